"""`python -m jobs run`: the whole pipeline, dedup then shred, under one run id."""

from __future__ import annotations

import argparse
from typing import Any

from jobs.commands.dedup import (
    add_dedup_options,
    add_incremental_options,
    dedup_preflight,
    incremental_window,
    with_dedup_options,
)
from jobs.commands.shred import add_format_option, with_iglu_config
from jobs.config import JobConfig
from jobs.contract import DEDUPLICATED, SHREDDED
from jobs.fs.paths import absolute
from jobs.fs.shreds import PendingShred, require_earlier_shred_complete
from jobs.runtime.cli import add_run_options, run_spark_job


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="the whole pipeline: dedup, then shred the deduplicated events",
        description="Deduplicate a batch of enriched events into OUT/deduplicated/run=ID/, then shred its good/ "
        "into OUT/shredded/run=ID/ (one run id for both). Each step writes its own summary.json and _SUCCESS; "
        "the shred step starts only when the dedup run is complete.",
    )
    parser.add_argument("--input", required=True, metavar="IN", help="a file or folder of enriched TSV, plain or .gz")
    parser.add_argument(
        "--output", required=True, metavar="OUT", help="the output folder: OUT/deduplicated/ and OUT/shredded/"
    )
    add_run_options(parser)
    add_dedup_options(parser)
    add_incremental_options(parser)
    add_format_option(
        parser,
        "; also the shape of dedup's bad/ rows (rdb: loader_parsing_error 2-0-0 bad rows, as shred's; legacy: "
        '{"line","errors","failure_tstamp"}), so one bad-rows table serves both steps',
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from jobs.dedup import job as dedup_job
    from jobs.shred import job as shred_job

    def pipeline(spark: Any, config: JobConfig, run_id: str, progress: Any) -> dict[str, Any]:
        output = absolute(args.output.rstrip("/"))  # checked before Spark started: run_preflight
        deduplicated = dedup_job.run(
            spark,
            config,
            args.input,
            f"{output}/{DEDUPLICATED}",
            run_id,
            progress,
            create_manifest=args.create,
            incremental=incremental_window(args, config),
            redo=args.invocation.again(run_id),  # the whole pipeline again: its shred too
            shred=PendingShred(run_id, f"{output}/{DEDUPLICATED}", f"{output}/{SHREDDED}", shred_options(args)),
        )
        shredded = shred_job.run(
            spark,
            config,
            f"{deduplicated['output']}/good",
            f"{output}/{SHREDDED}",
            run_id,
            progress,
            args.format,
            args.layout,
        )
        return {"run_id": run_id, "dedup": deduplicated, "shred": shredded}

    return run_spark_job(
        args,
        pipeline,
        render,
        lambda config: with_iglu_config(args, with_dedup_options(args, config)),
        lambda config: run_preflight(args, config),
    )


def shred_options(args: argparse.Namespace) -> tuple[str, ...]:
    """The shred arguments given to this `run`, paths made absolute: its shred's marker names them (an earlier
    run's unfinished shred from before the markers is completed with them)."""
    options: list[str] = []
    for name in ("config", "format", "layout", "iglu-config"):
        value = getattr(args, name.replace("-", "_"))
        if value is not None:
            options += [f"--{name}", absolute(value) if name in ("config", "iglu-config") else value]
    return tuple(options)


def run_preflight(args: argparse.Namespace, config: JobConfig) -> None:
    """dedup's checks, and no earlier run's shred unfinished (before Spark starts)."""
    dedup_preflight(args, config)
    output = absolute(args.output.rstrip("/"))
    require_earlier_shred_complete(f"{output}/{DEDUPLICATED}", f"{output}/{SHREDDED}", args.run_id, shred_options(args))


def render(summary: dict[str, Any]) -> str:
    """One table for the pipeline: the dedup figures, the shred figures, both wall times and the total."""
    from jobs.runtime.summary import render as render_dedup
    from jobs.runtime.summary import table_lines
    from jobs.shred.job import shred_rows

    dedup, shred = summary["dedup"], summary["shred"]
    # The dedup table's body (without its title and output lines), indented under a heading.
    dedup_body = [line for line in render_dedup(dedup).splitlines()[1:] if not line.lstrip().startswith("output:")]
    shred_body = table_lines(shred_rows(shred))
    total = dedup["wall_time_seconds"] + shred["wall_time_seconds"]
    return "\n".join(
        [
            f"Winnow run  run {summary['run_id']}",
            "  dedup",
            *(f"  {line}" for line in dedup_body),
            "  shred",
            *(f"  {line}" for line in shred_body),
            f"  total wall time  {total:.1f} s",
            f"  deduplicated: {dedup['output']}",
            f"  shredded:     {shred['output']}",
        ]
    )
