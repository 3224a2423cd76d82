"""Filters of the lake manifest's segments: a run reads a few bytes a key of them, not their entries.

A past day's segment (compacted, or the day's only one) gets a filter, and so does a run's segment of at least a
row a bucket (`worth_a_filter`): per entry, the entry's bucket (the bucket file its exact entry is in) and
FILTER_BITS bits of a second hash of its event id. The hashes are packed into rows of about KEYS_A_ROW: a row holds
the sorted hashes of one bucket whose top `block_bits` bits are its `block`, so a run's cost is that of decoding
the hashes, not of a row each (a row's cost in Spark's scan and join is the row's, whatever its bytes). Parquet's
delta encoding (no dictionary) keeps each hash at about `FILTER_BITS - log2(entries in its bucket) + 2` bits. A run
groups its ids' hashes by (bucket, block), joins them with the rows of the live filters in one bucketed join (the
filters are read, never shuffled) and intersects each row's hashes with its block's; then it reads exact entries
only from the bucket files of the segments where one of its ids matched.
A filter can only say "certainly not here": an id delivered earlier always matches its own entry's hash, so
decisions are those of reading every entry; a false match costs one bucket file read.

Layout: `filters-v2/segment=NAME/`, beside `segments/` (a segment folder is read whole as a table partition, so
its filter cannot live in it); the commit records each filter's files and sizes (`segment_filters_v2`), and the
integrity check compares them as it does a segment's. The first layout (`filters/`, one row a hash, commit key
`segment_filters`) is no longer read: its segments are read whole until compaction gives them a filter of this one.
"""

from __future__ import annotations

import math
import os
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.fs import store
from jobs.fs.paths import location, table_options

FILTER_BITS = 40
"""Bits of the second hash kept a key: a pair matches a bucket file's filter by chance with probability about
(entries in that file) / 2^FILTER_BITS; each chance match reads one bucket file."""
ENTRY_BUCKETS_A_FILE = 64
"""A filter file holds the rows of this many of the entries' buckets: a run reads every live filter file, and
each costs a request or two, so a day's filter has a 64th of the entries' files (at least one; a run's join has
as many tasks as the filters have files)."""
KEYS_A_ROW = 32
"""About this many hashes a filter row: fewer a row cost a row's overhead in the scan and the join each; more (64 to
256 a row, measured) saved nothing."""
FILTER_COLUMNS = (("bucket", "INT"), ("block", "INT"), ("hashes", "ARRAY<BIGINT>"))
_COLUMNS_SQL = ", ".join(f"{name} {kind}" for name, kind in FILTER_COLUMNS)
# Delta encoding of the sorted hashes: Parquet's V2 pages, and no dictionary (which random values would defeat).
_WRITE_OPTIONS = {"compression": "zstd", "parquet.writer.version": "v2", "parquet.enable.dictionary": "false"}
_BUCKET_FILE = re.compile(r".*_(\d+)(?:\..*)?$")
"""Spark's own rule for a bucketed table's file names (`part-00000-…_00003.c000.zstd.parquet`: bucket 3)."""
ENTRY_KEYS = ("id_hi", "id_lo")
"""An entry's key, the event id's 128 bits: the bucketing of the manifest's segments, and what filters hash."""


@dataclass(frozen=True)
class Filter:
    """One segment's filter, as a commit records it."""

    bits: int
    block_bits: int
    """The top bits of a hash that name its row within its bucket (`block`)."""
    file_buckets: int
    """The filter table's own bucket count (its files): the entries' buckets are spread over them."""
    keys: int
    """Its hashes: one per entry of its segment's files."""
    file_sizes: dict[str, int]
    """Its data files, by name in its folder, with their sizes."""

    @property
    def files(self) -> int:
        return len(self.file_sizes)

    @property
    def bytes(self) -> int:
        return sum(self.file_sizes.values())

    def document(self) -> dict[str, object]:
        return {"bits": self.bits, "block_bits": self.block_bits, "file_buckets": self.file_buckets,
                "keys": self.keys, "file_sizes": self.file_sizes}  # fmt: skip

    @staticmethod
    def parse(document: dict[str, Any]) -> Filter:
        return Filter(document["bits"], document["block_bits"], document["file_buckets"], document["keys"],
                      document["file_sizes"])  # fmt: skip

    @property
    def kind(self) -> tuple[int, int, int]:
        """What one join over several filters needs them to share."""
        return self.bits, self.block_bits, self.file_buckets


def entry_bucket(buckets: int) -> Column:
    """The bucket of an entry (columns `id_hi`, `id_lo`): the bucket file Spark's bucketing writes it to."""
    return F.pmod(F.hash(*ENTRY_KEYS), F.lit(buckets))


def filter_hash(bits: int) -> Column:
    """`bits` bits of a hash of the entry's id independent of its bucket (xxHash64, not Murmur3)."""
    return F.xxhash64(*ENTRY_KEYS).bitwiseAND(F.lit((1 << bits) - 1))


def block_bits_for(keys: int, buckets: int, bits: int) -> int:
    """The block bits that put about KEYS_A_ROW of a segment's `keys` hashes (of `bits` bits) in a row of each of
    its `buckets` (at most `bits`, and 24: a block is an INT)."""
    return max(0, min(bits, 24, round(math.log2(max(1, keys) / (buckets * KEYS_A_ROW)))))


