"""An older copy of a manifest put back in its place is found by the next run of an output that used it,
before it writes anything; the back-fill the line prints, pasted as printed, lets runs go on with nothing delivered
twice (`jobs.dedup.stale`)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
from pathlib import Path

import boto3
import pytest
from pyspark.sql import SparkSession

from jobs.dedup import bookkeeping
from jobs.manifest.base import RegisteredRun
from jobs.manifest.completions import SqliteCompletedRuns
from jobs.manifest.unfinished import LakeRunRegister, RunRegister, SqliteRunRegister
from jobs.runtime.cli import main
from tests.pipeline.helpers import error_line, numbered_id, read_lines
from tests.pipeline.helpers import numbered_events as events
from tests.pipeline.helpers import write_lines as write
from tests.pipeline.manifest_server import Faults, dynamodb_on_loopback
from tests.pipeline.test_unfinished_runs import completed_ids, operator_shell

RUN_A, RUN_B, RUN_C = "2026-11-24-01-00-00", "2026-11-24-02-00-00", "2026-11-24-03-00-00"


def pasted_back_fill(line: str) -> str:
    """The back-fill command a stale-manifest line prints."""
    return line.split("back-fill the completed runs into it (", 1)[1].split(", and the same", 1)[0]


def stop_line(capsys: pytest.CaptureFixture[str], run_id: str, output: Path) -> str:
    """The line that stopped a run as the manifest lacks run `run_id` of `output`."""
    line = error_line(capsys)
    assert f"is an older copy: run {run_id} of {output} completed with it" in line, line
    return line


def paste(command: str) -> None:
    """`command` pasted into an operator's shell, from `/`."""
    pasted = subprocess.run(["bash", "-c", command], cwd="/", env=operator_shell(), capture_output=True, text=True,
                            timeout=600)  # fmt: skip
    assert pasted.returncode == 0, pasted.stderr


def follow(command: str) -> None:
    """The printed `populate-manifest` command, its words as printed, run in this process (a shell's paste is
    tested once, above: a Spark start each)."""
    words = shlex.split(command)
    assert main(words[words.index("populate-manifest") :]) == 0


def put_back(copy: Path, place: Path) -> None:
    """A copy of the manifest (a file, or the lake's folder) in its place."""
    if copy.is_dir():
        shutil.rmtree(place, ignore_errors=True)
        shutil.copytree(copy, place)
    else:  # as docs/operations.md says: the file, without the write-ahead log of the one it replaces
        for log in (place.with_name(f"{place.name}-wal"), place.with_name(f"{place.name}-shm")):
            log.unlink(missing_ok=True)
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
    last = json.loads((out / "_LAST_COMPLETED.json").read_text())["manifests"]
    attempt = json.loads((out / f"run={RUN_B}" / "summary.json").read_text())["manifest"]["attempt"]
    assert [(entry["run_id"], entry["attempt"]) for entry in last] == [(RUN_B, attempt)]
    put_back(tmp_path / "copy", database)  # put back: it lacks run B's pairs

    assert dedup("b", RUN_C) == 1  # run B's events again
    line = error_line(capsys)
    back_fill = pasted_back_fill(line)
    assert line == (
        f"error: manifest {uri} is an older copy: run {RUN_B} of {out} completed with it ({out / '_LAST_COMPLETED.json'}), "
        "and it lacks it, so the events of the runs completed after the copy was taken would be delivered again; "
        f"nothing was written. Put the newest copy back, or back-fill the completed runs into it ({back_fill}, and "
        "the same for every other output that uses it), then run again"
    )  # 93cc664: exit 0, run B's 5 events delivered again
    assert not (out / f"run={RUN_C}").exists()
    assert back_fill.endswith(
        f"populate-manifest --input {shlex.quote(str(out))} --manifest {shlex.quote(uri)} --run-id {RUN_B}"
    )
    if backend == "sqlite":
        paste(back_fill)  # through a shell once: a Spark start each
    else:
        follow(back_fill)

    assert dedup("b", RUN_C) == 0
    assert read_lines(out / f"run={RUN_C}" / "good") == []  # each of run B's events is delivered once
    assert len(read_lines(out / f"run={RUN_C}" / "duplicates" / "reason=cross_batch_natural")) == 5
    assert dedup("a", RUN_A) == 0  # a redo of the first run still gives its output
    assert len(read_lines(out / f"run={RUN_A}" / "good")) == 5


