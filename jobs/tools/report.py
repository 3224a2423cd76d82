"""The duplicates report: how many event IDs have 1, 2, 3, … events, before and after dedup.

The distribution is the warehouse-side query of Snowplow's dedup guide (`SELECT event_count, COUNT(*) FROM
(SELECT event_id, COUNT(*) AS event_count … GROUP BY 1) GROUP BY 1 ORDER BY 1`), computed in Spark; only the small
distribution table reaches the driver, which writes it as TSV and draws it with a log scale.
"""

from __future__ import annotations

import functools
import io
import time
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.contract import BAD, DUPLICATES, GOOD, QUARANTINE, SUCCESS_MARKER, SUMMARY, Progress
from jobs.enriched.parse import parse_events
from jobs.errors import InvalidArgumentError
from jobs.fs.hadoop import FileSystem
from jobs.fs.input import read_lines
from jobs.fs.paths import absolute, check_apart
from jobs.shred.job import shred_input

TABLE_NAME = "events_per_event_id.tsv"
CHART_NAME = "events_per_event_id.png"
# Up to this many distinct events-per-ID values the chart is a bar chart; beyond, markers on log-log axes.
MAX_BARS = 30
TABLE_HEADER = ("events_per_event_id", "event_ids_before", "events_before", "event_ids_after", "events_after")
# What a dedup run writes in its folder: a folder holding one of these is a run folder, never enriched TSV.
RUN_OUTPUTS = frozenset({GOOD, DUPLICATES, QUARANTINE, BAD})


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


def chart_title(before: dict[int, int], after: dict[int, int] | None) -> str:
    """What the chart shows in one line: the events and the shared event IDs, before and after dedup."""
    events_before, shared_before = events_total(before), ids_shared(before)
    if after is None:
        return f"Events per event ID: {events_before:,} events, {shared_before:,} event IDs shared by 2 or more"
    events_after = events_total(after)
    removed = events_before - events_after
    share = f" ({removed / events_before:.1%})" if events_before else ""
    return (
        f"Dedup: {events_before:,} \u2192 {events_after:,} events, {removed:,} fewer{share}; event IDs shared by 2 or "
        f"more: {shared_before:,} \u2192 {ids_shared(after):,}"
    )


def events_total(counts: dict[int, int]) -> int:
    return sum(events * ids for events, ids in counts.items())


def ids_shared(counts: dict[int, int]) -> int:
    return sum(ids for events, ids in counts.items() if events > 1)


def chart_figure(before: dict[int, int], after: dict[int, int] | None) -> Any:
    """The chart as a matplotlib Figure: event IDs per events-per-ID value on a log count axis; before and after
    dedup side by side on the same axes, the change stated in the title (`chart_title`)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: render to a file
    import matplotlib.pyplot as plt

    panels = [("before dedup", before)] + ([("after dedup", after)] if after is not None else [])
    values = sorted(set(before) | set(after or {}))
    per_panel = min(6.5, max(4.5, 0.25 * min(len(values), MAX_BARS) + 2))
    figure, axes_list = plt.subplots(
        1, len(panels), figsize=(per_panel * len(panels) + 1, 4.8), sharex=True, sharey=True, squeeze=False
    )
    for axes, (name, counts), color in zip(axes_list[0], panels, ("tab:blue", "tab:orange"), strict=False):
        if len(values) <= MAX_BARS:
            positions = range(len(values))
            axes.bar(list(positions), [counts.get(v, 0) for v in values], 0.8, color=color, label=name)
            axes.set_xticks(list(positions), [str(v) for v in values])
        else:  # a long tail (IDs with hundreds of copies): markers on a log-scaled x axis stay readable
            axes.plot(sorted(counts), [counts[v] for v in sorted(counts)], "o", color=color, label=name)
            axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("events per event ID")
        axes.set_title(f"{name}: {events_total(counts):,} events on {sum(counts.values()):,} event IDs", fontsize=10)
    axes_list[0][0].set_ylabel("event IDs (log scale)")
    figure.suptitle(chart_title(before, after), fontsize=11)
    figure.tight_layout()
    return figure


def chart_png(before: dict[int, int], after: dict[int, int] | None) -> bytes:
    """`chart_figure` as PNG bytes (no software version in them: the same distributions give the same bytes)."""
    import matplotlib.pyplot as plt

    figure = chart_figure(before, after)
    try:
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
        return buffer.getvalue()
    finally:
        plt.close(figure)


def deduplicated_folder(spark: SparkSession, path: str) -> str:
    """What the report reads for one `--deduplicated` path: a complete dedup run folder's `good/`, or the path
    itself when it is enriched TSV after dedup (e.g. a run's `good/`). Shred's check of its input decides.

    Raises:
        InvalidArgumentError: a folder of run folders, a dedup run without `_SUCCESS` (or, unfinished earlier,
            without `summary.json`), or another job's run folder: their other outputs are not events.
    """
    try:
        folder = shred_input(spark, path)
    except InvalidArgumentError as err:  # shred's message names its own option
        raise InvalidArgumentError(f"--deduplicated: {str(err).removeprefix('--input: ')}") from None
    if folder == path:
        outputs = [name for name in FileSystem(spark).children(path) if name in RUN_OUTPUTS]
        if outputs:
            raise InvalidArgumentError(
                f"--deduplicated: {path} holds {', '.join(f'{name}/' for name in outputs)} but no {SUMMARY} and no "
                f"{SUCCESS_MARKER} (a dedup run that did not finish); allowed: a complete dedup run folder, its "
                "good/, or enriched TSV after dedup"
            )
    return folder


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
        deduplicated_paths: complete dedup run folders (each one's `good/` is read, all together: the runs of
            several batches) or enriched TSV after dedup; or None. A folder of run folders is refused.
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
    # Before any counting: a refused path costs no Spark pass and leaves nothing written.
    folders = [deduplicated_folder(spark, absolute(path).rstrip("/")) for path in deduplicated_paths or ()]
    progress(f"counting events per event ID in {input_path}")
    before, rejected_before = distribution(read_lines(spark, input_path))
    after: dict[int, int] | None = None
    rejected_after = 0
    if folders:
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
