"""A run that fails in a Spark task says so in one line: Spark's task loggers do not print the worker's traceback
first (attack 9B's F16: six tracebacks on stderr before the line). Through a process of its own: the loggers are the
job's log4j2 settings, which the tests' session shares."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

from tests.pipeline.helpers import numbered_events as events

REPO = Path(__file__).resolve().parents[2]


def test_a_task_that_fails_is_reported_once_in_one_line(tmp_path: Path) -> None:
    whole = gzip.compress(("\n".join(events(range(2_000))) + "\n").encode())
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.tsv.gz").write_bytes(whole[: len(whole) // 2])  # cut: read by a task, which fails
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)}
    argv = ["dedup", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--run-id",
            "2026-11-24-01-00-00"]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "jobs", *argv], env=env, capture_output=True, text=True, timeout=600)

    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    noise = [line for line in lines[:-1] if not line.startswith(("[dedup ", "WARNING: Using incubator modules"))]
    assert noise == []  # 35411f2: Executor, TaskSetManager, BlockManager and DiskBlockObjectWriter lines, tracebacks
    assert lines[-1].startswith(
        f"error: --input: 1 of 1 file(s) cannot be read, nothing was written: file://{tmp_path}"
    )
