"""`python -m jobs populate-manifest`: back-fill the events manifest from historical enriched data."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from jobs.config import JobConfig
from jobs.runtime import preflight
from jobs.runtime.cli import add_run_options, run_spark_job


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "populate-manifest",
        help="back-fill the events manifest from historical enriched events",
        description="Record every distinct (event_id, fingerprint) of historical enriched events in the manifest, "
        "so that the first dedup runs already see them. Idempotent for a given run id.",
    )
    parser.add_argument("--input", required=True, metavar="IN", help="a file or folder of enriched TSV, plain or .gz")
    parser.add_argument(
        "--input-format",
        choices=("enriched", "dynamodb-export"),
        default="enriched",
        help="enriched (default) or dynamodb-export: IN is the data/ folder of a DynamoDB manifest table's export "
        "to S3 (DynamoDB JSON), loaded into an empty lake:PATH manifest",
    )
    parser.add_argument(
        "--manifest",
        metavar="URI",
        help="sqlite:PATH, dynamodb://TABLE or lake:PATH; default: the config's manifest.uri",
    )
    parser.add_argument(
        "--create", action="store_true", help="create the manifest first if it does not exist (local/dev)"
    )
    add_run_options(
        parser,
        "the back-fill's run id, YYYY-MM-DD-HH-MM-SS (UTC), recorded with each pair it writes (and the start of "
        "their time to live); default: now. It writes no run folder: rerunning with the same id records the same "
        "pairs again as that run's own",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from jobs.dedup import populate

    def configure(config: JobConfig) -> JobConfig:
        if args.manifest is None:
            return config
        return dataclasses.replace(config, manifest=dataclasses.replace(config.manifest, uri=args.manifest))

    return run_spark_job(
        args,
        lambda spark, config, run_id, progress: populate.run(
            spark, config, args.input, run_id, progress, args.create, args.input_format
        ),
        populate.render,
        configure,
        lambda config: populate_preflight(args, config),
    )


def populate_preflight(args: argparse.Namespace, config: JobConfig) -> None:
    """The input and the manifest URI (one is needed), checked before Spark starts."""
    from jobs.dedup.populate import require_manifest_uri

    preflight.check_paths(args.input)
    require_manifest_uri(config)
    preflight.check_manifest(config, args.create)
