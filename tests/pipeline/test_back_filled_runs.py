"""What `populate-manifest` back-fills from a dedup output is each completed run's delivery, at that run's time and
under a run key of its own (`base.back_filled_key`): no dedup run takes it over, and a redo of any run of the
output, in any order, gives its first output byte for byte (attack 10C's 03), on SQLite, DynamoDB and the lake."""

from __future__ import annotations

import contextlib
import errno
import os
import shlex
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from pyspark.sql import SparkSession

import jobs.dedup.populate as populate_module
from jobs.manifest.base import back_filled_key, run_key
from jobs.runtime.cli import main
from tests.pipeline.helpers import PROG, error_line, event, fresh_manifest, numbered_id, read_lines, run_folder_content
from tests.pipeline.helpers import numbered_events as events
from tests.pipeline.helpers import write_lines as write
from tests.pipeline.test_unfinished_runs import operator_shell

RUN_1, RUN_2, RUN_3, RUN_4 = (f"2026-11-2{day}-00-00-00" for day in range(1, 5))
TABLE = "events-manifest"


@pytest.fixture(params=["sqlite", "dynamodb", "lake"])
def manifest_uri(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with fresh_manifest(request.param, tmp_path, monkeypatch, TABLE) as uri:
        yield uri


def copy_of(uri: str, tmp_path: Path) -> Callable[[], None]:
    """Take a copy of the manifest now (a backup); the function puts it back in its place."""
    if uri.startswith("dynamodb://"):
        table = boto3.resource("dynamodb", endpoint_url=os.environ["AWS_ENDPOINT_URL"]).Table(TABLE)
        saved = table.scan()["Items"]  # a few dozen items: one page
        keys = [key["AttributeName"] for key in table.key_schema]

        def put_back_table() -> None:
            with table.batch_writer() as batch:
                for item in table.scan()["Items"]:
                    batch.delete_item(Key={key: item[key] for key in keys})
                for item in saved:
                    batch.put_item(Item=item)

        return put_back_table
    place = Path(uri.split(":", 1)[1])
    copy = tmp_path / "copy"
    (shutil.copytree if place.is_dir() else shutil.copy)(place, copy)

    def put_back() -> None:
        if place.is_dir():
            shutil.rmtree(place)
            shutil.copytree(copy, place)
        else:
            shutil.copy(copy, place)

    return put_back


def test_a_printed_back_fill_leaves_every_redo_byte_identical_and_later_runs_deliver_nothing_again(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], manifest_uri: str
) -> None:
    """Run 3 delivers 10..19, then the late run 2 (an earlier id) finds 10..14 as run 3's copies, delivers 20..24,
    and re-identifies 15 (run 3 delivered its id with another fingerprint). A copy of the manifest from after run 1
    is put back; the printed back-fill, pasted from `/`, records all three runs again. 93cc664 (keyless at run 3's
    time): run 2's redo took run 3's 10..14 over and delivered them again (exit 0)."""
    out = tmp_path / "out"
    write(tmp_path / "one" / "a.tsv", events(range(0, 10)))
    write(tmp_path / "three" / "a.tsv", events(range(10, 20)))
    write(tmp_path / "two" / "a.tsv", [*events(range(10, 15)), *events(range(20, 25)),
                                       event(numbered_id(15), event_fingerprint="fp-2")])  # fmt: skip
    write(tmp_path / "four" / "a.tsv", events(range(0, 30)))

    def dedup(batch: str, run_id: str, *more: str) -> int:
        argv = ["dedup", "--input", str(tmp_path / batch), "--output", str(out), "--run-id", run_id]
        return main([*argv, "--manifest", manifest_uri, *more])

    assert dedup("one", RUN_1, "--create") == 0
    put_back = copy_of(manifest_uri, tmp_path)
    assert dedup("three", RUN_3) == 0
    assert dedup("two", RUN_2) == 0
    first = {run_id: run_folder_content(out / f"run={run_id}") for run_id in (RUN_1, RUN_2, RUN_3)}
    assert set(events(range(20, 25))) < set(first[RUN_2]["good"])  # and 15 re-identified
    assert len(first[RUN_2]["good"]) == 6 and first[RUN_2]["duplicates"] == events(range(10, 15))
    put_back()

    assert dedup("four", RUN_4) == 1  # the older copy is found
    back_fill = error_line(capsys).split("back-fill the completed runs into it (", 1)[1].split(", and the same")[0]
    if manifest_uri.startswith("sqlite:"):  # pasted into a shell once: a Spark start each
        pasted = subprocess.run(["bash", "-c", back_fill], cwd="/", env=operator_shell(), capture_output=True,
                                text=True, timeout=600)  # fmt: skip
        assert pasted.returncode == 0, pasted.stderr
    else:  # its words as printed, in this process
        words = shlex.split(back_fill)
        assert main(words[words.index("populate-manifest") :]) == 0

    # The late batch first (it took run 3's copies over), then an earlier run, then the late batch again.
    for run_id, batch in ((RUN_2, "two"), (RUN_1, "one"), (RUN_2, "two")):
        assert dedup(batch, run_id) == 0
        assert run_folder_content(out / f"run={run_id}") == first[run_id], run_id
    assert dedup("four", RUN_4) == 0
    assert read_lines(out / f"run={RUN_4}" / "good") == events(range(25, 30))  # nothing delivered again


