"""The embedded manifest: one SQLite file, for local runs. Same semantics as the DynamoDB table."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame

from jobs.manifest.base import (
    RECORDED,
    SEEN_EARLIER,
    SEEN_LATER,
    IdResult,
    ManifestCheck,
    ManifestClient,
    ManifestError,
    ManifestRun,
    later_only,
    later_runs_entry,
    others_entry,
)  # fmt: skip
from jobs.manifest.requests import RequestManifest

TABLE = "events_manifest"
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    event_id    TEXT    NOT NULL,
    fingerprint TEXT    NOT NULL,
    etl_time    INTEGER NOT NULL,
    ttl         INTEGER NOT NULL,
    run_key     TEXT,
    PRIMARY KEY (event_id, fingerprint)
) WITHOUT ROWID
"""
LEGACY_COLUMNS = [("event_id", "TEXT"), ("fingerprint", "TEXT"), ("etl_time", "INTEGER"), ("ttl", "INTEGER")]
COLUMNS = [*LEGACY_COLUMNS, ("run_key", "TEXT")]
"""`run_key` (`ManifestRun.run_key`, NULL for entries without one) was added later: a file with the first four
columns only is accepted, and gains it in place when a run first writes to it (`migrate`)."""
# Ids checked per transaction: several Spark tasks write at once, each holding the write lock briefly.
IDS_PER_TRANSACTION = 500


@dataclass(frozen=True)
class SqliteManifest(RequestManifest):
    """`sqlite:PATH`: a local file (relative paths from the current folder)."""

    uri: str
    path: str

    def check(self) -> None:
        if not Path(self.path).exists():
            raise ManifestError(
                f"manifest {self.uri}: {self.path} does not exist; run once with --create to make an empty one"
            )
        with self._connect() as db:
            columns = [(row[1], row[2]) for row in db.execute(f"PRAGMA table_info({TABLE})")]
        if columns not in (COLUMNS, LEGACY_COLUMNS):
            raise ManifestError(
                f"manifest {self.uri}: {self.path} has no table {TABLE}({', '.join(c for c, _ in COLUMNS)}) "
                f"(found columns {columns}); point --manifest at a Winnow manifest, or at a new file with --create"
            )

    def create(self) -> None:
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute(SCHEMA)

    def client(self) -> ManifestClient:
        return SqliteClient(self._connect())

    def check_pairs(self, pairs: DataFrame, run: ManifestRun, detect_synthetic: bool) -> ManifestCheck:
        self.migrate()  # on the driver, under the writer lease, before any worker writes
        return super().check_pairs(pairs, run, detect_synthetic)

    def migrate(self) -> None:
        """Give a manifest of the first layout its `run_key` column (existing entries: NULL, i.e. no key)."""
        with contextlib.closing(self._connect()) as db:
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({TABLE})")]
            if "run_key" not in columns:
                db.execute(f"ALTER TABLE {TABLE} ADD COLUMN run_key TEXT")

    def own_pairs(self, run_key: str, legacy_etl_time: int | None = None) -> list[tuple[str, str]]:
        self.migrate()
        # A scan (no index on run_key: it would cost every put): done for a redo or an abandon only.
        with contextlib.closing(self._connect()) as db:
            rows = db.execute(
                f"SELECT event_id, fingerprint FROM {TABLE} WHERE run_key = ? OR (run_key IS NULL AND etl_time = ?)",
                (run_key, -1 if legacy_etl_time is None else legacy_etl_time),
            ).fetchall()
        return [(row[0], row[1]) for row in rows]

    def remove_pairs(self, run_key: str, pairs: list[tuple[str, str]], legacy_etl_time: int | None = None) -> int:
        with contextlib.closing(self._connect()) as db:
            db.execute("BEGIN IMMEDIATE")
            removed = 0
            for event_id, fingerprint in pairs:
                removed += db.execute(
                    f"DELETE FROM {TABLE} WHERE event_id = ? AND fingerprint = ? AND (run_key = ? OR "
                    "(run_key IS NULL AND etl_time = ?))",
                    (event_id, fingerprint, run_key, -1 if legacy_etl_time is None else legacy_etl_time),
                ).rowcount
            db.execute("COMMIT")
        return removed

    def settle(self) -> None:
        # Move the write-ahead log into the database file: the `.db` alone then holds the whole manifest (a copy
        # of it, the file README names, is complete), whatever connections the Python workers keep open.
        with contextlib.closing(self._connect()) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=120, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        return db


