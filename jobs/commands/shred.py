"""`python -m jobs shred`: shred deduplicated enriched events into warehouse-ready files."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from jobs.config import JobConfig
from jobs.fs.shreds import is_sealed_dedup_output
from jobs.runtime import preflight
from jobs.runtime.cli import add_run_options, run_spark_job

FORMAT_HELP = (
    "shred (the default) = the atomic events (128-column TSV) and one JSON line per entity (with its hierarchy) in a "
    "folder per entity type; shred-tsv = the same with entities as TSV lines whose columns come from their Iglu "
    "schemas (needs --iglu-config); widerow = one JSON line per event; widerow-parquet = the same columns in Parquet"
)
LAYOUT_HELP = (
    "rdb (the default) = what Snowplow's RDB Loader 6.x reads: output=good/vendor=…/name=…/format=…/model=…/revision=…/"
    "addition=…/ (wide rows directly in output=good/), output=bad/ with badrows-schema bad rows, and "
    "shredding_complete.json (sent to output.queue when set); legacy = the R30-era RDB Shredder: atomic-events/, "
    "shredded-types/vendor=…/name=…/format=…/version=…/ (or widerow/), bad/"
)


def add_format_option(parser: argparse.ArgumentParser, layout_note: str = "") -> None:
    """`--format` and `--layout`, shared by `shred` and `run` (`layout_note`: what else `--layout` sets)."""
    from jobs.config import SHRED_FORMATS, SHRED_LAYOUTS

    parser.add_argument("--format", choices=SHRED_FORMATS, help=f"{FORMAT_HELP} (default: shred.format of the config)")
    parser.add_argument(
        "--layout", choices=SHRED_LAYOUTS, help=f"{LAYOUT_HELP}{layout_note} (default: shred.layout of the config)"
    )
    parser.add_argument(
        "--iglu-config",
        metavar="FILE",
        help="an Iglu resolver config (resolver-config 1-0-*: embedded and HTTP repositories), local or s3://; "
        "needed by --format shred-tsv, types the entity columns of widerow-parquet (default: shred.iglu_config)",
    )


def with_iglu_config(args: argparse.Namespace, config: JobConfig) -> JobConfig:
    """`config` with `--iglu-config`, when given, as `shred.iglu_config`."""
    if args.iglu_config is None:
        return config
    return dataclasses.replace(config, shred=dataclasses.replace(config.shred, iglu_config=args.iglu_config))


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "shred",
        help="shred enriched events into what a warehouse loader reads (RDB Loader's layout by default)",
        description="Shred Snowplow enriched events (131-field TSV, typically a dedup run's good/). Writes "
        "OUT/run=ID/ in the --layout chosen (rdb: output=good/, output=bad/, shredding_complete.json), summary.json "
        "and, last, _SUCCESS. An event is written whole or, when a value, a JSON field or an entity is invalid, as "
        "one bad row.",
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
            spark, config, args.input, args.output, run_id, progress, output_format=args.format, layout=args.layout
        ),
        job.render,
        lambda config: with_iglu_config(args, config),
        lambda config: preflight.check_paths(args.input, args.output, empty_allowed=is_sealed_dedup_output(args.input)),
    )
