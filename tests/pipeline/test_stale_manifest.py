"""An older copy of a manifest put back in its place is found by the next run of an output that used it,
before it writes anything; the back-fill the line prints, pasted as printed, lets runs go on with nothing delivered
twice (`jobs.dedup.stale`)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.runtime.cli import main
from tests.pipeline.helpers import error_line, read_lines
from tests.pipeline.helpers import numbered_events as events
from tests.pipeline.helpers import write_lines as write
from tests.pipeline.test_unfinished_runs import operator_shell

RUN_A, RUN_B, RUN_C = "2026-11-24-01-00-00", "2026-11-24-02-00-00", "2026-11-24-03-00-00"


def put_back(copy: Path, place: Path) -> None:
    """A copy of the manifest (a file, or the lake's folder) in its place."""
    if copy.is_dir():
        shutil.rmtree(place, ignore_errors=True)
        shutil.copytree(copy, place)
    else:
        shutil.copy(copy, place)


@pytest.mark.parametrize("backend", ["sqlite", "lake"])
def test_an_older_copy_of_the_manifest_stops_the_next_run_until_the_printed_back_fill(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    """SQLite: the file copied back; the lake: its whole folder (attack 10B's 01), which its anchor cannot tell."""
    out, database = tmp_path / "out", tmp_path / "manifest"
    uri = f"{backend}:{database}"
    write(tmp_path / "a" / "a.tsv", events(range(0, 5)))
    write(tmp_path / "b" / "b.tsv", events(range(5, 10)))

    def dedup(batch: str, run_id: str, *more: str) -> int:
        argv = ["dedup", "--input", str(tmp_path / batch), "--output", str(out), "--run-id", run_id]
        return main([*argv, "--manifest", uri, *more])

    assert dedup("a", RUN_A, "--create") == 0
    put_back(database, tmp_path / "copy")  # a backup taken after run A
    assert dedup("b", RUN_B) == 0
    summary = out / f"run={RUN_B}" / "summary.json"
    recorded = json.loads(summary.read_text())["manifest"]["generation"]
    assert recorded == 2
    put_back(tmp_path / "copy", database)  # put back: it lacks run B's pairs

    assert dedup("b", RUN_C) == 1  # run B's events again
    line = error_line(capsys)
    back_fill = line.split("back-fill the completed runs into it (", 1)[1].split(", and the same", 1)[0]
    assert line == (
        f"error: manifest {uri} is an older copy: {summary} records it at generation 2 (each run adds to it), and it "
        "is at 1, so the events of the runs completed after the copy was taken would be delivered again; nothing "
        f"was written. Put the newest copy back, or back-fill the completed runs into it ({back_fill}, and the same "
        "for every other output that uses it), then run again"
    )  # 93cc664: exit 0, run B's 5 events delivered again
    assert not (out / f"run={RUN_C}").exists()
    assert back_fill.endswith(
        f"populate-manifest --input {shlex.quote(str(out))} --manifest {shlex.quote(uri)} --run-id {RUN_B}"
    )
    pasted = subprocess.run(["bash", "-c", back_fill], cwd="/", env=operator_shell(), capture_output=True,
                            text=True, timeout=600)  # fmt: skip
    assert pasted.returncode == 0, pasted.stderr

    assert dedup("b", RUN_C) == 0
    assert read_lines(out / f"run={RUN_C}" / "good") == []  # each of run B's events is delivered once
    assert len(read_lines(out / f"run={RUN_C}" / "duplicates" / "reason=cross_batch_natural")) == 5
    assert dedup("a", RUN_A) == 0  # a redo of the first run still gives its output
    assert len(read_lines(out / f"run={RUN_A}" / "good")) == 5
