"""The lines a run wrote, folder by folder: what the bench compares when two cases must write the same."""

from __future__ import annotations

import gzip
from pathlib import Path


def output_lines(run_folder: Path) -> dict[str, list[str]]:
    """Every output folder of a dedup run with its lines, sorted (part files are named by Spark, gzip or not)."""
    outputs: dict[str, list[str]] = {}
    for part in sorted(run_folder.rglob("part-*")):
        opener = gzip.open if part.suffix == ".gz" else open
        with opener(part, "rt", encoding="utf-8") as lines:
            outputs.setdefault(str(part.parent.relative_to(run_folder)), []).extend(lines)
    return {folder: sorted(lines) for folder, lines in outputs.items()}
