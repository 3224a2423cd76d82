"""Throttling slows a run and changes nothing: a DynamoDB stand-in on 127.0.0.1 that serves at most N
requests a second, against the paced and patient manifest client. Transient server errors (500, 503) are
waited out the same way."""

from __future__ import annotations

import json
import re
import shlex
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from pyspark.sql import SparkSession

from jobs.manifest import dynamodb
from jobs.runtime.cli import main
from scripts.rehearsal.moto_server import serving
from tests.pipeline.helpers import run_folder_content
from tests.pipeline.manifest_server import Faults, dynamodb_on_loopback

RUNS = ("2026-11-22-03-00-00", "2026-11-23-03-00-00")
TABLE = "events-manifest"


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two batches of generated events, copies across them: cross-batch work for the manifest."""
    folder = tmp_path_factory.mktemp("generated")
    assert main(["generate", "--output", str(folder), "--events", "40", "--batches", "2", "--seed", "13",
                 "--duplicate-share", "0.2"]) == 0  # fmt: skip
    return folder


@pytest.fixture(scope="module")
def expected(
    spark: SparkSession, batches: Path, tmp_path_factory: pytest.TempPathFactory
) -> list[dict[str, list[str]]]:
    """The two runs' folders with an untroubled manifest (SQLite): what every troubled run must give."""
    reference = tmp_path_factory.mktemp("reference")
    return two_runs(batches, reference / "out", f"sqlite:{reference / 'manifest.db'}", "--create")


@pytest.fixture
def faults() -> Faults:
    return Faults()


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch, faults: Faults) -> Iterator[str]:
    with dynamodb_on_loopback(faults) as url:
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        yield url


