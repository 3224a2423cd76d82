"""The dedup job: read enriched TSV, parse, dedup in batch, write the run folder and its summary."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import __version__
from jobs.config import JobConfig, SyntheticStrategy
from jobs.dedup.inbatch import BAD, DROPPED, DUPLICATE, GOOD, IN_BATCH_SYNTHETIC, QUARANTINED, dedup_in_batch
from jobs.enriched.parse import bad_row_json, parse_events
from jobs.lake import RunFolder, absolute, read_lines
from jobs.runs import run_timestamp

# Where each outcome is written in the run folder; dropped copies go to duplicates/ with their reason.
OUTPUT_FOLDERS = {GOOD: "good", DUPLICATE: "duplicates", DROPPED: "duplicates", QUARANTINED: "quarantine", BAD: "bad"}
SUMMARY_COUNT_NAMES = {
    GOOD: "good",
    BAD: "bad",
    DUPLICATE: "duplicates",
    QUARANTINED: "quarantined",
    DROPPED: "dropped",
}

Progress = Callable[[str], None]


def classify(parsed: DataFrame, strategy: SyntheticStrategy, run_time: datetime) -> DataFrame:
    """Give every parsed line its outcome, reason and output text (the bad-row JSON for bad lines).

    Returns columns `outcome`, `reason`, `text`: exactly one row per input line.
    """
    is_valid = F.size("errors") == 0
    valid = parsed.where(is_valid)
    invalid = parsed.where(~is_valid).select(
        "line", F.lit(BAD).alias("outcome"), F.lit(None).cast("string").alias("reason"), "errors"
    )
    decided = dedup_in_batch(valid, strategy).unionByName(invalid)
    text = F.when(F.col("outcome") == BAD, bad_row_json(F.col("line"), F.col("errors"), run_time)).otherwise(
        F.col("line")
    )
    return decided.select("outcome", "reason", text.alias("text"))


def run(
    spark: SparkSession,
    config: JobConfig,
    input_path: str,
    output_path: str,
    run_id: str,
    progress: Progress = lambda message: None,
) -> dict[str, Any]:
    """Run the dedup job and return its summary (also written as `summary.json`)."""
    started_at, started = datetime.now(UTC), time.monotonic()
    run_time = run_timestamp(run_id)
    input_path, output_path = absolute(input_path), absolute(output_path)
    strategy = config.dedup.synthetic

    lines = read_lines(spark, input_path)
    # Parsed once and kept: the repeated-id count, the decisions and the bad rows all read it. The
    # decisions are kept too, so the count materializes them once and each output is a scan of the cache.
    parsed = parse_events(lines, config.dedup.fingerprint_fields).persist(StorageLevel.MEMORY_AND_DISK)
    decided = classify(parsed, strategy, run_time).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        progress(f"reading and deduplicating {input_path}")
        counts = {
            (row["outcome"], row["reason"]): row["count"]
            for row in decided.groupBy("outcome", "reason").count().collect()
        }
        parsed.unpersist()
        folder = RunFolder(spark, output_path, run_id)
        folder.clear()
        compression = config.output.compression
        for outcome in (GOOD, QUARANTINED, BAD):
            progress(f"writing {OUTPUT_FOLDERS[outcome]}/")
            folder.write_text(
                OUTPUT_FOLDERS[outcome], decided.where(F.col("outcome") == outcome).select("text"), compression
            )
        progress("writing duplicates/")
        dropped_copies = decided.where(F.col("outcome").isin(DUPLICATE, DROPPED)).select("reason", "text")
        folder.write_text("duplicates", dropped_copies, compression, partition_by="reason")
    finally:
        decided.unpersist()
        parsed.unpersist()

    summary = build_summary(counts, strategy)
    summary.update(
        job="dedup",
        version=__version__,
        run_id=run_id,
        input=input_path,
        output=folder.path,
        started_at=started_at.isoformat(timespec="seconds"),
        wall_time_seconds=round(time.monotonic() - started, 3),
    )
    folder.write_json("summary.json", summary)
    folder.seal()
    return summary


def build_summary(counts: dict[tuple[str, str | None], int], strategy: SyntheticStrategy) -> dict[str, Any]:
    """The counts part of `summary.json` from the number of lines per (outcome, reason).

    `counts.input` equals the sum of the other counts: every input line is in exactly one outcome.
    """
    totals = {name: 0 for name in SUMMARY_COUNT_NAMES.values()}
    by_reason: dict[str, dict[str, int]] = {"duplicates": {}, "quarantined": {}, "dropped": {}}
    synthetic = {name: 0 for name in SUMMARY_COUNT_NAMES.values()}
    for (outcome, reason), count in sorted(counts.items(), key=lambda item: (item[0][0], item[0][1] or "")):
        name = SUMMARY_COUNT_NAMES[outcome]
        totals[name] += count
        if name in by_reason and reason:
            by_reason[name][reason] = by_reason[name].get(reason, 0) + count
        if reason == IN_BATCH_SYNTHETIC:
            synthetic[name] += count
    return {
        "counts": {"input": sum(totals.values()), **totals},
        "by_reason": by_reason,
        "synthetic": {"strategy": strategy, "events": sum(synthetic.values()), **synthetic},
    }
