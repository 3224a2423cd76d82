"""`python -m jobs run`: the whole pipeline, dedup then shred, under one run id."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from jobs.cli import add_run_options, run_spark_job
from jobs.commands.dedup import (
    add_dedup_options,
    add_incremental_options,
    dedup_preflight,
    incremental_window,
    with_dedup_options,
)
from jobs.commands.shred import add_format_option, with_iglu_config
from jobs.config import JobConfig
from jobs.contract import SUCCESS_MARKER
from jobs.errors import WinnowError
from jobs.runs import run_lease

if TYPE_CHECKING:
    from jobs.lake import FileSystem

DEDUPLICATED, SHREDDED = "deduplicated", "shredded"


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
    add_format_option(parser)
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from jobs.dedup import job as dedup_job
    from jobs.lake import FileSystem, absolute
    from jobs.shred import job as shred_job

    def pipeline(spark: Any, config: JobConfig, run_id: str, progress: Any) -> dict[str, Any]:
        output = absolute(args.output.rstrip("/"))  # apart from --input: checked before Spark (dedup_preflight)
        require_earlier_shred_complete(FileSystem(spark), output, run_id, shred_options(args))
        redo = (
            f"python -m jobs run --input {absolute(args.input)} --output {output} --run-id {run_id}"
            f"{' --incremental' if args.incremental else ''}, with its other options as they were (--config, "
            "--manifest, --format)"
        )
        deduplicated = dedup_job.run(
            spark,
            config,
            args.input,
            f"{output}/{DEDUPLICATED}",
            run_id,
            progress,
            create_manifest=args.create,
            incremental=incremental_window(args, config),
            redo=redo,
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
        lambda config: dedup_preflight(args, config),
    )


class UnfinishedShredError(WinnowError):
    """An earlier run's dedup completed and its shred did not: the next run stops before writing (exit 1)."""

    exit_code = 1


def shred_options(args: argparse.Namespace) -> str:
    """The shred options given to this `run` (the unfinished shred is redone with them)."""
    options = [f"--{name} {value}" for name in ("format", "layout", "iglu-config")
               if (value := getattr(args, name.replace("-", "_"))) is not None]  # fmt: skip
    return "".join(f" {option}" for option in options)


def require_earlier_shred_complete(fs: FileSystem, output: str, run_id: str, options: str) -> None:
    """Stop when the latest earlier run's dedup completed and its shred did not: that batch would never reach the
    warehouse. Only the latest needs a look: every `run` before it passed this check.

    Raises:
        UnfinishedShredError: named, with the shred command that completes it.
    """
    earlier = [name for name in fs.children(f"{output}/{DEDUPLICATED}")
               if name.startswith("run=") and name.removeprefix("run=") < run_id]  # fmt: skip
    if not earlier:
        return
    name = max(earlier)
    deduplicated, shredded = f"{output}/{DEDUPLICATED}/{name}", f"{output}/{SHREDDED}/{name}"
    if not fs.exists(f"{deduplicated}/{SUCCESS_MARKER}") or fs.exists(f"{shredded}/{SUCCESS_MARKER}"):
        return  # an unfinished dedup is stopped by its own checks (the ledger, the manifest's register)
    earlier_id = name.removeprefix("run=")
    lease = run_lease(f"{output}/{SHREDDED}", earlier_id)
    stale = f" Its lease {lease} is still there: once that run is gone, remove it first." if fs.exists(lease) else ""
    raise UnfinishedShredError(
        f"run {earlier_id}: its dedup completed and its shred did not (no {shredded}/{SUCCESS_MARKER}), so its events "
        f"are not in the warehouse yet; nothing was written. Complete it first: python -m jobs shred --input "
        f"{deduplicated}/good --output {output}/{SHREDDED} --run-id {earlier_id}{options}, with its --config as it was."
        + stale
    )


def render(summary: dict[str, Any]) -> str:
    """One table for the pipeline: the dedup figures, the shred figures, both wall times and the total."""
    from jobs.shred.job import shred_rows
    from jobs.summary import render as render_dedup
    from jobs.summary import table_lines

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