def test_a_back_fill_of_plain_files_is_a_delivery_at_its_run_id_that_no_dedup_run_takes_over(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Files outside run folders are recorded at --run-id's time under the key of the input root: a copy for a run
    of an earlier id (93cc664: taken over, delivered again), of the same second and of a later one; a rerun of the
    back-fill finds them its own."""
    uri = f"sqlite:{tmp_path / 'm.db'}"
    write(tmp_path / "archive" / "a.tsv", events(range(0, 5)))
    populate = ["populate-manifest", "--input", str(tmp_path / "archive"), "--manifest", uri, "--run-id", RUN_2]
    assert main([*populate, "--create"]) == 0
    capsys.readouterr()
    assert main(populate) == 0
    assert "pairs recorded                    5" in capsys.readouterr().out  # its own again, not already present
    for number, run_id in enumerate((RUN_1, RUN_2, RUN_3), start=1):
        new = events(range(10 * number, 10 * number + 3))
        write(tmp_path / run_id / "in" / "a.tsv", [*events(range(0, 5)), *new])
        output = tmp_path / run_id / "out"
        argv = ["dedup", "--input", str(tmp_path / run_id / "in"), "--output", str(output), "--run-id", run_id]
        assert main([*argv, "--manifest", uri]) == 0
        assert read_lines(output / f"run={run_id}" / "good") == new, run_id
        assert read_lines(output / f"run={run_id}" / "duplicates") == events(range(0, 5)), run_id


@pytest.mark.parametrize("failure", ["disk full", "unknown"])
def test_a_failed_back_fill_names_the_same_command_which_pasted_records_the_rest(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    failure: str,
) -> None:  # fmt: skip
    """A back-fill stopped after its first run folder's pairs: 93cc664 said "no _SUCCESS written … the rerun replaces
    it" (it writes no run folder, and replaces nothing). The line names the command; pasted from `/`, it records
    the rest, and the manifest is what a back-fill that never stopped leaves."""
    out, database = tmp_path / "out", tmp_path / "backfilled.db"
    for run_id, numbers in ((RUN_1, range(0, 5)), (RUN_2, range(5, 9))):
        write(tmp_path / run_id / "a.tsv", events(numbers))
        argv = ["dedup", "--input", str(tmp_path / run_id), "--output", str(out), "--run-id", run_id]
        assert main([*argv, "--manifest", f"sqlite:{tmp_path / 'm.db'}", "--create"]) == 0
    populate = ["populate-manifest", "--input", str(out), "--manifest", f"sqlite:{database}", "--run-id", RUN_3]
    clean = tmp_path / "clean.db"  # what a back-fill that never stopped leaves
    assert main([*populate[:4], f"sqlite:{clean}", *populate[5:], "--create"]) == 0
    whole = manifest_rows(clean)
    keys = [back_filled_key(run_key(str(out / f"run={run_id}"), run_id)) for run_id in (RUN_1, RUN_2)]
    assert sorted({row[3] for row in whole}) == keys and len(whole) == 9

    recorded = populate_module._populate
    calls: list[int] = []

    def stops_at_the_second(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device") if failure == "disk full" else RuntimeError("lost")
        return recorded(*args, **kwargs)

    monkeypatch.setattr(populate_module, "_populate", stops_at_the_second)
    assert main([*populate, "--create"]) == 1
    assert len(manifest_rows(database)) == 5  # run 1's pairs, recorded before it stopped
    line = error_line(capsys)
    command = f"{PROG} populate-manifest --input {out} --manifest sqlite:{database} --run-id {RUN_3} --create"
    way_out = (
        f"then run the same back-fill again: {command} (it writes no run folder and no _SUCCESS; the pairs it "
        "recorded before it stopped stay in the manifest and pass as its own, the rest is recorded then)"
    )
    cause = (
        f"no space left on the device holding the output or {database} or Spark's scratch folder (/tmp) (No space "
        "left on device). Free space there, "
        if failure == "disk full"
        else "RuntimeError: lost. Fix that, "
    )
    assert line == f"error: populate-manifest run {RUN_3} failed: {cause}{way_out} (run with --debug for the traceback)"
    pasted = subprocess.run(["bash", "-c", command], cwd="/", env=operator_shell(), capture_output=True, text=True,
                            timeout=600)  # fmt: skip
    assert pasted.returncode == 0, pasted.stderr
    assert manifest_rows(database) == whole


def manifest_rows(database: Path) -> list[tuple[str, str, int, str]]:
    with contextlib.closing(sqlite3.connect(database)) as db:
        rows = db.execute("SELECT event_id, fingerprint, etl_time, run_key FROM events_manifest ORDER BY 1, 2")
        return [tuple(row) for row in rows]


def test_a_back_fill_records_the_id_a_re_identified_copy_replaced(spark: SparkSession, tmp_path: Path) -> None:
    """Attack 58's 02: a run re-identifies a copy of an id an earlier run delivered (`--synthetic reid`, the default)
    and records the id it replaced; its good/ holds the new id, which was all a back-fill read: the same batch sent
    again after the back-fill delivered the copy a second time, exit 0."""
    write(tmp_path / "a" / "a.tsv", events(range(3)))
    copy = event(numbered_id(0), app_id="another-app", event_fingerprint="fp-copy")  # event 0's id, another fingerprint
    write(tmp_path / "b" / "b.tsv", [copy, *events(range(3, 5))])
    out, manifest = tmp_path / "out", tmp_path / "manifest"

    def dedup(batch: str, run_id: str, *more: str) -> int:
        argv = ["dedup", "--input", str(tmp_path / batch), "--output", str(out), "--run-id", run_id]
        return main([*argv, "--manifest", f"sqlite:{manifest}", *more])

    assert dedup("a", RUN_1, "--create") == 0
    assert dedup("b", RUN_2) == 0
    ids = [line.split("\t")[6] for line in read_lines(out / f"run={RUN_2}" / "good")]
    assert len(ids) == 3 and numbered_id(0) not in ids  # the copy, re-identified
    manifest.unlink()  # lost: rebuilt from the output
    back_fill = ["populate-manifest", "--input", str(out), "--manifest", f"sqlite:{manifest}", "--run-id", RUN_2]
    assert main([*back_fill, "--create"]) == 0

    assert dedup("b", RUN_3) == 0  # the same batch again
    assert read_lines(out / f"run={RUN_3}" / "good") == []  # 35411f2..3611a19: the re-identified copy again
