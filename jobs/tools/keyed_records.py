"""Generated keyed records for benchmarks: `python -m jobs.tools.keyed_records --output DIR --rows N`.

Built with Spark built-ins only (deterministic for a given N, seed and file count). Columns:
`id` (a key drawn from 0.9 N values: about 60% of the keys are distinct, 40% of rows repeat one), `t` (an ordered number: the row number plus up to
1,000 of jitter, so some rows arrive late), `ver` (1-3), `sign` (1, or -1 for about 5%), `v` (a payload).
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F


def generated_rows(spark: SparkSession, rows: int, seed: int = 1, files: int = 4) -> DataFrame:
    """`rows` generated records in `files` partitions (one output file each)."""
    base = spark.range(0, rows, 1, numPartitions=files)
    h = F.xxhash64(F.col("id"), F.lit(seed))
    distinct_keys = max(1, int(rows * 0.9))
    return base.select(
        F.concat(F.lit("k"), F.pmod(h, F.lit(distinct_keys)).cast("string")).alias("id"),
        (F.col("id") + F.pmod(F.xxhash64(F.col("id"), F.lit(seed + 1)), F.lit(1000))).alias("t"),
        (F.pmod(F.xxhash64(F.col("id"), F.lit(seed + 2)), F.lit(3)) + 1).alias("ver"),
        F.when(F.pmod(F.xxhash64(F.col("id"), F.lit(seed + 3)), F.lit(20)) == 0, F.lit(-1)).otherwise(1).alias("sign"),
        F.sha2(F.col("id").cast("string"), 256).substr(1, 16).alias("v"),
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m jobs.tools.keyed_records", description=__doc__)
    parser.add_argument("--output", required=True, help="folder to write (replaced)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--format", default="csv", choices=("csv", "parquet"))
    args = parser.parse_args()
    from jobs.config import SparkConfig
    from jobs.fs.paths import written
    from jobs.runtime.session import spark_session

    spark = spark_session(SparkConfig(), app_name="winnow-keyed-generate")
    frame = generated_rows(spark, args.rows, args.seed, args.files)
    writer = frame.write.mode("overwrite")
    if args.format == "csv":
        writer.option("header", "true").csv(written(args.output))
    else:
        writer.parquet(written(args.output))
    print(f"wrote {args.rows:,} rows to {args.output}")


if __name__ == "__main__":
    main()
