"""The lake manifest (`lake:PATH`): the events manifest as Parquet files, checked with one join per run.

A per-request manifest pays a write (and a query) per event; a batch job holds its whole batch at once, so here
the batch's distinct pairs are joined with the manifest's entries in one Spark step (the bucket store of the
Apex Deduper, at warehouse scale). Layout under PATH (names in `jobs.contract`):

- `_manifest.json`: written once by `--create`, with the bucket count, fixed for the manifest's life.
- `segments/segment=NAME/`: a run's entries (or a compaction's), one Parquet file per bucket: `id_hi`, `id_lo`
  (the event id's 128 bits), `fingerprint` (64-bit xxHash of the fingerprint), `etl_time`, `ttl` (epoch seconds).
  Spark's own bucketing (Murmur3 of the id, modulo the bucket count), so the join reads each bucket's files in
  its own task and only the batch's pairs are shuffled; the manifest never is, and full lines never are.
- `_commits/NNNNNNNNNN.json`: the whole state (segments with their files' sizes, and which segment holds each
  run's entries), created only if absent; the highest number is current. A run's entries count only once its
  commit exists; files no commit names are never read. Before a check reads anything, the committed segments'
  files are compared with the commit (`lake_integrity`): a damaged manifest stops the run.

Semantics are the other backends' (jobs/manifest/base.py): an entry counts against run R (time T) when
`etl_time < T < ttl`; a rerun's commit replaces that run's entries; so redoing any run, in any order, gives the
same decisions. Unlike the one-item-per-pair backends, every run's entries are kept until they expire, so a
pair delivered again after it expired does not change what a redo of an older run decides. The fingerprint is
compared by its 64-bit hash: two different fingerprints of one event id collide with probability 2^-64.

Housekeeping happens in the commit of each run: segments whose entries all expired more than
RETAIN_AFTER_EXPIRY_DAYS before the newest run are dropped whole (no per-key deletes), and a past UTC day's
per-run segments are merged into one (compaction), so a run reads about one segment per day of TTL; segment
folders no kept commit names (a run or compaction killed before its commit) are removed.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.contract import (
    DYNAMODB_ETL_TIME,
    DYNAMODB_PARTITION_KEY,
    DYNAMODB_SORT_KEY,
    DYNAMODB_TTL,
    LAKE_COLUMNS,
    LAKE_COMMITS,
    LAKE_DESCRIPTOR,
    LAKE_SEGMENTS,
)  # fmt: skip
from jobs.enriched.parse import UUID_PATTERN
from jobs.errors import InvalidArgumentError
from jobs.fs import store
from jobs.manifest.base import (
    ID_SEEN_EARLIER,
    SECONDS_PER_DAY,
    SEEN_EARLIER,
    Manifest,
    ManifestCheck,
    ManifestError,
    ManifestRun,
    ManifestStats,
)  # fmt: skip
from jobs.manifest.lake_integrity import Recorded, data_files, leftovers, verify_segments

FORMAT = "winnow-lake-manifest"
VERSION = 1
DEFAULT_BUCKETS = 64
RETAIN_AFTER_EXPIRY_DAYS = 7
"""Expired segments are kept this long after the newest run: a redo of a run up to this old still decides as it
first did (the per-request backends lose expired items at once, DynamoDB within about two days)."""
COMMITS_KEPT = 100
"""Older commit objects are deleted (each commit holds the whole state; the old ones are history only)."""
ENTRY_KEYS = ("id_hi", "id_lo")
_COLUMNS_SQL = ", ".join(f"{name} {kind}" for name, kind in LAKE_COLUMNS)


def _bucketing(buckets: int) -> str:
    """The table clause that makes Spark write, and read, a segment as one file per bucket of the event id."""
    return f"CLUSTERED BY ({', '.join(ENTRY_KEYS)}) SORTED BY ({', '.join(ENTRY_KEYS)}) INTO {buckets} BUCKETS"


def _stale(segments: dict[str, tuple[int, ...]]) -> Column:
    """True for the rows of a registered table (column `segment`) that no longer count where they lie: the runs
    each segment holds stale rows of (`State.stale_in`)."""
    stale = F.lit(False)
    for name, runs in segments.items():
        if runs:
            stale = stale | ((F.col("segment") == name) & F.col("etl_time").isin(*runs))
    return stale


def id_halves(event_key: Column) -> tuple[Column, Column]:
    """The two signed 64-bit halves of a lower-case UUID's 128 bits (built-in functions only: no Python per row).

    The hex digits by position (8-4-4-4-12), not a regular expression, which is slower.
    """

    def as_long(digits: Column) -> Column:
        high = F.conv(F.substring(digits, 1, 8), 16, 10).cast("long")
        low = F.conv(F.substring(digits, 9, 8), 16, 10).cast("long")
        return F.shiftleft(high, 32).bitwiseOR(low)

    high = F.concat(F.substring(event_key, 1, 8), F.substring(event_key, 10, 4), F.substring(event_key, 15, 4))
    low = F.concat(F.substring(event_key, 20, 4), F.substring(event_key, 25, 12))
    return as_long(high), as_long(low)


def keyed_pairs(pairs: DataFrame) -> DataFrame:
    """(`event_key`, `fingerprint`) pairs with the entry's key columns: `id_hi`, `id_lo`, `fp_hash`."""
    high, low = id_halves(F.col("event_key"))
    return pairs.select(
        high.alias("id_hi"), low.alias("id_lo"), F.xxhash64("fingerprint").alias("fp_hash"), "event_key", "fingerprint"
    )


