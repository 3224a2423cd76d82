"""A run's identity is its run folder (output + run id), not its id: two pipelines sharing a manifest and a run id
are two runs; a redo replaces its attempt exactly; a run that can never be redone is abandoned (issue 44).

Runs "killed" after every manifest write fail in-process at their seal (what a kill there leaves: the manifest's
pairs, the register entry, no `_SUCCESS`); the leases are released on the way out, as a failed run releases them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.manifest.completions import LakeCompletedRuns, SqliteCompletedRuns
from jobs.runtime.cli import main
from tests.pipeline.helpers import PROG, error_line, event, job_words, killed_at_seal, read_lines
from tests.pipeline.helpers import numbered_id as uuid
from tests.pipeline.manifest_server import Faults, dynamodb_on_loopback

RUN_A, RUN_B = "2026-11-24-01-00-00", "2026-11-24-02-00-00"


def events(*numbers: int) -> list[str]:
    return [event(uuid(number)) for number in numbers]


def batch(path: Path, lines: list[str]) -> Path:
    path.mkdir(parents=True)
    (path / "part-0.tsv").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def dedup(input_path: Path, output: Path, run_id: str, manifest: str, *extra: str) -> list[str]:
    return ["dedup", "--input", str(input_path), "--output", str(output), "--run-id", run_id,
            "--manifest", manifest, *extra]  # fmt: skip


def good(output: Path, run_id: str) -> list[str]:
    assert (output / f"run={run_id}" / "_SUCCESS").exists()
    return read_lines(output / f"run={run_id}" / "good")


@pytest.fixture(params=["sqlite", "dynamodb", "lake"])
def manifest_uri(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A manifest of each backend (created by the first run's --create)."""
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'manifest.db'}"
    elif request.param == "lake":
        yield f"lake:{tmp_path / 'manifest'}"
    else:
        with dynamodb_on_loopback(Faults()) as endpoint:
            monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
            yield "dynamodb://events-manifest"


