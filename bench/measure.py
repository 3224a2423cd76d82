"""Timing and peak memory of one case, and the warm-up + alternating-runs protocol every figure follows.

Peak memory is the peak resident set size (VmHWM) of the processes that do the work: for a case inside
the Spark session, the session's JVM (reset before each run through /proc/PID/clear_refs, so each run
reports its own peak over the JVM's size when it started); for a whole process, the sum over
its process tree (the Python driver and the JVM it starts), sampled every 0.2 s.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO


@dataclass
class Sample:
    seconds: float
    peak_rss_mb: float | None
    result: Any = None


@dataclass
class Figure:
    """The runs of one case: the warm-up is kept apart, the median is over the timed runs."""

    name: str
    warmup: Sample | None = None
    runs: list[Sample] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return statistics.median(run.seconds for run in self.runs)

    @property
    def peak_rss_mb(self) -> float | None:
        peaks = [run.peak_rss_mb for run in self.runs if run.peak_rss_mb is not None]
        return max(peaks) if peaks else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "median_seconds": round(self.seconds, 3),
            "runs_seconds": [round(run.seconds, 3) for run in self.runs],
            "warmup_seconds": round(self.warmup.seconds, 3) if self.warmup else None,
            "peak_rss_mb": round(self.peak_rss_mb, 1) if self.peak_rss_mb is not None else None,
        }


def reset_peak_rss(pid: int) -> bool:
    """Set the process's VmHWM back to its current RSS (Linux: "5" > clear_refs). False where not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def measure_in_process(work: Callable[[], Any], pid: int) -> Sample:
    """Run `work` and time it; peak RSS of process `pid` (the Spark JVM) during the run."""
    can_reset = reset_peak_rss(pid)
    started = time.monotonic()
    result = work()
    seconds = time.monotonic() - started
    return Sample(seconds, peak_rss_mb(pid) if can_reset else None, result)


def process_tree(root: int) -> dict[int, list[str]]:
    """The `/proc/PID/stat` fields (after the command name) of a process and all its descendants, by pid."""
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        parents[pid], stats[pid] = int(fields[1]), fields
    members, frontier = {root}, [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier and pid not in members]
        members.update(children)
        frontier = children
    return {pid: stats[pid] for pid in members if pid in stats}


def tree_rss_mb(root: int) -> float:
    """Resident memory of a process and all its descendants (a Python driver and the JVM it started)."""
    page = os.sysconf("SC_PAGE_SIZE")
    return sum(int(fields[21]) * page for fields in process_tree(root).values()) / 1024 / 1024


def measure_process(command: Sequence[str], env: dict[str, str] | None = None, log: Path | None = None) -> Sample:
    """Run a whole command; wall time and the peak resident memory of its process tree (sampled every 0.2 s). The
    result is its output lines (stdout and stderr as they came), each with the seconds since it started.

    Raises:
        subprocess.CalledProcessError: the command failed (its output is in `log`).
    """
    stamped: list[tuple[float, str]] = []
    with open(log or os.devnull, "a", encoding="utf-8") as out:
        started = time.monotonic()
        # errors="replace": a byte that is not UTF-8 (a JVM's message) must not stop the reader and lose lines.
        process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   errors="replace", env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})  # fmt: skip
        reader = threading.Thread(target=_stamp_lines, args=(process, started, stamped, out), daemon=True)
        reader.start()
        peak = 0.0
        while process.poll() is None:
            peak = max(peak, tree_rss_mb(process.pid))
            time.sleep(0.2)
        seconds = time.monotonic() - started
        reader.join()
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, list(command))
    return Sample(seconds, peak, stamped)


def _stamp_lines(process: subprocess.Popen[str], started: float, stamped: list[tuple[float, str]], log: TextIO) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        stamped.append((time.monotonic() - started, line.rstrip("\n")))
        log.write(line)


def alternate(
    cases: dict[str, Callable[[], Sample]], runs: int, warmup: bool = True, progress: Callable[[str], None] = print
) -> dict[str, Figure]:
    """One warm-up per case, then `runs` rounds taking the cases in turn (A B A B …)."""
    figures = {name: Figure(name) for name in cases}
    if warmup:
        for name, case in cases.items():
            figures[name].warmup = sample = case()
            progress(f"  warm-up {name}: {sample.seconds:.2f} s")
    for round_number in range(1, runs + 1):
        for name, case in cases.items():
            sample = case()
            figures[name].runs.append(sample)
            progress(f"  run {round_number} {name}: {sample.seconds:.2f} s")
    return figures
