"""`python -m jobs manifest abandon`: the way out for a run that recorded events and can never be redone."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from jobs.config import JobConfig
from jobs.runtime.cli import run_spark_job
from jobs.runtime.summary import table


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "manifest",
        help="manage the events manifest: abandon a run that can never be redone",
        description="Work on the events manifest itself.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    abandon = actions.add_parser(
        "abandon",
        help="remove an unfinished run whose input is gone: its pairs and its register entry",
        description="Remove the pairs and the register entry of a run that recorded its events and did not complete, "
        "when it can never be redone (its input is gone). Its events are then in no completed output, so a later "
        "batch holding them delivers them. Refused when the run completed (its _SUCCESS exists) or while the "
        "manifest's writer lease is held.",
    )
    abandon.add_argument("--manifest", required=True, metavar="URI", help="sqlite:PATH, dynamodb://TABLE or lake:PATH")
    abandon.add_argument(
        "--output",
        required=True,
        metavar="OUT",
        help="the output holding the run's folder OUT/run=ID (a dedup's --output; for a `run`, its "
        "OUT/deduplicated): as the line that stopped a later run prints it",
    )
    abandon.add_argument("--run-id", required=True, metavar="ID", help="the run's id, YYYY-MM-DD-HH-MM-SS")
    abandon.add_argument(
        "--config", metavar="FILE", help="job config JSON (its manifest and spark settings apply); default: built-in"
    )
    abandon.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from jobs.dedup.job import manifest_for
    from jobs.manifest.abandon import abandon

    def configure(config: JobConfig) -> JobConfig:
        return dataclasses.replace(config, manifest=dataclasses.replace(config.manifest, uri=args.manifest))

    def job(spark: Any, config: JobConfig, run_id: str, progress: Any) -> dict[str, Any]:
        manifest = manifest_for(config)
        assert manifest is not None  # --manifest is required
        return abandon(spark, manifest, args.output, run_id, progress)

    return run_spark_job(args, job, render, configure)


def render(summary: dict[str, Any]) -> str:
    unit = "run's segment(s)" if summary["manifest"].startswith("lake:") else "pairs"
    rows = [("run folder", summary["folder"]), (f"{unit} removed", summary["removed"]),
            ("register entry removed", "yes" if summary["register_entry"] else "none was there")]  # fmt: skip
    footer = [
        f"run {summary['run_id']} is abandoned: its events are in no completed output and no longer in "
        f"{summary['manifest']}, so a later batch that holds them delivers them"
    ]
    return table(f"manifest abandon {summary['run_id']}", rows, footer)
