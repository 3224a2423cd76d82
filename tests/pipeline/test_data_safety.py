"""Data safety through the command line: one writer per run folder, folders checked before they are replaced,
unreadable and empty input, inputs and outputs kept apart, one-line errors."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.fs.hadoop import FileSystem
from jobs.fs.input import count_lines, open_input, read_whole
from jobs.fs.lease import Lease, create_if_absent
from jobs.manifest import sqlite as sqlite_manifest
from jobs.manifest.base import run_key
from jobs.runtime.cli import main
from tests.pipeline.barrier import BARRIER_VARIABLE, with_barrier_after
from tests.pipeline.helpers import ID_A, ID_B, ID_C, RUN_ID, event, read_lines, run_folder_content

ROOT = Path(__file__).resolve().parents[2]
LINES = [event(ID_A), event(ID_A), event(ID_B, event_fingerprint="fp-2"), event(ID_C), "not an event"]


def write_input(folder: Path, lines: list[str] = LINES, name: str = "part-0.tsv") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return folder


def last_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert lines, "nothing on stderr"
    return lines[-1]


@pytest.fixture(scope="module")
def completed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Runs done once, for tests to copy, never to change: "dedup", a dedup run of `LINES`; "shred", a shred run of
    that dedup run's folder; "manifest", a dedup run of `LINES` with a new SQLite manifest, whose database is
    "manifest.db" (no lease beside it: released)."""
    root = tmp_path_factory.mktemp("completed")
    source = write_input(root / "in")
    assert main(["dedup", "--input", str(source), "--output", str(root / "dedup"), "--run-id", RUN_ID]) == 0
    run = root / "dedup" / f"run={RUN_ID}"
    assert main(["shred", "--input", str(run), "--output", str(root / "shred"), "--run-id", RUN_ID]) == 0
    database = root / "manifest" / "manifest.db"
    database.parent.mkdir()
    argv = ["dedup", "--input", str(source), "--output", str(root / "manifest-out"), "--run-id", RUN_ID]
    assert main([*argv, "--manifest", f"sqlite:{database}", "--create"]) == 0
    return {"dedup": root / "dedup", "shred": root / "shred", "manifest": root / "manifest-out",
            "manifest.db": database}  # fmt: skip


def copy_of(output: Path, to: Path) -> Path:
    """A copy of a completed run's output folder (its run folder with _SUCCESS, the released lease's folder)."""
    shutil.copytree(output, to)
    return to


# 1. Two writers of one run folder.


