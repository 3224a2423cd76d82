"""The pass-through as a whole process: start Spark, copy the enriched TSV as text, stop (Spark's process floor).

python -m bench.passthrough --input IN --output OUT --config CONFIG
"""

from __future__ import annotations

import argparse

from bench.spark_cases import passthrough
from jobs.config import load_config
from jobs.runtime.session import spark_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.passthrough", description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--config", required=True, help="a job config; only its spark settings are used")
    args = parser.parse_args(argv)
    # Like `python -m jobs`: no spark.stop(), the JVM ends with the process.
    passthrough(spark_session(load_config(args.config).spark, "winnow-bench-passthrough"), args.input, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