class Outputs:
    """Dedup runs of outputs under `base` (each output a folder name) on one manifest."""

    def __init__(self, base: Path, uri: str) -> None:
        self.base, self.uri = base, uri

    def dedup(self, batch: str, output: str, run_id: str, *more: str, uri: str | None = None) -> int:
        argv = ["dedup", "--input", str(self.base / batch), "--output", str(self.base / output), "--run-id", run_id]
        if "--create" in more and (uri or self.uri).startswith("lake:"):  # 4 bucket files a segment, not 64: quicker
            (self.base / "buckets.json").write_text('{"manifest": {"buckets": 4}}')
            more = (*more, "--config", str(self.base / "buckets.json"))
        return main([*argv, "--manifest", uri or self.uri, *more])

    def older_copy_of_two_runs(self, database: Path) -> None:
        """Runs A (batch a) and B (batch b) into `out`, with a copy of the manifest taken between them."""
        assert self.dedup("a", "out", RUN_A, "--create") == 0
        put_back(database, self.base / "copy")
        assert self.dedup("b", "out", RUN_B) == 0

    def delivered(self, *outputs: str) -> list[str]:
        """The event ids in the `good/` of every completed run of `outputs`, sorted: a doubled one twice."""
        folders = [folder for output in outputs for folder in (self.base / output).glob("run=*")]
        return completed_ids(folders, "good")


def three_batches(base: Path) -> Path:
    """Batches a (events 0-4), b (5-9), c (10-14) under `base`."""
    for name, first in (("a", 0), ("b", 5), ("c", 10)):
        write(base / name / f"{name}.tsv", events(range(first, first + 5)))
    return base


@pytest.fixture
def batches(tmp_path: Path) -> Path:
    return three_batches(tmp_path)