@dataclass(frozen=True)
class Segment:
    """One folder of entries, as a commit records it."""

    name: str
    runs: tuple[int, ...]
    """The etl_times of the entries in it (one run's, or a day's after compaction)."""
    files: int
    bytes: int
    keys: int
    max_ttl: int
    file_sizes: dict[str, int] | None = None
    """Its data files, by name in its folder, with their sizes (None: recorded by the first version, which
    counted them only). In the commit's `segment_files`, apart from the segment: the first version reads a
    segment's keys as its fields, so a commit of this one stays readable by it."""


@dataclass(frozen=True)
class RunEntries:
    """Which segment holds a run's current entries."""

    etl_time: int
    run_id: str
    ttl: int
    segment: str


@dataclass(frozen=True)
class State:
    """The manifest as one commit leaves it."""

    commit: int
    buckets: int
    segments: dict[str, Segment] = field(default_factory=dict)
    runs: dict[int, RunEntries] = field(default_factory=dict)

    def live_for(self, etl_time: int) -> dict[str, tuple[int, ...]]:
        """Segments holding entries that count at `etl_time`, each with the runs whose rows are stale in it (a
        rerun's commit moved them to another segment)."""
        live = {
            entries.segment
            for entries in self.runs.values()
            if entries.etl_time < etl_time < entries.ttl and entries.segment in self.segments
        }
        return {name: self.stale_in(name) for name in sorted(live)}

    def stale_in(self, name: str) -> tuple[int, ...]:
        """The runs with rows in segment `name` that no longer count there (a later commit moved them)."""
        return tuple(t for t in self.segments[name].runs if t not in self.runs or self.runs[t].segment != name)

    def document(self, job: str, run_id: str) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "commit": self.commit,
            "committed_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "by": {"job": job, "run_id": run_id},
            "buckets": self.buckets,
            "segments": [
                {key: value for key, value in asdict(segment).items() if key != "file_sizes"}
                for segment in self.segments.values()
            ],
            "runs": [asdict(entries) for entries in sorted(self.runs.values(), key=lambda e: e.etl_time)],
            "segment_files": {s.name: s.file_sizes for s in self.segments.values() if s.file_sizes is not None},
        }

    @staticmethod
    def parse(document: dict[str, Any]) -> State:
        sizes = document.get("segment_files", {})  # absent from the first version's commits
        segments = {
            s["name"]: Segment(**{**s, "runs": tuple(s["runs"]), "file_sizes": sizes.get(s["name"])})
            for s in document["segments"]
        }
        runs = {r["etl_time"]: RunEntries(**r) for r in document["runs"]}
        return State(commit=document["commit"], buckets=document["buckets"], segments=segments, runs=runs)