def provisioned_table(endpoint: str, writes: int, reads: int) -> None:
    """The manifest table as the Storage stack makes it, provisioned (the proxy passes DDL through)."""
    client = boto3.client("dynamodb", endpoint_url=endpoint)
    client.create_table(
        TableName=TABLE,
        AttributeDefinitions=[{"AttributeName": "eventId", "AttributeType": "S"},
                              {"AttributeName": "fingerprint", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "eventId", "KeyType": "HASH"}, {"AttributeName": "fingerprint", "KeyType": "RANGE"}],
        BillingMode="PROVISIONED",
        ProvisionedThroughput={"ReadCapacityUnits": reads, "WriteCapacityUnits": writes},
    )  # fmt: skip
    client.update_time_to_live(TableName=TABLE, TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"})


def two_runs(batches: Path, output: Path, manifest: str, *extra: str) -> list[dict[str, list[str]]]:
    for batch, run_id in zip(("batch=1", "batch=2"), RUNS, strict=True):
        argv = ["dedup", "--input", str(batches / batch), "--output", str(output), "--run-id", run_id]
        assert main([*argv, "--manifest", manifest, *extra]) == 0
    return [run_folder_content(output / f"run={run_id}") for run_id in RUNS]


def one_attempt(tmp_path: Path, **manifest: int) -> str:
    """A config of one attempt per request: botocore never retries, so the client itself waits out each fault."""
    config = tmp_path / "one-attempt.json"
    config.write_text(json.dumps({"manifest": {"max_attempts": 1, **manifest}}))
    return str(config)


def manifest_summary(output: Path, run_id: str) -> dict[str, Any]:
    figures: dict[str, Any] = json.loads((output / f"run={run_id}" / "summary.json").read_text())["manifest"]
    return figures


@pytest.mark.slow  # seconds of throttling on every request
def test_sustained_throttling_slows_the_run_and_changes_nothing(
    batches: Path, tmp_path: Path, endpoint: str, faults: Faults, expected: list[dict[str, list[str]]]
) -> None:
    # The table claims far more than the stand-in serves (as when another job shares it): every second, all
    # requests above 20 are throttled. With one attempt per request every throttle is waited out by the client
    # itself, as when botocore's retry quota (500 tokens, 5 a retry) is drained.
    provisioned_table(endpoint, writes=1000, reads=1000)
    faults.max_per_second = 20
    # Two requests in flight a task, not 16: still far more than 20 a second, so throttled all along; but not 32
    # threads waiting out ever longer (doubling) waits for the same 20 a second, which only made the run longer.
    settings = one_attempt(tmp_path, concurrency=2)

    assert two_runs(batches, tmp_path / "out", f"dynamodb://{TABLE}", "--config", settings) == expected
    waits = sum(manifest_summary(tmp_path / "out", run_id)["throttle_waits"] for run_id in RUNS)
    assert faults.throttled > 0 and waits == faults.throttled  # each one waited out by the client


def test_requests_are_paced_to_the_table_capacity(
    batches: Path, tmp_path: Path, endpoint: str, faults: Faults, expected: list[dict[str, list[str]]]
) -> None:
    provisioned_table(endpoint, writes=30, reads=15)  # 30 puts and 30 queries a second in all
    faults.max_per_second = 75  # the stand-in serves a little more than that
    assert two_runs(batches, tmp_path / "out", f"dynamodb://{TABLE}") == expected
    assert faults.throttled == 0
    assert manifest_summary(tmp_path / "out", RUNS[1])["pacing"] == {
        "capacity": "provisioned capacity",
        "table_writes_per_second": 30.0,
        "table_queries_per_second": 30.0,
        "tasks_at_once": 2,
        "writes_per_second_per_task": 15.0,
        "queries_per_second_per_task": 15.0,
    }


def test_transient_server_errors_are_waited_out_and_change_nothing(
    batches: Path, tmp_path: Path, endpoint: str, faults: Faults, expected: list[dict[str, list[str]]]
) -> None:
    provisioned_table(endpoint, writes=1000, reads=1000)
    # Two of each: 500 InternalServerError, 503 ServiceUnavailable, a 500 without a DynamoDB error code.
    faults.server_errors = 6

    assert two_runs(batches, tmp_path / "out", f"dynamodb://{TABLE}", "--config", one_attempt(tmp_path)) == expected
    figures = [manifest_summary(tmp_path / "out", run_id) for run_id in RUNS]
    assert faults.server_errored == 6
    assert sum(run["server_error_waits"] for run in figures) == 6
    assert sum(run["throttle_waits"] for run in figures) == 0


def test_server_errors_past_the_patience_stop_the_run_with_one_line(
    spark: SparkSession, batches: Path, tmp_path: Path, endpoint: str, faults: Faults,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    provisioned_table(endpoint, writes=1000, reads=1000)
    faults.server_errors, faults.server_error_kinds = -1, ("ServiceUnavailable",)  # for good
    config = tmp_path / "impatient.json"
    config.write_text('{"manifest": {"max_attempts": 1, "throttle_patience_seconds": 1}}')  # the least allowed
    out = tmp_path / "out"
    argv = ["dedup", "--input", str(batches / "batch=1"), "--output", str(out), "--run-id", RUNS[0]]
    capsys.readouterr()

    assert main([*argv, "--manifest", f"dynamodb://{TABLE}", "--config", str(config)]) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    # An id's first request is its look-up (cross-batch synthetic detection is on by default).
    assert re.fullmatch(
        rf"error: dedup run {RUNS[0]} failed, no _SUCCESS written: ManifestServerError: manifest table "
        rf"{TABLE}: a query kept failing with ServiceUnavailable \(HTTP 503\) for [0-9]+ s "
        r"\(manifest.throttle_patience_seconds: 1\); nothing is lost: rerun with the same run id "
        r"\(run with --debug for the traceback\)",
        line,
    ), line
    assert not (out / f"run={RUNS[0]}" / "_SUCCESS").exists()


def test_a_run_stopped_by_an_outage_that_also_keeps_its_lease_says_how_to_remove_it(
    spark: SparkSession, batches: Path, tmp_path: Path, endpoint: str, faults: Faults,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """FAULTS 6 (DynamoDB answering 500 for the rest of the run). Before (attack 9): the line said "nothing is lost:
    rerun with the same run id", the error of the lease's release, which DynamoDB refused too; that rerun was
    refused, the lease still held. Now the line says the lease was kept and how to remove it; done as printed once
    DynamoDB answers, the rerun completes."""
    provisioned_table(endpoint, writes=1000, reads=1000)
    faults.server_errors, faults.lease_down = -1, True
    config = tmp_path / "impatient.json"
    config.write_text('{"manifest": {"max_attempts": 1, "throttle_patience_seconds": 1}}')
    out = tmp_path / "out"
    argv = ["dedup", "--input", str(batches / "batch=1"), "--output", str(out), "--run-id", RUNS[0],
            "--manifest", f"dynamodb://{TABLE}", "--config", str(config)]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "nothing is lost: rerun with the same run id. Its lease on manifest dynamodb://" in line, line
    removal = re.search(r"before running again, remove its lease: (aws dynamodb delete-item .*\}') \(run", line)
    assert removal is not None, line
    faults.server_errors, faults.lease_down = 0, False  # DynamoDB answers again
    assert main(argv) == 1  # the lease is still there: the rerun alone is refused
    assert "is being written by dedup run" in capsys.readouterr().err
    words = shlex.split(removal.group(1))  # the printed command, as the shell gives it to the AWS CLI
    key = json.loads(words[words.index("--key") + 1])
    boto3.client("dynamodb", endpoint_url=endpoint).delete_item(
        TableName=words[words.index("--table-name") + 1], Key=key
    )
    assert main(argv) == 0
    assert (out / f"run={RUNS[0]}" / "_SUCCESS").exists()


def test_a_manifest_request_that_gets_no_answer_stops_within_the_patience_naming_the_table_and_the_way_out() -> None:
    """FAULTS 6 (DynamoDB answering slowly). Before: each of botocore's attempts waited out its 60 s timeout whatever
    `manifest.throttle_patience_seconds` said (a 20 s patience ran 150-540 s), and botocore's ReadTimeoutError left the
    task: the run ended on `Py4JJavaError: An error occurred while calling o455.count.` (attack 6). Now each attempt
    waits its share of the patience, and the failure names the table, the operation, the cause and the way out
    (`ManifestServerError`, which the run's last line shows whole)."""
    from jobs.manifest.dynamodb import DynamoDbManifest
    from jobs.manifest.dynamodb_client import DynamoDbClient, ManifestServerError

    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts connections, never answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        table = DynamoDbManifest("dynamodb://events-manifest", "events-manifest", "eu-west-1", endpoint,
                                 max_attempts=1, patience_seconds=5)  # fmt: skip
        client = table._client()
        assert (client.meta.config.read_timeout, client.meta.config.connect_timeout) == (5, 5)
        manifest = DynamoDbClient(client, "events-manifest", concurrency=1, patience_seconds=5)
        with pytest.raises(ManifestServerError) as stopped:
            manifest.call("put_item", None, TableName="events-manifest", Item={"eventId": {"S": "e"}})
    assert re.fullmatch(
        r"manifest table events-manifest: a put_item got no answer in 1 attempt\(s\) \(ReadTimeoutError: Read timeout on "
        r"endpoint URL: \"http://127\.0\.0\.1:[0-9]+/\"; [0-9]+ s\); nothing is lost: rerun with the same run id "
        r"once DynamoDB answers",
        str(stopped.value),
    ), stopped.value
    default = DynamoDbManifest("dynamodb://t", "t")._client().meta.config
    assert (default.read_timeout, default.connect_timeout) == (60, 60)  # the default patience (3600 s): botocore's own


@contextmanager
def answering_500() -> Iterator[str]:
    """An endpoint on 127.0.0.1 that answers every request with a bare 500 (as a failing proxy or moto does)."""

    class Failing(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = b"<h1>Internal Server Error</h1>"
            self.send_response(500)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Failing)) as url:
        yield url


def dedup_at_start_up(
    endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """A dedup run against `endpoint` with a patience of 1 s in one attempt: its exit code and last line. An attempt
    waits its share of the patience, 1 s here (the shortest, 5 s, lowered for the test)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setattr(dynamodb, "SHORTEST_TIMEOUT_SECONDS", 0.5)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "events.tsv").write_text("x\n")  # the input is only listed: the run stops before reading it
    argv = ["dedup", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--run-id", RUNS[0],
            "--manifest", f"dynamodb://{TABLE}", "--config", one_attempt(tmp_path, throttle_patience_seconds=1)]  # fmt: skip
    capsys.readouterr()
    code = main(argv)
    assert not (tmp_path / "out").exists()  # nothing written
    return code, capsys.readouterr().err.strip().splitlines()[-1]


def test_a_start_up_check_that_gets_no_answer_stops_within_the_patience_with_the_way_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """FAULTS 7 (06.sh, DynamoDB answering nothing from the run's start). Before: the check before Spark started
    waited botocore's 60 s a attempt whatever the patience, and the outage was a configuration error: exit 2 after
    609 s with a 20 s patience, "cannot reach table T in region R: Read timeout on endpoint URL", no way out."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts connections, never answers
        code, line = dedup_at_start_up(f"http://127.0.0.1:{silent.getsockname()[1]}", tmp_path, monkeypatch, capsys)
    assert code == 1, line
    assert re.fullmatch(
        rf"error: manifest table {TABLE}: a describe_table got no answer in 1 attempt\(s\) \(ReadTimeoutError: Read "
        r"timeout on endpoint URL: \"http://127\.0\.0\.1:[0-9]+/\"; [0-9]+ s\); nothing is lost: rerun with the same "
        r"run id once DynamoDB answers",
        line,
    ), line


def test_a_start_up_check_answered_500_past_the_patience_stops_with_the_way_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """FAULTS 7 (06.sh, MODE=500). Before: exit 2 after botocore's attempts, "DescribeTable on T in region R was
    refused: 500", a configuration error, no way out; during the run the same 500s are waited out for the patience."""
    with answering_500() as endpoint:
        code, line = dedup_at_start_up(endpoint, tmp_path, monkeypatch, capsys)
    assert code == 1, line
    assert re.fullmatch(
        rf"error: manifest table {TABLE}: a describe_table kept failing with HTTP 500 for [0-9]+ s "
        r"\(manifest.throttle_patience_seconds: 1\); nothing is lost: rerun with the same run id",
        line,
    ), line


@pytest.mark.parametrize("step", ["check", "create", "paced"])
def test_every_request_before_the_run_stops_on_no_answer_as_an_outage(
    step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `dedup --create` and the job itself ask before any event (`create`, `check`, `paced`): an outage is a
    ManifestServerError (exit 1, the way out named), as it is during the run; before, a configuration error (exit 2)."""
    from jobs.manifest.dynamodb import DynamoDbManifest
    from jobs.manifest.dynamodb_client import ManifestServerError

    monkeypatch.setattr(dynamodb, "SHORTEST_TIMEOUT_SECONDS", 0.5)
    with socket.create_server(("127.0.0.1", 0)) as silent:
        table = DynamoDbManifest(f"dynamodb://{TABLE}", TABLE, "eu-west-1", f"http://127.0.0.1:{silent.getsockname()[1]}",
                                 max_attempts=1, patience_seconds=1)  # fmt: skip
        with pytest.raises(ManifestServerError, match=rf"^manifest table {TABLE}: a [a-z_]+ got no answer in 1 "):
            getattr(table, step)(*((2,) if step == "paced" else ()))
