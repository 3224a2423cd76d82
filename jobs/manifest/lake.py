"""The lake manifest (`lake:PATH`): the events manifest as Parquet files, checked with one join per run.

A per-request manifest pays a write (and a query) per event; a batch job holds its whole batch at once, so here
the batch's distinct pairs are joined with the manifest's entries in one Spark step (the bucket store of the
Apex Deduper, at warehouse scale). Layout under PATH (names in `jobs.contract`):

- `_manifest.json`: written once by `--create`, with the bucket count, fixed for the manifest's life.
- `segments/segment=NAME/`: a run's entries (or a compaction's), one Parquet file per bucket: `id_hi`, `id_lo`
  (the event id's 128 bits), `fingerprint` (64-bit xxHash of the fingerprint), `etl_time`, `ttl` (epoch seconds).
  Spark's own bucketing (Murmur3 of the id, modulo the bucket count), so the join reads each bucket's files in
  its own task and only the batch's pairs are shuffled; the manifest never is, and full lines never are.
- `filters-v2/segment=NAME/`: a segment's filter (`lake_filter`): a few bytes a key, through which a run reads the
  segment instead of its entries, looking up only the bucket files a filter cannot rule out. A past day's
  segment has one, and a run's segment of at least a row a bucket (written with it, in the run's commit).
- `_commits/NNNNNNNNNN.json`: the whole state (segments with their files' sizes, their filters, and which segment
  holds each run's entries), created only if absent; the highest number is current (`lake_commits`). A run's
  entries count only once its commit exists; files no commit names are never read. Before a check reads anything,
  the committed segments' and filters' files are compared with the commit (`lake_integrity`): a damaged manifest
  stops the run.

Semantics are the other backends' (jobs/manifest/base.py): an entry counts against run R (time T) when
`etl_time < T < ttl`, and an entry of a later run with a run key makes the pair (and, with synthetic detection,
the id) a copy that R does not record (`State.later_for`); a rerun's commit replaces that run's entries; so
redoing any run, in any order, gives the same decisions. Unlike the one-item-per-pair backends, every run's entries are kept until they expire, so a
pair delivered again after it expired does not change what a redo of an older run decides. The fingerprint is
compared by its 64-bit hash: two different fingerprints of one event id collide with probability 2^-64.

Housekeeping happens in the commit of each run: segments whose entries all expired more than
RETAIN_AFTER_EXPIRY_DAYS before the newest run are dropped whole (no per-key deletes), and a past UTC day's
per-run segments are merged into one (compaction) with a filter of its own, so a run reads about one filter per
day of TTL; segment and filter folders no kept commit names (a run or compaction killed before its commit) are
removed.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import ClassVar

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.contract import (
    LAKE_COLUMNS,
    LAKE_DESCRIPTOR,
    LAKE_FILTERS,
    LAKE_SEGMENTS,
    SUCCESS_MARKER,
)  # fmt: skip
from jobs.errors import InvalidArgumentError
from jobs.fs import store
from jobs.fs.paths import check_readable, exact, location, qualified, table_options
from jobs.manifest.base import (
    ID_SEEN_EARLIER,
    SECONDS_PER_DAY,
    SEEN_EARLIER,
    Manifest,
    ManifestCheck,
    ManifestError,
    ManifestRun,
    ManifestStats,
    RegisteredRun,
    back_filled_key,
)  # fmt: skip
from jobs.manifest.lake_commits import LakeLocation
from jobs.manifest.lake_filter import (
    ENTRY_KEYS,
    FILTER_BITS,
    Filter,
    bucket_of_file,
    file_buckets,
    filter_matches,
    register_by_segment,
    register_filters,
    worth_a_filter,
    write_filter,
)  # fmt: skip
from jobs.manifest.lake_integrity import data_files
from jobs.manifest.lake_state import (
    FORMAT,
    VERSION,
    RunEntries,
    Segment,
    State,
    expired_dropped,
)

DEFAULT_BUCKETS = 64
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
class LakeManifest(LakeLocation, Manifest):
    """`lake:PATH`: PATH a local folder or `s3://bucket/prefix`."""

    uri: str
    root: str
    buckets_at_create: int = DEFAULT_BUCKETS
    records_when_checked: ClassVar[bool] = False  # at the commit, `record()`

    # -- checking the location ---------------------------------------------------------------------------------

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

    # -- segments ----------------------------------------------------------------------------------------------

    def write_segment(self, entries: DataFrame, name: str, buckets: int) -> Segment:
        """Write `entries` (LAKE_COLUMNS) as segment `name`, one file per bucket; its record for the commit."""
        spark = entries.sparkSession
        path = self._segment_path(name)
        store.delete_folder(path)  # a name is new per attempt: anything there is an earlier try of this attempt
        if (local := store.local_path(path)) is not None:
            os.makedirs(local)  # else Spark warns, twice, that the table's location is not there
        table = f"winnow_lake_{uuid.uuid4().hex}"
        spark.sql(
            f"CREATE TABLE {table} ({_COLUMNS_SQL}) USING parquet {table_options(compression='zstd')} "
            f"{_bucketing(buckets)} {location(path)}"
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
        written = spark.read.parquet(*(exact(qualified(file.path)) for file in files))
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
        live = state.live_for(run.etl_time, run.run_key)
        whole = {name: stale for name, stale in live.items() if name not in state.filters}
        filtered = {name: stale for name, stale in live.items() if name in state.filters}
        # Distinct by the entry's key: the id's bits are the id, and two fingerprints of an id share a hash with
        # probability 2^-64 (cheaper than comparing the strings).
        keyed = keyed_pairs(pairs).repartition(buckets, *ENTRY_KEYS).dropDuplicates([*ENTRY_KEYS, "fp_hash"])
        if filtered:
            keyed = keyed.persist(StorageLevel.MEMORY_AND_DISK)  # read by the filters' join, then by the check
        lookups, matched = self._lookup_files(spark, keyed, state, filtered)
        filters = [state.filters[name] for name in filtered]
        stats = ManifestStats(
            files_read=sum(state.segments[s].files for s in whole) + sum(f.files for f in filters) + len(lookups),
            bytes_read=sum(state.segments[s].bytes for s in whole) + sum(f.bytes for f in filters)
            + sum(lookups.values()),
            keys_read=sum(state.segments[s].keys for s in whole) + sum(f.keys for f in filters),
            live_keys=sum(state.segments[s].keys for s in live),
            filter_matches=matched,
            lookup_files_read=len(lookups),
        )  # fmt: skip
        table = f"winnow_lake_{uuid.uuid4().hex}" if whole else None
        same_second = sorted(state.same_second(run.etl_time, run.run_key))
        joined = self._with_earlier(keyed, run, buckets, table, whole, filtered, sorted(lookups), same_second)
        earlier_fp = F.col("earlier_fp")
        flagged = joined.groupBy(*keyed.columns).agg(
            F.coalesce(F.max(earlier_fp == F.col("fp_hash")), F.lit(False)).alias("natural"),
            F.max(earlier_fp.isNotNull()).alias("delivered"),
        )
        later_table = f"winnow_lake_{uuid.uuid4().hex}"
        flagged = self._with_later(flagged, run, later_table, state)
        flagged = flagged.persist(StorageLevel.MEMORY_AND_DISK)
        flagged.count()  # the manifest is read once, here
        # base.SEEN_LATER: a copy of what a later run delivered; with synthetic detection, of the id it delivered.
        later_id = F.col("later_id") & F.lit(detect_synthetic)
        answer = F.when(F.col("natural") | F.col("later"), F.lit(SEEN_EARLIER)).when(
            (F.col("delivered") | later_id) & F.lit(detect_synthetic), F.lit(ID_SEEN_EARLIER)
        )
        answers = (
            flagged.where(F.col("delivered") | F.col("later") | later_id)
            .select("event_key", "fingerprint", answer.alias("cross_batch"))
            .where(F.col("cross_batch").isNotNull())
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        answers.count()
        written: list[Segment] = []

        def record() -> None:
            new_entries = flagged.where(~F.col("natural") & ~F.col("later") & ~later_id).select(
                *ENTRY_KEYS, F.col("fp_hash").alias("fingerprint"),
                F.lit(run.etl_time).cast("long").alias("etl_time"), F.lit(run.ttl).cast("long").alias("ttl"),
            )  # fmt: skip
            written.append(self.record_run(new_entries, run, state))

        def release() -> None:
            answers.unpersist()
            flagged.unpersist()
            keyed.unpersist()
            for name in (table, later_table):
                if name is not None:
                    spark.sql(f"DROP TABLE IF EXISTS {name}")

        def figures() -> ManifestStats:
            return replace(
                stats,
                files_written=sum(segment.files for segment in written),
                bytes_written=sum(segment.bytes for segment in written),
            )

        return ManifestCheck(answers=answers, stats=figures, record=record, release=release)

    def _with_later(self, flagged: DataFrame, run: ManifestRun, table: str, state: State) -> DataFrame:
        """`flagged` with `later` and `later_id`: whether a later run with a run key delivered the pair, and the id
        when neither an earlier run nor this one did (`base.later_only`). Read from `State.later_for`'s segments and
        the run's own, whole, registered as `table`: none for a run in order, which reads nothing more."""
        later = state.later_for(run.etl_time, run.run_key)
        if not later:
            return flagged.withColumn("later", F.lit(False)).withColumn("later_id", F.lit(False))
        own = {e.segment for e in state.runs.values() if e.owned_by(run.etl_time, run.run_key)} & set(state.segments)
        spark = flagged.sparkSession
        self._register(spark, table, state.buckets, {name: () for name in sorted(set(later) | own)})
        in_later_runs = F.lit(False)
        for name, times in later.items():
            in_later_runs = in_later_runs | ((F.col("segment") == name) & F.col("etl_time").isin(*times))
        in_own = F.col("segment").isin(*sorted(own)) & (F.col("etl_time") == run.etl_time)
        by_id = (
            spark.table(table)
            .where((in_later_runs | in_own) & (F.col("ttl") > run.etl_time))
            .groupBy(*ENTRY_KEYS)
            .agg(
                F.collect_set(F.when(in_later_runs, F.col("fingerprint"))).alias("later_fps"),
                F.max(in_own).alias("own"),
            )
        )
        later_fps = F.coalesce(F.col("later_fps"), F.array().cast("array<long>"))
        return (
            flagged.join(by_id, list(ENTRY_KEYS), "left")
            .withColumn("later", F.array_contains(later_fps, F.col("fp_hash")))
            .withColumn(
                "later_id", (F.size(later_fps) > 0) & ~F.coalesce(F.col("own"), F.lit(False)) & ~F.col("delivered")
            )
            .drop("later_fps", "own")
        )

    def _with_earlier(
        self,
        keyed: DataFrame,
        run: ManifestRun,
        buckets: int,
        table: str | None,
        whole: dict[str, tuple[int, ...]],
        filtered: dict[str, tuple[int, ...]],
        lookups: list[str],
        same_second: list[str],
    ) -> DataFrame:
        """`keyed` with `earlier_fp`: a row per entry that counts against `run` for its id (one with a null when
        none does), from the segments read whole (`whole`, registered as `table`) and the bucket files of the
        filtered segments their filters could not rule out (`lookups`); in the `same_second` segments (other runs
        of the run's second) the entries of its second count too."""
        spark = keyed.sparkSession
        before = F.col("etl_time") < run.etl_time
        if same_second:
            before = before | F.col("segment").isin(*same_second)
        counts = before & (F.col("ttl") > run.etl_time)
        if table is None:
            joined = keyed.select("*", F.lit(None).cast("long").alias("earlier_fp"))
        else:
            self._register(spark, table, buckets, whole)
            earlier = (
                spark.table(table)
                .where(counts & ~_stale(whole))
                .select(*ENTRY_KEYS, F.col("fingerprint").alias("earlier_fp"))
            )
            # The batch's pairs of a bucket are the hash table; the bucket's entries stream past it.
            joined = keyed.hint("shuffle_hash").join(earlier, list(ENTRY_KEYS), "left")
        if lookups:
            looked_up = (
                spark.read.schema(f"{_COLUMNS_SQL}, segment STRING")
                .option("basePath", qualified(f"{self.root}/{LAKE_SEGMENTS}"))  # a name, not a glob
                .parquet(*(exact(qualified(path)) for path in lookups))
                .where(counts & ~_stale(filtered))
                .select(*ENTRY_KEYS, F.col("fingerprint").alias("earlier_fp"))
            )
            joined = joined.unionByName(keyed.join(looked_up, list(ENTRY_KEYS)))
        return joined

    def _lookup_files(
        self, spark: SparkSession, keyed: DataFrame, state: State, filtered: dict[str, tuple[int, ...]]
    ) -> tuple[dict[str, int], int]:
        """The bucket files of the `filtered` segments whose filter some of `keyed`'s ids match (path -> bytes), and
        how many (id, segment) matches there were."""
        # One join for all, unless filters of another kind (bits, block bits, file count) are live too.
        by_kind: dict[tuple[int, int, int], list[str]] = {}
        for name in filtered:
            if (made := state.filters[name]).keys:
                by_kind.setdefault(made.kind, []).append(name)
        matches = []
        for _, named in sorted(by_kind.items()):
            kind = state.filters[named[0]]
            table = f"winnow_filter_{uuid.uuid4().hex}"
            register_filters(spark, table, f"{self.root}/{LAKE_FILTERS}", kind.file_buckets, named)
            try:
                matches += filter_matches(spark, keyed, table, state.buckets, kind)
            finally:
                spark.sql(f"DROP TABLE IF EXISTS {table}")
        wanted = {(segment, bucket) for segment, bucket, _ in matches}
        files = {
            f"{self._segment_path(segment)}/{file}": size
            for segment in sorted({segment for segment, _ in wanted})
            for file, size in (state.segments[segment].file_sizes or {}).items()
            if (segment, bucket_of_file(file)) in wanted
        }
        return files, sum(count for _, _, count in matches)

    def _register(self, spark: SparkSession, table: str, buckets: int, segments: dict[str, tuple[int, ...]]) -> None:
        register_by_segment(spark, table, _COLUMNS_SQL, _bucketing(buckets), f"{self.root}/{LAKE_SEGMENTS}", segments)

    def record_run(self, entries: DataFrame, run: ManifestRun, state: State) -> Segment:
        """Write a run's entries as a new segment (with its filter, if `worth_a_filter`) and commit it as the run's
        (replacing an earlier attempt's); then drop what expired and compact past days. The segment written."""
        for leftover in sorted(set(self._segment_names(f"{run.run_id}.")) - set(state.segments)):
            store.delete_folder(self._segment_path(leftover))  # an attempt of this run that stopped before its commit
        name = f"{run.run_id}.{uuid.uuid4().hex[:8]}"
        spark = entries.sparkSession
        segment = self.write_segment(entries, name, state.buckets)
        filters = dict(state.filters)  # an earlier attempt's filter goes with its segment, at the commit
        # The same day's later runs read a segment of a row a bucket or more through its filter.
        made = (
            self.filter_of(spark, name, segment, state.buckets) if worth_a_filter(segment.keys, state.buckets) else None
        )
        if made is not None:
            filters[name] = made
        segments, runs = self._without_run(state, run)  # this run's earlier attempt: replaced whole
        segments[name] = replace(segment, runs=(run.etl_time,), max_ttl=run.ttl)
        own = RunEntries(run.etl_time, run.run_id, run.ttl, name, run.run_key or None)
        runs[own.key] = own
        open_runs = _open_after(state, run)
        committed = self.commit(
            expired_dropped(replace(state, segments=segments, runs=runs, filters=filters, open_runs=open_runs)),
            state, run.job, run.run_id,
        )  # fmt: skip
        self.compact(spark, committed, run)
        return segment

    @staticmethod
    def _without_run(state: State, run: ManifestRun) -> tuple[dict[str, Segment], dict[int | str, RunEntries]]:
        """`state`'s segments and runs without the run's own entries (by run key; entries recorded without one at its
        second are its own too): a segment of its second that no other run's entries are in goes whole; in a
        merged one its rows are stale from then on."""
        segments, runs = dict(state.segments), dict(state.runs)
        for key, entries in state.runs.items():
            if entries.owned_by(run.etl_time, run.run_key):
                del runs[key]
        for name in {e.segment for e in state.runs.values() if e.owned_by(run.etl_time, run.run_key)}:
            others = any(entries.segment == name for entries in runs.values())
            if name in segments and segments[name].runs == (run.etl_time,) and not others:
                del segments[name]
        return segments, runs

    def leftovers(self, pairs: DataFrame, run: ManifestRun) -> int:
        """The entries of `run`'s second in the segments holding its entries that `pairs` lack (in a merged segment,
        another pipeline's run of the same second counts too: a redo is then refused rather than guessed)."""
        state = self.state()
        # What a back-fill recorded from the run's folder (its `good/`, re-identified events included) is not what
        # the run recorded from its input: none of it counts as lacking.
        back_filled = back_filled_key(run.run_key)
        names = sorted(
            {
                e.segment
                for e in state.runs.values()
                if e.owned_by(run.etl_time, run.run_key) and e.run_key != back_filled
            }
        )
        paths: list[str] = []
        for name in names:
            segment = state.segments.get(name)
            if segment is not None and segment.file_sizes is None:  # committed before commits listed the files
                paths.append(self._segment_path(name))
            elif segment is not None:
                paths.extend(f"{self._segment_path(name)}/{file}" for file in sorted(segment.file_sizes or {}))
        if not paths:
            return 0
        spark = pairs.sparkSession
        own = spark.read.schema(_COLUMNS_SQL).parquet(*(exact(qualified(path)) for path in paths))
        batch = keyed_pairs(pairs).select(*ENTRY_KEYS, F.col("fp_hash").alias("fingerprint"))
        own = own.where(F.col("etl_time") == run.etl_time).select(*ENTRY_KEYS, "fingerprint")
        return own.join(batch, [*ENTRY_KEYS, "fingerprint"], "left_anti").count()

    def abandon(self, run: ManifestRun) -> int:
        """Remove the run's entries (its segment, or its rows of a merged one) in a commit; how many runs' entries
        were removed (0: none recorded)."""
        state = self.state()
        self.verify(state)
        segments, runs = self._without_run(state, run)
        open_runs = tuple(entry for entry in state.open_runs if entry.key != run.run_key)
        if len(runs) == len(state.runs) and open_runs == state.open_runs:
            return 0
        self.commit(
            replace(state, segments=segments, runs=runs, open_runs=open_runs), state, "manifest abandon", run.run_id
        )
        return len(state.runs) - len(runs)

    def compact(self, spark: SparkSession, state: State, run: ManifestRun) -> State:
        """Merge each past UTC day's segments (before the day of `run`) into one segment, give each past day's
        segment a filter (`lake_filter`), and commit."""
        today = run.etl_time // SECONDS_PER_DAY
        by_day: dict[int, list[str]] = {}
        for segment in state.segments.values():
            days = {t // SECONDS_PER_DAY for t in segment.runs}
            if len(days) == 1 and (day := days.pop()) < today:
                by_day.setdefault(day, []).append(segment.name)
        merged = {day: names for day, names in by_day.items() if len(names) > 1}
        unfiltered = sorted(names[0] for names in by_day.values() if len(names) == 1 and names[0] not in state.filters)
        if not merged and not unfiltered:
            return state
        segments, runs, filters = dict(state.segments), dict(state.runs), dict(state.filters)
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
            unfiltered.append(name)
            for key, entries in list(runs.items()):
                if entries.segment in names:
                    runs[key] = replace(entries, segment=name)
        for name in unfiltered:
            if (made := self.filter_of(spark, name, segments[name], state.buckets)) is not None:
                filters[name] = made
        return self.commit(
            replace(state, segments=segments, runs=runs, filters=filters), state, f"{run.job} (compaction)", run.run_id
        )

    def filter_of(self, spark: SparkSession, name: str, segment: Segment, buckets: int) -> Filter | None:
        """The filter of segment `name`, from its files as committed (stale rows included: a filter may say more
        than is there, never less); None for a segment whose commit does not list its files (it stays read whole)."""
        if segment.file_sizes is None:
            return None
        files = [f"{self._segment_path(name)}/{file}" for file in sorted(segment.file_sizes)]
        if not files:
            return Filter(FILTER_BITS, 0, file_buckets(buckets), 0, {})
        entries = spark.read.parquet(*(exact(qualified(file)) for file in files))
        return write_filter(entries, segment.keys, self._filter_path(name), buckets)


def _open_after(state: State, run: ManifestRun) -> tuple[RegisteredRun, ...]:
    """The open runs the commit of `run` records: its own entry, and every other one `state` has whose run folder is
    not sealed (the run checked the register first: normally none)."""
    others = tuple(
        entry for entry in state.open_runs
        if entry.key != run.run_key and not store.exists(f"{entry.folder}/{SUCCESS_MARKER}")
    )  # fmt: skip
    return (*others, run.register_entry) if run.register_entry else others


def open_lake(uri: str, buckets: int = DEFAULT_BUCKETS) -> LakeManifest:
    """The lake manifest `lake:PATH`.

    Raises:
        InvalidArgumentError: PATH is empty, neither local nor S3, or Spark's reader cannot name it (`exact`).
    """
    path = uri.removeprefix("lake:").rstrip("/")
    if path.startswith("file://"):
        path = path.removeprefix("file://")
    if not path or not store.supported(path):
        raise InvalidArgumentError(
            f"--manifest: given {uri!r}; allowed: lake:PATH with PATH a local folder or s3://bucket/prefix"
        )
    check_readable("--manifest", path)
    root = os.path.abspath(path) if store.local_path(path) is not None else path.replace("s3a://", "s3://")
    return LakeManifest(uri=uri, root=root, buckets_at_create=buckets)
