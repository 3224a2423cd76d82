"""`python -m jobs table create|insert|select|optimize`: keyed tables with merge engines (ClickHouse-like)."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from jobs.runtime import preflight
from jobs.runtime.cli import run_spark_job

ENGINE_HELP = (
    "replacing: per key the highest --version wins (ties and no version: the last inserted row); "
    "collapsing: +1/-1 rows of a key cancel as in ClickHouse's CollapsingMergeTree; "
    "versioned-collapsing: +1/-1 rows of a (key, version) cancel in any order"
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "table",
        help="keyed tables with merge engines (replacing, collapsing, versioned-collapsing)",
        description="A table is a folder (local or s3://) of immutable Parquet parts plus a commit log, changed "
        "atomically. select --final and optimize apply the engine's merge rules.",
    )
    operations = parser.add_subparsers(dest="operation", required=True, metavar="OPERATION")

    create = operations.add_parser("create", help="create an empty table")
    _table_option(create)
    create.add_argument("--engine", required=True, metavar="ENGINE", help=ENGINE_HELP)
    create.add_argument("--key", required=True, metavar="F1[,F2…]", help="the sorting key columns")
    create.add_argument(
        "--version", metavar="F", help="version column (replacing: optional; versioned-collapsing: required)"
    )
    create.add_argument("--sign", metavar="F", help="sign column, values 1 or -1 (collapsing engines)")
    create.add_argument("--is-deleted", metavar="F", help="tombstone column, values 0 or 1 (replacing with --version)")
    create.add_argument("--dedup-window", type=int, default=0, metavar="N",
                        help="skip a token-less insert identical to one of the last N inserts (default 0 = off)")  # fmt: skip

    insert = operations.add_parser("insert", help="insert a batch as a new part")
    _table_option(insert)
    insert.add_argument("--input", required=True, metavar="IN", help="a file or folder of records")
    insert.add_argument("--format", required=True, metavar="FORMAT", help="csv (with a header), jsonl or parquet")
    insert.add_argument("--token", metavar="TOKEN", help="dedup token: an insert whose token was applied is skipped")

    select = operations.add_parser("select", help="write the table's rows to a folder")
    _table_option(select)
    select.add_argument("--output", required=True, metavar="OUT", help="folder to write (replaced)")
    select.add_argument("--final", action="store_true", help="the merged state instead of the rows as stored")
    select.add_argument("--format", default="parquet", metavar="FORMAT", help="parquet (default), csv or jsonl")

    optimize = operations.add_parser("optimize", help="merge all parts into one")
    _table_option(optimize)
    optimize.add_argument("--cleanup", action="store_true",
                          help="also remove winning is_deleted rows (replacing tables with --is-deleted)")  # fmt: skip
    for sub in (create, insert, select, optimize):
        sub.set_defaults(handler=handle, run_id=None)


def _table_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", required=True, metavar="T", help="the table folder (local or s3:// prefix)")
    parser.add_argument("--config", metavar="FILE", help="job config JSON (the spark section); default: built-in")


def _timed(operation: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run `operation` and add its wall time (Spark startup excluded) to its result."""
    started = time.monotonic()
    result = operation()
    return {**result, "wall_time_seconds": round(time.monotonic() - started, 3)}


def handle(args: argparse.Namespace) -> int:
    from jobs.keyed.job import parse_key
    from jobs.keyed.records import check_format
    from jobs.tables import job
    from jobs.tables.log import TableSettings, validate_settings

    if args.operation == "create":
        settings = TableSettings(
            engine=args.engine, key=parse_key(args.key), version=args.version, sign=args.sign,
            is_deleted=args.is_deleted, dedup_window=args.dedup_window,
        )  # fmt: skip
        validate_settings(settings)  # usage errors before Spark starts
        return run_spark_job(
            args,
            lambda spark, config, run_id, progress: _timed(lambda: job.create(spark, args.table, settings)),
            render,
        )
    if args.operation == "insert":
        check_format(args.format)
        return run_spark_job(
            args,
            lambda spark, config, run_id, progress: _timed(
                lambda: job.insert(spark, args.table, args.input, args.format, args.token, progress)
            ),
            render,
            preflight=lambda config: preflight.check_paths(args.input),
        )
    if args.operation == "select":
        check_format(args.format)
        return run_spark_job(
            args,
            lambda spark, config, run_id, progress: _timed(
                lambda: job.select(spark, args.table, args.output, args.final, args.format)
            ),
            render,
        )
    return run_spark_job(
        args,
        lambda spark, config, run_id, progress: _timed(lambda: job.optimize(spark, args.table, args.cleanup, progress)),
        render,
    )


def render(result: dict[str, Any]) -> str:
    """One line per fact of the operation's result."""
    if result.get("skipped"):
        return f"Winnow table insert SKIPPED: {result['skipped']} (table {result['table']} stays at commit {result['commit']})"
    lines = [f"Winnow table {result['operation']}  {result['table']}"]
    lines.extend(
        f"  {name}: {json.dumps(value)}" for name, value in result.items() if name not in ("operation", "table")
    )
    return "\n".join(lines)
