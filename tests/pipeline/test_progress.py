"""Progress a person can follow (`jobs.runtime.progress`): phase lines, and Spark's running stages between them."""

from __future__ import annotations

import io
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.config import JobConfig
from jobs.dedup import job as dedup_job
from jobs.runtime.progress import Reporter, StageStatus, StageWatcher, human_bytes, running_stages
from jobs.tools.generate import GenerateOptions, generate

PREFIX = r"\[dedup +\d+\.\ds\]"


def test_lines_go_to_stderr_as_it_is_when_the_reporter_is_made(capsys: pytest.CaptureFixture[str]) -> None:
    # Not sys.stderr as it was when jobs.runtime.progress was imported: a caller (pytest's capsys here, which the
    # module import above predates) may have replaced it since, and the old object may be closed.
    Reporter("dedup", terminal=False)("reading")
    assert re.fullmatch(rf"{PREFIX} reading\n", capsys.readouterr().err)


def test_a_stage_says_its_tasks_rows_and_time_left() -> None:
    stage = StageStatus(7, tasks=64, done=16, running=2, failed=1, read_bytes=1_530_000_000, written_rows=12_000)
    assert stage.describe(seconds_running=10.0) == (
        "stage 7: 16/64 tasks, 2 running, 1 failed (retried), 1.5 GB read, 12,000 rows written, ~30 s left"
    )
    assert [human_bytes(count) for count in (12, 1_500, 268_600_000)] == ["12 B", "1.5 KB", "268.6 MB"]
    # No task done yet: no estimate but the time so far, and no figures Spark has not given.
    assert StageStatus(3, tasks=4, done=0, running=2, failed=0).describe(5.0) == (
        "stage 3: 0/4 tasks, 2 running, 5 s so far"
    )


def test_between_stages_and_before_spark_something_is_said_too() -> None:
    reporter = Reporter("dedup", io.StringIO(), terminal=False)
    reporter("starting Spark")
    watcher = StageWatcher(reporter, seconds=10)
    started = reporter.phase_started
    assert watcher.line(None, started + 12.4) == "the Spark JVM is starting (12 s)"
    assert watcher.line([], started + 30) == (
        "no Spark stage running: the driver is planning, listing or moving files (30 s)"
    )
    stages = [StageStatus(4, tasks=8, done=2, running=2, failed=0), StageStatus(5, tasks=2, done=0, running=0,
                                                                                    failed=0)]  # fmt: skip
    watcher.line(stages, started + 40)  # first seen at 40 s
    assert watcher.line(stages, started + 50) == (
        "stage 4: 2/8 tasks, 2 running, ~30 s left; stage 5: 0/2 tasks, 10 s so far"
    )


def test_on_a_terminal_the_status_line_is_rewritten_and_cleared_before_the_next_phase() -> None:
    stream = io.StringIO()
    reporter = Reporter("dedup", stream, terminal=True)
    reporter("reading")
    reporter.status("stage 1: 1/4 tasks")
    reporter.status("stage 1: 3/4 tasks")
    reporter("writing")
    reporter.close()
    assert re.fullmatch(
        f"{PREFIX} reading\n"
        f"\r\x1b\\[K{PREFIX}   stage 1: 1/4 tasks"
        f"\r\x1b\\[K{PREFIX}   stage 1: 3/4 tasks"
        f"\r\x1b\\[K{PREFIX} writing\n",
        stream.getvalue(),
    )


def test_elsewhere_each_status_is_a_plain_line() -> None:
    stream = io.StringIO()
    reporter = Reporter("dedup", stream, terminal=False)
    reporter("reading")
    reporter.status("stage 1: 1/4 tasks")
    reporter.close()
    assert re.fullmatch(f"{PREFIX} reading\n{PREFIX}   stage 1: 1/4 tasks\n", stream.getvalue())


def test_a_real_run_names_its_phases_in_order(spark: SparkSession, tmp_path: Path) -> None:
    source = tmp_path / "in"
    generate(source, GenerateOptions(events=3000, seed=5, files=4))
    stream = io.StringIO()
    reporter = Reporter("dedup", stream, terminal=False)
    with StageWatcher(reporter, spark, seconds=0.05):
        dedup_job.run(spark, JobConfig(), str(source), str(tmp_path / "out"), "2026-11-25-05-00-00", reporter)
    lines = stream.getvalue().splitlines()
    folder = tmp_path / "out" / "run=2026-11-25-05-00-00"
    phases = [match.group(1) for line in lines if (match := re.fullmatch(f"{PREFIX} (\\S.*)", line))]
    assert phases == [
        f"reading and parsing every line of {source}; deciding the bad lines and repeated ids",
        f"writing every line of {source} where its decision says",
        f"moving the written files from {folder}/_staging into place",
        f"sealing {folder}: summary.json, then _SUCCESS",
    ]  # the steps `make bench` times a whole process by


def hold_partition_one(release: str) -> Callable[[int, Iterable[str]], Iterable[str]]:
    def hold(index: int, rows: Iterable[str]) -> Iterable[str]:
        while index == 1 and not os.path.exists(release):
            time.sleep(0.05)
        return rows

    return hold


def test_a_running_stage_is_reported_with_its_tasks_and_what_its_finished_tasks_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A stage held open at a known point (its first task done, its second waiting for a file), so what the status
    line shows does not depend on when it is looked at."""
    source, release = tmp_path / "lines.txt", tmp_path / "release"
    source.write_text("".join(f"line {n}\n" for n in range(1000)))
    held = spark.sparkContext.textFile(str(source), 2).mapPartitionsWithIndex(hold_partition_one(str(release)))
    job = threading.Thread(target=held.count)
    job.start()
    try:
        deadline = time.monotonic() + 300  # a bound for a broken run, not a timing the test relies on
        while not (stages := [s for s in running_stages(spark) if s.done == 1 and s.read_bytes]):
            assert time.monotonic() < deadline, running_stages(spark)
            time.sleep(0.05)
    finally:
        release.touch()
        job.join()
    line = StageWatcher(Reporter("dedup", io.StringIO(), terminal=False), spark).line(stages, time.monotonic())
    assert re.fullmatch(r"stage \d+: 1/2 tasks, 1 running, [\d.,]+ [KMG]?B read", line), line
