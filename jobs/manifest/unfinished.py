"""Which runs have recorded events in a manifest and not completed: the manifest's run register.

A dedup run records its pairs in the manifest before its run folder is sealed (SQLite and DynamoDB while they
are answered, the lake at its commit). Pairs of a run that never completes would count as "delivered earlier"
for every later run, and its events would be in no completed `good/`. So a run registers itself (with its run
folder and the command that redoes it) before its first manifest write, and removes its entry once its
`_SUCCESS` is written: the register holds the runs that are writing or were stopped. A later run first reads
it: an entry whose `_SUCCESS` exists (a run killed between the two writes) is removed; any other stops the later
run before it writes anything, with the command that redoes the unfinished run. So no run ever decides on an
unfinished run's pairs, whatever happened to the ledger or the run folders.

Entries are keyed by the run key (`base.run_key`: the run folder, output root + run id), so two pipelines running
one run id on one manifest have an entry each. Entries written before run keys (keyed by run id) are still read:
their key is that of the run folder they name.

Where the register lives: SQLite, a table `winnow_runs` in the same file (the `.db` stays the whole manifest);
DynamoDB, items of the manifest table under the partition key `winnow:runs` (no event id: no query of the jobs
meets them), with the events' `ttl`; lake, one JSON document per run in `PATH/_runs/`, and in the commit of each run
that committed entries (kept until a later run's commit finds its run folder sealed), so removing `_runs/` hides no
unfinished run.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, astuple
from typing import TYPE_CHECKING, Any

from jobs.contract import (
    COMPLETED_BEFORE,
    DYNAMODB_ETL_TIME,
    DYNAMODB_PARTITION_KEY,
    DYNAMODB_SORT_KEY,
    DYNAMODB_TTL,
    SUCCESS_MARKER,
)
from jobs.errors import DamagedFileError
from jobs.fs import store
from jobs.manifest.base import Manifest, ManifestError, RegisteredRun

if TYPE_CHECKING:
    from jobs.manifest.dynamodb_client import DynamoDbClient

SQLITE_TABLE = "winnow_runs"
SQLITE_SCHEMA = (
    "CREATE TABLE {table} (run_key TEXT PRIMARY KEY, run_id TEXT NOT NULL, etl_time INTEGER NOT NULL, "
    "ttl INTEGER NOT NULL, folder TEXT NOT NULL, redo TEXT NOT NULL, completed_before INTEGER NOT NULL DEFAULT 0)"
)
SQLITE_GENERATION = "winnow_generation"
SQLITE_GENERATION_SCHEMA = f"CREATE TABLE IF NOT EXISTS {SQLITE_GENERATION} (id INTEGER PRIMARY KEY CHECK (id = 0), generation INTEGER NOT NULL)"
SQLITE_SET_GENERATION = f"INSERT INTO {SQLITE_GENERATION} VALUES (0, ?) ON CONFLICT (id) DO UPDATE SET generation ="
DYNAMODB_RUNS_KEY = "winnow:runs"
DYNAMODB_GENERATION_KEY = "winnow:generation"  # its own partition: the register's query never meets it
LAKE_RUNS = "_runs"
_PLACES = ", ".join("?" * 7)  # the run key and the six fields of RegisteredRun


class UnfinishedRunError(ManifestError):
    """An earlier run recorded events in the manifest and has not completed: this run stops before writing (exit 1)."""

    exit_code = 1


class RunRegister(ABC):
    """The register of one manifest (see the module docstring)."""

    @abstractmethod
    def begin(self, run: RegisteredRun) -> None:
        """Register `run` (replacing an entry of an earlier attempt): before its first manifest write; where the
        register keeps a generation, it counts one more."""

    def generation(self) -> int | None:
        """How many runs have registered in the manifest (0 before the first; the lake: its commit number): recorded
        by each run in its `summary.json`, so an older copy of the manifest put back is found by the next run of that
        output (`jobs.dedup.stale`). None: the register keeps none."""
        return None

    def advance(self, at_least: int) -> None:  # noqa: B027  (optional: only registers with a generation)
        """Raise the generation to `at_least` (a back-fill of the runs an older copy lacked)."""

    @abstractmethod
    def complete(self, run: RegisteredRun) -> None:
        """Remove the run's entry (by its key, or one written before run keys for its folder): after its `_SUCCESS`
        is written, or when it is abandoned (nothing happens when there is none)."""

    @abstractmethod
    def unfinished(self) -> list[RegisteredRun]:
        """Every registered run, in run id order: writing now, or stopped before its `_SUCCESS`."""

    def entry(self, key: str) -> RegisteredRun | None:
        """The registered run of run key `key`, if any."""
        return next((run for run in self.unfinished() if run.key == key), None)

    def require_no_unfinished(self, key: str, manifest_uri: str, sealed: Callable[[str], bool]) -> None:
        """Stop unless every registered run other than the run of run key `key` has completed.

        `sealed(path)` says whether a file exists; a registered run whose `_SUCCESS` exists was killed after sealing
        its folder: its entry is removed here.

        Raises:
            UnfinishedRunError: another run recorded events and has not completed (named, with its redo command).
        """
        for run in self.unfinished():
            if run.key == key:
                continue  # a redo of this very run: its own pairs are its own
            if sealed(f"{run.folder}/{SUCCESS_MARKER}"):
                self.complete(run)
                continue
            if run.completed_before or sealed(f"{run.folder}/{COMPLETED_BEFORE}"):
                raise UnfinishedRunError(
                    f"manifest {manifest_uri}: run {run.run_id} completed, and a redo of it stopped before its seal "
                    f"(no {run.folder}/{SUCCESS_MARKER}): its events are in no completed output now, and later runs "
                    f"decided against them; nothing was written. Redo it first, with the input it completed with: "
                    f"{run.redo}"
                )
            raise UnfinishedRunError(
                f"manifest {manifest_uri}: run {run.run_id} recorded its events and has not completed (no "
                f"{run.folder}/{SUCCESS_MARKER}), so no later run may decide against them; nothing was written. "
                f"If its input is gone for good, {run.abandon_command(manifest_uri)} abandons it (its events then "
                f"wait for a later batch). Else redo it first: {run.redo}"
            )


class SqliteRunRegister(RunRegister):
    """Table `winnow_runs`, keyed by run key (a table of the first layout, keyed by run id, is rebuilt in place; one
    without `completed_before` gains it, 0 for its entries)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=120, isolation_level=None)
        columns = [row[1] for row in db.execute(f"PRAGMA table_info({SQLITE_TABLE})")]
        if columns and "run_key" not in columns:
            self._rekey(db)
        elif columns and "completed_before" not in columns:
            self._add_completed_before(db)
        db.execute(SQLITE_SCHEMA.format(table=f"IF NOT EXISTS {SQLITE_TABLE}"))
        return db

    def _add_completed_before(self, db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        if "completed_before" not in [row[1] for row in db.execute(f"PRAGMA table_info({SQLITE_TABLE})")]:
            db.execute(f"ALTER TABLE {SQLITE_TABLE} ADD COLUMN completed_before INTEGER NOT NULL DEFAULT 0")
        db.execute("COMMIT")  # or another connection did it first

    def _rekey(self, db: sqlite3.Connection) -> None:
        """The first layout's entries (keyed by run id) under the run keys of the folders they name."""
        db.execute("BEGIN IMMEDIATE")
        if "run_key" in [row[1] for row in db.execute(f"PRAGMA table_info({SQLITE_TABLE})")]:
            db.execute("COMMIT")  # another connection did it first
            return
        runs = [RegisteredRun(*row) for row in db.execute(f"SELECT * FROM {SQLITE_TABLE}").fetchall()]  # 5 columns
        db.execute(f"DROP TABLE {SQLITE_TABLE}")
        db.execute(SQLITE_SCHEMA.format(table=SQLITE_TABLE))
        db.executemany(f"INSERT INTO {SQLITE_TABLE} VALUES ({_PLACES})", [(r.key, *astuple(r)) for r in runs])
        db.execute("COMMIT")

    def begin(self, run: RegisteredRun) -> None:
        with contextlib.closing(self._connect()) as db:
            db.execute("BEGIN IMMEDIATE")  # the entry and the generation it makes, together
            db.execute(f"INSERT OR REPLACE INTO {SQLITE_TABLE} VALUES ({_PLACES})", (run.key, *astuple(run)))
            db.execute(SQLITE_GENERATION_SCHEMA)
            db.execute(f"{SQLITE_SET_GENERATION} generation + 1", (1,))
            db.execute("COMMIT")

    def generation(self) -> int:
        with contextlib.closing(self._connect()) as db:
            db.execute(SQLITE_GENERATION_SCHEMA)
            row = db.execute(f"SELECT generation FROM {SQLITE_GENERATION}").fetchone()
        return int(row[0]) if row else 0

    def advance(self, at_least: int) -> None:
        with contextlib.closing(self._connect()) as db:
            db.execute(SQLITE_GENERATION_SCHEMA)
            db.execute(f"{SQLITE_SET_GENERATION} MAX(generation, excluded.generation)", (at_least,))

    def complete(self, run: RegisteredRun) -> None:
        with contextlib.closing(self._connect()) as db:
            db.execute(f"DELETE FROM {SQLITE_TABLE} WHERE run_key = ?", (run.key,))

    def unfinished(self) -> list[RegisteredRun]:
        with contextlib.closing(self._connect()) as db:
            rows = db.execute(f"SELECT * FROM {SQLITE_TABLE} ORDER BY run_id, folder").fetchall()
        return [
            RegisteredRun(run_id, etl_time, ttl, folder, redo, bool(completed))
            for _, run_id, etl_time, ttl, folder, redo, completed in rows
        ]


class DynamoDbRunRegister(RunRegister):
    """Items `eventId` = `winnow:runs`, `fingerprint` = the run key (before run keys: the run id), through the
    manifest's own client (paced by nothing, waited out when throttled, like the writer lease)."""

    def __init__(self, client: DynamoDbClient) -> None:
        self.call, self.partition = client.call, client.partition
        self.table = client.table
        self.conditional_failure = client.client.exceptions.ConditionalCheckFailedException

    def _key(self, name: str) -> dict[str, Any]:
        return {DYNAMODB_PARTITION_KEY: {"S": DYNAMODB_RUNS_KEY}, DYNAMODB_SORT_KEY: {"S": name}}

    def begin(self, run: RegisteredRun) -> None:
        item = {
            **self._key(run.key),
            DYNAMODB_ETL_TIME: {"N": str(run.etl_time)},
            DYNAMODB_TTL: {"N": str(run.ttl)},
            "folder": {"S": run.folder},
            "redo": {"S": run.redo},
            **({"completedBefore": {"BOOL": True}} if run.completed_before else {}),
        }
        self.call("put_item", None, TableName=self.table, Item=item)
        self.call(
            "update_item", None, TableName=self.table, Key=self._generation_key(), UpdateExpression="ADD generation :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )  # fmt: skip

    def _generation_key(self) -> dict[str, Any]:
        """The item holding the generation: no `ttl`, so it never expires."""
        return {
            DYNAMODB_PARTITION_KEY: {"S": DYNAMODB_GENERATION_KEY},
            DYNAMODB_SORT_KEY: {"S": DYNAMODB_GENERATION_KEY},
        }

    def generation(self) -> int:
        item = self.call("get_item", None, TableName=self.table, Key=self._generation_key(), ConsistentRead=True).get(
            "Item"
        )
        return int(item["generation"]["N"]) if item else 0

    def advance(self, at_least: int) -> None:
        with contextlib.suppress(self.conditional_failure):  # already at least that
            self.call(
                "update_item", None, TableName=self.table, Key=self._generation_key(),
                UpdateExpression="SET generation = :at_least",
                ConditionExpression="attribute_not_exists(generation) OR generation < :at_least",
                ExpressionAttributeValues={":at_least": {"N": str(at_least)}},
            )  # fmt: skip

    def complete(self, run: RegisteredRun) -> None:
        self.call("delete_item", None, TableName=self.table, Key=self._key(run.key))
        # An entry written before run keys, under the run id: only if it names this run's folder.
        with contextlib.suppress(self.conditional_failure):
            self.call(
                "delete_item", None, TableName=self.table, Key=self._key(run.run_id),
                ConditionExpression="folder = :folder", ExpressionAttributeValues={":folder": {"S": run.folder}},
            )  # fmt: skip

    def unfinished(self) -> list[RegisteredRun]:
        runs = [
            RegisteredRun(
                run_id=item[DYNAMODB_SORT_KEY]["S"].split("~")[0],
                etl_time=int(item[DYNAMODB_ETL_TIME]["N"]),
                ttl=int(item[DYNAMODB_TTL]["N"]),
                folder=item["folder"]["S"],
                redo=item["redo"]["S"],
                completed_before=item.get("completedBefore", {}).get("BOOL", False),
            )
            for item in self.partition(DYNAMODB_RUNS_KEY)
        ]
        return sorted(runs, key=lambda run: (run.run_id, run.folder))


class FileRunRegister(RunRegister):
    """One document per run, `FOLDER/run=KEY.json` (local or `s3://`; before run keys `run=ID.json`), written whole."""

    def __init__(self, folder: str) -> None:
        self.folder = folder.rstrip("/")

    def _path(self, name: str) -> str:
        return f"{self.folder}/run={name}.json"

    def begin(self, run: RegisteredRun) -> None:
        store.write_bytes(self._path(run.key), (json.dumps(asdict(run), indent=1) + "\n").encode())

    def complete(self, run: RegisteredRun) -> None:
        store.delete(self._path(run.key))
        legacy = self._read(self._path(run.run_id))  # written before run keys: only if it names this folder
        if legacy is not None and legacy.folder == run.folder:
            store.delete(self._path(run.run_id))

    def unfinished(self) -> list[RegisteredRun]:
        runs = [self._read(file.path) for file in store.list_files(self.folder)]
        return sorted((run for run in runs if run is not None), key=lambda run: (run.run_id, run.folder))

    def _read(self, path: str) -> RegisteredRun | None:
        """The entry at `path` (None: removed since listed).

        Raises:
            DamagedFileError: the file is cut, emptied, or no entry of this register (a stray file), named.
        """
        way_out = (
            f"a stray file: move it out of {self.folder}; a cut entry: restore its earlier version, or redo the run "
            "its name says with its command and then remove the file"
        )
        document = store.read_json(path, way_out)
        if document is None:
            return None
        try:
            return RegisteredRun(**document)
        except TypeError:
            raise DamagedFileError(f"{path} is no entry of the register of unfinished runs; {way_out}") from None


class LakeRunRegister(FileRunRegister):
    """The lake's register: its `_runs/` documents, and the open runs its newest commit records (`State.open_runs`,
    written by the run's commit): a `_runs/` removed or lost hides no run that committed and did not complete."""

    def __init__(
        self,
        folder: str,
        committed: Callable[[], tuple[RegisteredRun, ...]],
        generation: Callable[[], int] = lambda: 0,
        advance: Callable[[int], None] = lambda at_least: None,
    ) -> None:
        super().__init__(folder)
        self.committed = committed
        self._generation, self._advance = generation, advance

    def generation(self) -> int:
        """The commit number (or what a back-fill raised it to): each run's commit adds one."""
        return self._generation()

    def advance(self, at_least: int) -> None:
        self._advance(at_least)

    def unfinished(self) -> list[RegisteredRun]:
        listed = super().unfinished()
        keys = {run.key for run in listed}
        kept = [run for run in self.committed() if run.key not in keys]
        return sorted([*listed, *kept], key=lambda run: (run.run_id, run.folder))


def run_register(manifest: Manifest) -> RunRegister:
    """The register of `manifest`."""
    from jobs.manifest.dynamodb import DynamoDbManifest
    from jobs.manifest.lake import LakeManifest
    from jobs.manifest.sqlite import SqliteManifest

    if isinstance(manifest, SqliteManifest):
        return SqliteRunRegister(manifest.path)
    if isinstance(manifest, LakeManifest):
        return LakeRunRegister(
            f"{manifest.root}/{LAKE_RUNS}", lambda: manifest.state().open_runs, manifest.generation,
            manifest.advance_generation,
        )  # fmt: skip
    if isinstance(manifest, DynamoDbManifest):
        return DynamoDbRunRegister(manifest.dynamodb_client())
    raise TypeError(f"no run register for {type(manifest).__name__}")
