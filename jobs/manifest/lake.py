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
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.contract import (
    LAKE_DESCRIPTOR,
    LAKE_FILTERS,
    LAKE_SEGMENTS,
)  # fmt: skip
from jobs.errors import InvalidArgumentError
from jobs.fs import store
from jobs.fs.paths import check_readable, exact, qualified
from jobs.manifest.base import (
    ID_SEEN_EARLIER,
    SEEN_EARLIER,
    Manifest,
    ManifestCheck,
    ManifestError,
    ManifestRun,
    ManifestStats,
)  # fmt: skip
from jobs.manifest.lake_filter import (
    ENTRY_KEYS,
    bucket_of_file,
    filter_matches,
    register_filters,
)  # fmt: skip
from jobs.manifest.lake_state import (
    FORMAT,
    VERSION,
    Segment,
    State,
)
from jobs.manifest.lake_writes import COLUMNS_SQL, DEFAULT_BUCKETS, LakeWriter, keyed_pairs, stale_rows


@dataclass(frozen=True)
class LakeManifest(LakeWriter, Manifest):
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
                .where(counts & ~stale_rows(whole))
                .select(*ENTRY_KEYS, F.col("fingerprint").alias("earlier_fp"))
            )
            # The batch's pairs of a bucket are the hash table; the bucket's entries stream past it.
            joined = keyed.hint("shuffle_hash").join(earlier, list(ENTRY_KEYS), "left")
        if lookups:
            looked_up = (
                spark.read.schema(f"{COLUMNS_SQL}, segment STRING")
                .option("basePath", qualified(f"{self.root}/{LAKE_SEGMENTS}"))  # a name, not a glob
                .parquet(*(exact(qualified(path)) for path in lookups))
                .where(counts & ~stale_rows(filtered))
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
