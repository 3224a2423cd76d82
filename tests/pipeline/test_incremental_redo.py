"""Incremental runs redone after a file of their ledger entry went away (FAULTS 2: a redo after the input vanished),
through the command line, with a SQLite manifest, each printed way out followed as printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.runtime.cli import main
from tests.pipeline.helpers import error_line, good_everywhere, job_words, killed_at_seal, numbered_events, write_lines

RUN_A, RUN_B, RUN_C = "2026-11-24-02-00-00", "2026-11-24-03-00-00", "2026-11-24-04-00-00"


def dedup(root: Path, output: Path, run_id: str, manifest: str, config: Path, *extra: str) -> list[str]:
    return ["dedup", "--input", str(root), "--output", str(output), "--run-id", run_id, "--incremental",
            "--manifest", manifest, "--config", str(config), *extra]  # fmt: skip


def test_a_stopped_runs_redo_after_a_file_went_away_names_it_and_reads_the_rest_when_told(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run A (two files) stops at its seal; one of its files goes away for good. Before (attack 8): the printed redo
    failed on Spark's `[PATH_NOT_FOUND] Path does not exist`, and so did every printed way on (stuck). Now the redo
    names the file and the way out; with `input.skip_unreadable` it reads the rest and lists the file as skipped,
    and the file, once back, is taken by a later run: every event once."""
    root, out, config = tmp_path / "in" / "2026" / "11" / "24", tmp_path / "out", tmp_path / "config.json"
    manifest = f"sqlite:{tmp_path / 'manifest.db'}"
    config.write_text("{}")
    write_lines(root / "01" / "part-0.tsv", numbered_events(range(0, 5)))
    write_lines(root / "01" / "part-1.tsv", numbered_events(range(5, 10)))
    killed_at_seal(monkeypatch, dedup(tmp_path / "in", out, RUN_A, manifest, config, "--create"))
    gone = root / "01" / "part-1.tsv"
    kept = gone.read_bytes()
    gone.unlink()
    write_lines(root / "02" / "part-0.tsv", numbered_events(range(10, 12)))
    later = dedup(tmp_path / "in", out, RUN_B, manifest, config)
    capsys.readouterr()
    assert main(later) == 1
    redo = error_line(capsys).split("Else redo it first: ", 1)[1]
    assert main(job_words(redo)) == 1  # the redo as printed
    assert error_line(capsys) == (
        f"error: --incremental: run {RUN_A} has not completed, and 1 file(s) of its ledger entry 1 went away since "
        f"it listed them: {gone}. Restore them, then run again; if they are gone for good, set "
        "input.skip_unreadable: true and run again: the redo reads the rest and lists them in summary.json (a later "
        "run takes them if they come back); nothing was written"
    )
    config.write_text(json.dumps({"input": {"skip_unreadable": True}}))
    assert main(job_words(redo)) == 0
    summary = json.loads((out / f"run={RUN_A}" / "summary.json").read_text())
    assert [skipped["path"] for skipped in summary["input_files"]["unreadable"]] == [f"file://{gone}"]
    assert summary["counts"]["input"] == 5
    assert main(later) == 0
    gone.write_bytes(kept)  # it comes back: a later run takes it
    assert main(dedup(tmp_path / "in", out, RUN_C, manifest, config)) == 0
    assert good_everywhere(out) == sorted(numbered_events(range(0, 12)))


def test_a_completed_runs_redo_after_a_file_went_away_is_refused_before_anything_is_written(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before (attack 8): Spark's `[PATH_NOT_FOUND]`, naming no way out. Now refused at planning, the completed
    output kept as it was."""
    root, out, config = tmp_path / "in" / "2026" / "11" / "24", tmp_path / "out", tmp_path / "config.json"
    manifest = f"sqlite:{tmp_path / 'manifest.db'}"
    config.write_text(json.dumps({"input": {"skip_unreadable": True}}))  # not even with it
    write_lines(root / "01" / "part-0.tsv", numbered_events(range(0, 5)))
    write_lines(root / "01" / "part-1.tsv", numbered_events(range(5, 10)))
    assert main(dedup(tmp_path / "in", out, RUN_A, manifest, config, "--create")) == 0
    (root / "01" / "part-1.tsv").unlink()
    capsys.readouterr()
    assert main(dedup(tmp_path / "in", out, RUN_A, manifest, config)) == 1
    assert error_line(capsys) == (
        f"error: --incremental: run {RUN_A} completed, and 1 file(s) it read changed or went away since (size or "
        f"ETag/time differ from ledger entry 1, or not listed): {root / '01' / 'part-1.tsv'} (gone); a redo would "
        "not give its output again. Restore them; nothing was written"
    )
    assert good_everywhere(out) == sorted(numbered_events(range(0, 10)))