@pytest.mark.slow  # a second Spark process
def test_a_second_writer_of_a_run_folder_fails_fast_naming_the_first(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes: the first writer is this one (its run in a thread, held at the barrier once it holds the
    lease), the second a `python -m jobs` process, which stops at the lease (before any work)."""
    source, output, barrier = write_input(tmp_path / "in"), tmp_path / "out", tmp_path / "barrier"
    barrier.mkdir()
    argv = ("dedup", "--input", str(source), "--output", str(output), "--run-id", RUN_ID)
    monkeypatch.setenv(BARRIER_VARIABLE, str(barrier))
    monkeypatch.setattr(Lease, "acquire", with_barrier_after(Lease.acquire))
    codes: list[int] = []
    settings = spark.conf.get("spark.sql.shuffle.partitions")

    def first_writer() -> None:
        # The test session active in this thread too, as in the main thread: else the job's spark_session would
        # build its own and set the jobs' local settings on the one shared session.
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        codes.append(main(list(argv)))

    first = threading.Thread(target=first_writer, daemon=True)
    first.start()
    try:
        deadline = time.monotonic() + 180
        while not (barrier / "held").exists():  # the first writer holds the lease and waits
            assert first.is_alive(), "the first writer ended early"
            assert time.monotonic() < deadline, "the first writer did not take its lease within 180 s"
            time.sleep(0.1)
        second = subprocess.run([sys.executable, "-m", "jobs", *argv], cwd=ROOT, capture_output=True, text=True,
                                timeout=300)  # fmt: skip
    finally:
        (barrier / "go").touch()
        first.join(timeout=300)
    assert second.returncode == 1, second.stderr
    assert spark.conf.get("spark.sql.shuffle.partitions") == settings  # the shared session as it was
    line = last_error_line(second.stderr)
    assert line.startswith(f"error: {output}/run={RUN_ID} is being written by dedup run {RUN_ID} (host ")
    assert f"pid {os.getpid()}," in line and "nothing was written" in line
    assert codes == [0]  # the first writer completed
    good = read_lines(output / f"run={RUN_ID}" / "good")
    assert good == sorted([event(ID_A), event(ID_B, event_fingerprint="fp-2"), event(ID_C)])  # each line once
    assert not (output / "_leases" / f"run={RUN_ID}.json").exists()  # released


def test_a_stale_lease_stops_the_run_until_it_is_removed(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, output = write_input(tmp_path / "in"), tmp_path / "out"
    lease = output / "_leases" / f"run={RUN_ID}.json"
    holder = {"job": "dedup", "run_id": RUN_ID, "host": "worker-7", "pid": 4242, "started_at": "2026-11-22T03:00:01+00:00",
              "token": "killed"}  # fmt: skip
    assert create_if_absent(spark, str(lease), json.dumps(holder).encode())
    argv = ["dedup", "--input", str(source), "--output", str(output), "--run-id", RUN_ID]
    assert main(argv) == 1
    assert last_error_line(capsys.readouterr().err) == (
        f"error: {output}/run={RUN_ID} is being written by dedup run {RUN_ID} (host worker-7, pid 4242, since "
        f"2026-11-22T03:00:01+00:00); nothing was written. If that run is no longer running (killed or crashed), "
        f"remove its lease {lease} and run again"
    )
    assert not (output / f"run={RUN_ID}").exists()
    lease.unlink()  # the documented way out
    assert main(argv) == 0
    assert (output / f"run={RUN_ID}" / "_SUCCESS").exists() and not lease.exists()


def test_create_if_absent_is_exclusive_on_local_paths(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "a" / "lease.json"
    assert create_if_absent(spark, str(path), b"first")
    assert not create_if_absent(spark, str(path), b"second")
    assert path.read_bytes() == b"first"


@pytest.mark.aws
def test_create_if_absent_uses_s3_conditional_writes(spark: SparkSession) -> None:
    import boto3
    from moto import mock_aws

    with mock_aws():
        boto3.client("s3").create_bucket(
            Bucket="out-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
        )
        path = "s3://out-bucket/deduplicated/_leases/run=1.json"
        assert create_if_absent(spark, path, b"first")
        assert not create_if_absent(spark, path, b"second")
        assert create_if_absent(spark, path, b"first")  # a retry of a write that landed: it is ours
        body = boto3.client("s3").get_object(Bucket="out-bucket", Key="deduplicated/_leases/run=1.json")["Body"]
        assert body.read() == b"first"


def test_a_manifest_has_one_writer_at_a_time(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], completed: dict[str, Path]
) -> None:
    source = write_input(tmp_path / "in")
    other_run = "2026-11-22-02-00-00"
    # The first run (the fixture's: a dedup run that made the manifest) released the manifest's lease.
    manifest = shutil.copytree(completed["manifest.db"].parent, tmp_path / "manifest") / "manifest.db"
    assert not Path(f"{manifest}.lease").exists()  # released after the run
    argv = ["dedup", "--input", str(source), "--manifest", f"sqlite:{manifest}", "--create", "--run-id", RUN_ID]
    holder = {"job": "populate-manifest", "run_id": other_run, "host": "worker-2", "pid": 77,
              "started_at": "2026-11-22T03:59:00+00:00", "token": "other"}  # fmt: skip
    assert create_if_absent(spark, f"{manifest}.lease", json.dumps(holder).encode())
    capsys.readouterr()
    assert main([*argv, "--output", str(tmp_path / "second")]) == 1
    assert last_error_line(capsys.readouterr().err) == (
        f"error: manifest sqlite:{manifest} is being written by populate-manifest run {other_run} (host worker-2, "
        "pid 77, since 2026-11-22T03:59:00+00:00); nothing was written. If that run is no longer running (killed "
        f"or crashed), remove its lease {manifest}.lease and run again"
    )
    assert not (tmp_path / "second" / f"run={RUN_ID}").exists()
    assert not (tmp_path / "second" / "_leases" / f"run={RUN_ID}.json").exists()  # the run folder's lease released


@pytest.mark.aws
def test_the_dynamodb_writer_lease_is_one_item_put_only_if_absent() -> None:
    import boto3
    from moto import mock_aws

    from jobs.fs.lease import LeaseHeldError
    from jobs.manifest.dynamodb_client import DynamoDbClient
    from jobs.manifest.writer_lease import LEASE_KEY, DynamoDbLease

    with mock_aws():
        client = boto3.client("dynamodb")
        client.create_table(
            TableName="manifest", BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "eventId", "AttributeType": "S"},
                                  {"AttributeName": "fingerprint", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "eventId", "KeyType": "HASH"}, {"AttributeName": "fingerprint", "KeyType": "RANGE"}],
        )  # fmt: skip
        manifest = DynamoDbClient(client, "manifest", concurrency=1)
        first = DynamoDbLease(manifest, "manifest dynamodb://manifest", "dedup", RUN_ID)
        second = DynamoDbLease(manifest, "manifest dynamodb://manifest", "dedup", "2026-11-22-05-00-00")
        with first:
            with pytest.raises(LeaseHeldError) as held:
                second.acquire()
            assert str(held.value).startswith(
                f"manifest dynamodb://manifest is being written by dedup run {RUN_ID} (host "
            )
            assert str(held.value).endswith(
                "remove its lease: aws dynamodb delete-item --table-name manifest --key "
                """'{"eventId":{"S":"winnow:writer-lease"},"fingerprint":{"S":"writer"}}' and run again"""
            )
            second.release()  # not its lease: left alone
            assert "Item" in client.get_item(TableName="manifest", Key=LEASE_KEY)
        assert "Item" not in client.get_item(TableName="manifest", Key=LEASE_KEY)
        with second:
            assert json.loads(client.get_item(TableName="manifest", Key=LEASE_KEY)["Item"]["holder"]["S"])[
                "run_id"
            ] == ("2026-11-22-05-00-00")


# 3 (runs) and 7: outputs never inside inputs, inputs never inside outputs; nothing foreign is replaced.


@pytest.mark.parametrize("job", ["dedup", "shred", "run"])
@pytest.mark.parametrize(("input_name", "output_name"), [("in", "in"), ("in", "in/out"), ("out/in", "out")])
def test_output_and_input_must_be_apart(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], job: str, input_name: str, output_name: str
) -> None:
    source = write_input(tmp_path / input_name)
    before = sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*"))
    assert main([job, "--input", str(source), "--output", str(tmp_path / output_name), "--run-id", RUN_ID]) == 2
    line = last_error_line(capsys.readouterr().err)
    assert line.startswith(f"error: --output: given {tmp_path / output_name}") and f"--input {source}" in line
    assert sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*")) == before


def test_the_report_is_not_written_into_its_input(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_input(tmp_path / "in")
    assert main(["report", "--input", str(source), "--output", str(source / "report")]) == 2
    assert last_error_line(capsys.readouterr().err).startswith(f"error: --output: given {source / 'report'}")
    assert sorted(path.name for path in source.iterdir()) == ["part-0.tsv"]


def test_a_run_folder_holding_anything_else_is_not_replaced(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], completed: dict[str, Path]
) -> None:
    source, output = write_input(tmp_path / "in"), tmp_path / "out"
    precious = output / f"run={RUN_ID}" / "warehouse.parquet"
    precious.parent.mkdir(parents=True)
    precious.write_text("keep me")
    assert main(["dedup", "--input", str(source), "--output", str(output), "--run-id", RUN_ID]) == 2
    assert "holds warehouse.parquet, which a dedup run does not write; it is not replaced" in capsys.readouterr().err
    assert precious.read_text() == "keep me"
    # A shred run folder is not replaced by a dedup run either.
    shutil.rmtree(output)
    copy_of(completed["shred"], output)
    assert main(["dedup", "--input", str(source), "--output", str(output), "--run-id", RUN_ID]) == 2
    assert "holds a shred run, not a dedup run" in capsys.readouterr().err
    assert (output / f"run={RUN_ID}" / "output=good").is_dir()


# 5. Unreadable input files.


def gzip_input(folder: Path) -> tuple[Path, Path]:
    """Two gzip files of distinct events: one whole, one truncated halfway."""
    folder.mkdir(parents=True)
    good = [event(f"d0000000-0000-4000-8000-{i:012d}") for i in range(50)]
    many = [event(f"e0000000-0000-4000-8000-{i:012d}") for i in range(3000)]
    (folder / "whole.tsv.gz").write_bytes(gzip.compress("".join(line + "\n" for line in good).encode()))
    data = gzip.compress("".join(line + "\n" for line in many).encode())
    truncated = folder / "truncated.tsv.gz"
    truncated.write_bytes(data[: len(data) // 2])
    return folder / "whole.tsv.gz", truncated


def manifest_entries(database: Path) -> list[tuple[str, str]]:
    with contextlib.closing(sqlite3.connect(database)) as connection:
        return sorted(connection.execute(f"SELECT event_id, fingerprint FROM {sqlite_manifest.TABLE}").fetchall())


@pytest.mark.parametrize("job,manifest", [("dedup", False), ("dedup", True), ("shred", False)])
def test_a_truncated_gzip_stops_the_run_before_it_writes_naming_the_file(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], job: str, manifest: bool,
    completed: dict[str, Path],
) -> None:  # fmt: skip
    _, truncated = gzip_input(tmp_path / "in")
    output, database = tmp_path / "out", tmp_path / "manifest.db"
    options = ["--manifest", f"sqlite:{database}"] if manifest else []
    argv = [job, "--input", str(tmp_path / "in"), "--output", str(output), "--run-id", RUN_ID, *options]
    # An earlier complete attempt of the run stays in place (with a manifest, one that recorded its events: the
    # fixture's run with a new manifest, its output folder and database copied).
    if manifest:
        copy_of(completed["manifest"], output)
        shutil.copy(completed["manifest.db"], database)
        summary = output / f"run={RUN_ID}" / "summary.json"  # as if it had run here, with the manifest at its new place
        document = json.loads(summary.read_text())
        moved = {
            "output": str(output / f"run={RUN_ID}"),
            "manifest": {
                **document["manifest"],
                "uri": f"sqlite:{database}",
                "run_key": run_key(str(output / f"run={RUN_ID}"), RUN_ID),
            },
        }
        summary.write_text(json.dumps({**document, **moved}))
        (output / "_LAST_COMPLETED.json").unlink()  # it names the run at its first place
    else:
        copy_of(completed[job], output)
    earlier = sorted(str(path.relative_to(output)) for path in output.rglob("*"))
    recorded = manifest_entries(database) if manifest else []
    assert len(recorded) == (3 if manifest else 0)
    capsys.readouterr()

    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == err.strip().count("\n") + 1 and "Traceback" not in err
    line = last_error_line(err)
    size = truncated.stat().st_size
    assert line == (
        f"error: --input: 1 of 2 file(s) cannot be read, nothing was written: file://{truncated} ({size:,} bytes): "
        "java.io.EOFException: Unexpected end of input stream. Replace or remove them, or set "
        "input.skip_unreadable: true to skip them (listed in summary.json)"
    )
    assert sorted(str(path.relative_to(output)) for path in output.rglob("*")) == earlier
    if manifest:  # the manifest was not asked: not one of the readable file's events was recorded
        assert manifest_entries(database) == recorded


@pytest.mark.parametrize("job", ["dedup", "shred"])
def test_skip_unreadable_skips_and_lists_each_file(spark: SparkSession, tmp_path: Path, job: str) -> None:
    whole, truncated = gzip_input(tmp_path / "in")
    config = tmp_path / "config.json"
    config.write_text('{"input": {"skip_unreadable": true}}')
    output = tmp_path / "out"
    argv = [job, "--input", str(tmp_path / "in"), "--output", str(output), "--run-id", RUN_ID, "--config", str(config)]
    assert main(argv) == 0
    run = output / f"run={RUN_ID}"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["input_files"] == {
        "files": 1,
        "unreadable": [{"path": f"file://{truncated}", "size": truncated.stat().st_size,
                        "error": "java.io.EOFException: Unexpected end of input stream"}],
        "in_progress": [],
    }  # fmt: skip
    assert summary["counts"]["input"] == 50
    with gzip.open(whole, "rt") as handle:
        lines = sorted(handle.read().splitlines())
    if job == "dedup":
        assert read_lines(run / "good") == lines
    assert not (run / "_staging").exists()


def test_skip_unreadable_with_no_readable_file_stops_the_run(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole, truncated = gzip_input(tmp_path / "in")
    whole.unlink()
    config = tmp_path / "config.json"
    config.write_text('{"input": {"skip_unreadable": true}}')
    output = tmp_path / "out"
    argv = ["dedup", "--input", str(tmp_path / "in"), "--output", str(output), "--run-id", RUN_ID]
    assert main([*argv, "--config", str(config)]) == 1
    assert last_error_line(capsys.readouterr().err) == (
        f"error: --input: 1 of 1 file(s) cannot be read, nothing was written: file://{truncated} "
        f"({truncated.stat().st_size:,} bytes): java.io.EOFException: Unexpected end of input stream. "
        "Replace or remove them"
    )
    assert not (output / f"run={RUN_ID}").exists()


def test_a_file_arriving_after_the_listing_is_neither_read_nor_counted(spark: SparkSession, tmp_path: Path) -> None:
    source = open_input(spark, str(write_input(tmp_path / "in")))
    write_input(tmp_path / "in", [event(ID_A)] * 7, name="part-1.tsv")  # lands while the run starts
    read, lines = read_whole(spark, source, False, count_lines)
    assert (read.files, lines) == ((f"file://{tmp_path / 'in' / 'part-0.tsv'}",), len(LINES))
    assert read.lines(spark).count() == len(LINES)  # every later pass reads the same files


# 6. A rerun removes _SUCCESS first.


def test_a_rerun_removes_success_before_anything_else(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, completed: dict[str, Path]
) -> None:
    source, output = write_input(tmp_path / "in"), copy_of(completed["dedup"], tmp_path / "out")
    argv = ["dedup", "--input", str(source), "--output", str(output), "--run-id", RUN_ID]
    first = run_folder_content(output / f"run={RUN_ID}")
    deleted: list[str] = []
    delete = FileSystem.delete

    def recording_delete(self: FileSystem, path: str) -> None:
        deleted.append(path)
        delete(self, path)

    monkeypatch.setattr(FileSystem, "delete", recording_delete)
    assert main(argv) == 0
    run = f"{output}/run={RUN_ID}"
    # _SUCCESS first; the earlier attempt's outputs next, the marker of a completed run's redo kept until the seal
    assert deleted[0] == f"{run}/_SUCCESS"
    cleared = [path.rsplit("/", 1)[1] for path in deleted[1:6]]
    assert cleared == ["bad", "duplicates", "good", "quarantine", "summary.json"]
    assert f"{run}/_COMPLETED_BEFORE" in deleted and not Path(run, "_COMPLETED_BEFORE").exists()
    assert run_folder_content(output / f"run={RUN_ID}") == first


# 8. shred given a dedup run folder.


def test_shred_of_a_dedup_run_folder_reads_its_good_only(
    spark: SparkSession, tmp_path: Path, completed: dict[str, Path]
) -> None:
    run = completed["dedup"] / f"run={RUN_ID}"
    assert read_lines(run / "duplicates") and read_lines(run / "bad")  # there is something not to shred
    # a: the fixture's shred of the dedup run folder (`shred --input <run folder>`); b: of its good/ only.
    assert main(["shred", "--input", str(run / "good"), "--output", str(tmp_path / "b"), "--run-id", RUN_ID]) == 0
    a, b = completed["shred"] / f"run={RUN_ID}", tmp_path / "b" / f"run={RUN_ID}"
    assert json.loads((a / "summary.json").read_text())["counts"] == {"input": 3, "good": 3, "bad": 0}
    for name in ("output=good", "output=bad"):
        assert read_lines(a / name) == read_lines(b / name)


def test_shred_refuses_an_incomplete_dedup_run_and_a_folder_of_runs(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], completed: dict[str, Path]
) -> None:
    deduplicated = copy_of(completed["dedup"], tmp_path / "dedup")
    shred = ["shred", "--output", str(tmp_path / "s"), "--run-id", RUN_ID, "--input"]
    assert main([*shred, str(deduplicated)]) == 2
    assert f"error: --input: {deduplicated} holds run folders (run={RUN_ID})" in capsys.readouterr().err
    (deduplicated / f"run={RUN_ID}" / "_SUCCESS").unlink()
    assert main([*shred, str(deduplicated / f"run={RUN_ID}")]) == 2
    assert "is a dedup run without _SUCCESS (incomplete or being written)" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


# 9. Empty input.


@pytest.mark.parametrize("job", ["dedup", "shred", "run"])
def test_an_input_without_files_is_a_usage_error(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], job: str
) -> None:
    (tmp_path / "in" / "_hidden").mkdir(parents=True)
    (tmp_path / "in" / "_SUCCESS").touch()
    assert main([job, "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--run-id", RUN_ID]) == 2
    assert last_error_line(capsys.readouterr().err) == (
        f"error: --input: {tmp_path / 'in'} holds no input files (names starting with _ or . are skipped); "
        "nothing to do"
    )
    assert not list((tmp_path / "out").rglob("run=*"))


# 13 and 15, and --debug: usage and config errors are one line, exit 2.


def test_run_ids_take_ascii_digits_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = "\uff12026-11-22-04-00-00"  # a fullwidth 2
    assert main(["dedup", "--input", str(tmp_path), "--output", str(tmp_path / "o"), "--run-id", run_id]) == 2
    assert last_error_line(capsys.readouterr().err) == (
        f"error: --run-id: given {run_id!r}; allowed: YYYY-MM-DD-HH-MM-SS, e.g. 2026-11-22-03-00-00"
    )


def test_a_deeply_nested_config_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "deep.json"
    config.write_text("[" * 100_000 + "]" * 100_000)
    argv = ["dedup", "--input", str(tmp_path), "--output", str(tmp_path / "o"), "--config", str(config)]
    capsys.readouterr()
    assert main(argv) == 2  # in this process: stderr is the one line, nothing before it (Spark not started)
    stderr = capsys.readouterr().err
    assert stderr == f"error: config file {config} nests too deeply to be a job config\n"
    assert main([*argv, "--debug"]) == 2
    debug = capsys.readouterr().err
    assert debug.startswith("Traceback") and debug.endswith(stderr)


# 14. The DynamoDB manifest without a region or credentials: one line, exit 2.


@pytest.fixture
def bare_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No AWS settings but the ones a test sets: no profile files, no instance metadata, no region, no keys."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there: nothing leaves the host
    import boto3

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # it caches the credentials earlier tests resolved
    return monkeypatch


def dedup_against(manifest: str, tmp_path: Path) -> list[str]:
    source = write_input(tmp_path / "in")
    return [
        "dedup",
        "--input",
        str(source),
        "--output",
        str(tmp_path / "out"),
        "--run-id",
        RUN_ID,
        "--manifest",
        manifest,
    ]


def test_no_aws_region_is_one_line(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], bare_aws_environment: pytest.MonkeyPatch
) -> None:
    assert main(dedup_against("dynamodb://events", tmp_path)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert last_error_line(err) == (
        "error: manifest dynamodb://events: no AWS region; allowed: set AWS_REGION or AWS_DEFAULT_REGION, or a "
        "region in the AWS profile"
    )


def test_no_aws_credentials_is_one_line_and_aws_region_alone_is_honoured(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], bare_aws_environment: pytest.MonkeyPatch
) -> None:
    bare_aws_environment.setenv("AWS_REGION", "eu-central-1")
    assert main(dedup_against("dynamodb://events", tmp_path)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert last_error_line(err) == (
        "error: manifest dynamodb://events: cannot reach table events in region eu-central-1: Unable to locate "
        "credentials"
    )
    assert not (tmp_path / "out").exists()
