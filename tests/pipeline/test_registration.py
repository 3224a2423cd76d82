"""The output's own record of its runs that write to a manifest (`jobs.manifest.registration`): a run whose entry in
the manifest's register was lost is still found, and a completed run's redo is still held to its manifest."""

from __future__ import annotations

import gzip
import shlex
import shutil
import sqlite3
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.fs.run_folder import RunFolder
from jobs.runtime.cli import main
from tests.pipeline.helpers import error_line, numbered_id
from tests.pipeline.test_stale_manifest import RUN_A, RUN_B, RUN_C, Outputs, three_batches


@pytest.fixture
def batches(tmp_path: Path) -> Path:
    return three_batches(tmp_path)


def killed_after_clearing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next run stops right after clearing its folder, as a kill there would stop it."""
    clear = RunFolder.clear

    def clear_and_stop(self: RunFolder) -> None:
        clear(self)
        raise OSError("injected: the run was killed")

    monkeypatch.setattr(RunFolder, "clear", clear_and_stop)


def killed(runs: Outputs, monkeypatch: pytest.MonkeyPatch, batch: str, run_id: str) -> None:
    """Run `run_id` of `batch` into `out`, stopped right after clearing its folder (`killed_after_clearing`)."""
    killed_after_clearing(monkeypatch)
    assert runs.dedup(batch, "out", run_id) == 1
    monkeypatch.undo()


@pytest.mark.parametrize("backend", ["sqlite", "lake"])
def test_a_run_whose_register_entry_was_lost_stops_the_next_run_until_it_is_redone(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:  # fmt: skip
    """Attack 10B's 03 (a killed run's row deleted from SQLite's winnow_runs: 223 events lost) and 02 (the lake's
    `_runs/` lost while a completed run's redo, stopped before its commit, was unfinished: 190 lost), exit 0."""
    database = batches / "manifest"
    runs = Outputs(batches, f"{backend}:{database}")
    assert runs.dedup("a", "out", RUN_A, "--create") == 0
    assert runs.dedup("b", "out", RUN_B) == 0
    killed_after_clearing(monkeypatch)
    assert runs.dedup("a", "out", RUN_A) == 1  # a redo of the completed run A: its good/ is gone
    monkeypatch.undo()
    if backend == "sqlite":
        with sqlite3.connect(database) as db:
            db.execute("DELETE FROM winnow_runs")
    else:
        shutil.rmtree(database / "_runs")

    assert runs.dedup("c", "out", RUN_C) == 1
    line = error_line(capsys)
    assert f"run {RUN_A} of {batches / 'out'} wrote to it and has not completed" in line
    redo = shlex.split(line.split("Redo it first: ", 1)[1])
    assert main(redo[redo.index("dedup") :]) == 0  # the redo as printed
    assert runs.dedup("c", "out", RUN_C) == 0
    assert runs.delivered("out") == sorted(numbered_id(n) for n in range(15))  # 35411f2: 0-4 in no good/


