"""Incremental input: `--incremental` reads each input file in one run (its ledger entry), on both layouts."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from pyspark.sql import SparkSession

from jobs.errors import DamagedFileError
from jobs.fs import store
from jobs.incremental.entries import Ledger, entry_digest
from jobs.incremental.ledger import IncrementalRunError, NothingToDo, plan_run
from jobs.incremental.window import Window
from jobs.runtime.cli import main
from tests.pipeline.helpers import ID_A, ID_B, ID_C, event, read_lines

START = datetime(2026, 11, 24, 1, tzinfo=UTC)


def run_id(hour: int) -> str:
    return (START + timedelta(hours=hour, minutes=30)).strftime("%Y-%m-%d-%H-%M-%S")


def put(root: Path, layout: str, hour: int, name: str, lines: list[str]) -> Path:
    """Write a file where the layout puts files of `hour` (hours after START)."""
    when = START + timedelta(hours=hour)
    folder = root / (when.strftime("run=%Y-%m-%d-%H-%M-%S") if layout == "archive" else when.strftime("%Y/%m/%d/%H"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def dedup(root: Path, output: Path, hour: int, *extra: str) -> int:
    argv = ["dedup", "--input", str(root), "--output", str(output), "--run-id", run_id(hour), "--incremental"]
    return main([*argv, *extra])


def summary_of(output: Path, hour: int) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((output / f"run={run_id(hour)}" / "summary.json").read_text())
    return summary


def complete(output: Path, hour: int) -> None:
    """Stand in for a completed run of the planned entry (planner tests only)."""
    folder = output / f"run={run_id(hour)}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "_SUCCESS").write_text("")


# Through the command line (Spark).


# The layouts differ only in the planner (where a file's time is read from its path): the command line's scenario
# runs on the archive layout (run=... folders, which Spark could take for partitions), the planner's on both.
@pytest.mark.parametrize("layout", ["archive"])
def test_each_file_is_read_by_one_run_and_a_redo_reads_the_same_files(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: str
) -> None:
    root, output = tmp_path / "enriched", tmp_path / "out"
    put(root, layout, 0, "part-0.tsv", [event(ID_A)])
    assert dedup(root, output, 0) == 0
    put(root, layout, 1, "part-0.tsv", [event(ID_B, event_fingerprint="fp-2")])
    assert dedup(root, output, 1) == 0
    assert read_lines(output / f"run={run_id(0)}" / "good") == [event(ID_A)]
    assert read_lines(output / f"run={run_id(1)}" / "good") == [event(ID_B, event_fingerprint="fp-2")]
    assert summary_of(output, 1)["input_files"]["incremental"] == {
        "ledger_entry": 2, "reused_entry": False, "files": 1, "bytes": len(event(ID_B, event_fingerprint="fp-2")) + 1,
        "backlog_files": 0, "backlog_bytes": 0, "changed_files_skipped": [],
        "entry_digest": entry_digest(Ledger(str(output)).entries()[1]),  # the entry as the run sealed it
    }  # fmt: skip
    capsys.readouterr()

    assert dedup(root, output, 2) == 0  # nothing new: exit 0, no run written
    out = capsys.readouterr().out
    assert (
        f"dedup run {run_id(2)}: nothing to do: no new input files under {root} (2 listed, 2 read by earlier runs)"
        in out
    )
    assert not (output / f"run={run_id(2)}").exists()
    assert [entry["run_id"] for entry in Ledger(str(output)).entries()] == [run_id(0), run_id(1)]

    put(root, layout, 2, "part-0.tsv", [event(ID_C)])
    assert dedup(root, output, 1) == 0  # a redo of run 1 after a new file arrived: the same file only
    assert read_lines(output / f"run={run_id(1)}" / "good") == [event(ID_B, event_fingerprint="fp-2")]
    assert summary_of(output, 1)["input_files"]["incremental"]["reused_entry"] is True
    assert dedup(root, output, 3) == 0
    assert read_lines(output / f"run={run_id(3)}" / "good") == [event(ID_C)]


@pytest.mark.parametrize("layout", ["archive", "hourly"])
def test_each_file_is_planned_for_one_run_and_a_redo_plans_the_same_files(tmp_path: Path, layout: str) -> None:
    """The planner's side of the scenario above (without Spark), on both layouts: what each run of it reads."""
    root, output = tmp_path / "enriched", tmp_path / "out"
    first = put(root, layout, 0, "part-0.tsv", [event(ID_A)])
    plan = plan_run(str(root), str(output), run_id(0))
    assert (plan.entry, plan.paths, plan.reused) == (1, [str(first)], False)
    complete(output, 0)
    second = put(root, layout, 1, "part-0.tsv", [event(ID_B, event_fingerprint="fp-2")])
    plan = plan_run(str(root), str(output), run_id(1))
    assert plan.summary() == {
        "ledger_entry": 2, "reused_entry": False, "files": 1, "bytes": len(event(ID_B, event_fingerprint="fp-2")) + 1,
        "backlog_files": 0, "backlog_bytes": 0, "changed_files_skipped": [],
        "entry_digest": entry_digest(Ledger(str(output)).entries()[1]),  # the entry as the run sealed it
    }  # fmt: skip
    assert plan.paths == [str(second)]
    complete(output, 1)

    with pytest.raises(NothingToDo):  # nothing new: no entry written
        plan_run(str(root), str(output), run_id(2))
    assert [entry["run_id"] for entry in Ledger(str(output)).entries()] == [run_id(0), run_id(1)]

    third = put(root, layout, 2, "part-0.tsv", [event(ID_C)])
    redo = plan_run(str(root), str(output), run_id(1))  # a redo of run 1 after a new file arrived: the same file only
    assert (redo.entry, redo.paths, redo.reused) == (2, [str(second)], True)
    assert plan_run(str(root), str(output), run_id(3)).paths == [str(third)]


