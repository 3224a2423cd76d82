"""Filters of the lake manifest's past days: a run reads a few bytes a key of them, not their entries.

A past day's segment (compacted, or the day's only one) gets a filter: per entry, the entry's bucket (the bucket
file its exact entry is in) and FILTER_BITS bits of a second hash of its event id, sorted within a bucket, written
with Parquet's delta encoding (no dictionary), so each value costs about `FILTER_BITS - log2(entries in its
file)` bits. A run joins its pairs' (bucket, hash) with the filters of the live past days in one bucketed join
(the filters are read, never shuffled), then reads exact entries only from the bucket files of the segments where
one of its pairs matched. A filter can only say "certainly not here": an id delivered earlier always matches its
own entry's filter row, so decisions are those of reading every entry; a false match costs one bucket file read.

Layout: `filters/segment=NAME/`, beside `segments/` (a segment folder is read whole as a table partition, so its
filter cannot live in it); the commit records each filter's files and sizes (`segment_filters`), and the
integrity check compares them as it does a segment's.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.fs import store

FILTER_BITS = 40
"""Bits of the second hash kept a key: a pair matches a bucket file's filter by chance with probability about
(entries in that file) / 2^FILTER_BITS; each chance match reads one bucket file."""
ENTRY_BUCKETS_A_FILE = 16
"""A filter file holds the rows of this many of the entries' buckets: a run reads every live filter file, and
each costs a request or two, so a day's filter has a sixteenth of the entries' files (at least one)."""
FILTER_COLUMNS = (("bucket", "INT"), ("h", "BIGINT"))
_COLUMNS_SQL = ", ".join(f"{name} {kind}" for name, kind in FILTER_COLUMNS)
# Delta encoding of the sorted hashes: Parquet's V2 pages, and no dictionary (which random values would defeat).
_WRITE_OPTIONS = "compression 'zstd', 'parquet.writer.version' 'v2', 'parquet.enable.dictionary' 'false'"
_BUCKET_FILE = re.compile(r".*_(\d+)(?:\..*)?$")
"""Spark's own rule for a bucketed table's file names (`part-00000-…_00003.c000.zstd.parquet`: bucket 3)."""
ENTRY_KEYS = ("id_hi", "id_lo")
"""An entry's key, the event id's 128 bits: the bucketing of the manifest's segments, and what filters hash."""


@dataclass(frozen=True)
class Filter:
    """One segment's filter, as a commit records it."""

    bits: int
    file_buckets: int
    """The filter table's own bucket count (its files): the entries' buckets are spread over them."""
    keys: int
    """Its rows: one per entry of its segment's files."""
    file_sizes: dict[str, int]
    """Its data files, by name in its folder, with their sizes."""

    @property
    def files(self) -> int:
        return len(self.file_sizes)

    @property
    def bytes(self) -> int:
        return sum(self.file_sizes.values())

    def document(self) -> dict[str, object]:
        return {"bits": self.bits, "file_buckets": self.file_buckets, "keys": self.keys,
                "file_sizes": self.file_sizes}  # fmt: skip

    @staticmethod
    def parse(document: dict[str, Any]) -> Filter:
        return Filter(document["bits"], document["file_buckets"], document["keys"], document["file_sizes"])


def entry_bucket(buckets: int) -> Column:
    """The bucket of an entry (columns `id_hi`, `id_lo`): the bucket file Spark's bucketing writes it to."""
    return F.pmod(F.hash(*ENTRY_KEYS), F.lit(buckets))


def filter_hash(bits: int) -> Column:
    """`bits` bits of a hash of the entry's id independent of its bucket (xxHash64, not Murmur3)."""
    return F.xxhash64(*ENTRY_KEYS).bitwiseAND(F.lit((1 << bits) - 1))


def filter_rows(entries: DataFrame, buckets: int, bits: int) -> DataFrame:
    """The filter rows of `entries` (with `id_hi`, `id_lo`)."""
    return entries.select(entry_bucket(buckets).alias("bucket"), filter_hash(bits).alias("h"))