def test_a_completed_runs_redo_without_its_marker_is_held_to_its_manifest(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack 10C's 04: `_COMPLETED_BEFORE` removed from a completed run's stopped redo, then redone without
    `--manifest`: it checked nothing against the manifest, 190 events delivered again, exit 0."""
    database = batches / "manifest"
    runs = Outputs(batches, f"sqlite:{database}")
    assert runs.dedup("a", "out", RUN_A, "--create") == 0
    killed(runs, monkeypatch, "a", RUN_A)
    (batches / "out" / f"run={RUN_A}" / "_COMPLETED_BEFORE").unlink()

    argv = ["dedup", "--input", str(batches / "a"), "--output", str(batches / "out"), "--run-id", RUN_A]
    assert main(argv) == 2
    assert error_line(capsys) == (
        f"error: --manifest: run {RUN_A} completed in {batches / 'out' / f'run={RUN_A}'} with sqlite:{database}, and "
        "this redo gives none: it could not check the events later runs decided against there. Allowed: --manifest "
        f"sqlite:{database} (as it completed), or a new run id for the batch. Nothing was written"
    )
    assert runs.dedup("a", "out", RUN_A) == 0  # with it
    assert runs.delivered("out") == sorted(numbered_id(n) for n in range(5))


def test_a_run_that_stopped_before_registering_leaves_no_marker_to_stop_the_next(
    spark: SparkSession, batches: Path
) -> None:
    """A run stopped by an unreadable input file wrote nothing to the manifest: the next run goes on."""
    database = batches / "manifest"
    runs = Outputs(batches, f"sqlite:{database}")
    assert runs.dedup("a", "out", RUN_A, "--create") == 0
    whole = gzip.compress((batches / "b" / "b.tsv").read_bytes())
    (batches / "cut").mkdir()
    (batches / "cut" / "b.tsv.gz").write_bytes(whole[: len(whole) // 2])
    assert runs.dedup("cut", "out", RUN_B) == 1
    assert not (batches / "out" / "_registered" / f"run={RUN_B}.json").exists()
    assert runs.dedup("c", "out", RUN_C) == 0


def test_a_run_that_never_completed_and_lost_its_entry_can_be_abandoned_as_printed(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its input gone for good: the printed abandon removes its pairs and its marker; its events wait for a later
    batch (attack 58's 01: only a redo was offered, and `manifest abandon` refused a run the register lacked)."""
    database = batches / "manifest"
    runs = Outputs(batches, f"sqlite:{database}")
    assert runs.dedup("a", "out", RUN_A, "--create") == 0
    killed(runs, monkeypatch, "b", RUN_B)
    with sqlite3.connect(database) as db:
        db.execute("DELETE FROM winnow_runs")

    assert runs.dedup("c", "out", RUN_C) == 1
    line = error_line(capsys)
    abandon = shlex.split(line.split("If its input is gone for good, ", 1)[1].split(" abandons it", 1)[0])
    assert main(abandon[abandon.index("manifest") :]) == 0
    assert not (batches / "out" / "_registered" / f"run={RUN_B}.json").exists()
    assert runs.dedup("c", "out", RUN_C) == 0
    assert runs.dedup("b", "out", "2026-11-24-04-00-00") == 0  # the later batch that holds run B's events
    assert runs.delivered("out") == sorted(numbered_id(n) for n in range(15))


def test_an_older_copy_put_back_while_a_run_is_unfinished_is_back_filled_then_the_run_redone(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack 58's 07: run C killed, then the manifest put back as it was after run A. C's redo asked for the
    back-fill, which refused C's unfinished folder, and the back-fill of each folder alone recorded no completion:
    no printed way led on. The back-fill now leaves out an unfinished run of this manifest (its marker still stops
    every other run until it is redone)."""
    database = batches / "manifest"
    runs = Outputs(batches, f"sqlite:{database}")
    runs.older_copy_of_two_runs(database)
    killed(runs, monkeypatch, "c", RUN_C)
    part = batches / "out" / f"run={RUN_C}" / "good" / "part-00000.txt"
    part.parent.mkdir(parents=True)
    part.write_text("")  # what a kill while it wrote leaves
    shutil.copy(batches / "copy", database)  # the disk lost: last night's copy put back

    assert runs.dedup("c", "out", RUN_C) == 1  # the redo
    back_fill = error_line(capsys).split("back-fill the completed runs into it (", 1)[1].split(", and the same")[0]
    words = shlex.split(back_fill)
    assert main(words[words.index("populate-manifest") :]) == 0
    assert runs.dedup("c", "out", RUN_C) == 0
    assert runs.delivered("out") == sorted(numbered_id(n) for n in range(15))


def test_a_cut_marker_is_named_and_both_ways_on_complete(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack 58's 09: a run's marker cut short stopped every run, its redo included (a loop)."""
    database = batches / "manifest"
    runs = Outputs(batches, f"sqlite:{database}")
    assert runs.dedup("a", "out", RUN_A, "--create") == 0
    killed(runs, monkeypatch, "b", RUN_B)
    marker = batches / "out" / "_registered" / f"run={RUN_B}.json"
    marker.write_bytes(marker.read_bytes()[:40])

    assert runs.dedup("c", "out", RUN_C) == 1
    assert error_line(capsys).endswith(
        f"restore it from a copy, or remove {marker} and run again (the manifest's register still names that run if "
        "it did not complete, and the next run then prints its redo)"
    )
    marker.unlink()  # as the line says
    assert runs.dedup("c", "out", RUN_C) == 1  # the register's line: run B first
    assert f"run {RUN_B} recorded its events and has not completed" in error_line(capsys)

    marker.write_bytes(b'{"run_id": ')  # cut again: its own redo goes through all the same
    assert runs.dedup("b", "out", RUN_B) == 0
    assert runs.dedup("c", "out", RUN_C) == 0
    assert runs.delivered("out") == sorted(numbered_id(n) for n in range(15))
