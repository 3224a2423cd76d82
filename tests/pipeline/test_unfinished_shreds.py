"""Every sealed dedup run's shred completes before the next run: a late batch run with an earlier id than the latest
completed run, its shred failed, stops the next run (`run`, and `dedup --shredded` as the deployed state machine runs
it), and the printed command completes it: every event in exactly one completed output.
"""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from pyspark.sql import SparkSession

from jobs.runtime.cli import main
from jobs.shred import job as shred_job
from tests.pipeline.helpers import PROG, event, job_words, read_lines
from tests.pipeline.helpers import numbered_id as uuid

RUN_A, RUN_B, RUN_C = "2026-11-24-01-00-00", "2026-11-24-02-00-00", "2026-11-24-03-00-00"
ATOMIC = "output=good/vendor=com.snowplowanalytics.snowplow/name=atomic/format=tsv/model=1/revision=0/addition=0"
COMPLETE = "Complete it first, then run again: "


def failing(*_: object) -> None:
    raise RuntimeError("injected: the shred step fails before it writes")


def sealed_ids(output: Path, data: str) -> list[str]:
    """The event ids in `data` of every sealed run folder under `output`, sorted (a double shows twice)."""
    runs = [folder for folder in output.glob("run=*") if (folder / "_SUCCESS").exists()]
    return sorted(line.split("\t")[6] for folder in runs for line in read_lines(folder / data))


@pytest.mark.slow  # four dedup and shred runs, and the printed command
def test_a_late_batch_whose_shred_failed_stops_the_next_dedup_with_shredded_until_the_printed_command_completes_it(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deployed state machine's way: `dedup --shredded`, then `shred` as a job of its own (`run` with a real
    kill: tests/pipeline/test_unfinished_runs.py)."""
    root, output = tmp_path / "in", tmp_path / "out dir"  # the printed command must be quoted to paste
    deduplicated, shredded = output / "deduplicated", output / "shredded"
    for batch, numbers in (("a", range(0, 3)), ("b", range(3, 5)), ("c", range(5, 7))):
        (root / batch).mkdir(parents=True)
        (root / batch / "events.tsv").write_text("".join(event(uuid(n)) + "\n" for n in numbers), encoding="utf-8")

    def start(run_id: str, batch: str) -> int:
        dedup = ["dedup", "--input", str(root / batch), "--output", str(deduplicated), "--shredded", str(shredded),
                 "--run-id", run_id]  # fmt: skip
        return main(dedup) or main(["shred", "--input", f"{deduplicated}/run={run_id}/good", "--output",
                                    str(shredded), "--run-id", run_id])  # fmt: skip

    assert start(RUN_B, "b") == 0  # the latest run, complete
    with monkeypatch.context() as injected:
        injected.setattr(shred_job, "_write", failing)
        assert start(RUN_A, "a") == 1  # a late batch with an earlier id: its dedup sealed, its shred failed
    capsys.readouterr()
    assert start(RUN_C, "c") == 1
    quoted = f"'{output}/deduplicated/run={RUN_A}/good' --output '{output}/shredded' --run-id {RUN_A}"
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: run {RUN_A}: its dedup completed and its shred did not (no {shredded}/run={RUN_A}/_SUCCESS), so "
        f"its events are not in the warehouse yet; nothing was written. {COMPLETE}{PROG} shred --input {quoted}"
    )
    assert sorted(path.name for path in deduplicated.glob("run=*")) == [f"run={RUN_A}", f"run={RUN_B}"]

    # The printed way out, read as a shell reads it and run in-process: the paste of the same command through a shell
    # is test_unfinished_runs.py's (test_a_late_run_killed_during_shred_...), where a `run`'s shred was killed.
    assert main(job_words(f"{PROG} shred --input {quoted}")) == 0
    assert start(RUN_C, "c") == 0
    assert list((deduplicated / "_shred_pending").iterdir()) == []  # each shred removed its run's marker
    everything = [uuid(n) for n in range(0, 7)]
    assert sealed_ids(deduplicated, "good") == everything  # nothing missing, nothing twice
    assert sealed_ids(shredded, ATOMIC) == everything


def test_the_check_removes_a_marker_whose_shred_sealed_and_names_every_unfinished_one_on_s3(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A shred killed between its `_SUCCESS` and the marker's removal is complete; one sealed by a shred of an
    earlier dedup attempt of the run is not; the markers are read on S3 as the deployed jobs see them, whatever
    the ids' order (a driver spark-submit started: the line names the command, not that driver's interpreter)."""
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "41234")
    from jobs.fs.runs import UnfinishedShredError
    from jobs.fs.shreds import PendingShred, require_earlier_shred_complete

    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="out", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        options = ("--config", "s3://artifacts/jobs/1/config.json")
        markers = {}
        for run_id in (RUN_A, RUN_B, RUN_C):
            s3.put_object(Bucket="out", Key=f"deduplicated/run={run_id}/_SUCCESS", Body=b"")
            PendingShred(run_id, "s3://out/deduplicated", "s3://out/shredded", options).write()
            key = f"deduplicated/_shred_pending/run={run_id}.json"
            markers[run_id] = json.loads(s3.get_object(Bucket="out", Key=key)["Body"].read())

        def shred_sealed(run_id: str, attempt: str) -> None:
            summary = json.dumps({"job": "shred", "dedup_attempt": attempt}).encode()
            s3.put_object(Bucket="out", Key=f"shredded/run={run_id}/summary.json", Body=summary)
            s3.put_object(Bucket="out", Key=f"shredded/run={run_id}/_SUCCESS", Body=b"")

        assert markers[RUN_A]["dedup"] == f"s3://out/deduplicated/run={RUN_A}"
        assert markers[RUN_A]["shredded"] == "s3://out/shredded"
        shred_sealed(RUN_B, markers[RUN_B]["attempt"])  # killed before the removal
        shred_sealed(RUN_C, "an earlier attempt's")  # C's dedup was redone since

        with pytest.raises(UnfinishedShredError) as stopped:
            require_earlier_shred_complete("s3://out/deduplicated", "s3://out/shredded", "2026-11-24-04-00-00")
        assert str(stopped.value).endswith(
            f"nothing was written. The shreds of 1 more run(s) have not completed either: {RUN_C}. {COMPLETE}python "
            f"-m jobs shred --input s3://out/deduplicated/run={RUN_A}/good --output s3://out/shredded --run-id {RUN_A} "
            "--config s3://artifacts/jobs/1/config.json"
        )  # A, whose id is the earliest
        pending = s3.list_objects_v2(Bucket="out", Prefix="deduplicated/_shred_pending/")["Contents"]
        assert [item["Key"] for item in pending] == [
            f"deduplicated/_shred_pending/run={run_id}.json" for run_id in (RUN_A, RUN_C)
        ]  # B's removed
        shred_sealed(RUN_C, markers[RUN_C]["attempt"])
        require_earlier_shred_complete("s3://out/deduplicated", "s3://out/shredded", RUN_A)  # A's own redo passes
        pending = s3.list_objects_v2(Bucket="out", Prefix="deduplicated/_shred_pending/")["Contents"]
        assert [item["Key"] for item in pending] == [f"deduplicated/_shred_pending/run={RUN_A}.json"]