@pytest.fixture
def settings(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text('{"manifest": {"buckets": 4}}')  # a lake of 4 bucket files a segment, not 64: quicker
    return str(path)


@pytest.mark.parametrize("manifest_uri", ["sqlite", "dynamodb"], indirect=True)
def test_two_pipelines_sharing_a_manifest_and_a_run_id_are_two_runs(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    manifest_uri: str,
) -> None:  # fmt: skip
    manifest = manifest_uri
    web, mobile = tmp_path / "web", tmp_path / "mobile"
    assert main(dedup(batch(tmp_path / "web-a", events(0, 1, 2, 3)), web, RUN_A, manifest, "--create")) == 0
    # The same run id on another output, re-sending web's events: they were delivered, by another run.
    assert main(dedup(batch(tmp_path / "mobile-a", events(0, 1, 2, 3, 4, 5)), mobile, RUN_A, manifest)) == 0
    assert good(web, RUN_A) == sorted(events(0, 1, 2, 3))
    assert good(mobile, RUN_A) == sorted(events(4, 5))
    summary = json.loads((mobile / f"run={RUN_A}" / "summary.json").read_text())
    assert summary["by_reason"]["duplicates"] == {"cross_batch_natural": 4}
    # Web's run redone after mobile's of the same id (one second for both: which came first is in their
    # completions only): refused (attack 59's 04: a synthetic copy mobile filed counted as delivered before web's).
    assert main(dedup(tmp_path / "web-a", web, RUN_A, manifest)) == 2
    assert error_line(capsys).startswith(
        f"error: --run-id: run {RUN_A} completed in {web}/run={RUN_A}, and after it another output's run of the same "
        f"id on {manifest} (run key {RUN_A}~"
    )
    assert good(web, RUN_A) == sorted(events(0, 1, 2, 3))

    # Web's next run is killed after its manifest writes: mobile's run of the same id does not pass its entry.
    killed_at_seal(monkeypatch, dedup(batch(tmp_path / "web-b", events(10, 11, 12)), web, RUN_B, manifest))
    mobile_b = dedup(batch(tmp_path / "mobile-b", events(10, 11, 20)), mobile, RUN_B, manifest)
    assert main(mobile_b) == 1
    assert error_line(capsys).startswith(
        f"error: manifest {manifest}: run {RUN_B} recorded its events and has not completed (no "
        f"{web}/run={RUN_B}/_SUCCESS)"
    )
    assert main(dedup(tmp_path / "web-b", web, RUN_B, manifest)) == 0  # the printed redo
    assert main(mobile_b) == 0
    assert good(web, RUN_B) == sorted(events(10, 11, 12))
    assert good(mobile, RUN_B) == sorted(events(20))
    assert read_lines(mobile / f"run={RUN_B}" / "duplicates") == sorted(events(10, 11))


@pytest.mark.parametrize("manifest_uri", ["sqlite", "dynamodb"], indirect=True)
def test_a_redo_with_less_input_leaves_none_of_its_first_attempts_pairs(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, manifest_uri: str
) -> None:
    out, first = tmp_path / "out", tmp_path / "in-1"
    batch(first, events(0, 1, 2))
    (first / "part-1.tsv").write_text("".join(line + "\n" for line in events(3, 4, 5)), encoding="utf-8")
    killed_at_seal(monkeypatch, dedup(first, out, RUN_A, manifest_uri, "--create"))
    (first / "part-1.tsv").unlink()  # one of the two files lost: it comes later, in another batch
    assert main(dedup(first, out, RUN_A, manifest_uri)) == 0
    assert good(out, RUN_A) == sorted(events(0, 1, 2))
    assert main(dedup(batch(tmp_path / "in-2", events(3, 4, 5, 0)), out, RUN_B, manifest_uri)) == 0
    assert good(out, RUN_B) == sorted(events(3, 4, 5))  # delivered once, by the run that has them
    assert read_lines(out / f"run={RUN_B}" / "duplicates") == events(0)


def test_a_run_that_can_never_be_redone_is_abandoned(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    manifest_uri: str, settings: str,
) -> None:  # fmt: skip
    out, first = tmp_path / "out", tmp_path / "in-1"
    killed_at_seal(monkeypatch, dedup(batch(first, events(0, 1, 2)), out, RUN_A, manifest_uri, "--create",
                                      "--config", settings))  # fmt: skip
    (first / "part-0.tsv").unlink()  # its input is gone for good
    if manifest_uri.startswith("lake:"):  # and its register file lost: the run's commit still holds its entry
        shutil.rmtree(Path(manifest_uri.removeprefix("lake:")) / "_runs")
    second = dedup(batch(tmp_path / "in-2", events(0, 1, 7)), out, RUN_B, manifest_uri, "--config", settings)
    assert main(second) == 1
    line = error_line(capsys)
    abandon = f"{PROG} manifest abandon --manifest {manifest_uri} --output {out} --run-id {RUN_A}"
    assert f"If its input is gone for good, {abandon} abandons it (its events then wait for a later batch). " in line
    if manifest_uri.startswith("sqlite:"):  # refused while a writer holds the manifest
        lease = Path(f"{manifest_uri.removeprefix('sqlite:')}.lease")
        lease.write_text(
            json.dumps({"job": "dedup", "run_id": "x", "host": "h", "pid": 1, "started_at": "now", "token": "t"})
        )
        assert main(job_words(abandon)) == 1
        assert "is being written by" in error_line(capsys)
        lease.unlink()
    elsewhere = job_words(abandon.replace(f"--output {out}", f"--output {tmp_path / 'other'}"))
    assert main(elsewhere) == 2  # not a run of that output: refused, nothing changed (not "abandoned", exit 0)
    assert error_line(capsys).endswith(f"run {RUN_A} is registered for {out}/run={RUN_A}: give --output the folder "
                                       "that holds that run=ID (for a `run`, its OUT/deduplicated)")  # fmt: skip
    assert main(job_words(abandon)) == 0  # the printed way out, word for word
    assert f"run {RUN_A} is abandoned: its events are in no completed output" in capsys.readouterr().out
    assert main(second) == 0
    assert good(out, RUN_B) == sorted(events(0, 1, 7))  # the abandoned run's events, delivered by a later batch
    assert main(job_words(abandon.replace(RUN_A, RUN_B))) == 2  # a completed run: nothing to abandon
    assert error_line(capsys).startswith(f"error: --run-id: run {RUN_B} of {out} completed")


def test_a_completed_runs_stopped_redo_is_held_to_its_input_when_its_folders_marker_is_removed(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    manifest_uri: str, settings: str,
) -> None:  # fmt: skip
    """FAULTS 4 and 2 (a file of the state removed; a redo with less input).

    Given: run A delivers 0-5, run B (later) delivers 6-7 and finds 3-5 as A's copies; A's redo stops at its seal
    (its folder holds `_COMPLETED_BEFORE`, no `_SUCCESS`); the marker is removed by hand, and A's second file is gone.
    Before (attack 7): the redo was taken for a never-completed run's: exit 0, and 3-5 were in no completed good/.
    Now the register entry remembers that A completed: the shrunk redo is refused, `manifest abandon` too, a later
    run prints only the redo; with the file back, the redo leaves every event once.
    """
    out, first = tmp_path / "out", tmp_path / "in-1"
    batch(first, events(0, 1, 2))
    (first / "part-1.tsv").write_text("".join(line + "\n" for line in events(3, 4, 5)), encoding="utf-8")
    options = ("--config", settings)
    assert main(dedup(first, out, RUN_A, manifest_uri, "--create", *options)) == 0
    assert main(dedup(batch(tmp_path / "in-2", events(3, 4, 5, 6, 7)), out, RUN_B, manifest_uri, *options)) == 0
    killed_at_seal(monkeypatch, dedup(first, out, RUN_A, manifest_uri, *options))
    (out / f"run={RUN_A}" / "_COMPLETED_BEFORE").unlink()
    part = (first / "part-1.tsv").read_bytes()
    (first / "part-1.tsv").unlink()
    capsys.readouterr()
    assert main(dedup(first, out, RUN_A, manifest_uri, *options)) == 2
    assert error_line(capsys).startswith(
        f"error: --input: run {RUN_A} completed in {out / f'run={RUN_A}'}, recording 3 event(s) in "
    )
    assert main(["manifest", "abandon", "--manifest", manifest_uri, "--output", str(out), "--run-id", RUN_A]) == 2
    assert f"run {RUN_A} of {out} completed (its entry in the register of " in error_line(capsys)
    later = dedup(batch(tmp_path / "in-3", events(8)), out, "2026-11-24-03-00-00", manifest_uri, *options)
    assert main(later) == 1
    line = error_line(capsys)
    assert f"run {RUN_A} completed, and a redo of it stopped before its seal" in line and "abandon" not in line
    (first / "part-1.tsv").write_bytes(part)
    assert main(dedup(first, out, RUN_A, manifest_uri, *options)) == 0
    assert main(later) == 0
    delivered = [line for run in sorted(out.glob("run=*")) for line in read_lines(run / "good")]
    assert sorted(delivered) == sorted(events(*range(9)))


def test_a_cut_marker_of_a_completed_runs_stopped_redo_stops_the_redo_naming_it(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """FAULTS 4 and 2: `_COMPLETED_BEFORE` cut while a completed run's redo is stopped before its seal. Before (attack
    10B's 05): the folder read as a never-completed run's, so the redo without the manifest it completed with passed,
    exit 0, and the events later runs had found as its copies were delivered again. Now the marker is named, and with
    it restored the redo is held to its manifest again."""
    out, manifest = tmp_path / "out", f"sqlite:{tmp_path / 'manifest.db'}"
    first = batch(tmp_path / "in-1", events(0, 1, 2))
    assert main(dedup(first, out, RUN_A, manifest, "--create")) == 0
    assert main(dedup(batch(tmp_path / "in-2", events(1, 2, 3)), out, RUN_B, manifest)) == 0
    killed_at_seal(monkeypatch, dedup(first, out, RUN_A, manifest))
    marker = out / f"run={RUN_A}" / "_COMPLETED_BEFORE"
    whole = marker.read_bytes()
    marker.write_bytes(whole[: len(whole) // 2])
    without_manifest = ["dedup", "--input", str(first), "--output", str(out), "--run-id", RUN_A]
    capsys.readouterr()
    assert main(without_manifest) == 1
    assert error_line(capsys) == (
        f"error: {marker} is damaged (not a whole JSON document): it is the summary.json of run {RUN_A}, which "
        "completed, kept while a redo of it has not sealed; without it the redo could not be held to the manifest and "
        "input the run completed with. Restore it from a copy (or put the run's summary.json from a backup in its "
        "place), then run again; nothing was written"
    )
    marker.write_bytes(whole)  # restored as printed
    assert main(without_manifest) == 2  # held to its manifest again
    assert main(dedup(first, out, RUN_A, manifest)) == 0
    delivered = [line for run in sorted(out.glob("run=*")) for line in read_lines(run / "good")]
    assert sorted(delivered) == sorted(events(0, 1, 2, 3))  # 93cc664: 1 and 2 twice


def test_the_completions_of_a_run_id_are_every_outputs_run_of_it(tmp_path: Path) -> None:
    """`of_run_id` (read by a completed run's redo, above) on SQLite and the lake; DynamoDB's: above, on moto."""
    for completions in (SqliteCompletedRuns(str(tmp_path / "m.db")), LakeCompletedRuns(str(tmp_path / "lake"))):
        for key, attempt in ((f"{RUN_A}~aa", "1"), (f"{RUN_A}~bb", "2"), (f"{RUN_B}~aa", "3")):
            completions.record(key, attempt, 2**31, str(tmp_path / key[-2:]))
        assert completions.of_run_id(RUN_A) == {f"{RUN_A}~aa": "1", f"{RUN_A}~bb": "2"}
        assert completions.of_run_id("2026-01-01-00-00-00") == {}
