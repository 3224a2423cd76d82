"""The `small` section of `make bench`: small batches as whole cold processes, the small-input session against
Spark's defaults.

On each generated input (10,000 and 40,000 events by default, `--small-events`): `winnow run` (dedup then shred,
a SQLite manifest created fresh for each run) and `winnow dedup` (the same manifest, fresh), each in the session a
small input gets (`spark.small_input_mb`, jobs/runtime/session.py SMALL_INPUT_CONF) and with Spark's defaults
(`small_input_mb: 0`), beside the Spark pass-through process (bench/passthrough.py) on the same input. The two
sessions' outputs are compared line for line (every output folder, lines sorted); any difference stops the bench.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.measure import Sample, alternate, measure_process
from bench.outputs import output_lines
from jobs.config import SparkConfig
from jobs.runtime.cli import is_small_input

RUN_ID = "2026-11-22-05-00-00"
DEFAULT_EVENTS = [10_000, 40_000]
LIMIT_MB = SparkConfig().small_input_mb  # the default a config without the key gets
PASSTHROUGH = "spark pass-through (process)"
# Issue 45's target: a `run` of 10,000 events (a small site's 15-minute batch) within 1.5x the pass-through process.
TARGET_EVENTS, TARGET_RATIO = 10_000, 1.5
# The pairs whose outputs must be the same line for line: (what, small-input case, Spark's defaults case).
PAIRS = (
    ("run", "winnow run (small-input session)", "winnow run (Spark's defaults)"),
    ("dedup", "winnow dedup (small-input session)", "winnow dedup (Spark's defaults)"),
)


class OutputsDifferError(Exception):
    """The small-input session and Spark's defaults wrote different lines for the same input."""


def configs(work: Path, spark_config: dict[str, Any], small_by_default: bool) -> tuple[Path, Path]:
    """The job configs of the two sessions: the bench's Spark settings as they are (the small-input session an
    input under the limit gets by default; forced for a bigger one) and with `small_input_mb: 0`."""
    small, defaults = work / "small-input.json", work / "small-input-0.json"
    forced = {} if small_by_default else {"small_input_mb": 1_000_000}  # the largest the config allows
    small.write_text(json.dumps({"spark": {**spark_config["spark"], **forced}}))
    defaults.write_text(json.dumps({"spark": {**spark_config["spark"], "small_input_mb": 0}}))
    return small, defaults


def cases(
    source: Path, work: Path, spark_config: dict[str, Any], small_by_default: bool
) -> dict[str, Callable[[], Sample]]:
    """The five processes on `source`, each writing into a folder of its own emptied before each run (with its
    manifest), so the last run's outputs stay for the comparison."""
    small, defaults = configs(work, spark_config, small_by_default)
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    log = work / "small.log"

    def job(command: str, config: Path, name: str) -> Callable[[], Sample]:
        output, manifest = work / "out" / f"small-{name}", work / f"small-{name}.db"
        argv = [sys.executable, "-m", "jobs", command, "--input", str(source), "--output", str(output),
                "--config", str(config), "--run-id", RUN_ID, "--manifest", f"sqlite:{manifest}", "--create"]  # fmt: skip

        def case() -> Sample:
            shutil.rmtree(output, ignore_errors=True)  # bench/work is this harness's own scratch
            for suffix in ("", "-wal", "-shm", "-journal"):  # a fresh manifest for each run
                Path(f"{manifest}{suffix}").unlink(missing_ok=True)
            return measure_process(argv, env, log)

        return case

    passthrough = [sys.executable, "-m", "bench.passthrough", "--input", str(source),
                   "--output", str(work / "out" / "small-pass"), "--config", str(defaults)]  # fmt: skip
    return {
        PAIRS[0][1]: job("run", small, "run"),
        PAIRS[0][2]: job("run", defaults, "run-0"),
        PAIRS[1][1]: job("dedup", small, "dedup"),
        PAIRS[1][2]: job("dedup", defaults, "dedup-0"),
        PASSTHROUGH: lambda: measure_process(passthrough, env, log),
    }


def same_outputs(work: Path) -> dict[str, dict[str, int]]:
    """Folders and lines of each pair's outputs (the last run of each case), once checked to be the same.

    Raises:
        OutputsDifferError: a pair wrote different lines (the folders stay in bench/work/out to compare).
    """
    compared = {}
    for what, small_case, defaults_case in PAIRS:
        small_out, defaults_out = (work / "out" / f"small-{name}" for name in (what, f"{what}-0"))
        small, defaults = output_lines(small_out), output_lines(defaults_out)
        if small != defaults:
            differ = sorted(f for f in small.keys() | defaults.keys() if small.get(f) != defaults.get(f))
            raise OutputsDifferError(
                f"small: {small_case} and {defaults_case} wrote different lines in {', '.join(differ)}; "
                f"compare {small_out} with {defaults_out}"
            )
        compared[what] = {"folders": len(small), "lines": sum(len(lines) for lines in small.values())}
    return compared


def section(
    sizes: list[int], runs: int, input_for: Callable[[int], Path], work: Path, spark_config: dict[str, Any],
    progress: Callable[[str], None],
) -> dict[str, Any]:  # fmt: skip
    """Each size's figures (warm-up, then `runs` alternating runs) and the pairs' compared outputs."""
    measured = []
    for events in sizes:
        source = input_for(events)
        small_by_default = is_small_input(argparse.Namespace(input=str(source)), LIMIT_MB)
        progress(
            f"small batches: {events:,} events, small-input session {'by default' if small_by_default else 'forced'}"
        )
        figures = alternate(cases(source, work, spark_config, small_by_default), runs, progress=progress)
        measured.append({
            "events": events,
            "bytes": sum(path.stat().st_size for path in source.glob("*.tsv")),
            "small_input_by_default": small_by_default,
            "cases": {name: figure.as_dict() for name, figure in figures.items()},
            "identical_outputs": same_outputs(work),
        })  # fmt: skip
    return {"limit_mb": LIMIT_MB, "sizes": measured}