def test_a_damaged_marker_stops_the_check_naming_it_and_a_stray_file_is_no_marker(tmp_path: Path) -> None:
    from jobs.fs.shreds import DamagedShredMarkerError, require_earlier_shred_complete

    deduplicated, shredded = tmp_path / "out" / "deduplicated", tmp_path / "out" / "shredded"
    (deduplicated / "_shred_pending").mkdir(parents=True)
    (deduplicated / "_shred_pending" / "notes.txt").write_text("a stray file")
    require_earlier_shred_complete(str(deduplicated), str(shredded), RUN_B)
    (deduplicated / "_shred_pending" / f"run={RUN_A}.json").write_text('{"run_id": "')  # cut short
    with pytest.raises(DamagedShredMarkerError) as stopped:
        require_earlier_shred_complete(str(deduplicated), str(shredded), RUN_B)
    assert str(stopped.value) == (
        f"{deduplicated}/_shred_pending/run={RUN_A}.json: not a shred marker as a dedup run writes it "
        "(JSONDecodeError: Unterminated string starting at: line 1 column 12 (char 11)); nothing was written. Complete "
        f"run {RUN_A}'s shred ({PROG} shred --input {deduplicated}/run={RUN_A}/good with its pipeline's "
        f"--output, --run-id {RUN_A} and options), then remove the marker"
    )


def test_a_batch_of_no_new_event_is_shredded_empty_and_the_next_run_goes_on(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A batch of bad lines only (or one a re-sent batch whose events were all delivered before) leaves a dedup good/
    of no file: its shred seals an empty run, whether `run`'s step or a shred of its own, so no later run waits for a
    shred that could never be made (it once stopped with "holds no input files" and every later run with it)."""
    root, output = tmp_path / "in", tmp_path / "out"
    for batch, lines in (("bad", ["garbage\tline"]), ("c", [event(uuid(1))])):
        (root / batch).mkdir(parents=True)
        (root / batch / "events.tsv").write_text("".join(line + "\n" for line in lines), encoding="utf-8")

    def run(run_id: str, batch: str) -> list[str]:
        return ["run", "--input", str(root / batch), "--output", str(output), "--run-id", run_id]

    assert main(run(RUN_A, "bad")) == 0
    deduplicated, shredded = output / "deduplicated" / f"run={RUN_A}", output / "shredded" / f"run={RUN_A}"
    assert json.loads((shredded / "summary.json").read_text())["counts"] == {"input": 0, "good": 0, "bad": 0}
    assert (shredded / "_SUCCESS").exists() and not list((output / "deduplicated" / "_shred_pending").iterdir())
    again = ["shred", "--input", str(deduplicated), "--output", str(tmp_path / "again"), "--run-id", RUN_A]
    assert main(again) == 0  # the deployed way (a shred job of its own) passes its checks before Spark too
    assert main(run(RUN_B, "c")) == 0
    assert sealed_ids(output / "shredded", ATOMIC) == [uuid(1)]