def hashed(ids: DataFrame, buckets: int, bits: int, block_bits: int) -> DataFrame:
    """`ids` (with `id_hi`, `id_lo`) as (bucket, block, h): where each one's hash is, and the hash."""
    h = filter_hash(bits)
    return ids.select(
        entry_bucket(buckets).alias("bucket"),
        F.shiftright(h, bits - block_bits).cast("int").alias("block"),
        h.alias("h"),
    )


def worth_a_filter(keys: int, buckets: int) -> bool:
    """Whether a run's segment of `keys` keys gets a filter of its own, in the run's commit: once it holds about a
    row of KEYS_A_ROW hashes a bucket, the same day's later runs read a few bytes a key of it, and a file for
    ENTRY_BUCKETS_A_FILE buckets instead of one a bucket; a smaller one is read whole for less than the filter's
    own Spark job costs."""
    return keys >= buckets * KEYS_A_ROW


def file_buckets(buckets: int) -> int:
    """The filter files of a segment of `buckets` buckets."""
    return max(1, buckets // ENTRY_BUCKETS_A_FILE)


def _bucketing(file_buckets: int) -> str:
    return f"CLUSTERED BY (bucket) SORTED BY (bucket, block) INTO {file_buckets} BUCKETS"


def write_filter(entries: DataFrame, keys: int, folder: str, buckets: int) -> Filter:
    """Write the filter of `entries` (`keys` rows, of a manifest of `buckets` buckets) into `folder`, in
    `file_buckets(buckets)` files; its record for the commit."""
    spark = entries.sparkSession
    files_wanted = file_buckets(buckets)
    block_bits = block_bits_for(keys, buckets, FILTER_BITS)
    store.delete_folder(folder)  # a filter is written for a new segment name only: anything there is a dead try's
    if (local := store.local_path(folder)) is not None:
        os.makedirs(local)
    table = f"winnow_filter_{uuid.uuid4().hex}"
    spark.sql(
        f"CREATE TABLE {table} ({_COLUMNS_SQL}) USING parquet {table_options(**_WRITE_OPTIONS)} "
        f"{_bucketing(files_wanted)} {location(folder)}"
    )
    try:
        # Partitioned by the bucket, as the files are: each row's hashes are gathered in the task that writes it.
        rows = hashed(entries, buckets, FILTER_BITS, block_bits).repartition(files_wanted, "bucket")
        packed = rows.groupBy("bucket", "block").agg(F.array_sort(F.collect_list("h")).alias("hashes"))
        packed.write.insertInto(table)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    sizes = {file.path.removeprefix(f"{folder}/"): file.size for file in store.list_files(folder)
             if file.path.endswith(".parquet")}  # fmt: skip
    return Filter(FILTER_BITS, block_bits, files_wanted, keys, sizes)


def register_by_segment(
    spark: SparkSession, table: str, columns_sql: str, bucketing: str, root: str, segments: Iterable[str]
) -> None:
    """Register the folders `root/segment=NAME` of `segments` as one bucketed table with a `segment` column."""
    spark.sql(
        f"CREATE TABLE {table} ({columns_sql}, segment STRING) USING parquet {table_options()} PARTITIONED BY "
        f"(segment) {bucketing} {location(root)}"
    )
    partitions = " ".join(f"PARTITION (segment='{name}') {location(f'{root}/segment={name}')}" for name in segments)
    spark.sql(f"ALTER TABLE {table} ADD {partitions}")


def register_filters(spark: SparkSession, table: str, root: str, file_buckets: int, segments: list[str]) -> None:
    """Register the filters of `segments` (under `root`, the manifest's `filters/`; each of `file_buckets` files)
    as one bucketed table."""
    register_by_segment(spark, table, _COLUMNS_SQL, _bucketing(file_buckets), root, segments)


def filter_matches(
    spark: SparkSession, keyed: DataFrame, table: str, buckets: int, kind: Filter
) -> list[tuple[str, int, int]]:
    """The (segment, bucket, ids) whose filters (all of `kind`'s bits, block bits and files) hold the hash of one of
    `keyed`'s ids: one bucketed join; the filters are not shuffled (the join's keys need not all be the filters'
    bucketing keys)."""
    # Partitioned by the bucket alone, as the filters are: the join then reads each filter file in its own task.
    hashes = hashed(keyed, buckets, kind.bits, kind.block_bits).repartition(kind.file_buckets, "bucket")
    # A block's hashes of the batch in one row, the hash table's: each filter row meets at most one batch row and
    # intersects the two arrays (hashing both once), however many of the batch's ids fall in its block.
    by_block = hashes.groupBy("bucket", "block").agg(F.array_distinct(F.collect_list("h")).alias("ids"))
    matched = (
        by_block.hint("shuffle_hash")
        .join(spark.table(table), ["bucket", "block"])
        .select("segment", "bucket", F.size(F.array_intersect("hashes", "ids")).alias("matches"))
        .where(F.col("matches") > 0)
        .groupBy("segment", "bucket")
        .agg(F.sum("matches").alias("matches"))
    )
    setting = "spark.sql.requireAllClusterKeysForCoPartition"
    before = spark.conf.get(setting, "true") or "true"
    spark.conf.set(setting, "false")
    try:
        rows = matched.collect()
    finally:
        spark.conf.set(setting, before)
    return sorted((row["segment"], row["bucket"], row["matches"]) for row in rows)


def bucket_of_file(name: str) -> int:
    """The bucket of a bucketed table's data file, by its name."""
    match = _BUCKET_FILE.fullmatch(name.rsplit("/", 1)[-1])
    if match is None:
        raise ValueError(f"{name} is no bucketed data file")
    return int(match.group(1))
