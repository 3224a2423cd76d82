"""The state machine's flow, executed in moto with the EMR job tasks swapped for stand-ins."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC
from typing import Any

import boto3
import pytest

from tests.infra import flow
from tests.infra.helpers import Synthesized


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with flow.moto_flow(monkeypatch):
        yield


def succeeding(dev: Synthesized) -> dict[str, Any]:
    return flow.with_jobs_as_pass(dev)


def output(described: dict[str, Any]) -> dict[str, Any]:
    assert described["status"] == "SUCCEEDED", described
    result: dict[str, Any] = json.loads(described["output"])
    return result


@pytest.mark.usefixtures("aws")
def test_empty_console_input_runs_both_jobs_with_the_start_time_as_run_id(dev: Synthesized) -> None:
    described = flow.execute(succeeding(dev), {})
    result = output(described)
    run_id = described["startDate"].astimezone(UTC).strftime("%Y-%m-%d-%H-%M-%S")
    assert result["run"]["runId"] == run_id
    assert result["run"]["inputPrefix"] == "enriched/"
    dedup_args = result["jobs"]["dedup"]["JobDriver"]["SparkSubmit"]["EntryPointArguments"]
    assert dedup_args[:7] == [
        "dedup",
        "--input",
        f"s3://winnow-dev-input-{flow.ACCOUNT}-{flow.REGION}/enriched/",
        "--output",
        f"s3://winnow-dev-output-{flow.ACCOUNT}-{flow.REGION}/deduplicated",
        "--run-id",
        run_id,
    ]
    assert result["jobs"]["dedup"]["Name"] == f"dedup-{run_id}"
    assert result["jobs"]["shred"]["Name"] == f"shred-{run_id}"
    assert flow.states_entered(described["executionArn"]) == [
        "Defaults",
        "MergeInput",
        "RunIdFromTime",
        "Run",
        "JobArguments",
        "Dedup",
        "Shred",
        "Succeeded",
    ]


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize(
    ("scheduled_time", "run_id"),
    [("2026-11-22T03:00:00Z", "2026-11-22-03-00-00"), ("2027-01-05T23:59:07.250Z", "2027-01-05-23-59-07")],
)
def test_scheduled_runs_take_their_run_id_from_the_scheduled_time(
    dev: Synthesized, scheduled_time: str, run_id: str
) -> None:
    result = output(flow.execute(succeeding(dev), {"scheduledTime": scheduled_time}))
    assert result["run"]["runId"] == run_id
    shred_args = result["jobs"]["shred"]["JobDriver"]["SparkSubmit"]["EntryPointArguments"]
    assert shred_args[:3] == [
        "shred",
        "--input",
        f"s3://winnow-dev-output-{flow.ACCOUNT}-{flow.REGION}/deduplicated/run={run_id}/good",
    ]


@pytest.mark.usefixtures("aws")
def test_console_input_overrides_run_id_and_input_prefix(dev: Synthesized) -> None:
    result = output(
        flow.execute(succeeding(dev), {"runId": "2026-11-20-00-00-00", "inputPrefix": "enriched/2026/11/20/"})
    )
    args = result["jobs"]["dedup"]["JobDriver"]["SparkSubmit"]["EntryPointArguments"]
    assert args[2] == f"s3://winnow-dev-input-{flow.ACCOUNT}-{flow.REGION}/enriched/2026/11/20/"
    assert args[6] == "2026-11-20-00-00-00"


@pytest.mark.usefixtures("aws")
def test_a_failed_job_is_retried_then_notifies_the_topic_and_fails_with_the_cause(dev: Synthesized) -> None:
    asl = flow.as_pass(flow.definition(dev), "Shred")
    asl = flow.as_failing_task(asl, "Dedup")
    sns, sqs = boto3.client("sns", region_name=flow.REGION), boto3.client("sqs", region_name=flow.REGION)
    topic = sns.create_topic(Name=flow.topic_name(asl))["TopicArn"]
    queue = sqs.create_queue(QueueName="failures")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)

    described = flow.execute(asl, {"runId": "2026-11-22-03-00-00"})

    assert described["status"] == "FAILED"
    assert described["error"] == "DynamoDB.ResourceNotFoundException"
    entered = flow.states_entered(described["executionArn"])
    assert entered[-3:] == ["Dedup", "NotifyFailure", "Failed"]
    assert "Shred" not in entered
    assert flow.task_failures(described["executionArn"]) == 2  # the first attempt and its one retry
    (message,) = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    notification = json.loads(json.loads(message["Body"])["Message"])
    assert notification["pipeline"] == "winnow-dev"
    assert notification["run"]["runId"] == "2026-11-22-03-00-00"
    assert notification["error"] == "DynamoDB.ResourceNotFoundException"
    assert notification["execution"] == described["executionArn"]
