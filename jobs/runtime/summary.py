"""The summary table a job prints when it completes (the same figures as its summary.json)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Row = tuple[str, int | str]


def table_lines(rows: Sequence[Row]) -> list[str]:
    """`  label  value` per row: labels padded to one width, values right-aligned (numbers with separators)."""
    width = max(len(label) for label, _ in rows)
    return [f"  {label:<{width}}  {value if isinstance(value, str) else f'{value:,}':>12}" for label, value in rows]


def table(title: str, rows: Sequence[Row], footer: Sequence[str] = ()) -> str:
    """A job's summary table: the title, the rows, then footer lines (where the outputs are)."""
    return "\n".join([title, *table_lines(rows), *footer])


def render(summary: dict[str, Any]) -> str:
    """A plain-text table of a job summary."""
    counts = summary["counts"]
    rows: list[tuple[str, int | str]] = [("input lines", counts["input"])]
    rows.append(("good", counts["good"]))
    rows.append(("bad", counts["bad"]))
    for name in ("duplicates", "quarantined", "dropped"):
        rows.append((name, counts[name]))
        rows.extend((f"  {reason}", count) for reason, count in summary["by_reason"][name].items())
    synthetic = summary["synthetic"]
    outcomes = ", ".join(
        f"{synthetic[name]:,} {name}"
        for name in ("good", "duplicates", "quarantined", "dropped", "bad")
        if synthetic[name]
    )
    rows.append(
        (
            f"synthetic ({synthetic['strategy']})",
            f"{synthetic['events']:,} events" + (f": {outcomes}" if outcomes else ""),
        )
    )
    rows.extend((f"  {reason}", count) for reason, count in synthetic.get("by_reason", {}).items() if count)
    manifest = summary.get("manifest")
    if manifest:
        rows.append(("manifest requests", manifest["requests"]))
        rows.append(("  per input line", f"{manifest['requests_per_input_line']:.3f}"))
        rows.append(("  conditional failures", manifest["conditional_failures"]))
        rows.append(("  retries / throttles", f"{manifest['retries']:,} / {manifest['throttles']:,}"))
        if manifest.get("throttle_waits"):
            rows.append(("  throttled, waited out", manifest["throttle_waits"]))
        if manifest.get("server_error_waits"):
            rows.append(("  server errors, waited out", manifest["server_error_waits"]))
        pacing = manifest.get("pacing")
        if pacing:
            rows.append(("  paced per task", f"{pacing['writes_per_second_per_task']:,} puts/s"))
    rows.append(("wall time", f"{summary['wall_time_seconds']:.1f} s"))
    footer = [f"  manifest: {manifest['uri']}"] if manifest else []
    footer.append(f"  output: {summary['output']}")
    return table(f"Winnow {summary['job']}  run {summary['run_id']}", rows, footer)
