"""Seams found by the attacks on issue 44 along ../shared/FAULTS.md (dedup with a manifest): a redo of a completed
run, back-fills from an output folder, and the printed ways out of a stopped run (ledger damage:
`test_ledger_damage.py`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.dedup.populate import delivered_files
from jobs.errors import InvalidArgumentError
from jobs.fs.run_folder import RunFolder
from jobs.runtime.cli import main
from tests.pipeline.helpers import (
    error_line,
    good_everywhere,
    job_words,
    killed_after_clear,
    killed_at_seal,
    numbered_events,
    read_lines,
    write_lines,
)

RUN_A, RUN_C, RUN_B = "2026-12-01-01-00-00", "2026-12-01-01-30-00", "2026-12-01-02-00-00"
RUN_C_LATER = "2026-12-01-03-00-00"


def dedup(input_path: Path, output: Path, run_id: str, manifest: str, *extra: str) -> list[str]:
    return ["dedup", "--input", str(input_path), "--output", str(output), "--run-id", run_id,
            "--manifest", manifest, *extra]  # fmt: skip


@pytest.mark.parametrize("backend", ["sqlite", "lake"])
def test_a_completed_runs_redo_with_less_input_is_refused_and_either_way_out_keeps_every_event_once(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    """FAULTS 2 (redo in a changed world: input shrank, after later runs completed).

    Given: run A delivers events 0-9; run B, later, reads events 5-14 and delivers 10-14 (5-9 are cross-batch
    copies of A's: in B's duplicates/). Then A's input loses its second half and A is rerun with the same id.
    Before: exit 0; A's folder held 0-4, and the rerun removed A's manifest entries of 5-9, so events 5-9 were in
    no completed good/ and no later batch was told to deliver them (5 of 15 events lost, silently).
    Now: refused before anything is written; both printed ways out (a new run id for the changed batch, or the
    input restored) leave every event of 0-14 in exactly one completed good/.
    """
    manifest = f"sqlite:{tmp_path / 'manifest.db'}" if backend == "sqlite" else f"lake:{tmp_path / 'lake'}"
    out, config = tmp_path / "out", tmp_path / "config.json"
    config.write_text('{"manifest": {"buckets": 4}}')  # a lake of 4 bucket files a segment, not 64: quicker
    settings = ("--config", str(config))
    write_lines(tmp_path / "in-a" / "part-0.tsv", numbered_events(range(0, 5)))
    write_lines(tmp_path / "in-a" / "part-1.tsv", numbered_events(range(5, 10)))
    write_lines(tmp_path / "in-b" / "part-0.tsv", numbered_events(range(5, 15)))
    assert main(dedup(tmp_path / "in-a", out, RUN_A, manifest, "--create", *settings)) == 0
    assert main(dedup(tmp_path / "in-b", out, RUN_B, manifest, *settings)) == 0
    assert read_lines(out / f"run={RUN_B}" / "good") == sorted(numbered_events(range(10, 15)))
    part = (tmp_path / "in-a" / "part-1.tsv").read_bytes()
    (tmp_path / "in-a" / "part-1.tsv").unlink()
    capsys.readouterr()
    assert main(dedup(tmp_path / "in-a", out, RUN_A, manifest, *settings)) == 2
    assert error_line(capsys) == (
        f"error: --input: run {RUN_A} completed in {out / f'run={RUN_A}'}, recording 5 event(s) in {manifest} that "
        "this input no longer holds; a redo would take them out of the manifest, and a later run may have found "
        "them as copies, so they would be in no completed output. Allowed: the input it completed with (restore "
        "the files), or a new run id for the changed batch (the completed run stays as it is). Nothing was written"
    )
    assert good_everywhere(out) == sorted(numbered_events(range(0, 15)))  # A's completed folder as it was
    assert main(dedup(tmp_path / "in-a", out, RUN_C_LATER, manifest, *settings)) == 0  # a new run id: 0-4 are copies
    assert read_lines(out / f"run={RUN_C_LATER}" / "good") == []
    (tmp_path / "in-a" / "part-1.tsv").write_bytes(part)  # or the input it completed with: the redo is allowed
    assert main(dedup(tmp_path / "in-a", out, RUN_A, manifest, *settings)) == 0
    assert good_everywhere(out) == sorted(numbered_events(range(0, 15)))


@pytest.mark.parametrize("lost", ["a file it completed with", "a file its stopped redo read besides"])
def test_a_completed_runs_redo_stopped_before_its_seal_is_still_refused_less_input(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    lost: str,
) -> None:
    """FAULTS 1 and 2 (a redo killed, then redone in a changed world).

    Given: run A delivers events 0-9, run B (later) delivers 10-14 and finds 5-9 as A's copies; A is redone with its
    whole input and the redo dies at its seal (A's folder cleared and rewritten, no `_SUCCESS`); then A's input loses
    its second half. Before: the shrunk redo was let through (the check looked for `_SUCCESS` only): exit 0, and
    5-9 were in no completed good/. Now: refused, naming the marker the stopped redo left; the redo with the
    input restored (the printed way out) leaves every event of 0-14 in exactly one completed good/. Attack 7: when
    the stopped redo had read a file more (events 15-19) and that file is gone again, the line said "only the input
    it completed with may redo it", which A's input then was: no printed way on; it names that file's kind now,
    and with it back the redo delivers 15-19 once. The marker is the
    run folder's, whatever the backend (`Manifest.leftovers`, which counts the run's entries, is tested on each by
    the test above); attack 6 found it on SQLite, DynamoDB and the lake alike.
    """
    manifest, out = f"sqlite:{tmp_path / 'manifest.db'}", tmp_path / "out"
    write_lines(tmp_path / "in-a" / "part-0.tsv", numbered_events(range(0, 5)))
    write_lines(tmp_path / "in-a" / "part-1.tsv", numbered_events(range(5, 10)))
    write_lines(tmp_path / "in-b" / "part-0.tsv", numbered_events(range(5, 15)))
    assert main(dedup(tmp_path / "in-a", out, RUN_A, manifest, "--create")) == 0
    assert main(dedup(tmp_path / "in-b", out, RUN_B, manifest)) == 0
    besides = lost != "a file it completed with"
    if besides:
        write_lines(tmp_path / "in-a" / "part-2.tsv", numbered_events(range(15, 20)))
    killed_at_seal(monkeypatch, dedup(tmp_path / "in-a", out, RUN_A, manifest))
    marker = out / f"run={RUN_A}" / "_COMPLETED_BEFORE"
    assert marker.exists() and not (out / f"run={RUN_A}" / "_SUCCESS").exists()
    gone = tmp_path / "in-a" / ("part-2.tsv" if besides else "part-1.tsv")
    part = gone.read_bytes()
    gone.unlink()
    capsys.readouterr()
    assert main(dedup(tmp_path / "in-a", out, RUN_A, manifest)) == 2
    assert error_line(capsys) == (
        f"error: --input: run {RUN_A} completed in {out / f'run={RUN_A}'}, recording 5 event(s) in {manifest} that "
        "this input no longer holds; a redo would take them out of the manifest, and a later run may have found "
        f"them as copies, so they would be in no completed output. A redo of it stopped before its seal (no "
        f"{out / f'run={RUN_A}' / '_SUCCESS'}), "
        "so only an input holding them may redo it: the files it completed with, and any file its stopped redo read "
        "besides; restore them, then run again. Nothing was written"
    )
    gone.write_bytes(part)
    assert main(dedup(tmp_path / "in-a", out, RUN_A, manifest)) == 0
    assert good_everywhere(out) == sorted(numbered_events(range(0, 20 if besides else 15)))
    assert not marker.exists()  # sealed again: the marker goes with the redo's seal


@pytest.mark.parametrize("backend", ["sqlite", "lake"])
def test_a_completed_runs_redo_killed_while_writing_stops_later_runs_until_it_is_redone_with_its_manifest(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    backend: str,
) -> None:
    """FAULTS 1, 2 and 3 (a redo killed while writing; redone with other options; the printed way out).

    Given: run A delivers events 0-9, run B (later) delivers 10-14 and finds 5-9 as A's copies; A is redone with its
    whole input and the redo dies while writing (A's completed folder cleared, `_COMPLETED_BEFORE` left).
    Before (attack 7): on the lake, run C then completed (exit 0; the redo registered only at its commit), so 5-9 were
    in no completed good/ and nothing named A again; on SQLite, C printed `manifest abandon` as a way out, which
    removed A's pairs (exit 0), and C then lost 5-9 the same way; a redo of A with no --manifest (or another one)
    was let through, exit 0, checking nothing. Now: C stops naming A's redo, abandon and a redo with another
    manifest are refused, and the redo as printed leaves every event once. The runs name the manifest by a relative
    path and the printed redo is run from another folder (attack 8: summary.json recorded the path as given, so the
    printed redo, which names it whole, was refused as another manifest: stuck).
    """
    monkeypatch.chdir(tmp_path)
    given = "sqlite:manifest.db" if backend == "sqlite" else "lake:lake"
    manifest = f"sqlite:{tmp_path / 'manifest.db'}" if backend == "sqlite" else f"lake:{tmp_path / 'lake'}"
    out, config = tmp_path / "out", tmp_path / "config.json"
    config.write_text('{"manifest": {"buckets": 4}}')
    settings = ("--config", str(config))
    write_lines(tmp_path / "in-a" / "part-0.tsv", numbered_events(range(0, 10)))
    write_lines(tmp_path / "in-b" / "part-0.tsv", numbered_events(range(5, 15)))
    write_lines(tmp_path / "in-c" / "part-0.tsv", numbered_events(range(20, 25)))
    assert main(dedup(tmp_path / "in-a", out, RUN_A, given, "--create", *settings)) == 0
    assert main(dedup(tmp_path / "in-b", out, RUN_B, given, *settings)) == 0
    without = ["dedup", "--input", str(tmp_path / "in-a"), "--output", str(out), "--run-id", RUN_A, *settings]
    assert main(without) == 2  # the sealed run, redone without its manifest
    assert error_line(capsys) == (
        f"error: --manifest: run {RUN_A} completed in {out / f'run={RUN_A}'} with {manifest}, and this redo gives "
        f"none: it could not check the events later runs decided against there. Allowed: --manifest {manifest} (as "
        "it completed), or a new run id for the batch. Nothing was written"
    )

    def dying(*_: object, **__: object) -> None:
        raise RuntimeError("killed while writing")

    with monkeypatch.context() as patched:
        patched.setattr(RunFolder, "write_text_split", dying)
        assert main(dedup(tmp_path / "in-a", out, RUN_A, manifest, *settings)) == 1
    marker = out / f"run={RUN_A}" / "_COMPLETED_BEFORE"
    assert marker.exists() and not (out / f"run={RUN_A}" / "good").exists()
    capsys.readouterr()
    assert main(dedup(tmp_path / "in-c", out, RUN_C_LATER, manifest, *settings)) == 1
    line = error_line(capsys)
    stopped = (
        f"error: manifest {manifest}: run {RUN_A} completed, and a redo of it stopped before its seal (no "
        f"{out / f'run={RUN_A}' / '_SUCCESS'}): its "
        "events are in no completed output now, and later runs decided against them; nothing was written. Redo it "
        "first, with the input it completed with: "
    )
    assert line.startswith(stopped), line
    assert main(["manifest", "abandon", "--manifest", manifest, "--output", str(out), "--run-id", RUN_A]) == 2
    assert main([*without, "--manifest", f"sqlite:{tmp_path / 'other.db'}", "--create"]) == 2
    assert not (tmp_path / "other.db").exists()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the relative path, given from another folder: another manifest
    assert main([*without, "--manifest", given, "--create"]) == 2
    # A summary of an earlier version holds the path as given (attack 8: a redo from another folder with --create
    # made an empty manifest there, taken for the one the run completed with): the redo never makes its manifest.
    summary = out / f"run={RUN_A}" / "_COMPLETED_BEFORE"
    completed = json.loads(summary.read_text())
    summary.write_text(json.dumps({**completed, "manifest": {**completed["manifest"], "uri": given}}))
    assert main([*without, "--manifest", given, "--create"]) == 2
    assert not (tmp_path / "elsewhere" / given.split(":")[1]).exists()
    summary.write_text(json.dumps(completed))
    monkeypatch.chdir("/")
    assert main(job_words(line.removeprefix(stopped))) == 0  # the way out, as printed, from another folder
    assert main(dedup(tmp_path / "in-c", out, RUN_C_LATER, manifest, *settings)) == 0
    assert good_everywhere(out) == sorted(numbered_events([*range(0, 15), *range(20, 25)]))


@pytest.mark.parametrize("option", ["--output", "--input", "--manifest"])
def test_a_line_break_in_a_path_argument_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    """FAULTS 5 (names are data: a newline in a path argument) with FAULTS 1 (a killed run's printed way out).
    Before: dedup into `out\\nweb` (sqlite manifest), killed after its manifest writes, stopped the next run with a
    line naming the folder `out web` (the one-line message turned the newline into a space): the redo pasted as
    printed wrote another folder and stopped the same way, and the printed abandon found no such run: stuck. A path
    argument holding a line break is now refused before anything is written."""
    write_lines(tmp_path / "in" / "part-0.tsv", numbered_events(range(0, 5)))
    paths = {"--input": str(tmp_path / "in"), "--output": str(tmp_path / "out"),
             "--manifest": f"sqlite:{tmp_path / 'manifest.db'}"}  # fmt: skip
    paths[option] = paths[option] + "\nweb"
    argv = ["dedup", "--run-id", RUN_A, "--create", *(word for pair in paths.items() for word in pair)]
    assert main(argv) == 2
    assert error_line(capsys) == (
        f"error: {option}: given {paths[option]!r}: a name holding a line break cannot be named in the one-line "
        "messages and commands a run prints (its way out); allowed: names without line breaks. Rename it; nothing "
        "was written"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in"]


def test_the_printed_abandon_names_a_relative_manifest_by_its_absolute_path(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """FAULTS 1/2 (follow every printed line exactly as printed, from a pasted printed command).

    Given: in folder W, dedup run A with `--manifest sqlite:manifest.db` (relative) is killed after its manifest
    writes; run B (the same relative manifest) stops with "run A recorded its events and has not completed … If its
    input is gone for good, PROG manifest abandon --manifest sqlite:manifest.db --output /abs/out --run-id A
    abandons it".
    Happened: the abandon command keeps the manifest relative (its redo command, on the same line, makes it
    absolute), so pasted in another folder it answers `manifest sqlite:manifest.db: … does not exist; run once with
    --create …` (exit 2): the printed way out works only from W (docs/operations.md: "A command a message prints
    runs as printed from any folder"). A `lake:` manifest the same (`no _manifest.json in /…`, seen by hand).
    Expected: the printed abandon names the manifest by its absolute path and, pasted anywhere, abandons run A.
    """
    work, out = tmp_path / "work", tmp_path / "out"
    write_lines(work / "in-a" / "part-0.tsv", numbered_events(range(0, 5)))
    write_lines(work / "in-b" / "part-0.tsv", numbered_events(range(5, 10)))
    monkeypatch.chdir(work)
    killed_at_seal(monkeypatch, dedup(Path("in-a"), out, RUN_A, "sqlite:manifest.db", "--create"))
    assert main(dedup(Path("in-b"), out, RUN_B, "sqlite:manifest.db")) == 1
    line = error_line(capsys)
    abandon = line.split("If its input is gone for good, ", 1)[1].split(" abandons it", 1)[0]
    monkeypatch.chdir(tmp_path)
    assert main(job_words(abandon)) == 0, error_line(capsys)


@pytest.mark.parametrize("unfinished", ["killed at its seal", "completed, its redo killed after clearing it",
                                        "killed before it wrote"])  # fmt: skip
def test_a_backfill_from_an_output_folder_records_only_what_completed_runs_delivered(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    unfinished: str,
) -> None:
    """FAULTS 3 (a manifest moved between backends while a run is unfinished).

    Given: on a SQLite manifest, run A delivers events 0-4 (a copy of event 0 in its duplicates/) and run B (5-9) is
    unfinished: killed at its seal, its good/ in place; or completed, then its redo killed right after it cleared
    B's folder (`_COMPLETED_BEFORE` alone in it); or killed before it wrote (a hidden `_staging/` alone). The
    manifest is moved to a lake with `populate-manifest` over the output folder. Before: the back-fill read every
    file under it, B's unsealed good/ too (exit 0); in the other two it saw no run folder (found only by its
    visible files; attack 7), exit 0 with none of B's events recorded, though a completed B's may have been found
    as copies by later runs. Now: refused while B has not completed; once B is redone, only the completed runs'
    good/ is recorded (duplicates/ left out, counted), and the next run on the lake delivers every event once.
    """
    out, sqlite, lake = tmp_path / "out", f"sqlite:{tmp_path / 'manifest.db'}", f"lake:{tmp_path / 'lake'}"
    config = tmp_path / "config.json"
    config.write_text('{"manifest": {"buckets": 4}}')
    write_lines(tmp_path / "in-a" / "part-0.tsv", numbered_events([0, 1, 2, 3, 4, 0]))
    write_lines(tmp_path / "in-b" / "part-0.tsv", numbered_events(range(5, 10)))
    write_lines(tmp_path / "in-c" / "part-0.tsv", numbered_events(range(0, 11)))
    assert main(dedup(tmp_path / "in-a", out, RUN_A, sqlite, "--create")) == 0
    if unfinished == "killed at its seal":
        killed_at_seal(monkeypatch, dedup(tmp_path / "in-b", out, RUN_B, sqlite))
    elif unfinished == "killed before it wrote":
        write_lines(out / f"run={RUN_B}" / "_staging" / "folder=good" / "part-0.txt", numbered_events(range(5, 10)))
    else:
        assert main(dedup(tmp_path / "in-b", out, RUN_B, sqlite)) == 0
        killed_after_clear(monkeypatch, dedup(tmp_path / "in-b", out, RUN_B, sqlite))
        assert [path.name for path in (out / f"run={RUN_B}").iterdir() if not path.name.startswith(".")] == [
            "_COMPLETED_BEFORE"
        ]
    populate = ["populate-manifest", "--input", str(out), "--manifest", lake, "--config", str(config),
                "--run-id", RUN_C]  # fmt: skip
    capsys.readouterr()
    assert main([*populate, "--create"]) == 2
    assert error_line(capsys) == (
        f"error: --input: {out} holds 1 dedup run folder(s) without _SUCCESS: {out}/run={RUN_B}; a run that has not "
        "completed delivered none of its events, so they are not recorded as delivered. Allowed: completed run "
        "folders only: complete each (its redo, as its manifest's message prints) or give an --input without it. "
        "Nothing was written"
    )
    assert not (tmp_path / "lake").exists()  # nothing written: not even the manifest --create asked for

    assert main(dedup(tmp_path / "in-b", out, RUN_B, sqlite)) == 0  # B completed: its redo
    capsys.readouterr()
    assert main([*populate, "--create"]) == 0
    summary = capsys.readouterr().out
    assert [line.split() for line in summary.splitlines() if "left out" in line or "pairs recorded" in line] == [
        ["pairs", "recorded", "10"],
        ["files", "left", "out:", "duplicates/", "1"],
        ["files", "left", "out:", "summary.json", "2"],
    ]  # B's events with A's: the good/ of completed runs only
    assert main(dedup(tmp_path / "in-c", out, RUN_C_LATER, lake, "--config", str(config))) == 0
    assert read_lines(out / f"run={RUN_C_LATER}" / "good") == numbered_events([10])
    assert good_everywhere(out) == sorted(numbered_events(range(0, 11)))


def test_a_backfill_reads_an_archive_run_folder_without_success_as_input(tmp_path: Path) -> None:
    """A `run=ID/` folder of the Snowplow enriched archive (its part files directly in it, no `_SUCCESS`) is not a
    dedup run folder: read whole, not refused, while an unsealed dedup run folder beside it is refused."""
    archive = tmp_path / "archive"
    write_lines(archive / f"run={RUN_A}" / "part-0.tsv", numbered_events([0]))
    assert delivered_files(str(archive))[0].paths == [str(archive / f"run={RUN_A}" / "part-0.tsv")]
    (archive / f"run={RUN_B}").mkdir()
    (archive / f"run={RUN_B}" / "_COMPLETED_BEFORE").touch()
    refused = re.escape(f"1 dedup run folder(s) without _SUCCESS: {archive}/run={RUN_B};")
    with pytest.raises(InvalidArgumentError, match=refused):
        delivered_files(str(archive))


def test_a_backfill_from_a_run_output_reads_only_its_deduplicated_good(tmp_path: Path) -> None:
    """A `run` output (`OUT/deduplicated/run=ID/`, `OUT/shredded/run=ID/`): only the completed dedup runs' good/ is
    read. Before: the shred's files (and `shredding_complete.json`) were read as enriched lines (attack 7: "2,891 bad
    lines (skipped)"), and a dedup run folder a stopped redo had cleared under `deduplicated/` was not seen."""
    out = tmp_path / "out"
    dedup_run, shred_run = out / "deduplicated" / f"run={RUN_A}", out / "shredded" / f"run={RUN_A}"
    for path in [dedup_run / "good" / "part-0.txt", dedup_run / "duplicates" / "part-0.txt",
                 shred_run / "atomic-events" / "part-0.txt", shred_run / "shredded-types" / "part-0.txt"]:  # fmt: skip
        write_lines(path, numbered_events([0]))
    for path in [dedup_run / "summary.json", shred_run / "summary.json", shred_run / "shredding_complete.json"]:
        path.write_text("{}")
    (dedup_run / "_SUCCESS").touch()
    (shred_run / "_SUCCESS").touch()
    listing, left_out = delivered_files(str(out))
    assert listing.paths == [str(dedup_run / "good" / "part-0.txt")]
    assert left_out == {"duplicates/": 1, "shredded/": 4, "summary.json": 1}
    (out / "deduplicated" / f"run={RUN_B}").mkdir()
    (out / "deduplicated" / f"run={RUN_B}" / "_COMPLETED_BEFORE").touch()
    refused = re.escape(f"1 dedup run folder(s) without _SUCCESS: {out}/deduplicated/run={RUN_B};")
    with pytest.raises(InvalidArgumentError, match=refused):
        delivered_files(str(out))
