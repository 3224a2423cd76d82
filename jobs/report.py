"""The duplicates report: how many event IDs have 1, 2, 3, … events, before and after dedup.

The distribution is the query of shared/reference/000 (`SELECT event_count, COUNT(*) FROM (SELECT event_id,
COUNT(*) AS event_count … GROUP BY 1) GROUP BY 1 ORDER BY 1`), computed in Spark; only the small
distribution table reaches the driver, which writes it as TSV and draws it with a log scale.
"""

from __future__ import annotations

import functools
import io
import time
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.enriched.parse import parse_events
from jobs.lake import FileSystem, absolute, check_apart, read_lines

TABLE_NAME = "events_per_event_id.tsv"
CHART_NAME = "events_per_event_id.png"
# Up to this many distinct events-per-ID values the chart is a bar chart; beyond, markers on log-log axes.
MAX_BARS = 30
TABLE_HEADER = ("events_per_event_id", "event_ids_before", "events_before", "event_ids_after", "events_after")

Progress = Callable[[str], None]


def distribution(lines: DataFrame) -> tuple[dict[int, int], int]:
    """Event IDs per number of events sharing the ID, over the valid events of `lines` (column `value`).

    IDs are compared lower-cased, as dedup groups them. Lines the enriched parser rejects are not events
    (they would be bad rows, never loaded); their number is returned beside the distribution.

    Returns:
        ({events per ID: number of IDs}, number of rejected lines).
    """
    parsed = parse_events(lines, ("app_id",)).select((F.size("errors") == 0).alias("valid"), "event_key")
    # One pass: rejected lines form one group (their key nulled), so it also counts them.
    per_id = parsed.groupBy("valid", F.when(F.col("valid"), F.col("event_key")).alias("key")).agg(
        F.count(F.lit(1)).alias("events")
    )
    rows = per_id.groupBy("valid", "events").agg(F.count(F.lit(1)).alias("ids")).collect()
    counts = {int(row["events"]): int(row["ids"]) for row in rows if row["valid"]}
    rejected = sum(int(row["events"]) for row in rows if not row["valid"])
    return counts, rejected


def table_lines(before: dict[int, int], after: dict[int, int] | None) -> list[str]:
    """The TSV table: one row per events-per-ID value seen before or after; after columns empty without after."""
    lines = ["\t".join(TABLE_HEADER)]
    for events in sorted(set(before) | set(after or {})):
        row = [events, before.get(events, 0), events * before.get(events, 0)]
        if after is not None:
            row += [after.get(events, 0), events * after.get(events, 0)]
        lines.append("\t".join(str(value) for value in row) + ("" if after is not None else "\t\t"))
    return lines


def chart_png(before: dict[int, int], after: dict[int, int] | None) -> bytes:
    """A bar chart of event IDs per events-per-ID value, log-scaled count axis, before (and after) dedup."""
    import matplotlib

    matplotlib.use("Agg")  # no display: render to a file
    import matplotlib.pyplot as plt

    values = sorted(set(before) | set(after or {}))
    figure, axes = plt.subplots(figsize=(min(12.0, max(6.0, 0.6 * len(values) + 2)), 4.5))
    try:
        if len(values) <= MAX_BARS:
            positions = range(len(values))
            width = 0.4 if after is not None else 0.8
            offset = -width / 2 if after is not None else 0.0
            axes.bar([p + offset for p in positions], [before.get(v, 0) for v in values], width, label="before dedup")
            if after is not None:
                after_counts = [after.get(v, 0) for v in values]
                axes.bar([p + width / 2 for p in positions], after_counts, width, label="after dedup")
            axes.set_xticks(list(positions), [str(v) for v in values])
        else:
            # A long tail (IDs with hundreds of copies): markers on a log-scaled x axis stay readable.
            axes.plot(sorted(before), [before[v] for v in sorted(before)], "o", label="before dedup")
            if after is not None:
                axes.plot(sorted(after), [after[v] for v in sorted(after)], "x", markersize=9, label="after dedup")
            axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("events per event ID")
        axes.set_ylabel("event IDs (log scale)")
        axes.set_title("Events per event ID")
        axes.legend()
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})  # no version: same bytes
        return buffer.getvalue()
    finally:
        plt.close(figure)