@pytest.mark.parametrize("backend", ["sqlite"])  # the lake's records: in the tests above and below
def test_an_older_copy_is_found_by_every_output_on_the_manifest_whatever_the_others_ran_since(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    """Attack 10C's 01 and 10A's 06: the count a run recorded was caught up by another output's runs on the copy,
    or by another output's back-fill: 211 and 400 events delivered again, exit 0. Here output x meets the events
    of y's run that the copy lacks."""
    database = batches / "manifest"
    runs = Outputs(batches, f"{backend}:{database}")
    assert runs.dedup("a", "x", RUN_A, "--create") == 0
    assert runs.dedup("c", "y", RUN_B) == 0
    put_back(database, batches / "copy")  # a backup taken after both outputs' first runs
    assert runs.dedup("b", "y", RUN_C) == 0
    put_back(batches / "copy", database)

    assert runs.dedup("b", "x", "2026-11-24-04-00-00") == 1  # x's own last run is in the copy; y's is not
    line = stop_line(capsys, RUN_C, batches / "y")
    follow(pasted_back_fill(line))
    assert runs.dedup("b", "x", "2026-11-24-04-00-00") == 0  # 5cb60ce..35411f2: y's 5 events delivered again
    assert runs.dedup("c", "y", "2026-11-24-05-00-00") == 0
    assert runs.delivered("x", "y") == sorted(numbered_id(n) for n in range(15))  # each event once


@pytest.mark.parametrize("backend", ["sqlite"])  # the lake's records: in the tests above and below
def test_an_older_copy_lacking_a_late_batch_is_found_whatever_the_run_ids_order(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    """Attack 10C's 02: the run that completed last has the earlier id; the check read the newest run by name, whose
    count the copy held: the late batch's events delivered again, exit 0."""
    database = batches / "manifest"
    runs = Outputs(batches, f"{backend}:{database}")
    assert runs.dedup("a", "out", RUN_C, "--create") == 0
    put_back(database, batches / "copy")
    assert runs.dedup("b", "out", RUN_A) == 0  # the late batch
    put_back(batches / "copy", database)

    assert runs.dedup("b", "out", "2026-11-24-04-00-00") == 1
    line = stop_line(capsys, RUN_A, batches / "out")
    assert pasted_back_fill(line).endswith(f"--run-id {RUN_C}")  # at the newest run's time: earlier for later runs
    follow(pasted_back_fill(line))
    assert runs.dedup("b", "out", "2026-11-24-04-00-00") == 0
    assert runs.delivered("out") == sorted(numbered_id(n) for n in range(10))


@pytest.mark.parametrize("backend", ["sqlite", "lake"])
def test_a_copy_taken_while_a_run_was_writing_is_found(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:  # fmt: skip
    """Attack 10A's 05: the copy holds the run's registration, so its count, and not its pairs: exit 0, its events
    delivered again. (The copy here is taken as the run registers, before its first manifest write.)"""
    database = batches / "manifest"
    runs = Outputs(batches, f"{backend}:{database}")
    assert runs.dedup("a", "out", RUN_A, "--create") == 0
    register: type[RunRegister] = SqliteRunRegister if backend == "sqlite" else LakeRunRegister
    begin = register.begin

    def begin_and_copy(self: RunRegister, run: RegisteredRun) -> None:
        begin(self, run)
        put_back(database, batches / "copy")

    monkeypatch.setattr(register, "begin", begin_and_copy)
    assert runs.dedup("b", "out", RUN_B) == 0
    monkeypatch.undo()
    put_back(batches / "copy", database)
    if backend == "lake":  # the copy holds the writer lease the run held: its line, followed, removes it
        assert runs.dedup("b", "out", RUN_C) == 1
        assert error_line(capsys).endswith(f"remove its lease {database / '_lease'} and run again")
        (database / "_lease").unlink()

    assert runs.dedup("b", "out", RUN_C) == 1
    line = stop_line(capsys, RUN_B, batches / "out")
    follow(pasted_back_fill(line))
    assert runs.dedup("b", "out", RUN_C) == 0
    assert runs.delivered("out") == sorted(numbered_id(n) for n in range(10))


def test_an_older_copy_named_another_way_is_found(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 10A's 04: runs recorded `sqlite:P`; the copy put back, a run given `sqlite:///P` was not checked."""
    database = batches / "manifest.db"
    runs = Outputs(batches, f"sqlite:{database}")
    runs.older_copy_of_two_runs(database)
    put_back(batches / "copy", database)
    assert runs.dedup("b", "out", RUN_C, uri=f"sqlite://{database}") == 1
    stop_line(capsys, RUN_B, batches / "out")


def test_an_older_copy_of_a_lake_given_at_its_own_place_is_found(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 59's 03: a lake folder's older copy, given by the path it was restored at, was taken for another
    manifest: 12 events delivered again, exit 0. The lake keeps an identity too (`_identity.json`)."""
    lake = batches / "lake"
    runs = Outputs(batches, f"lake:{lake}")
    runs.older_copy_of_two_runs(lake)
    assert runs.dedup("c", "out", RUN_C, uri=f"lake:{batches / 'copy'}") == 1
    stop_line(capsys, RUN_B, batches / "out")


def test_an_older_copy_of_a_dynamodb_table_restored_under_another_name_is_found(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack 10A's 07: DynamoDB restores a backup into a new table; the check matched manifests by URI only."""
    with dynamodb_on_loopback(Faults()) as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        runs = Outputs(batches, "dynamodb://events-manifest")
        assert runs.dedup("a", "out", RUN_A, "--create") == 0
        client = boto3.client("dynamodb", endpoint_url=endpoint, region_name=os.environ.get("AWS_REGION", "eu-west-1"))
        backup = client.scan(TableName="events-manifest", ConsistentRead=True)["Items"]
        assert runs.dedup("b", "out", RUN_B) == 0
        runs.dedup("a", "restored", RUN_A, "--create", uri="dynamodb://restored")  # a table like it
        for item in client.scan(TableName="restored", ConsistentRead=True)["Items"]:
            client.delete_item(TableName="restored", Key={k: item[k] for k in ("eventId", "fingerprint")})
        for item in backup:
            client.put_item(TableName="restored", Item=item)

        assert runs.dedup("b", "out", RUN_C, uri="dynamodb://restored") == 1
        stop_line(capsys, RUN_B, batches / "out")

        # A current backup restored under the new name is the same manifest to a redo of a completed run (it was
        # refused as "completed with dynamodb://events-manifest", which is lost).
        for item in client.scan(TableName="events-manifest", ConsistentRead=True)["Items"]:
            client.put_item(TableName="restored", Item=item)
        good = batches / "out" / f"run={RUN_B}" / "good"
        before = read_lines(good)
        assert runs.dedup("b", "out", RUN_B, uri="dynamodb://restored") == 0
        assert read_lines(good) == before and len(before) == 5


def test_a_redo_through_a_link_that_leads_elsewhere_now_stops(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 59's 05: `--output` a link, the output moved to another disk and the link repointed: the redo's run key
    was made of the new place, its own events taken for another run's (148 in no completed output, exit 0)."""
    (batches / "disk1").mkdir()
    (batches / "current").symlink_to(batches / "disk1")
    runs = Outputs(batches, f"sqlite:{batches / 'manifest'}")
    assert runs.dedup("a", "current", RUN_A, "--create") == 0
    (batches / "disk1").rename(batches / "disk2")
    (batches / "current").unlink()
    (batches / "current").symlink_to(batches / "disk2")
    assert runs.dedup("a", "current", RUN_A) == 2
    assert error_line(capsys).startswith(
        f"error: --output: run {RUN_A} completed in {batches / 'disk1'}/run={RUN_A}, not {batches / 'disk2'}/run={RUN_A}"
    )
    shutil.rmtree(batches / "disk2" / f"run={RUN_A}")  # its summary gone too: found by _LAST_COMPLETED.json
    assert runs.dedup("a", "current", RUN_A) == 2


def test_a_run_whose_completion_could_not_be_recorded_is_not_sealed(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack 59's 02: the manifest failed (DynamoDB's 500) as a run recorded its completion, after its `_SUCCESS`:
    sealed and unrecorded, then an older copy put back let the next run deliver its events again (exit 0). The
    completion is now recorded before the seal: the run stops unsealed, and the copy is found by its lost entry."""
    database = batches / "manifest"
    runs = Outputs(batches, f"sqlite:{database}")
    assert runs.dedup("a", "out", RUN_A, "--create") == 0
    put_back(database, batches / "copy")

    def refused(*args: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    with monkeypatch.context() as patch:
        patch.setattr(SqliteCompletedRuns, "record", refused)
        assert runs.dedup("b", "out", RUN_B) == 1
    assert not (batches / "out" / f"run={RUN_B}" / "_SUCCESS").exists()
    put_back(batches / "copy", database)
    assert runs.dedup("c", "out", RUN_C) == 1
    line = error_line(capsys)
    assert f"run {RUN_B} of {batches / 'out'} wrote to it and has not completed" in line, line
    assert runs.dedup("b", "out", RUN_B) == 0  # the redo it prints
    assert runs.dedup("c", "out", RUN_C) == 0
    assert runs.delivered("out") == sorted(numbered_id(n) for n in range(15))


def test_a_run_stopped_between_its_seal_and_naming_its_completion_is_checked_by_its_marker(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attack 59's 08: run B killed after its `_SUCCESS`, before `_LAST_COMPLETED.json` named it (which still names
    A); a copy from before B put back: the next run delivered B's events again (exit 0). B's marker, still there,
    is checked against the manifest; the printed back-fill records B."""
    database = batches / "manifest"
    runs = Outputs(batches, f"sqlite:{database}")
    assert runs.dedup("a", "out", RUN_A, "--create") == 0
    put_back(database, batches / "copy")

    def killed(*args: object) -> None:
        raise KeyboardInterrupt  # as a kill -9 leaves it: nothing after this runs

    with monkeypatch.context() as patch:
        patch.setattr(bookkeeping, "name_completion", killed)
        with pytest.raises(KeyboardInterrupt):
            runs.dedup("b", "out", RUN_B)
    assert (batches / "out" / f"run={RUN_B}" / "_SUCCESS").exists()
    put_back(batches / "copy", database)
    assert runs.dedup("c", "out", RUN_C) == 1
    line = stop_line(capsys, RUN_B, batches / "out")
    assert f"({batches / 'out'}/_registered/run={RUN_B}.json)" in line
    follow(pasted_back_fill(line))
    assert runs.dedup("c", "out", RUN_C) == 0
    assert runs.delivered("out") == sorted(numbered_id(n) for n in range(15))


def test_a_sqlite_manifest_moved_to_a_name_with_uri_characters_is_the_same_to_a_redo(
    spark: SparkSession, batches: Path
) -> None:
    """Names are data: the identity of `m #1 %41.db` is read by path, not as a URI (`#` would cut it, `%41` decode)."""
    runs = Outputs(batches, f"sqlite:{batches / 'manifest'}")
    assert runs.dedup("a", "out", RUN_A, "--create") == 0
    good = read_lines(batches / "out" / f"run={RUN_A}" / "good")
    (batches / "manifest").rename(batches / "m #1 %41.db")
    assert runs.dedup("a", "out", RUN_A, uri=f"sqlite:{batches / 'm #1 %41.db'}") == 0
    assert read_lines(batches / "out" / f"run={RUN_A}" / "good") == good and len(good) == 5


def test_a_redo_in_a_moved_output_stops_and_its_way_out_keeps_its_events(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 58's 05: an output moved whole, a completed run redone there took its own events in the manifest for
    another run's (its run key is made of its folder): 0 of its 5 events in a completed output, exit 0."""
    runs = Outputs(batches, f"sqlite:{batches / 'manifest'}")
    assert runs.dedup("a", "out", RUN_A, "--create") == 0
    good = read_lines(batches / "out" / f"run={RUN_A}" / "good")
    (batches / "out").rename(batches / "moved")
    assert runs.dedup("a", "moved", RUN_A) == 2
    line = error_line(capsys)
    assert line.startswith(
        f"error: --output: run {RUN_A} completed in {batches / 'out'}/run={RUN_A}, not {batches / 'moved'}/run={RUN_A}"
    ), line
    assert f"Allowed: the output where it completed (--output {batches / 'out'}: move it back first)" in line
    assert read_lines(batches / "moved" / f"run={RUN_A}" / "good") == good  # nothing was written
    # Attack 59's 01: its folder removed to redo it clean (no summary left to say where it completed); found by the
    # output's `_LAST_COMPLETED.json` and the manifest's completion of the run there.
    shutil.rmtree(batches / "moved" / f"run={RUN_A}")
    assert runs.dedup("a", "moved", RUN_A) == 2
    assert error_line(capsys) == line
    assert not (batches / "moved" / f"run={RUN_A}").exists()
    assert runs.dedup("b", "moved", RUN_B) == 0  # a new run in the moved output
    assert read_lines(batches / "moved" / f"run={RUN_B}" / "good") == events(range(5, 10))
    (batches / "moved").rename(batches / "out")
    assert runs.dedup("a", "out", RUN_A) == 0
    assert runs.delivered("out") == sorted(numbered_id(n) for n in range(10))


def test_an_output_from_before_completion_records_is_checked_by_its_count(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs completed before `_LAST_COMPLETED.json` was kept (here: removed) recorded the manifest's count only."""
    database = batches / "manifest"
    runs = Outputs(batches, f"sqlite:{database}")
    runs.older_copy_of_two_runs(database)
    (batches / "out" / "_LAST_COMPLETED.json").unlink()
    put_back(batches / "copy", database)
    assert runs.dedup("b", "out", RUN_C) == 1
    summary = batches / "out" / f"run={RUN_B}" / "summary.json"
    assert f"is an older copy: {summary} records it at generation 2 (each run adds to it), and it is at 1" in (
        error_line(capsys)
    )


def test_a_redo_is_told_apart_from_an_older_copy_by_its_attempt(
    spark: SparkSession, batches: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A redo killed between its completion record and `_LAST_COMPLETED.json` leaves the manifest a later attempt
    than the output names: no older copy (attack 58's 06: a false stop). A copy from before the redo holds an earlier
    attempt than the output names: an older copy."""
    database, last = batches / "manifest", batches / "out" / "_LAST_COMPLETED.json"
    runs = Outputs(batches, f"sqlite:{database}")
    runs.older_copy_of_two_runs(database)
    shutil.copy(database, batches / "before-redo")
    shutil.copy(last, batches / "last-before-redo")
    assert runs.dedup("b", "out", RUN_B) == 0  # a redo of the newest run
    shutil.copy(database, batches / "after-redo")

    put_back(batches / "before-redo", database)  # a copy from before the redo
    assert runs.dedup("c", "out", RUN_C) == 1
    assert "holds an earlier attempt of it" in stop_line(capsys, RUN_B, batches / "out")

    put_back(batches / "after-redo", database)
    shutil.copy(batches / "last-before-redo", last)  # as a kill before the output named the redo leaves it
    assert runs.dedup("c", "out", RUN_C) == 0  # 3611a19: stopped, "holds an earlier attempt of it"
