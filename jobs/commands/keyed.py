"""`python -m jobs keyed`: generic keyed dedup with expiry (the Apex Deduper) over csv, jsonl or parquet."""

from __future__ import annotations

import argparse
from typing import Any

from jobs.runtime import preflight
from jobs.runtime.cli import add_run_options, run_spark_job


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "keyed",
        help="deduplicate any keyed records, with optional expiry and state across runs",
        description="Deduplicate records by key fields, in input order (sorted file paths, then lines). Writes "
        "OUT/run=ID/ with unique/, duplicate/, expired/, error/ (in the input's format), summary.json and, last, "
        "_SUCCESS; keeps the seen keys in a bucket store at --state for later runs.",
    )
    parser.add_argument("--input", required=True, metavar="IN", help="a file or folder of records")
    parser.add_argument("--output", required=True, metavar="OUT", help="the output folder; the run writes OUT/run=ID/")
    parser.add_argument("--format", required=True, metavar="FORMAT", help="csv (with a header), jsonl or parquet")
    parser.add_argument("--key", required=True, metavar="F1[,F2…]", help="the dedup key fields")
    parser.add_argument("--expiry-key", metavar="F", help="a timestamp or ordered-number field; needs --expiry-period")
    parser.add_argument(
        "--expiry-period",
        metavar="P",
        help="a record at or below (latest expiry value - P) is expired: a number (e.g. 1000) for a numeric "
        "expiry key, or a duration (30d, 12h, 90s, 1h30m, 250ms) for a timestamp",
    )
    parser.add_argument(
        "--bucket-span", metavar="S", help="width of a state bucket, in the period's unit (default: the period)"
    )
    parser.add_argument(
        "--bucket-count", type=int, metavar="N", help="state buckets without expiry: hash(key) mod N (default 16)"
    )
    parser.add_argument(
        "--state", required=True, metavar="URI", help="the bucket store: a local folder or s3:// prefix"
    )
    add_run_options(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from jobs.keyed.job import KeyedOptions, render, run, settings_from
    from jobs.keyed.records import check_format

    options = KeyedOptions(
        input=args.input, output=args.output, format=args.format, key=args.key, state=args.state,
        expiry_key=args.expiry_key, expiry_period=args.expiry_period, bucket_span=args.bucket_span,
        bucket_count=args.bucket_count,
    )  # fmt: skip
    check_format(options.format)  # usage errors before Spark starts
    settings_from(options)
    return run_spark_job(
        args,
        lambda spark, config, run_id, progress: run(spark, options, run_id, progress),
        render,
        preflight=lambda config: preflight.check_paths(args.input, args.output),
    )
