"""`python -m jobs dedup`: deduplicate a batch of enriched events."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from jobs.config import LAYOUTS, SYNTHETIC_STRATEGIES, JobConfig
from jobs.errors import InvalidArgumentError
from jobs.fs.paths import absolute
from jobs.fs.shreds import PendingShred, require_earlier_shred_complete
from jobs.incremental.window import Window, window_from
from jobs.runtime import preflight
from jobs.runtime.cli import add_run_options, run_spark_job

SYNTHETIC_HELP = (
    "what to do with synthetic duplicates (same event_id, different fingerprint): "
    "reid = every copy gets a new event_id (UUIDv5 of id and fingerprint) and a `duplicate` context; "
    "quarantine = all copies go to quarantine/; keep-first = keep the earliest; keep-last = keep the latest "
    "collector_tstamp; drop = remove all copies (written to duplicates/ and counted); off = keep all as they are. "
    "Default: the config's dedup.synthetic (reid)"
)
BAD_ROWS_HELP = (
    "the shape of the bad/ rows: rdb = Snowplow's badrows schema loader_parsing_error 2-0-0 "
    '({"schema":…,"data":{"processor","failure","payload"}}), the rows shred writes in its rdb layout, so one '
    'bad-rows table serves both jobs; legacy = {"line","errors":[{"level","message"}],"failure_tstamp"}. '
    "Default: the config's shred.layout (rdb)"
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
    parser.add_argument("--layout", choices=LAYOUTS, help=BAD_ROWS_HELP)
    add_incremental_options(parser)
    parser.add_argument(
        "--shredded",
        metavar="SHRED_OUT",
        help="the output of the shred step that follows this dedup (a pipeline that runs them apart, as the "
        "deployed state machine does): the run stops, writing nothing, while an earlier dedup run's shred there "
        "has not completed, whatever its run id, and says how to complete it; this run leaves a marker in "
        "OUT/_shred_pending/ that its shred removes",
    )
    parser.set_defaults(handler=handle)


def add_dedup_options(parser: argparse.ArgumentParser) -> None:
    """`--synthetic`, `--manifest` and `--create`: the dedup options `dedup` and `run` share."""
    parser.add_argument("--synthetic", choices=SYNTHETIC_STRATEGIES, metavar="STRATEGY", help=SYNTHETIC_HELP)
    parser.add_argument(
        "--manifest",
        metavar="URI",
        help="the events manifest for cross-batch dedup: sqlite:PATH (embedded file), dynamodb://TABLE (region and "
        "endpoint from the usual AWS settings) or lake:PATH (Parquet under a folder or s3://bucket/prefix). "
        "Default: the config's manifest.uri; none means in-batch only",
    )
    parser.add_argument(
        "--create",
        action="store_true",
        help="create the manifest (SQLite file, DynamoDB on-demand table with TTL, or lake folder) if it does not "
        "exist; for local and dev use, production tables come from the Storage stack",
    )


def add_incremental_options(parser: argparse.ArgumentParser) -> None:
    """`--incremental` and its window and caps, which `dedup` and `run` share."""
    parser.add_argument(
        "--incremental",
        action="store_true",
        help="read only the files under IN that no earlier run into OUT read (the ledger OUT/_ledger/), oldest "
        "first; a retry of the same --run-id reads the same files. Nothing new: exit 0, 'nothing to do', no run",
    )
    parser.add_argument("--since", metavar="TIME", help="with --incremental: files of this time or later (default: "
                        "input.since); a file's time comes from run=…/ or YYYY/MM/DD/HH/ in its path, else its "
                        "modification time")  # fmt: skip
    parser.add_argument("--until", metavar="TIME", help="with --incremental: files before this time (input.until)")
    parser.add_argument(
        "--max-files", type=int, metavar="N", help="with --incremental: at most N files (input.max_files)"
    )
    parser.add_argument(
        "--max-bytes", type=int, metavar="N", help="with --incremental: at most N bytes (input.max_bytes)"
    )


def incremental_window(args: argparse.Namespace, config: JobConfig) -> Window | None:
    """The window of an `--incremental` run (options over the config's `input`), or None without `--incremental`.

    Raises:
        InvalidArgumentError: a window option without `--incremental`, or a bad value.
    """
    options = {
        "--since": args.since,
        "--until": args.until,
        "--max-files": args.max_files,
        "--max-bytes": args.max_bytes,
    }
    if not args.incremental:
        given = [name for name, value in options.items() if value is not None]
        if given:
            raise InvalidArgumentError(f"{given[0]}: given without --incremental; allowed: only with --incremental")
        return None
    for name in ("--max-files", "--max-bytes"):
        if options[name] is not None and options[name] < 1:
            raise InvalidArgumentError(f"{name}: given {options[name]}; allowed: a whole number of 1 or more")
    return window_from(
        config.input, since=args.since, until=args.until, max_files=args.max_files, max_bytes=args.max_bytes
    )


def with_dedup_options(args: argparse.Namespace, config: JobConfig) -> JobConfig:
    """The config with `--synthetic`, `--manifest` and `--layout` (`shred.layout`: dedup's bad rows, and in `run`
    shred's layout too) applied over it (the incremental options checked)."""
    if args.synthetic is not None:
        config = dataclasses.replace(config, dedup=dataclasses.replace(config.dedup, synthetic=args.synthetic))
    if args.layout is not None:
        config = dataclasses.replace(config, shred=dataclasses.replace(config.shred, layout=args.layout))
    if args.manifest is not None:
        config = dataclasses.replace(config, manifest=dataclasses.replace(config.manifest, uri=args.manifest))
    incremental_window(args, config)  # a bad window option is a usage error before Spark starts
    return config


def handle(args: argparse.Namespace) -> int:
    from jobs.dedup import job
    from jobs.runtime.summary import render

    return run_spark_job(
        args,
        lambda spark, config, run_id, progress: job.run(
            spark,
            config,
            args.input,
            args.output,
            run_id,
            progress,
            create_manifest=args.create,
            incremental=incremental_window(args, config),
            shred=pending_shred(args, run_id),
            redo=args.invocation.again(run_id),
        ),
        render,
        lambda config: with_dedup_options(args, config),
        lambda config: dedup_preflight(args, config),
    )


def dedup_preflight(args: argparse.Namespace, config: JobConfig) -> None:
    """The input, the output and the manifest URI of `dedup` and `run`, checked before Spark starts."""
    preflight.check_paths(args.input, args.output, incremental=args.incremental)
    preflight.check_manifest(config, args.create)
    if getattr(args, "shredded", None):
        require_earlier_shred_complete(absolute(args.output), absolute(args.shredded), args.run_id,
                                       shred_arguments(args))  # fmt: skip


def shred_arguments(args: argparse.Namespace) -> tuple[str, ...]:
    """What `dedup --shredded` knows of the shred that follows: its `--config` (the deployed state machine gives
    both jobs the same) and `--layout` (`shred.layout`, which dedup's bad rows follow)."""
    config = ("--config", absolute(args.config)) if args.config is not None else ()
    return (*config, *(("--layout", args.layout) if args.layout is not None else ()))


def pending_shred(args: argparse.Namespace, run_id: str) -> PendingShred | None:
    """With `--shredded`: the shred that must follow this run (its marker is written before the run seals)."""
    if not args.shredded:
        return None
    return PendingShred(run_id, absolute(args.output), absolute(args.shredded), shred_arguments(args))