class SqliteClient(ManifestClient):
    def __init__(self, db: sqlite3.Connection) -> None:
        super().__init__()
        self.db = db

    def put(self, event_id: str, fingerprint: str, etl_time: int, ttl: int, run_key: str = "") -> str:
        self.stats.requests += 1
        self.stats.puts += 1
        row = self.db.execute(
            f"SELECT etl_time, ttl, run_key FROM {TABLE} WHERE event_id = ? AND fingerprint = ?",
            (event_id, fingerprint),
        ).fetchone()
        # Delivered by an earlier run (or another run of the same second) and not expired: a duplicate. Delivered
        # by a later run: never taken over (its completed output has the event). A later entry without a run key
        # is replaced by this run's (the item keeps the earliest delivery).
        if row is not None and row[1] > etl_time:
            if row[0] < etl_time or others_entry(row[0], row[2], etl_time, run_key):
                self.stats.conditional_failures += 1
                return SEEN_EARLIER
            if later_runs_entry(row[0], row[2], etl_time, run_key):
                self.stats.conditional_failures += 1
                return SEEN_LATER
        self.db.execute(
            f"INSERT OR REPLACE INTO {TABLE} VALUES (?, ?, ?, ?, ?)",
            (event_id, fingerprint, etl_time, ttl, run_key or None),
        )
        return RECORDED

    def fingerprints_of(self, event_id: str, etl_time: int, run_key: str = "") -> tuple[set[str], set[str]]:
        self.stats.requests += 1
        self.stats.queries += 1
        rows = self.db.execute(
            f"SELECT fingerprint, etl_time, run_key FROM {TABLE} WHERE event_id = ? AND ttl > ?", (event_id, etl_time)
        ).fetchall()
        earlier = {fp for fp, time, key in rows if time < etl_time or others_entry(time, key, etl_time, run_key)}
        own = any(time == etl_time and not others_entry(time, key, etl_time, run_key) for _, time, key in rows)
        later = {fp for fp, time, key in rows if later_runs_entry(time, key, etl_time, run_key)}
        return earlier, later_only(earlier, own, later)

    def check_ids(
        self, ids: Iterable[tuple[str, list[str]]], etl_time: int, ttl: int, detect_synthetic: bool, run_key: str = ""
    ) -> Iterable[tuple[str, list[str], IdResult]]:
        # Each id's look-up and writes happen inside one write transaction, so concurrent tasks cannot
        # interleave between a check and its set; ids are grouped to keep the transactions few.
        batch: list[tuple[str, list[str]]] = []
        for item in ids:
            batch.append(item)
            if len(batch) == IDS_PER_TRANSACTION:
                yield from self._transaction(batch, etl_time, ttl, detect_synthetic, run_key)
                batch = []
        yield from self._transaction(batch, etl_time, ttl, detect_synthetic, run_key)

    def _transaction(
        self, batch: list[tuple[str, list[str]]], etl_time: int, ttl: int, detect_synthetic: bool, run_key: str
    ) -> list[tuple[str, list[str], IdResult]]:
        if not batch:
            return []
        self.db.execute("BEGIN IMMEDIATE")
        try:
            results = [
                (event_id, fps, self.check_id(event_id, fps, etl_time, ttl, detect_synthetic, run_key))
                for event_id, fps in batch
            ]
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return results

    def close(self) -> None:
        self.db.close()
