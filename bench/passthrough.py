"""The pass-through as a whole process: start Spark, copy the enriched TSV as text, stop (Spark's process floor);
with --drop-duplicates, Spark's cheapest dedup instead (`dropDuplicates` on event_id and event_fingerprint, no check).

python -m bench.passthrough --input IN --output OUT --config CONFIG [--drop-duplicates]
"""

from __future__ import annotations

import argparse

from bench.spark_cases import drop_duplicates, passthrough
from jobs.config import load_config
from jobs.runtime.session import spark_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.passthrough", description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--config", required=True, help="a job config; only its spark settings are used")
    parser.add_argument("--drop-duplicates", action="store_true", help="dropDuplicates instead of a copy")
    args = parser.parse_args(argv)
    # Like `python -m jobs`: no spark.stop(), the JVM ends with the process.
    spark = spark_session(load_config(args.config).spark, "winnow-bench-passthrough")
    (drop_duplicates if args.drop_duplicates else passthrough)(spark, args.input, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
