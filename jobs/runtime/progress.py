"""Progress a person can follow: the job's phases, and every few seconds what Spark is doing in the current one.

The job names its phases (`Progress` calls); between them, a thread on the driver reads Spark's status (the
stages running, their tasks done, the bytes their finished tasks read and the rows they wrote) and reports it:
- on a terminal, one line rewritten in place every `TERMINAL_SECONDS`;
- otherwise (CI, EMR's driver log), a plain line every `PLAIN_SECONDS`.

Something is said every time, so a person never waits longer than that for a line: the JVM starting, the stages
running, or the driver working alone between stages. The time left is the stage's own pace so far (tasks done
per second), shown once a task has finished; bytes and rows are those of the finished tasks (Spark counts a
task's when it ends). Nothing here touches the data: it reads the status Spark keeps anyway (its UI can stay off).
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, TextIO

from pyspark.sql import SparkSession

TERMINAL_SECONDS = 5.0
# Under 10 s with the poll itself and the thread's wake-up (a 10 s wait gave gaps of a little over 10 s).
PLAIN_SECONDS = 8.0


@dataclass(frozen=True)
class StageStatus:
    """One running stage, as Spark's status store has it."""

    stage_id: int
    tasks: int
    done: int
    running: int
    failed: int
    read_bytes: int | None = None
    written_rows: int | None = None

    def describe(self, seconds_running: float) -> str:
        parts = [f"stage {self.stage_id}: {self.done:,}/{self.tasks:,} tasks"]
        if self.running:
            parts.append(f"{self.running} running")
        if self.failed:
            parts.append(f"{self.failed} failed (retried)")
        if self.read_bytes:
            parts.append(f"{human_bytes(self.read_bytes)} read")
        if self.written_rows:
            parts.append(f"{self.written_rows:,} rows written")
        if 0 < self.done < self.tasks and seconds_running > 0:
            left = (self.tasks - self.done) * seconds_running / self.done
            parts.append(f"~{left:,.0f} s left")
        elif self.done == 0:  # no pace to go by yet
            parts.append(f"{seconds_running:,.0f} s so far")
        return ", ".join(parts)


def human_bytes(count: int) -> str:
    """`1.5 GB`, `268.6 MB`, `12 B`: decimal units, as the bench tables give sizes."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= scale:
            return f"{count / scale:,.1f} {unit}"
    return f"{count} B"


class Reporter:
    """Writes the job's lines to `stream`: phase lines as they come, the live status line rewritten in place on a
    terminal (cleared before any other line), or printed plainly otherwise."""

    def __init__(self, job: str, stream: TextIO | None = None, terminal: bool | None = None) -> None:
        # sys.stderr as it is now, not as it was at import (a caller may have replaced it since, as pytest does)
        stream = stream or sys.stderr
        self.job, self.stream = job, stream
        self.terminal = stream.isatty() if terminal is None else terminal
        self.started = self.phase_started = time.monotonic()
        self._live = False
        self._lock = threading.Lock()

    def _prefix(self) -> str:
        return f"[{self.job} {time.monotonic() - self.started:6.1f}s]"

    def __call__(self, message: str) -> None:
        """A new phase: said on a line of its own."""
        with self._lock:
            self.phase_started = time.monotonic()
            self._clear()
            print(f"{self._prefix()} {message}", file=self.stream, flush=True)

    def status(self, text: str) -> None:
        """Spark's status in the current phase."""
        with self._lock:
            if self.terminal:
                self.stream.write(f"\r\x1b[K{self._prefix()}   {text}")
                self.stream.flush()
                self._live = True
            else:
                print(f"{self._prefix()}   {text}", file=self.stream, flush=True)

    def _clear(self) -> None:
        if self._live:
            self.stream.write("\r\x1b[K")
            self._live = False

    def close(self) -> None:
        with self._lock:
            self._clear()
            self.stream.flush()


def running_stages(spark: SparkSession) -> list[StageStatus]:
    """The stages Spark is running now, with the metrics of their finished tasks when the status store has them."""
    tracker = spark.sparkContext.statusTracker()
    stages = []
    for stage_id in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage_id)
        if info is None:
            continue
        metrics = stage_metrics(spark, stage_id)
        stages.append(
            StageStatus(
                stage_id, info.numTasks, info.numCompletedTasks, info.numActiveTasks, info.numFailedTasks, *metrics
            )
        )
    return stages


def stage_metrics(spark: SparkSession, stage_id: int) -> tuple[int | None, int | None]:
    """(bytes read from the input or a shuffle, rows written to files) by the stage's finished tasks; Nones when
    Spark's status store does not say (not a public API: a stage gone, another version). Rows read are left out:
    from a cached frame Spark counts batches, not rows."""
    context: Any = spark.sparkContext
    try:
        data = context._jsc.sc().statusStore().lastStageAttempt(stage_id)
        return int(data.inputBytes()) + int(data.shuffleReadBytes()), int(data.outputRecords())
    except Exception:
        return None, None


class StageWatcher:
    """While open, says every `seconds` what Spark is doing (a daemon thread on the driver): the JVM starting
    (until `spark` is set), the running stages, or the driver working alone (planning, listing, moving files)."""

    def __init__(self, reporter: Reporter, spark: SparkSession | None = None, seconds: float | None = None) -> None:
        self.spark, self.reporter = spark, reporter
        self.seconds = seconds if seconds is not None else (TERMINAL_SECONDS if reporter.terminal else PLAIN_SECONDS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="winnow-progress", daemon=True)
        self._first_seen: dict[int, float] = {}

    def __enter__(self) -> StageWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.seconds + 5)
        self.reporter.close()

    def line(self, stages: list[StageStatus] | None, now: float) -> str:
        """The status line: these stages, or (None) the JVM starting, or ([]) the driver working alone."""
        in_phase = now - self.reporter.phase_started
        if stages is None:
            return f"the Spark JVM is starting ({in_phase:,.0f} s)"
        if not stages:
            return f"no Spark stage running: the driver is planning, listing or moving files ({in_phase:,.0f} s)"
        for stage in stages:
            self._first_seen.setdefault(stage.stage_id, now)
        return "; ".join(stage.describe(now - self._first_seen[stage.stage_id]) for stage in stages)

    def _watch(self) -> None:
        while not self._stop.wait(self.seconds):
            try:
                stages = None if self.spark is None else running_stages(self.spark)
            except Exception:  # the session stopping under us: progress is never worth failing a run for
                return
            self.reporter.status(self.line(stages, time.monotonic()))
