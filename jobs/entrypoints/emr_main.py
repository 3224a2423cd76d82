"""The EMR Serverless entry point: `emr_main.py JOB [options]`, the same arguments as `python -m jobs JOB …`.

It runs `jobs.cli.main` (the `jobs` package comes with `--py-files`) and exits with its code, so a failed
job fails the job run. After a completed run it publishes the run's figures from `summary.json` to
CloudWatch (namespace `Winnow`, dimensions `Env`, `Job`) for the pipeline dashboard; a failure to publish is
reported and never fails a completed run.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

METRICS_NAMESPACE = "Winnow"


def run(argv: Sequence[str]) -> int:
    """Run one job; publish its metrics when it completed."""
    from jobs.cli import build_parser, main

    code = main(argv)
    if code == 0:
        args = build_parser().parse_args(argv)
        if getattr(args, "output", None) and getattr(args, "run_id", None):
            try:
                publish_metrics(args.job, f"{args.output.rstrip('/')}/run={args.run_id}/summary.json")
            except Exception as err:  # the run is complete; a metrics problem must not fail it
                print(f"warning: metrics not published: {type(err).__name__}: {err}", file=sys.stderr)
    return code


def metric_data(job: str, env: str, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """CloudWatch datums of a job summary (figures the summary does not hold are left out)."""
    counts = summary.get("counts", {})
    figures = {
        "DurationSeconds": (summary.get("wall_time_seconds"), "Seconds"),
        "InputLines": (counts.get("input"), "Count"),
        "Duplicates": (counts.get("duplicates"), "Count"),
        "Quarantined": (counts.get("quarantined"), "Count"),
        "Bad": (counts.get("bad"), "Count"),
    }
    dimensions = [{"Name": "Env", "Value": env}, {"Name": "Job", "Value": job}]
    return [
        {"MetricName": name, "Dimensions": dimensions, "Value": float(value), "Unit": unit}
        for name, (value, unit) in figures.items()
        if isinstance(value, int | float)
    ]


def publish_metrics(job: str, summary_uri: str) -> None:
    """Read `summary_uri` (s3://…) and put its figures in CloudWatch."""
    import boto3

    bucket, _, key = summary_uri.removeprefix("s3://").partition("/")
    summary = json.loads(boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())
    data = metric_data(job, os.environ.get("WINNOW_ENV", "unknown"), summary)
    if data:
        boto3.client("cloudwatch").put_metric_data(Namespace=METRICS_NAMESPACE, MetricData=data)


if __name__ == "__main__":
    raise SystemExit(run(sys.argv[1:]))
