"""Back-fill the events manifest from historical enriched data, so the first runs have no cold start."""

from __future__ import annotations

import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs import __version__
from jobs.config import JobConfig
from jobs.dedup.crossbatch import check_and_set
from jobs.dedup.inbatch import SEEN_EARLIER
from jobs.dedup.job import Progress, manifest_for, tasks_at_once
from jobs.enriched.parse import parse_events
from jobs.errors import InvalidArgumentError
from jobs.lake import Input, absolute, open_input, require_input
from jobs.manifest import Manifest
from jobs.manifest.lease import writer_lease
from jobs.runs import run_timestamp
from jobs.summary import table


def run(
    spark: SparkSession,
    config: JobConfig,
    input_path: str,
    run_id: str,
    progress: Progress = lambda message: None,
    create_manifest: bool = False,
) -> dict[str, Any]:
    """Record every distinct (event_id, fingerprint) of the input in the manifest, as run `run_id`.

    Idempotent: rerunning with the same run id records the same pairs again (they pass as this run's own);
    pairs an earlier run recorded are left as they are and counted as already present.
    """
    started_at, started = datetime.now(UTC), time.monotonic()
    run_time = run_timestamp(run_id)
    manifest = manifest_for(config, create_manifest)
    if manifest is None:
        raise InvalidArgumentError(
            "--manifest: none given and the config has no manifest.uri; allowed: sqlite:PATH or dynamodb://TABLE"
        )
    input_path = absolute(input_path)
    require_input(spark, input_path)
    manifest, pacing = manifest.paced(tasks_at_once(spark))  # a back-fill is the heaviest load a table gets
    with writer_lease(spark, manifest, "populate-manifest", run_id):
        progress(f"reading every input file under {input_path} once")
        source = open_input(spark, input_path, config.input.skip_unreadable)
        summary = _populate(spark, config, source, manifest, run_time, progress)
        if pacing is not None:
            summary["manifest"]["pacing"] = pacing
    return {
        "job": "populate-manifest",
        "version": __version__,
        "run_id": run_id,
        "input": input_path,
        "input_files": source.summary(),
        **summary,
        "started_at": started_at.isoformat(timespec="seconds"),
        "wall_time_seconds": round(time.monotonic() - started, 3),
    }


def _populate(
    spark: SparkSession, config: JobConfig, source: Input, manifest: Manifest, run_time: datetime, progress: Progress
) -> dict[str, Any]:
    """Check-and-set every distinct valid pair: the manifest and counts parts of the summary."""
    input_path = source.path
    parsed = parse_events(source.lines(spark), config.dedup.fingerprint_fields).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        progress(f"reading {input_path}")
        valid = parsed.where(F.size("errors") == 0)
        lines = parsed.count()
        events = valid.count()
        progress(f"recording in {manifest.uri}")
        answers, stats = check_and_set(
            valid.select("event_key", "fingerprint").distinct(), manifest, run_time, config.manifest.ttl_days, False
        )
        try:
            pairs = {row["cross_batch"]: row["count"] for row in answers.groupBy("cross_batch").count().collect()}
        finally:
            answers.unpersist()
    finally:
        parsed.unpersist()
    return {
        "manifest": {"uri": manifest.uri, **asdict(stats.value)},
        "counts": {
            "input": lines,
            "bad": lines - events,
            "events": events,
            "pairs_recorded": pairs.get(None, 0),
            "pairs_already_present": pairs.get(SEEN_EARLIER, 0),
        },
    }


def render(summary: dict[str, Any]) -> str:
    counts = summary["counts"]
    rows = [
        ("input lines", f"{counts['input']:,}"),
        ("bad lines (skipped)", f"{counts['bad']:,}"),
        ("events", f"{counts['events']:,}"),
        ("pairs recorded", f"{counts['pairs_recorded']:,}"),
        ("pairs already present", f"{counts['pairs_already_present']:,}"),
        ("manifest requests", f"{summary['manifest']['requests']:,}"),
        ("wall time", f"{summary['wall_time_seconds']:.1f} s"),
    ]
    return table(
        f"Winnow populate-manifest  run {summary['run_id']}", rows, [f"  manifest: {summary['manifest']['uri']}"]
    )
