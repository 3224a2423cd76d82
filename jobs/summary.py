"""The summary table a job prints when it completes (the same figures as its summary.json)."""

from __future__ import annotations

from typing import Any


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
    rows.append(("wall time", f"{summary['wall_time_seconds']:.1f} s"))
    width = max(len(label) for label, _ in rows)
    lines = [f"Winnow {summary['job']}  run {summary['run_id']}"]
    for label, value in rows:
        shown = f"{value:>12,}" if isinstance(value, int) else f"{value:>12}"
        lines.append(f"  {label:<{width}}  {shown}")
    if manifest:
        lines.append(f"  manifest: {manifest['uri']}")
    lines.append(f"  output: {summary['output']}")
    return "\n".join(lines)
