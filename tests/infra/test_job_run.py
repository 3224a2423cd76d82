"""keyed and table on EMR: `scripts/job_run.py` builds the StartJobRun request from the deployed stack."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scripts.job_run import JobRunError, job_arguments, main
from tests.infra.helpers import Synthesized

ACCOUNT, REGION = "123456789012", "eu-west-1"
OUTPUT = f"winnow-dev-output-{ACCOUNT}-{REGION}"
INPUT = f"winnow-dev-input-{ACCOUNT}-{REGION}"
ALLOWED = [f"s3://{INPUT}/enriched/", f"s3://{OUTPUT}/keyed/", f"s3://{OUTPUT}/tables/"]
CONFIG = "s3://artifacts/jobs/0.1.0-abc/config.json"
KEYED = ["keyed", "--input", f"s3://{INPUT}/enriched/orders/", "--output", f"s3://{OUTPUT}/keyed/orders/runs",
         "--state", f"s3://{OUTPUT}/keyed/orders/state", "--format", "jsonl", "--key", "id"]  # fmt: skip


def test_keyed_gets_the_deployed_config_and_a_run_id() -> None:
    assert job_arguments(KEYED, CONFIG, "2026-11-24-03-00-00", ALLOWED) == [
        *KEYED, "--config", CONFIG, "--run-id", "2026-11-24-03-00-00",
    ]  # fmt: skip
    insert = ["table", "insert", "--table", f"s3://{OUTPUT}/tables/orders", "--input", f"s3://{INPUT}/enriched/o/",
              "--format", "csv"]  # fmt: skip
    assert job_arguments(insert, CONFIG, "2026-11-24-03-00-00", ALLOWED) == [*insert, "--config", CONFIG]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["dedup", "--input", "x", "--output", "y"], "job: given 'dedup'; allowed: keyed, table (dedup and shred run "
         "through the pipeline state machine)"),
        (["keyed", "--input", "x"], "the job's arguments do not parse: keyed --input x (see python -m jobs keyed --help)"),
        ([*KEYED[:4], f"s3://{OUTPUT}/deduplicated/x", *KEYED[5:]], f"s3://{OUTPUT}/deduplicated/x: the job role "
         f"cannot write or read there; allowed: paths under {', '.join(ALLOWED)}"),
    ],
)  # fmt: skip
def test_requests_the_job_role_cannot_serve_stop_before_anything_starts(argv: list[str], message: str) -> None:
    with pytest.raises(JobRunError) as refused:
        job_arguments(argv, CONFIG, "2026-11-24-03-00-00", ALLOWED)
    assert str(refused.value) == message


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto with an EMR application and a Processing stack whose outputs name it."""
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": REGION}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        app_id = boto3.client("emr-serverless").create_application(
            name="winnow-dev", releaseLabel="emr-7.12.0", type="SPARK"
        )["applicationId"]
        outputs = {
            "ApplicationId": app_id, "JobRoleArn": f"arn:aws:iam::{ACCOUNT}:role/JobRole",
            "EntryPoint": "s3://artifacts/jobs/0.1.0-abc/emr_main.py", "ConfigUri": CONFIG,
            "SparkSubmitParameters": "--py-files s3://artifacts/jobs/0.1.0-abc/winnow_jobs.zip", "OutputBucketName": OUTPUT,
        }  # fmt: skip
        template = {
            "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},  # a stack needs a resource
            "Outputs": {key: {"Value": value} for key, value in outputs.items()},
        }
        boto3.client("cloudformation").create_stack(
            StackName="Winnow-dev-Processing", TemplateBody=json.dumps(template)
        )
        yield app_id


def test_start_runs_keyed_on_the_deployed_application(deployed: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--env", "dev", "--start", "--", *KEYED]) == 0
    printed = capsys.readouterr().out
    emr = boto3.client("emr-serverless")
    (run,) = [r for r in emr.list_job_runs(applicationId=deployed)["jobRuns"] if r["name"].startswith("keyed-")]
    assert printed.startswith(f"started {run['name']}: job run {run['id']} on application {deployed}")
    described: dict[str, Any] = emr.get_job_run(applicationId=deployed, jobRunId=run["id"])["jobRun"]
    driver = described["jobDriver"]["sparkSubmit"]
    assert driver["entryPoint"] == "s3://artifacts/jobs/0.1.0-abc/emr_main.py"
    assert driver["entryPointArguments"][: len(KEYED) + 2] == [*KEYED, "--config", CONFIG]
    assert described["executionRole"] == f"arn:aws:iam::{ACCOUNT}:role/JobRole"


def test_without_start_it_prints_the_aws_cli_command(deployed: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--env", "dev", "--", "table", "optimize", "--table", f"s3://{OUTPUT}/tables/orders"]) == 0
    command = capsys.readouterr().out.strip()
    assert command.startswith(f"aws emr-serverless start-job-run --application-id {deployed} --execution-role-arn ")
    assert '"entryPointArguments":["table","optimize","--table","s3://' in command


def test_the_processing_stack_outputs_what_the_script_reads(dev: Synthesized) -> None:
    from scripts.job_run import STACK_OUTPUTS

    outputs = dev.template("Processing").to_json()["Outputs"]
    assert set(STACK_OUTPUTS) <= set(outputs)
