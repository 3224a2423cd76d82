"""The command line: `python -m jobs <job> …`.

Each job has a module in `jobs/commands/` with `register(subparsers)`, which adds the job's parser and sets
`handler`: a thin entrypoint from parsed arguments to the job's `run`.
The shared part of every Spark job (config, run id, session, progress, errors, summary) is `run_spark_job`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import SparkSession

from jobs.config import JobConfig, load_config
from jobs.errors import WinnowError
from jobs.runs import new_run_id, run_timestamp

# Modules with a `register(subparsers)` function, in the order `--help` lists them.
COMMAND_MODULES = (
    "jobs.commands.dedup",
    "jobs.commands.populate_manifest",
    "jobs.commands.generate",
    "jobs.commands.keyed",
    "jobs.commands.table",
    "jobs.commands.shred",
    "jobs.commands.run",
    "jobs.commands.report",
)

Progress = Callable[[str], None]
SparkJob = Callable[[SparkSession, JobConfig, str, Progress], dict[str, Any]]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m jobs", description="Winnow: deduplicate and shred event data on Spark."
    )
    subparsers = parser.add_subparsers(dest="job", required=True, metavar="JOB")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """`--run-id` and `--config`, which every Spark job takes."""
    parser.add_argument(
        "--run-id",
        metavar="ID",
        help="the run's id, YYYY-MM-DD-HH-MM-SS (UTC); default: now. Rerunning with the same id replaces that "
        "run's folder with identical content",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="job config JSON (see configs/README.md); default: the built-in defaults"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one job; 0 when it completed, 2 for a usage or config error, 1 when the job failed."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except WinnowError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def run_spark_job(
    args: argparse.Namespace,
    job: SparkJob,
    render: Callable[[dict[str, Any]], str],
    configure: Callable[[JobConfig], JobConfig] = lambda config: config,
) -> int:
    """Load the config, validate the run id, start Spark, run `job`, print its summary table.

    A `WinnowError` propagates (a usage error, exit 2); any other failure ends with one clear line and exit 1.
    """
    config = configure(load_config(args.config))
    run_id = args.run_id or new_run_id()
    run_timestamp(run_id)  # validate before Spark starts
    started = time.monotonic()

    def progress(message: str) -> None:
        print(f"[{args.job} {time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    progress("starting Spark")
    from jobs.session import spark_session

    spark = spark_session(config.spark, app_name=f"winnow-{args.job}")
    try:
        summary = job(spark, config, run_id, progress)
    except WinnowError:
        raise
    except Exception as err:  # a failed Spark job: keep the detail, end with one clear line
        traceback.print_exc()
        first_line = (str(err).strip().splitlines() or [""])[0]
        print(f"error: {args.job} run {run_id} failed, no _SUCCESS written: {type(err).__name__}: {first_line}",
              file=sys.stderr)  # fmt: skip
        return 1
    print(render(summary))
    return 0