@dataclass(frozen=True)
class LakeManifest(Manifest):
    """`lake:PATH`: PATH a local folder or `s3://bucket/prefix`."""

    uri: str
    root: str
    buckets_at_create: int = DEFAULT_BUCKETS

    # -- checking the location ---------------------------------------------------------------------------------

    def descriptor(self) -> dict[str, Any] | None:
        data = store.read_bytes(f"{self.root}/{LAKE_DESCRIPTOR}")
        if data is None:
            return None
        try:
            document: dict[str, Any] = json.loads(data)
        except ValueError:
            document = {}
        if document.get("format") != FORMAT or document.get("version") != VERSION:
            raise ManifestError(
                f"manifest {self.uri}: {self.root}/{LAKE_DESCRIPTOR} is no {FORMAT} version {VERSION} descriptor; "
                "point --manifest at a Winnow lake manifest, or at a new folder with --create"
            )
        return document

    def check(self) -> None:
        if self.descriptor() is None:
            raise ManifestError(
                f"manifest {self.uri}: no {LAKE_DESCRIPTOR} in {self.root}; run once with --create to make an empty one"
            )

    def create(self) -> None:
        document = {"format": FORMAT, "version": VERSION, "buckets": self.buckets_at_create,
                    "created_at": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
        if not store.create_if_absent(f"{self.root}/{LAKE_DESCRIPTOR}", json.dumps(document, indent=2).encode()):
            self.descriptor()  # it exists: say so if it is not ours; its bucket count stays

    def buckets(self) -> int:
        descriptor = self.descriptor()
        assert descriptor is not None, "check() first"
        return int(descriptor["buckets"])

    # -- commits -----------------------------------------------------------------------------------------------

    def state(self) -> State:
        """The state the highest commit records (empty before the first)."""
        commits = self._commit_numbers()
        if not commits:
            return State(commit=0, buckets=self.buckets())
        data = store.read_bytes(self._commit_path(commits[-1]))
        if data is None:
            raise ManifestError(f"manifest {self.uri}: commit {commits[-1]} was listed but cannot be read")
        return State.parse(json.loads(data))

    def _commit_numbers(self) -> list[int]:
        names = [file.path.rsplit("/", 1)[-1] for file in store.list_files(f"{self.root}/{LAKE_COMMITS}")]
        return sorted(int(name.removesuffix(".json")) for name in names if name.removesuffix(".json").isdigit())

    def _commit_path(self, number: int) -> str:
        return f"{self.root}/{LAKE_COMMITS}/{number:010d}.json"

    def commit(self, state: State, base: State, job: str, run_id: str) -> State:
        """Write `state`, derived from the commit `base`, as the commit after it; then delete the segments `base`
        had and `state` has not, and the commits older than the COMMITS_KEPT newest.

        Raises:
            ManifestError: the commit after `base` exists: another writer committed since `base` was read (only
                possible when someone removed the writer lease of a live run); nothing is written or deleted.
        """
        new = replace(state, commit=base.commit + 1)
        document = json.dumps(new.document(job, run_id), indent=1).encode("utf-8")
        if not store.create_if_absent(self._commit_path(new.commit), document):
            raise ManifestError(
                f"manifest {self.uri}: commit {new.commit} was written by another writer while {job} run {run_id} "
                "held the manifest's lease; nothing of this run was committed: run it again"
            )
        for name in sorted(set(base.segments) - set(new.segments)):
            store.delete_folder(self._segment_path(name))
        for number in self._commit_numbers()[:-COMMITS_KEPT]:
            store.delete(self._commit_path(number))
        self._remove_leftovers(new)
        return new

    def verify(self, state: State) -> int:
        """Compare every segment `state` names with its files (`lake_integrity.verify_segments`); the files listed.

        Raises:
            ManifestDamagedError: a file is missing, differs or is in no commit (exit 1).
        """
        recorded = (
            Recorded(name, self._segment_path(name), segment.files, segment.file_sizes)
            for name, segment in sorted(state.segments.items())
        )
        return verify_segments(self.uri, state.commit, recorded)

    def _remove_leftovers(self, current: State) -> None:
        """Remove the segment folders no kept commit names (a run or compaction killed before its commit, or before
        it deleted what its commit replaced). The lease makes this run the only writer and its own segments are
        committed by now, so such a folder is no one's work in progress."""
        unnamed = set(self._segment_names("")) - set(current.segments)
        for name in leftovers(unnamed, self._named_by_kept_commits):
            store.delete_folder(self._segment_path(name))

    def _named_by_kept_commits(self) -> set[str] | None:
        """The segments any kept commit names; None when one cannot be read (then nothing is removed)."""
        named: set[str] = set()
        for number in self._commit_numbers():
            data = store.read_bytes(self._commit_path(number))
            try:
                named.update(segment["name"] for segment in json.loads(data or b"")["segments"])
            except (ValueError, KeyError, TypeError):
                return None
        return named

    # -- segments ----------------------------------------------------------------------------------------------

    def _segment_path(self, name: str) -> str:
        return f"{self.root}/{LAKE_SEGMENTS}/segment={name}"

    def _spark_path(self, path: str) -> str:
        return path if store.s3_location(path) is not None else "file://" + path

    def _segment_names(self, prefix: str) -> list[str]:
        """Names of the segment folders (committed or not) whose name starts with `prefix`."""
        folder = f"{self.root}/{LAKE_SEGMENTS}"
        local = store.local_path(folder)
        marker = f"segment={prefix}"
        if local is not None:
            names = os.listdir(local) if os.path.isdir(local) else []
        else:
            bucket, key = store.s3_location(folder) or ("", "")
            pages = (
                store.s3_client()
                .get_paginator("list_objects_v2")
                .paginate(Bucket=bucket, Prefix=f"{key}/{marker}", Delimiter="/")
            )
            names = [
                item["Prefix"].rstrip("/").rsplit("/", 1)[-1]
                for page in pages
                for item in page.get("CommonPrefixes", [])
            ]
        return [name.removeprefix("segment=") for name in names if name.startswith(marker)]

    def write_segment(self, entries: DataFrame, name: str, buckets: int) -> Segment:
        """Write `entries` (LAKE_COLUMNS) as segment `name`, one file per bucket; its record for the commit."""
        spark = entries.sparkSession
        path = self._segment_path(name)
        store.delete_folder(path)  # a name is new per attempt: anything there is an earlier try of this attempt
        if (local := store.local_path(path)) is not None:
            os.makedirs(local)  # else Spark warns, twice, that the table's location is not there
        table = f"winnow_lake_{uuid.uuid4().hex}"
        spark.sql(
            f"CREATE TABLE {table} ({_COLUMNS_SQL}) USING parquet OPTIONS (compression 'zstd') {_bucketing(buckets)} "
            f"LOCATION '{self._spark_path(path)}'"
        )
        try:
            columns = [name for name, _ in LAKE_COLUMNS]
            entries.select(*columns).repartition(buckets, *ENTRY_KEYS).write.insertInto(table)
        finally:
            spark.sql(f"DROP TABLE IF EXISTS {table}")
        files = [file for file in store.list_files(path) if file.path.endswith(".parquet")]
        if not files:  # no entries (every pair of the run was delivered before)
            return Segment(name=name, runs=(), files=0, bytes=0, keys=0, max_ttl=0, file_sizes={})
        # Figures of what was written, from the files (small dictionary-encoded columns, not the entries again).
        written = spark.read.parquet(*(self._spark_path(file.path) for file in files))
        figures = written.agg(F.count(F.lit(1)), F.max("ttl"), F.sort_array(F.collect_set("etl_time"))).first()
        assert figures is not None
        return Segment(
            name=name, runs=tuple(figures[2]), files=len(files), bytes=sum(f.size for f in files),
            keys=figures[0], max_ttl=figures[1], file_sizes=data_files(path, files),
        )  # fmt: skip

    # -- the check ---------------------------------------------------------------------------------------------

    def check_pairs(self, pairs: DataFrame, run: ManifestRun, detect_synthetic: bool) -> ManifestCheck:
        spark = pairs.sparkSession
        state = self.state()
        self.verify(state)  # before anything is read or written: a damaged manifest would decide silently
        buckets = state.buckets
        live = state.live_for(run.etl_time)
        stats = ManifestStats(
            files_read=sum(state.segments[s].files for s in live),
            bytes_read=sum(state.segments[s].bytes for s in live),
            keys_read=sum(state.segments[s].keys for s in live),
        )
        # Distinct by the entry's key: the id's bits are the id, and two fingerprints of an id share a hash with
        # probability 2^-64 (cheaper than comparing the strings).
        keyed = keyed_pairs(pairs).repartition(buckets, *ENTRY_KEYS).dropDuplicates([*ENTRY_KEYS, "fp_hash"])
        table = f"winnow_lake_{uuid.uuid4().hex}" if live else None
        if table is None:
            flagged = keyed.select("*", F.lit(False).alias("natural"), F.lit(False).alias("delivered"))
        else:
            self._register(spark, table, buckets, live)
            earlier = (
                spark.table(table)
                .where((F.col("etl_time") < run.etl_time) & (F.col("ttl") > run.etl_time) & ~_stale(live))
                .select(*ENTRY_KEYS, F.col("fingerprint").alias("earlier_fp"))
            )
            # The batch's pairs of a bucket are the hash table; the bucket's entries stream past it.
            joined = keyed.hint("shuffle_hash").join(earlier, list(ENTRY_KEYS), "left")
            flagged = joined.groupBy(*keyed.columns).agg(
                F.coalesce(F.max(F.col("earlier_fp") == F.col("fp_hash")), F.lit(False)).alias("natural"),
                F.max(F.col("earlier_fp").isNotNull()).alias("delivered"),
            )
        flagged = flagged.persist(StorageLevel.MEMORY_AND_DISK)
        flagged.count()  # the manifest is read once, here
        answer = F.when(F.col("natural"), F.lit(SEEN_EARLIER)).when(
            F.col("delivered") & F.lit(detect_synthetic), F.lit(ID_SEEN_EARLIER)
        )
        answers = (
            flagged.where(F.col("delivered"))
            .select("event_key", "fingerprint", answer.alias("cross_batch"))
            .where(F.col("cross_batch").isNotNull())
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        answers.count()
        written: list[Segment] = []

        def record() -> None:
            new_entries = flagged.where(~F.col("natural")).select(
                *ENTRY_KEYS, F.col("fp_hash").alias("fingerprint"),
                F.lit(run.etl_time).cast("long").alias("etl_time"), F.lit(run.ttl).cast("long").alias("ttl"),
            )  # fmt: skip
            written.append(self.record_run(new_entries, run, state))

        def release() -> None:
            answers.unpersist()
            flagged.unpersist()
            if table is not None:
                spark.sql(f"DROP TABLE IF EXISTS {table}")

        def figures() -> ManifestStats:
            return replace(
                stats,
                files_written=sum(segment.files for segment in written),
                bytes_written=sum(segment.bytes for segment in written),
            )

        return ManifestCheck(answers=answers, stats=figures, record=record, release=release)

    def _register(self, spark: SparkSession, table: str, buckets: int, segments: dict[str, tuple[int, ...]]) -> None:
        spark.sql(
            f"CREATE TABLE {table} ({_COLUMNS_SQL}, segment STRING) USING parquet PARTITIONED BY (segment) "
            f"{_bucketing(buckets)} LOCATION '{self._spark_path(f'{self.root}/{LAKE_SEGMENTS}')}'"
        )
        partitions = " ".join(
            f"PARTITION (segment='{name}') LOCATION '{self._spark_path(self._segment_path(name))}'" for name in segments
        )
        spark.sql(f"ALTER TABLE {table} ADD {partitions}")

    def record_run(self, entries: DataFrame, run: ManifestRun, state: State) -> Segment:
        """Write a run's entries as a new segment and commit it as the run's (replacing an earlier attempt's);
        then drop what expired and compact past days. The segment written."""
        for leftover in sorted(set(self._segment_names(f"{run.run_id}.")) - set(state.segments)):
            store.delete_folder(self._segment_path(leftover))  # an attempt of this run that stopped before its commit
        name = f"{run.run_id}.{uuid.uuid4().hex[:8]}"
        segment = self.write_segment(entries, name, state.buckets)
        segments = dict(state.segments)
        previous = state.runs.get(run.etl_time)
        if previous is not None and previous.segment in segments and segments[previous.segment].runs == (run.etl_time,):
            del segments[previous.segment]  # this run's earlier attempt: replaced whole
        segments[name] = replace(segment, runs=(run.etl_time,), max_ttl=run.ttl)
        runs = {**state.runs, run.etl_time: RunEntries(run.etl_time, run.run_id, run.ttl, name)}
        committed = self.commit(
            expired_dropped(State(state.commit, state.buckets, segments, runs)), state, run.job, run.run_id
        )
        self.compact(entries.sparkSession, committed, run)
        return segment

    def compact(self, spark: SparkSession, state: State, run: ManifestRun) -> State:
        """Merge each past UTC day's segments (before the day of `run`) into one segment, and commit."""
        today = run.etl_time // SECONDS_PER_DAY
        by_day: dict[int, list[str]] = {}
        for segment in state.segments.values():
            days = {t // SECONDS_PER_DAY for t in segment.runs}
            if len(days) == 1 and (day := days.pop()) < today:
                by_day.setdefault(day, []).append(segment.name)
        merged = {day: names for day, names in by_day.items() if len(names) > 1}
        if not merged:
            return state
        segments, runs = dict(state.segments), dict(state.runs)
        for day, names in sorted(merged.items()):
            live = {name: state.stale_in(name) for name in names}
            table = f"winnow_lake_{uuid.uuid4().hex}"
            self._register(spark, table, state.buckets, live)
            try:
                rows = spark.table(table).where(~_stale(live)).drop("segment")
                name = f"day-{datetime.fromtimestamp(day * SECONDS_PER_DAY, UTC):%Y-%m-%d}.{uuid.uuid4().hex[:8]}"
                segment = self.write_segment(rows, name, state.buckets)
            finally:
                spark.sql(f"DROP TABLE IF EXISTS {table}")
            for old in names:
                del segments[old]
            segments[name] = segment
            for etl_time in segment.runs:
                runs[etl_time] = replace(runs[etl_time], segment=name)
        return self.commit(
            State(state.commit, state.buckets, segments, runs), state, f"{run.job} (compaction)", run.run_id
        )

    def import_dynamodb_export(self, spark: SparkSession, export: str, run_id: str) -> dict[str, int]:
        """Load a DynamoDB manifest table's export to S3 (DynamoDB JSON, from `aws dynamodb
        export-table-to-point-in-time`: its `data/` folder of `.json.gz` files) into this empty lake manifest, as
        one segment; each item keeps its `etlTime` and `ttl`. The counts: items read, entries written, items
        skipped (no UUID event id, such as the writer-lease item, or no fingerprint/etlTime/ttl).

        Raises:
            ManifestError: the lake manifest already holds entries (import first, then run).
        """
        state = self.state()
        if state.runs:
            raise ManifestError(
                f"manifest {self.uri}: already holds {len(state.runs)} run(s); a DynamoDB export is loaded into an "
                "empty lake manifest only: --create a new one and load the export first"
            )
        schema = (
            f"Item struct<{DYNAMODB_PARTITION_KEY}: struct<S: string>, {DYNAMODB_SORT_KEY}: struct<S: string>, "
            f"{DYNAMODB_ETL_TIME}: struct<N: string>, {DYNAMODB_TTL}: struct<N: string>>"
        )
        items = spark.read.schema(schema).json(export)
        event_key = F.lower(F.col(f"Item.{DYNAMODB_PARTITION_KEY}.S"))
        fingerprint = F.col(f"Item.{DYNAMODB_SORT_KEY}.S")
        etl_time = F.col(f"Item.{DYNAMODB_ETL_TIME}.N").cast("long")
        ttl = F.col(f"Item.{DYNAMODB_TTL}.N").cast("long")
        usable = event_key.rlike(UUID_PATTERN) & fingerprint.isNotNull() & etl_time.isNotNull() & ttl.isNotNull()
        high, low = id_halves(event_key)
        # Read once (an export can be large): every item, with the entry it makes if it is usable.
        converted = items.select(
            usable.alias("usable"), high.alias("id_hi"), low.alias("id_lo"),
            F.xxhash64(fingerprint).alias("fingerprint"), etl_time.alias("etl_time"), ttl.alias("ttl"),
        ).persist(StorageLevel.MEMORY_AND_DISK)  # fmt: skip
        try:
            read = converted.count()
            entries = converted.where("usable").drop("usable")
            name = f"dynamodb-export-{run_id}.{uuid.uuid4().hex[:8]}"
            segment = self.write_segment(entries, name, state.buckets)
            ttls = {row[0]: row[1] for row in entries.groupBy("etl_time").agg(F.max("ttl")).collect()}
        finally:
            converted.unpersist()
        runs = {t: RunEntries(t, f"dynamodb-export {run_id}", ttls[t], name) for t in segment.runs}
        self.commit(State(state.commit, state.buckets, {name: segment}, runs), state, "populate-manifest", run_id)
        return {"items": read, "entries": segment.keys, "skipped": read - segment.keys}


def expired_dropped(state: State) -> State:
    """`state` without the segments whose entries all expired more than RETAIN_AFTER_EXPIRY_DAYS before its newest
    run, and without those runs."""
    if not state.runs:
        return state
    cutoff = max(state.runs) - RETAIN_AFTER_EXPIRY_DAYS * SECONDS_PER_DAY
    segments = {name: s for name, s in state.segments.items() if s.max_ttl > cutoff}
    runs = {t: r for t, r in state.runs.items() if r.segment in segments}
    return replace(state, segments=segments, runs=runs)


def open_lake(uri: str, buckets: int = DEFAULT_BUCKETS) -> LakeManifest:
    """The lake manifest `lake:PATH`.

    Raises:
        InvalidArgumentError: PATH is empty, neither local nor S3, or has a quote in it.
    """
    path = uri.removeprefix("lake:").rstrip("/")
    if path.startswith("file://"):
        path = path.removeprefix("file://")
    if not path or "'" in path or not store.supported(path):
        raise InvalidArgumentError(
            f"--manifest: given {uri!r}; allowed: lake:PATH with PATH a local folder or s3://bucket/prefix "
            "(no quotes in it)"
        )
    root = os.path.abspath(path) if store.local_path(path) is not None else path.replace("s3a://", "s3://")
    return LakeManifest(uri=uri, root=root, buckets_at_create=buckets)
