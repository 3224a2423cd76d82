"""`python -m jobs report`: the distribution of events per event ID, before and after dedup."""

from __future__ import annotations

import argparse
from typing import Any

from jobs.runtime.cli import run_spark_job


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="events per event ID (table and log-scale chart), before and after dedup",
        description="Count the events of each event ID and how many IDs have 1, 2, 3, … events (the warehouse-side "
        "query from Snowplow's dedup guide), for the enriched input and, with --deduplicated, for dedup runs' good/. "
        "Writes OUT/events_per_event_id.tsv and OUT/events_per_event_id.png (log scale) and prints the table.",
    )
    parser.add_argument(
        "--input", required=True, metavar="IN", help="enriched TSV before dedup: a file or folder, plain or .gz"
    )
    parser.add_argument(
        "--deduplicated",
        metavar="RUN",
        nargs="+",
        help="one or more complete dedup run folders (OUT/run=ID with _SUCCESS: their good/ are read together, e.g. "
        "the runs of several batches) or enriched TSV after dedup (e.g. OUT/run=ID/good); a folder of run folders "
        "(OUT itself) or an unfinished run is refused; optional",
    )
    parser.add_argument("--output", required=True, metavar="OUT", help="the folder for the table and the chart")
    parser.add_argument(
        "--config", metavar="FILE", help="job config JSON (its spark settings apply); default: the built-in defaults"
    )
    parser.set_defaults(handler=handle, run_id=None)  # a report is no run: nothing is named by a run id


def handle(args: argparse.Namespace) -> int:
    from jobs.tools import report

    return run_spark_job(
        args,
        lambda spark, config, run_id, progress: report.run(spark, args.input, args.deduplicated, args.output, progress),
        report.render,
    )