def test_a_file_that_appears_twice_under_different_keys_is_still_deduplicated_by_the_manifest(
    spark: SparkSession, tmp_path: Path
) -> None:
    root, output = tmp_path / "enriched", tmp_path / "out"
    manifest = f"sqlite:{tmp_path / 'manifest.db'}"
    lines = [event(ID_A), event(ID_B, event_fingerprint="fp-2")]
    put(root, "hourly", 0, "part-0.tsv", lines)
    assert dedup(root, output, 0, "--manifest", manifest, "--create") == 0
    put(root, "hourly", 1, "copy-of-part-0.tsv", lines)  # the same file, delivered again under another key
    assert dedup(root, output, 1, "--manifest", manifest) == 0

    second = output / f"run={run_id(1)}"
    assert summary_of(output, 1)["input_files"]["incremental"]["files"] == 1
    assert read_lines(second / "good") == []
    assert read_lines(second / "duplicates") == sorted(lines)
    assert summary_of(output, 1)["by_reason"]["duplicates"] == {"cross_batch_natural": 2}


def test_a_run_that_stopped_blocks_later_runs_until_it_is_redone(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, output = tmp_path / "enriched", tmp_path / "out"
    whole = put(root, "hourly", 0, "part-0.tsv", [event(ID_A)])
    truncated = whole.with_name("part-1.tsv.gz")
    truncated.write_bytes(gzip.compress(b"".join(event(ID_B).encode() + b"\n" for _ in range(50)))[:-20])
    assert dedup(root, output, 0) == 1  # the truncated upload stops run 0 before it writes
    put(root, "hourly", 1, "part-0.tsv", [event(ID_C)])
    capsys.readouterr()

    assert dedup(root, output, 1) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --incremental: run {run_id(0)} (ledger entry 1, 2 files) has not completed: no "
        f"{output}/run={run_id(0)}/_SUCCESS. Redo it first (--run-id {run_id(0)} --incremental reads the same "
        "files); nothing was written"
    )
    assert not (output / f"run={run_id(1)}").exists()

    truncated.write_bytes(gzip.compress(event(ID_B).encode() + b"\n"))  # the upload put right
    assert dedup(root, output, 0) == 0
    assert read_lines(output / f"run={run_id(0)}" / "good") == [event(ID_A), event(ID_B)]
    assert dedup(root, output, 1) == 0  # the replaced file is not taken as changed: the redo recorded it anew
    assert read_lines(output / f"run={run_id(1)}" / "good") == [event(ID_C)]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--since", "2026-11-01"], "error: --since: given without --incremental; allowed: only with --incremental"),
        (["--incremental", "--since", "yesterday"], "error: --since: given 'yesterday'; allowed: YYYY-MM-DD or "
         "YYYY-MM-DDTHH:MM[:SS][Z], UTC unless an offset is given"),
        (["--incremental", "--max-files", "0"], "error: --max-files: given 0; allowed: a whole number of 1 or more"),
    ],
)  # fmt: skip
def test_window_options_are_checked_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    argv = ["dedup", "--input", str(tmp_path), "--output", str(tmp_path / "out"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip() == message and "starting Spark" not in err


# The planner alone (no Spark): windows, caps, order, and when a run may not start.


def test_a_backlog_is_worked_off_oldest_first_within_the_caps(tmp_path: Path) -> None:
    root, output = tmp_path / "enriched", tmp_path / "out"
    for hour in (4, 0, 3, 1, 2):  # written out of order
        put(root, "hourly", hour, "part-0.tsv", [event(ID_A)] * (hour + 1))
    sizes = [(len(event(ID_A)) + 1) * (hour + 1) for hour in range(5)]
    taken = []
    for number, caps in enumerate([Window(max_files=2), Window(max_bytes=sizes[2]), Window(max_bytes=1), Window()]):
        plan = plan_run(str(root), str(output), run_id(10 + number), caps)
        taken.append([Path(path).parent.name for path in plan.paths])
        complete(output, 10 + number)
        if number == 0:
            assert (plan.backlog_files, plan.backlog_bytes) == (3, sum(sizes[2:]))
    # max_bytes takes whole files up to the cap, and always the first file even when it alone is over the cap.
    assert taken == [["01", "02"], ["03"], ["04"], ["05"]]
    with pytest.raises(NothingToDo):
        plan_run(str(root), str(output), run_id(20))


def test_since_and_until_bound_the_window_by_the_time_in_the_path(tmp_path: Path) -> None:
    root, output = tmp_path / "enriched", tmp_path / "out"
    for hour in range(4):
        put(root, "archive", hour, "part-0.tsv", [event(ID_A)])
    unpartitioned = root / "loose.tsv"  # no time in its path: its modification time counts
    unpartitioned.write_text(event(ID_B) + "\n")
    os.utime(unpartitioned, (START.timestamp() + 1800, START.timestamp() + 1800))
    window = Window(since=START + timedelta(minutes=30), until=START + timedelta(hours=3))
    plan = plan_run(str(root), str(output), run_id(10), window)
    assert [Path(path).relative_to(root).as_posix() for path in plan.paths] == [
        "loose.tsv", "run=2026-11-24-02-00-00/part-0.tsv", "run=2026-11-24-03-00-00/part-0.tsv",
    ]  # fmt: skip


def test_a_run_may_not_start_before_a_later_run_or_while_another_writes(tmp_path: Path) -> None:
    root, output = tmp_path / "enriched", tmp_path / "out"
    put(root, "hourly", 0, "part-0.tsv", [event(ID_A)])
    plan_run(str(root), str(output), run_id(5))
    complete(output, 5)
    put(root, "hourly", 1, "part-0.tsv", [event(ID_B)])
    with pytest.raises(IncrementalRunError, match=rf"run {run_id(4)} is earlier than run {run_id(5)} in the ledger"):
        plan_run(str(root), str(output), run_id(4))

    lease = output / "_leases" / f"run={run_id(6)}.json"
    lease.parent.mkdir()
    lease.write_text(json.dumps({"job": "dedup", "run_id": run_id(6), "host": "h1", "pid": 7,
                                 "started_at": "2026-11-24T07:30:00+00:00", "token": "t"}))  # fmt: skip
    with pytest.raises(IncrementalRunError) as held:
        plan_run(str(root), str(output), run_id(7))
    assert str(held.value) == (
        f"--incremental: dedup run {run_id(6)} is writing {output} (host h1, pid 7, since 2026-11-24T07:30:00+00:00; "
        f"lease {lease}); a run starts when it has ended. If that run is gone, remove the lease file"
    )
    lease.unlink()
    assert len(plan_run(str(root), str(output), run_id(7)).files) == 1


def test_a_changed_file_stops_the_run_unless_skipped(tmp_path: Path) -> None:
    root, output = tmp_path / "enriched", tmp_path / "out"
    first = put(root, "hourly", 0, "part-0.tsv", [event(ID_A)])
    plan_run(str(root), str(output), run_id(5))
    complete(output, 5)
    first.write_text(event(ID_A) + "\n" + event(ID_B) + "\n")  # rewritten after run 5 read it
    put(root, "hourly", 1, "part-0.tsv", [event(ID_C)])
    with pytest.raises(IncrementalRunError, match=r"1 input file\(s\) changed after an earlier run read them"):
        plan_run(str(root), str(output), run_id(6))
    assert not (output / "_ledger" / f"{2:020d}.json").exists()
    plan = plan_run(str(root), str(output), run_id(6), Window(skip_changed=True))
    assert (plan.paths, plan.changed) == ([str(root / "2026/11/24/02/part-0.tsv")], (str(first),))


def test_two_planners_racing_for_one_entry_one_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, output = tmp_path / "enriched", tmp_path / "out"
    put(root, "hourly", 0, "part-0.tsv", [event(ID_A)])
    create = Ledger.create

    def another_planner_first(self: Ledger, number: int, document: dict[str, Any]) -> bool:
        assert create(self, number, {**document, "run_id": run_id(8)})  # the other run creates it between our steps
        return create(self, number, document)

    monkeypatch.setattr(Ledger, "create", another_planner_first)
    with pytest.raises(IncrementalRunError, match=r"another run took ledger entry .*00000000000000000001\.json"):
        plan_run(str(root), str(output), run_id(9))
    monkeypatch.undo()
    assert [entry["run_id"] for entry in Ledger(str(output)).entries()] == [run_id(8)]


def test_planning_on_s3_records_etags(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "eu-west-1"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="lake", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        s3.put_object(Bucket="lake", Key="enriched/2026/11/24/01/part-0.tsv", Body=b"a\n")
        s3.put_object(Bucket="lake", Key="enriched/2026/11/24/01/_temporary/part-1.tsv", Body=b"b\n")
        first = plan_run("s3://lake/enriched/", "s3://lake/deduplicated", run_id(0))
        assert first.paths == ["s3://lake/enriched/2026/11/24/01/part-0.tsv"]
        assert first.files[0].etag == s3.head_object(Bucket="lake", Key="enriched/2026/11/24/01/part-0.tsv")["ETag"]
        s3.put_object(Bucket="lake", Key=f"deduplicated/run={run_id(0)}/_SUCCESS", Body=b"")
        with pytest.raises(NothingToDo):
            plan_run("s3://lake/enriched/", "s3://lake/deduplicated", run_id(1))
        s3.put_object(Bucket="lake", Key="enriched/2026/11/24/02/part-0.tsv", Body=b"c\n")
        assert plan_run("s3://lake/enriched/", "s3://lake/deduplicated", run_id(1)).paths == [
            "s3://lake/enriched/2026/11/24/02/part-0.tsv"
        ]
        assert store.exists(f"s3://lake/deduplicated/_ledger/{2:020d}.json")


def test_a_completed_runs_entry_is_not_rewritten_for_a_file_uploaded_again_with_the_same_content(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Attack 8 (read in the code): on S3 a redo of a completed run rewrote its entry when only a file's time differed
    (uploaded again, same ETag), so the next entry's link to it no longer matched and every later run stopped as if
    the ledger were damaged."""
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "eu-west-1"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    root, output = "s3://lake/enriched/", "s3://lake/deduplicated"
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="lake", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        for hour in (1, 2, 3):
            s3.put_object(Bucket="lake", Key=f"enriched/2026/11/24/0{hour}/part-0.tsv", Body=f"{hour}\n".encode())
            plan_run(root, output, run_id(hour))
            s3.put_object(Bucket="lake", Key=f"deduplicated/run={run_id(hour)}/_SUCCESS", Body=b"")
        entry = store.read_bytes(f"{output}/_ledger/{1:020d}.json")
        listed = store.list_files

        def uploaded_again(path: str) -> list[store.StoredFile]:  # the same bytes, a later time
            return [
                dataclasses.replace(file, modified_ms=file.modified_ms + 60_000) if "/01/" in file.path else file
                for file in listed(path)
            ]

        monkeypatch.setattr(store, "list_files", uploaded_again)
        assert plan_run(root, output, run_id(1)).reused  # the redo of completed run 1
        assert store.read_bytes(f"{output}/_ledger/{1:020d}.json") == entry
        assert plan_run(root, output, run_id(3)).reused  # and the ledger still holds together


@pytest.mark.parametrize(
    "state", ["sealed", "redo-stopped-before-its-seal", "marker-removed-a-later-entry-follows", "marker-removed-known"]
)
def test_a_completed_run_whose_files_changed_is_not_redone(tmp_path: Path, state: str) -> None:
    """A redo of a completed run stopped before its seal (`_COMPLETED_BEFORE` left, `_SUCCESS` gone) is still the
    redo of a completed run: before, its files were read as they are now and the entry rewritten to say so. So is
    one whose marker was removed by hand (attack 7), when a later entry follows its own (no run starts before the
    earlier ones completed) or when the caller knows it completed (the manifest's register says so)."""
    root, output = tmp_path / "enriched", tmp_path / "out"
    first = put(root, "hourly", 0, "part-0.tsv", [event(ID_A)])
    plan_run(str(root), str(output), run_id(5))
    first.write_text(event(ID_A) + "\n" + event(ID_B) + "\n")  # rewritten after run 5 read it
    assert len(plan_run(str(root), str(output), run_id(5)).files) == 1  # not completed yet: the file is read anew
    complete(output, 5)
    if state == "marker-removed-a-later-entry-follows":
        put(root, "hourly", 1, "part-0.tsv", [event(ID_B)])
        plan_run(str(root), str(output), run_id(6))
        complete(output, 6)
    if state != "sealed":
        (output / f"run={run_id(5)}" / "_SUCCESS").rename(output / f"run={run_id(5)}" / "_COMPLETED_BEFORE")
    if state.startswith("marker-removed"):
        (output / f"run={run_id(5)}" / "_COMPLETED_BEFORE").unlink()
    first.write_text(event(ID_C) + "\n")  # and rewritten again after run 5 completed
    entry = (output / "_ledger" / f"{1:020d}.json").read_bytes()
    with pytest.raises(IncrementalRunError) as refused:
        plan_run(str(root), str(output), run_id(5), completed_before=state == "marker-removed-known")
    assert str(refused.value).startswith(
        f"--incremental: run {run_id(5)} completed, and 1 file(s) it read changed or went away since (size or "
        f"ETag/time differ from ledger entry 1, or not listed): {first}; a redo would not give its output again"
    )
    assert (output / "_ledger" / f"{1:020d}.json").read_bytes() == entry  # as the completed run left it


def test_an_s3_root_that_cannot_be_read_is_an_error_not_an_empty_input() -> None:
    from botocore.stub import Stubber

    client = boto3.client("s3", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stub:
        stub.add_response(
            "list_objects_v2", {"KeyCount": 0, "IsTruncated": False}, {"Bucket": "lake", "Prefix": "in/x/"}
        )
        stub.add_client_error("head_object", "403", "Forbidden", 403, expected_params={"Bucket": "lake", "Key": "in/x"})
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.setattr(store, "s3_client", lambda: client)
            with pytest.raises(client.exceptions.ClientError, match="403"):
                store.list_files("s3://lake/in/x")


def test_a_file_skipped_as_unreadable_is_not_recorded_as_read(spark: SparkSession, tmp_path: Path) -> None:
    root, output = tmp_path / "enriched", tmp_path / "out"
    whole = put(root, "hourly", 0, "part-0.tsv", [event(ID_A)])
    late = [event(f"d0000000-0000-4000-8000-{i:012d}", event_fingerprint=f"fp-{i}") for i in range(2000)]
    upload = whole.with_name("part-1.tsv.gz")
    data = gzip.compress("".join(line + "\n" for line in late).encode())
    upload.write_bytes(data[: len(data) // 2])  # an upload still being written
    config = tmp_path / "config.json"
    config.write_text('{"input": {"skip_unreadable": true}}')
    assert dedup(root, output, 0, "--config", str(config)) == 0
    first = summary_of(output, 0)
    assert [skipped["path"] for skipped in first["input_files"]["unreadable"]] == [f"file://{upload}"]
    assert first["input_files"]["incremental"]["files"] == 1
    entry = json.loads((output / "_ledger" / f"{1:020d}.json").read_text())
    assert [file["path"] for file in entry["files"]] == [str(whole)]
    assert [file["path"] for file in entry["skipped"]] == [str(upload)]

    upload.write_bytes(data)  # the upload put right: the next run reads it, once
    assert dedup(root, output, 1, "--config", str(config)) == 0
    assert read_lines(output / f"run={run_id(1)}" / "good") == sorted(late)
    assert summary_of(output, 1)["counts"]["input"] == len(late)
    assert dedup(root, output, 0, "--config", str(config)) == 0  # a redo of run 0 skips it again: the same output
    assert read_lines(output / f"run={run_id(0)}" / "good") == [event(ID_A)]
    redone = summary_of(output, 0)
    assert redone["counts"] == first["counts"]
    assert redone["input_files"]["unreadable"] == first["input_files"]["unreadable"]
    assert dedup(root, output, 2, "--config", str(config)) == 0  # nothing left
    assert not (output / f"run={run_id(2)}").exists()


def test_a_file_that_grows_while_the_run_reads_it_stops_the_run_before_success(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, output = tmp_path / "enriched", tmp_path / "out"
    lines = [event(f"d0000000-0000-4000-8000-{i:012d}", event_fingerprint=f"fp-{i}") for i in range(20)]
    growing = put(root, "hourly", 0, "part-0.tsv", lines[:10])

    def listed_then_grown(*args: Any, **options: Any) -> Any:
        plan = plan_run(*args, **options)
        with growing.open("a", encoding="utf-8") as handle:  # the upload goes on after the listing
            handle.write("".join(line + "\n" for line in lines[10:]))
        return plan

    monkeypatch.setattr("jobs.dedup.job.plan_run", listed_then_grown)
    capsys.readouterr()
    assert dedup(root, output, 0) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --incremental: 1 input file(s) changed while run {run_id(0)} read them (size or ETag/time differ "
        f"from ledger entry 1): {growing}; nothing is sealed (no _SUCCESS). Once the upload is done, redo the run "
        f"(--run-id {run_id(0)} --incremental): it reads them again"
    )
    assert not (output / f"run={run_id(0)}" / "_SUCCESS").exists()
    monkeypatch.undo()

    assert dedup(root, output, 0) == 0  # the redo reads the whole file, and records it as read
    assert read_lines(output / f"run={run_id(0)}" / "good") == sorted(lines)
    assert summary_of(output, 0)["counts"]["input"] == len(lines)
    assert dedup(root, output, 1) == 0  # nothing to do: the grown file is not taken as changed
    assert not (output / f"run={run_id(1)}").exists()


def test_a_completed_runs_redo_that_finds_a_file_unreadable_stops_before_its_seal(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """FAULTS 4 and 2 (a file rots in place, same size and time; the completed run that read it is redone).

    Before (attack 8): with input.skip_unreadable the redo completed without the file, exit 0: its events left run
    0's output, its entry moved the file to `skipped`, which the next entry's link no longer matched, so every later
    run stopped as if the ledger were damaged (and restoring the entry, as printed, left the file in no output).
    Now: the redo stops before its seal, naming the file; restored, the redo gives run 0's output again."""
    root, output = tmp_path / "enriched", tmp_path / "out"
    first = put(root, "hourly", 0, "part-0.tsv", [event(ID_A)])
    lines = [event(f"d0000000-0000-4000-8000-{i:012d}", event_fingerprint=f"fp-{i}") for i in range(2000)]
    packed = first.with_name("part-1.tsv.gz")
    data = gzip.compress("".join(line + "\n" for line in lines).encode())
    packed.write_bytes(data)
    config = tmp_path / "config.json"
    config.write_text('{"input": {"skip_unreadable": true}}')
    assert dedup(root, output, 0, "--config", str(config)) == 0
    put(root, "hourly", 1, "part-2.tsv", [event(ID_B, event_fingerprint="fp-b")])
    assert dedup(root, output, 1, "--config", str(config)) == 0
    stat = packed.stat()
    packed.write_bytes(data[: len(data) // 2] + bytes(len(data) - len(data) // 2))  # rotted: same size
    os.utime(packed, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and time
    capsys.readouterr()
    assert dedup(root, output, 0, "--config", str(config)) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --incremental: run {run_id(0)} completed, and 1 file(s) it read cannot be read now: {packed}; a redo "
        f"would not give its output again. Restore them, then redo the run (--run-id {run_id(0)} --incremental); "
        "nothing is sealed (no _SUCCESS)"
    )
    packed.write_bytes(data)
    os.utime(packed, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert dedup(root, output, 0, "--config", str(config)) == 0
    assert read_lines(output / f"run={run_id(0)}" / "good") == sorted([event(ID_A), *lines])
    put(root, "hourly", 2, "part-3.tsv", [event(ID_C, event_fingerprint="fp-c")])
    assert dedup(root, output, 2, "--config", str(config)) == 0  # the ledger holds: a later run goes on
    assert read_lines(output / f"run={run_id(2)}" / "good") == [event(ID_C, event_fingerprint="fp-c")]


def test_the_newest_entry_is_checked_while_a_redo_of_its_completed_run_is_unfinished(tmp_path: Path) -> None:
    """Attack 8: the newest entry was checked against its run's summary only while `_SUCCESS` was there; with a redo
    of the completed run stopped halfway (`_COMPLETED_BEFORE`, holding that summary), an entry given another run's
    files was read as it was (exit 0: one file's lines delivered twice, another's in no completed output)."""
    root, output = tmp_path / "enriched", tmp_path / "out"
    put(root, "hourly", 0, "part-0.tsv", [event(ID_A)])
    plan = plan_run(str(root), str(output), run_id(5))
    folder = output / f"run={run_id(5)}"
    folder.mkdir(parents=True)
    (folder / "_COMPLETED_BEFORE").write_text(json.dumps({"input_files": {"incremental": plan.summary()}}))
    entry = output / "_ledger" / f"{1:020d}.json"
    other = put(root, "hourly", 1, "part-1.tsv", [event(ID_B)])
    document = json.loads(entry.read_text())
    recorded = next(vars(file) for file in store.list_files(str(root)) if file.path == str(other))
    entry.write_text(json.dumps({**document, "files": [recorded]}))  # a file another run read, as it is
    with pytest.raises(DamagedFileError) as refused:
        plan_run(str(root), str(output), run_id(5))
    assert str(refused.value).startswith(
        f"ledger files disagree: {entry} and {folder / '_COMPLETED_BEFORE'} (the summary recorded the entry as run "
        f"{run_id(5)} sealed, and it is not so now"
    )
    entry.write_text(json.dumps(document))  # restored as printed
    assert [file.path for file in plan_run(str(root), str(output), run_id(5)).files] == [document["files"][0]["path"]]
    (folder / "_COMPLETED_BEFORE").write_text("")  # as an earlier version left it: nothing to check against
    assert plan_run(str(root), str(output), run_id(5)).reused