def run(
    spark: SparkSession,
    input_path: str,
    deduplicated_paths: Sequence[str] | None,
    output_path: str,
    progress: Progress = lambda message: None,
) -> dict[str, Any]:
    """Compute the distribution before (and after) dedup; write the TSV table and the PNG chart.

    Args:
        spark: the session.
        input_path: enriched TSV before dedup (file or folder).
        deduplicated_paths: dedup run folders (each one's `good/` is read, all together: the runs of
            several batches) or enriched TSV after dedup; or None.
        output_path: the folder that receives `events_per_event_id.tsv` and `events_per_event_id.png`.
        progress: called with a short message at each step.

    Returns:
        The report summary: both distributions, the rejected line counts, the paths and the wall time.
    """
    started = time.monotonic()
    fs = FileSystem(spark)
    input_path, output_path = absolute(input_path), absolute(output_path).rstrip("/")
    # The report's files written into an input would be read as events by the next run.
    check_apart("--output", output_path, {"--input": input_path})
    for path in deduplicated_paths or ():
        check_apart("--output", output_path, {"--deduplicated": absolute(path)})
    progress(f"counting events per event ID in {input_path}")
    before, rejected_before = distribution(read_lines(spark, input_path))
    after: dict[int, int] | None = None
    rejected_after = 0
    folders: list[str] = []
    if deduplicated_paths:
        for path in deduplicated_paths:
            path = absolute(path).rstrip("/")
            folders.append(f"{path}/good" if fs.exists(f"{path}/good") else path)
        progress(f"counting events per event ID in {', '.join(folders)}")
        frames = [read_lines(spark, folder) for folder in folders]
        after, rejected_after = distribution(functools.reduce(DataFrame.unionByName, frames))
    lines = table_lines(before, after)
    fs.write_bytes(f"{output_path}/{TABLE_NAME}", ("\n".join(lines) + "\n").encode("utf-8"))
    fs.write_bytes(f"{output_path}/{CHART_NAME}", chart_png(before, after))
    return {
        "job": "report",
        "input": input_path,
        "deduplicated": folders if deduplicated_paths else None,
        "before": {str(k): v for k, v in sorted(before.items())},
        "after": None if after is None else {str(k): v for k, v in sorted(after.items())},
        "rejected_lines": {"before": rejected_before, "after": rejected_after},
        "table": f"{output_path}/{TABLE_NAME}",
        "chart": f"{output_path}/{CHART_NAME}",
        "wall_time_seconds": round(time.monotonic() - started, 3),
    }


def render(summary: dict[str, Any]) -> str:
    """The distribution as a plain-text table, with where the TSV and the chart are."""
    before = {int(k): v for k, v in summary["before"].items()}
    after = None if summary["after"] is None else {int(k): v for k, v in summary["after"].items()}
    header = ["events/ID", "IDs before", "events before"] + (["IDs after", "events after"] if after is not None else [])
    rows = [header]
    for line in table_lines(before, after)[1:]:
        values = [value for value in line.split("\t") if value != ""]
        rows.append([f"{int(value):,}" for value in values])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    out = ["Winnow report  events per event ID"]
    out.extend("  " + "  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)) for row in rows)
    rejected = summary["rejected_lines"]
    if rejected["before"] or rejected["after"]:
        out.append(
            f"  lines that are not valid events (not counted): {rejected['before']:,} before, "
            f"{rejected['after']:,} after"
        )
    out.append(f"  table: {summary['table']}")
    out.append(f"  chart: {summary['chart']}")
    return "\n".join(out)
