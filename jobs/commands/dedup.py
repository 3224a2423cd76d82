"""`python -m jobs dedup`: deduplicate a batch of enriched events."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from jobs.cli import add_run_options, run_spark_job
from jobs.config import SYNTHETIC_STRATEGIES, JobConfig

SYNTHETIC_HELP = (
    "what to do with synthetic duplicates (same event_id, different fingerprint): "
    "reid = every copy gets a new event_id (UUIDv5 of id and fingerprint) and a `duplicate` context; "
    "quarantine = all copies go to quarantine/; keep-first = keep the earliest; keep-last = keep the latest "
    "collector_tstamp; drop = remove all copies (written to duplicates/ and counted); off = keep all as they are. "
    "Default: the config's dedup.synthetic (reid)"
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "dedup",
        help="deduplicate a batch of enriched events",
        description="Deduplicate a batch of Snowplow enriched events (131-field TSV). Writes OUT/run=ID/ with "
        "good/, duplicates/reason=…/, quarantine/, bad/, summary.json and, last, _SUCCESS.",
    )
    parser.add_argument("--input", required=True, metavar="IN", help="a file or folder of enriched TSV, plain or .gz")
    parser.add_argument("--output", required=True, metavar="OUT", help="the output folder; the run writes OUT/run=ID/")
    add_run_options(parser)
    add_dedup_options(parser)
    parser.set_defaults(handler=handle)


def add_dedup_options(parser: argparse.ArgumentParser) -> None:
    """`--synthetic`, `--manifest` and `--create`: the dedup options `dedup` and `run` share."""
    parser.add_argument("--synthetic", choices=SYNTHETIC_STRATEGIES, metavar="STRATEGY", help=SYNTHETIC_HELP)
    parser.add_argument(
        "--manifest",
        metavar="URI",
        help="the events manifest for cross-batch dedup: sqlite:PATH (embedded) or dynamodb://TABLE (region and "
        "endpoint from the usual AWS settings). Default: the config's manifest.uri; none means in-batch only",
    )
    parser.add_argument(
        "--create",
        action="store_true",
        help="create the manifest (SQLite file, or DynamoDB on-demand table with TTL) if it does not exist; "
        "for local and dev use, production tables come from the Storage stack",
    )


def with_dedup_options(args: argparse.Namespace, config: JobConfig) -> JobConfig:
    """The config with `--synthetic` and `--manifest` applied over it."""
    if args.synthetic is not None:
        config = dataclasses.replace(config, dedup=dataclasses.replace(config.dedup, synthetic=args.synthetic))
    if args.manifest is not None:
        config = dataclasses.replace(config, manifest=dataclasses.replace(config.manifest, uri=args.manifest))
    return config


def handle(args: argparse.Namespace) -> int:
    from jobs.dedup import job
    from jobs.summary import render

    return run_spark_job(
        args,
        lambda spark, config, run_id, progress: job.run(
            spark, config, args.input, args.output, run_id, progress, create_manifest=args.create
        ),
        render,
        lambda config: with_dedup_options(args, config),
    )