def file_buckets(buckets: int) -> int:
    """The filter files of a segment of `buckets` buckets."""
    return max(1, buckets // ENTRY_BUCKETS_A_FILE)


def _bucketing(file_buckets: int) -> str:
    return f"CLUSTERED BY (bucket) SORTED BY (bucket, h) INTO {file_buckets} BUCKETS"


def write_filter(entries: DataFrame, keys: int, folder: str, buckets: int) -> Filter:
    """Write the filter of `entries` (`keys` rows, of a manifest of `buckets` buckets) into `folder`, in
    `file_buckets(buckets)` files; its record for the commit."""
    spark = entries.sparkSession
    files_wanted = file_buckets(buckets)
    store.delete_folder(folder)  # a filter is written for a new segment name only: anything there is a dead try's
    if (local := store.local_path(folder)) is not None:
        os.makedirs(local)
    table = f"winnow_filter_{uuid.uuid4().hex}"
    spark.sql(
        f"CREATE TABLE {table} ({_COLUMNS_SQL}) USING parquet OPTIONS ({_WRITE_OPTIONS}) {_bucketing(files_wanted)} "
        f"LOCATION '{spark_path_of(folder)}'"
    )
    try:
        filter_rows(entries, buckets, FILTER_BITS).repartition(files_wanted, "bucket").write.insertInto(table)
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {table}")
    sizes = {file.path.removeprefix(f"{folder}/"): file.size for file in store.list_files(folder)
             if file.path.endswith(".parquet")}  # fmt: skip
    return Filter(FILTER_BITS, files_wanted, keys, sizes)


def spark_path_of(path: str) -> str:
    """A local or S3 path as Spark reads it."""
    return path if store.s3_location(path) is not None else "file://" + path


def register_by_segment(
    spark: SparkSession, table: str, columns_sql: str, bucketing: str, root: str, segments: Iterable[str]
) -> None:
    """Register the folders `root/segment=NAME` of `segments` as one bucketed table with a `segment` column."""
    spark.sql(
        f"CREATE TABLE {table} ({columns_sql}, segment STRING) USING parquet PARTITIONED BY (segment) {bucketing} "
        f"LOCATION '{spark_path_of(root)}'"
    )
    partitions = " ".join(
        f"PARTITION (segment='{name}') LOCATION '{spark_path_of(f'{root}/segment={name}')}'" for name in segments
    )
    spark.sql(f"ALTER TABLE {table} ADD {partitions}")


def register_filters(spark: SparkSession, table: str, root: str, file_buckets: int, segments: list[str]) -> None:
    """Register the filters of `segments` (under `root`, the manifest's `filters/`; each of `file_buckets` files)
    as one bucketed table."""
    register_by_segment(spark, table, _COLUMNS_SQL, _bucketing(file_buckets), root, segments)


def filter_matches(
    spark: SparkSession, keyed: DataFrame, table: str, buckets: int, bits: int, file_buckets: int
) -> list[tuple[str, int, int]]:
    """The (segment, bucket, ids) whose filter rows (of `bits` bits, in `file_buckets` files a segment) `keyed`'s
    ids match: one bucketed join; the filters are not shuffled (the join's keys need not all be the filters'
    bucketing keys)."""
    # Partitioned by the bucket alone, as the filters are: the join then reads each filter file in its own task.
    hashes = (
        keyed.select(entry_bucket(buckets).alias("bucket"), filter_hash(bits).alias("h"))
        .repartition(file_buckets, "bucket")
        .distinct()
    )
    # The batch's hashes of a bucket are the hash table; the bucket's filter rows stream past it, unsorted.
    matched = hashes.hint("shuffle_hash").join(spark.table(table), ["bucket", "h"]).groupBy("segment", "bucket").count()
    setting = "spark.sql.requireAllClusterKeysForCoPartition"
    before = spark.conf.get(setting, "true") or "true"
    spark.conf.set(setting, "false")
    try:
        rows = matched.collect()
    finally:
        spark.conf.set(setting, before)
    return sorted((row["segment"], row["bucket"], row["count"]) for row in rows)


def bucket_of_file(name: str) -> int:
    """The bucket of a bucketed table's data file, by its name."""
    match = _BUCKET_FILE.fullmatch(name.rsplit("/", 1)[-1])
    if match is None:
        raise ValueError(f"{name} is no bucketed data file")
    return int(match.group(1))
