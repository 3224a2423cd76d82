"""The whole pipeline in the `processes` section: `winnow run` (dedup then shred) as one cold process, beside the
Spark pass-through process on the same input, on the generator's default events and on the heavy-tail workload.

`winnow run (process)` is `python -m jobs run --manifest sqlite:… --create` with the section's Spark settings: a
SQLite manifest created fresh for each run (as configs/local.json's runs keep one), the manifest and the output
removed before and after each run, so every run does the same work and the disk holds one output at a time.
The heavy-tail rows are the same processes on `generate --tail heavy --synthetic-share 0.5` (1% of ids copied,
Pareto(1.2) copies up to 5,000 per id, half of them synthetic), each compared with the pass-through on that input.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from bench.measure import Sample, measure_process

RUN_ID = "2026-11-22-05-00-00"
RUN = "winnow run (process)"
DEDUP = "winnow dedup (process)"
PASSTHROUGH = "spark pass-through (process)"
HEAVY = ", heavy tail)"
# Issue 45's target: `run` as a whole process within 5x the Spark pass-through process at 1M events.
TARGET_EVENTS, TARGET_RATIO = 1_000_000, 5.0
# What `generate` is given for the heavy-tail workload (its default duplicate share is the 1%).
HEAVY_GENERATE = ("--tail", "heavy", "--synthetic-share", "0.5")


def heavy(name: str) -> str:
    """The row of a case on the heavy-tail input: "winnow run (process)" -> "winnow run (process, heavy tail)"."""
    return name.removesuffix(")") + HEAVY


def baseline_of(name: str) -> str:
    """The pass-through row a case is compared with: the one on the same input."""
    return heavy(PASSTHROUGH) if name.endswith(HEAVY) else PASSTHROUGH


def run_process(
    source: Path, output: Path, config: Path, env: dict[str, str], log: Path
) -> Callable[[], Sample]:  # fmt: skip
    """`winnow run` on `source` into `output`, against a SQLite manifest beside it, both fresh for each run."""
    manifest = output.with_name(f"{output.name}.db")
    argv = [sys.executable, "-m", "jobs", "run", "--input", str(source), "--output", str(output),
            "--config", str(config), "--run-id", RUN_ID, "--manifest", f"sqlite:{manifest}", "--create"]  # fmt: skip

    def removed() -> None:
        shutil.rmtree(output, ignore_errors=True)  # bench/work is this harness's own scratch
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{manifest}{suffix}").unlink(missing_ok=True)

    def case() -> Sample:
        removed()
        try:
            return measure_process(argv, env, log)
        finally:
            removed()

    return case
