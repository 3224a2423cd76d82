"""The bucket store: the keys of earlier runs, in Parquet buckets under a state URI, plus a commit log.

Layout under the state URI (a local folder or an S3 prefix):

    runs/run=ID/bucket=B/part-*.parquet   keys (a JSON array of the key values) and their expiry value,
                                          written by run ID into bucket B
    commits/ID.json                       the state after run ID: its parent run, the settings, the latest
                                          point, the live buckets with the runs that wrote them, each bucket
                                          file's size and checksum, its depth (`jobs.keyed.commits`), and its
                                          run folder and arguments (`jobs.keyed.completion`)
    _latest                               the anchor: the newest commit, its SHA-256 and its parent

Bucket B is `floor(expiry / bucket span)` with an expiry key, else `pmod(xxhash64(key), bucket count)`.

A run with id ID reads the current commit (the anchored one), or, rerunning it, the commit before it (its
parent), so a rerun of ID reads the same state as the first attempt did. Before reading the parent's buckets it
compares their files with the parent's record (`jobs.keyed.bucket_files`). It writes its own `runs/run=ID/`
(replacing a failed attempt's files), then `commits/ID.json` whole, then the anchor. Until the commit exists the
previous state is the current one. A bucket is retired by a commit once it has fully expired,
`(B + 1) * span <= latest - period`, and its files are deleted by the next run (one run later, so that a rerun
of the retiring run still finds every file its parent lists). Reruns are safe for the newest run; a run whose id
sorts before a committed run's is refused (a rerun would change the keys the later run decided against; a late
run's keys would be in no later state). A damaged state (a commit, the anchor or a bucket file lost, cut or
replaced, a stray file in `commits/`) stops the run before it writes, naming the file and the way out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.errors import InvalidArgumentError
from jobs.fs.paths import exact, written
from jobs.keyed import bucket_files
from jobs.keyed.commits import FORMAT, CommitLog
from jobs.keyed.decide import DUPLICATE, EXPIRY, EXPIRY_TYPE, KEY, OUTCOME, STATE_EXPIRY, STATE_SEEN, UNIQUE
from jobs.keyed.period import Kind
from jobs.keyed.storage import Storage

DEFAULT_BUCKET_COUNT = 16


@dataclass(frozen=True)
class StateSettings:
    """What a state is built for; every run on one state must agree on it."""

    key: tuple[str, ...]
    expiry_field: str | None = None
    kind: Kind | None = None
    period: str | None = None  # decimal text; seconds for timestamp expiry
    bucket_span: str | None = None  # decimal text, same unit as period
    bucket_count: int | None = None  # without expiry

    @property
    def period_value(self) -> Decimal | None:
        return None if self.period is None else Decimal(self.period)

    @property
    def span_value(self) -> Decimal | None:
        return None if self.bucket_span is None else Decimal(self.bucket_span)


class BucketStore:
    """The state at one URI."""

    def __init__(self, spark: SparkSession, uri: str) -> None:
        self.spark = spark
        self.uri = uri.rstrip("/")
        self.fs = Storage(spark)
        self.log = CommitLog(self.fs, self.uri)

    def _bucket_path(self, run_id: str, bucket: int | str) -> str:
        return f"{self.uri}/runs/run={run_id}/bucket={bucket}"

    def parent(self, run_id: str) -> dict[str, Any] | None:
        """The commit run `run_id` starts from: the current one, or for a rerun of it, its parent; or None.

        Raises:
            InvalidArgumentError: a later run has committed: this run would change the keys that run decided
                against (a rerun of it), or leave its own keys out of that run's state (a late run).
            DamagedFileError: the commit log is damaged (`jobs.keyed.commits`).
        """
        return self.log.parent(run_id)

    @staticmethod
    def settle(
        parent: dict[str, Any] | None, given: StateSettings, span_given: bool, count_given: bool
    ) -> StateSettings:
        """The settings of this run: the given ones, checked against the state's (which win for defaults).

        Raises:
            InvalidArgumentError: the key, expiry field or period differ from the state's, or an explicit
                bucket span / count differs from the one the state was built with.
        """
        if parent is None:
            return given
        stored = StateSettings(**{**parent["settings"], "key": tuple(parent["settings"]["key"])})
        for name, option in (("key", "--key"), ("expiry_field", "--expiry-key"), ("period", "--expiry-period")):
            if getattr(stored, name) != getattr(given, name):
                raise InvalidArgumentError(
                    f"{option}: given {_show(getattr(given, name))}, but the state was built with "
                    f"{_show(getattr(stored, name))}; use the same settings or a new --state"
                )
        if span_given and stored.bucket_span != given.bucket_span:
            raise InvalidArgumentError(
                f"--bucket-span: given {given.bucket_span}, but the state uses {stored.bucket_span}; omit it or use a new --state"
            )
        if count_given and stored.bucket_count != given.bucket_count:
            raise InvalidArgumentError(
                f"--bucket-count: given {given.bucket_count}, but the state uses {stored.bucket_count}; omit it or use a new --state"
            )
        return stored

    def check_files(self, parent: dict[str, Any] | None) -> bucket_files.Records:
        """The files of the parent's live buckets, compared with its record before anything reads them; their
        records for this run's commit.

        Raises:
            DamagedFileError: a bucket folder or file is missing, differs or is in no commit.
        """
        if parent is None:
            return {}
        folders = [
            bucket_files.folder_of(run, bucket) for bucket, runs in sorted(parent["buckets"].items()) for run in runs
        ]
        recorded = parent["files"] if parent["format"] >= FORMAT else None
        return bucket_files.check(self.uri, self.log.path(parent["run_id"]), folders, recorded)

    def read_live(self, parent: dict[str, Any] | None) -> tuple[DataFrame | None, int]:
        """The live keys of the parent state (`KEY`, `STATE_EXPIRY`, `STATE_SEEN`), and how many buckets were read
        (their files checked first: `check_files`)."""
        if parent is None or not parent["buckets"]:
            return None, 0
        paths = [self._bucket_path(run, bucket) for bucket, runs in sorted(parent["buckets"].items()) for run in runs]
        stored = self.spark.read.schema(f"key string, expiry {EXPIRY_TYPE.simpleString()}").parquet(
            *(exact(path) for path in paths)
        )
        live = stored.groupBy(F.col("key").alias(KEY)).agg(F.max("expiry").alias(STATE_EXPIRY))
        return live.withColumn(STATE_SEEN, F.lit(True)), len(parent["buckets"])

    def write_run(
        self, decided: DataFrame, settings: StateSettings, run_id: str, latest_point: Decimal | None
    ) -> list[str]:
        """Write this run's keys into `runs/run=ID/bucket=B/`; return the buckets written.

        With expiry: per key, the largest expiry value of its valid, non-expired records, when it is newer
        than the state's and still live at the run's final latest point (a key at or below
        `latest - period` can never make a later record a duplicate). Without: the keys of the unique records.
        """
        span, count, period = settings.span_value, settings.bucket_count, settings.period_value
        if span is not None and period is not None and latest_point is not None:
            seen = decided.where(F.col(OUTCOME).isin(UNIQUE, DUPLICATE))
            per_key = seen.groupBy(KEY).agg(F.max(EXPIRY).alias("expiry"), F.max(STATE_EXPIRY).alias("stored"))
            live = F.col("expiry") > F.lit(str(latest_point - period)).cast(EXPIRY_TYPE)
            delta = per_key.where((F.col("stored").isNull() | (F.col("expiry") > F.col("stored"))) & live)
            bucket = F.floor(F.col("expiry") / F.lit(str(span)).cast(EXPIRY_TYPE)).cast("long")
        elif span is not None:  # expiry, but no valid record anywhere yet: nothing to keep
            delta = decided.where(F.lit(False)).select(KEY, F.lit(None).cast(EXPIRY_TYPE).alias("expiry"))
            bucket = F.lit(0).cast("long")
        else:
            delta = decided.where(F.col(OUTCOME) == UNIQUE).select(KEY, F.lit(None).cast(EXPIRY_TYPE).alias("expiry"))
            bucket = F.pmod(F.xxhash64(KEY), F.lit(count or DEFAULT_BUCKET_COUNT))
        rows = delta.select(F.col(KEY).alias("key"), F.col("expiry"), bucket.alias("bucket"))
        target = f"{self.uri}/runs/run={run_id}"
        rows.write.mode("overwrite").partitionBy("bucket").parquet(written(target))
        return [name.removeprefix("bucket=") for name in self.fs.list_names(target) if name.startswith("bucket=")]

    def commit(
        self,
        parent: dict[str, Any] | None,
        settings: StateSettings,
        run_id: str,
        latest_point: Decimal | None,
        written: list[str],
        checked: bucket_files.Records,
        run: dict[str, Any],
    ) -> tuple[dict[str, Any], str]:
        """Write `commits/ID.json` whole, then the anchor: the parent's buckets plus this run's, minus fully expired
        ones, with the records of their files (`checked`: the parent's, as `check_files` found them), and `run`
        (its run folder and arguments: `jobs.keyed.completion`). Return it and its SHA-256."""
        buckets: dict[str, list[str]] = {name: list(runs) for name, runs in (parent or {}).get("buckets", {}).items()}
        for name in written:
            buckets.setdefault(name, []).append(run_id)
        retired: dict[str, list[str]] = {}
        period, span = settings.period_value, settings.span_value
        if latest_point is not None and period is not None and span is not None:
            horizon = latest_point - period
            for name in list(buckets):
                if (int(name) + 1) * span <= horizon:
                    retired[name] = buckets.pop(name)
        files = {**checked, **bucket_files.written(f"{self.uri}/runs", run_id)}
        live = {bucket_files.folder_of(run, name) for name, runs in buckets.items() for run in runs}
        document = {
            "format": FORMAT,
            "run_id": run_id,
            "parent": None if parent is None else parent["run_id"],
            "depth": 1 if parent is None else parent["depth"] + 1,
            "settings": {**asdict(settings), "key": list(settings.key)},
            "latest_point": None if latest_point is None else str(latest_point),
            "buckets": {name: sorted(runs) for name, runs in sorted(buckets.items(), key=lambda item: int(item[0]))},
            "retired": retired,
            "files": {folder: files[folder] for folder in sorted(live)},
            "run": run,
            "committed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        return document, self.log.write(document)

    def delete_retired(self, parent: dict[str, Any] | None) -> int:
        """Delete the files of the buckets the parent commit retired; return how many bucket folders."""
        deleted = 0
        for name, runs in (parent or {}).get("retired", {}).items():
            for run in runs:
                self.fs.delete(self._bucket_path(run, name))
                deleted += 1
        return deleted


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(value)
    return "none" if value is None else str(value)
