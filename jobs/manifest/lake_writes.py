"""The lake manifest's writes (`jobs.manifest.lake`): a segment written, a run's entries committed as its own (and
an earlier attempt's replaced), an abandoned run's removed, past days compacted and given filters; and the
expressions the check shares with them (the entry's key of an event id, the rows a segment no longer counts)."""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.contract import LAKE_COLUMNS, LAKE_SEGMENTS, SUCCESS_MARKER
from jobs.fs import store
from jobs.fs.paths import exact, location, qualified, table_options
from jobs.manifest.base import SECONDS_PER_DAY, ManifestRun, RegisteredRun, back_filled_key
from jobs.manifest.lake_commits import LakeLocation
from jobs.manifest.lake_filter import (
    ENTRY_KEYS,
    FILTER_BITS,
    Filter,
    file_buckets,
    register_by_segment,
    worth_a_filter,
    write_filter,
)  # fmt: skip
from jobs.manifest.lake_integrity import data_files
from jobs.manifest.lake_state import RunEntries, Segment, State, expired_dropped

DEFAULT_BUCKETS = 64
COLUMNS_SQL = ", ".join(f"{name} {kind}" for name, kind in LAKE_COLUMNS)


def bucketing(buckets: int) -> str:
    """The table clause that makes Spark write, and read, a segment as one file per bucket of the event id."""
    return f"CLUSTERED BY ({', '.join(ENTRY_KEYS)}) SORTED BY ({', '.join(ENTRY_KEYS)}) INTO {buckets} BUCKETS"


def stale_rows(segments: dict[str, tuple[int, ...]]) -> Column:
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


class LakeWriter(LakeLocation):
    """What `LakeManifest` writes, and commits."""

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
            f"CREATE TABLE {table} ({COLUMNS_SQL}) USING parquet {table_options(compression='zstd')} "
            f"{bucketing(buckets)} {location(path)}"
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

    def _register(self, spark: SparkSession, table: str, buckets: int, segments: dict[str, tuple[int, ...]]) -> None:
        register_by_segment(spark, table, COLUMNS_SQL, bucketing(buckets), f"{self.root}/{LAKE_SEGMENTS}", segments)

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
        own = spark.read.schema(COLUMNS_SQL).parquet(*(exact(qualified(path)) for path in paths))
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
                rows = spark.table(table).where(~stale_rows(live)).drop("segment")
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
