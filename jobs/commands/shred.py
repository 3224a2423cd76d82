"""`python -m jobs shred`: shred deduplicated enriched events into warehouse-ready files."""

from __future__ import annotations

import argparse
from typing import Any

from jobs.cli import add_run_options, run_spark_job

FORMAT_HELP = (
    "shred (default) = atomic-events/ (128-column TSV) and shredded-types/vendor=…/name=…/format=…/version=…/ "
    "(one JSON line per entity, with its hierarchy); widerow = widerow/ with one JSON line per event; "
    "widerow-parquet = the same columns in Parquet"
)


def add_format_option(parser: argparse.ArgumentParser) -> None:
    """`--format`, shared by `shred` and `run`."""
    from jobs.shred.job import SHRED_FORMATS

    parser.add_argument("--format", choices=SHRED_FORMATS, default="shred", help=FORMAT_HELP)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "shred",
        help="shred enriched events into atomic-events TSV and shredded-types JSON (or wide rows)",
        description="Shred Snowplow enriched events (131-field TSV, typically a dedup run's good/). Writes "
        "OUT/run=ID/ with atomic-events/ and shredded-types/ (or widerow/), bad/, summary.json and, last, _SUCCESS. "
        "An event is written whole or, when a JSON field or an entity is invalid, as one bad row.",
    )
    parser.add_argument("--input", required=True, metavar="IN", help="a file or folder of enriched TSV, plain or .gz")
    parser.add_argument("--output", required=True, metavar="OUT", help="the output folder; the run writes OUT/run=ID/")
    add_run_options(parser)
    add_format_option(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from jobs.shred import job

    return run_spark_job(
        args,
        lambda spark, config, run_id, progress: job.run(
            spark, config, args.input, args.output, run_id, progress, output_format=args.format
        ),
        job.render,
    )
