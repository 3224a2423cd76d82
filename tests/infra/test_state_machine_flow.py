"""The state machine's flow, executed in moto with the EMR job tasks swapped for stand-ins."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
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
    assert described["status"] == "SUCCEEDED", (described.get("error"), described.get("cause"))
    result: dict[str, Any] = json.loads(described["output"])
    return result


BUCKETS = {kind: f"winnow-dev-{kind}-{flow.ACCOUNT}-{flow.REGION}" for kind in ("input", "output", "artifacts")}


def lake(dev: Synthesized, config: dict[str, Any] | None = None) -> Any:
    """moto's S3 with the dev buckets and the deployed job config (the planner reads its `input` section),
    and the failure topic."""
    boto3.client("sns", region_name=flow.REGION).create_topic(Name=flow.topic_name(succeeding(dev)))
    s3 = boto3.client("s3", region_name=flow.REGION)
    for bucket in BUCKETS.values():
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": flow.REGION})
    version = dev.pipeline.processing.artifacts.version
    s3.put_object(Bucket=BUCKETS["artifacts"], Key=f"jobs/{version}/config.json", Body=json.dumps(config or {}))
    return s3


def dedup_arguments(result: dict[str, Any]) -> list[str]:
    arguments: list[str] = result["jobs"]["dedup"]["JobDriver"]["SparkSubmit"]["EntryPointArguments"]
    return arguments


@pytest.mark.usefixtures("aws")
def test_an_unnamed_start_hands_the_run_over_to_an_execution_named_after_it(dev: Synthesized) -> None:
    lake(dev)
    first = flow.start(succeeding(dev), {})
    run_id = first["startDate"].astimezone(UTC).strftime("%Y-%m-%d-%H-%M-%S")
    assert first["status"] == "SUCCEEDED", (first.get("error"), first.get("cause"))
    assert flow.states_entered(first["executionArn"]) == [
        "Defaults", "MergeInput", "RunIdFromTime", "Run", "NamedAfterRun", "StartNamedRun", "HandedOver",
    ]  # fmt: skip
    named = json.loads(first["output"])["handedOverTo"]["executionArn"]
    assert named.endswith(f":run-{run_id}")
    described = flow.wait(named)
    assert json.loads(described["input"]) == {"runId": run_id}
    result = output(described)
    assert result["run"]["runId"] == run_id and result["plan"]["files"] == 0  # an empty lake: nothing to do
    assert flow.states_entered(named)[-3:] == ["PlanInput", "AnythingNew", "NothingToDo"]


@pytest.mark.usefixtures("aws")
def test_a_second_execution_of_a_run_id_is_refused(dev: Synthesized) -> None:
    lake(dev)
    asl = succeeding(dev)
    assert flow.execute(asl, {"scheduledTime": "2026-11-22T03:00:00Z"})["status"] == "SUCCEEDED"
    # The same run started again from the console, with another input: Step Functions refuses the name.
    again = flow.start(asl, {"runId": "2026-11-22-03-00-00", "inputPrefix": "enriched/2026/"})
    assert (again["status"], again["error"]) == ("FAILED", "RunAlreadyStarted")
    assert again["cause"] == (
        "Run 2026-11-22-03-00-00 already has an execution named run-2026-11-22-03-00-00: a run id runs once. "
        "Redrive that execution, or start one named run-2026-11-22-03-00-00-<anything> to redo the run"
    )
    assert "Dedup" not in flow.states_entered(again["executionArn"])
    redo = flow.start(asl, {"runId": "2026-11-22-03-00-00", "inputPrefix": "enriched/2026/"},
                      name="run-2026-11-22-03-00-00-redo")  # fmt: skip
    assert dedup_arguments(output(redo))[6] == "2026-11-22-03-00-00"


@pytest.mark.usefixtures("aws")
def test_scheduled_runs_read_new_files_only_and_start_no_job_when_there_is_none(dev: Synthesized) -> None:
    s3 = lake(dev)
    asl = succeeding(dev)

    def put(key: str) -> str:
        s3.put_object(Bucket=BUCKETS["input"], Key=key, Body=b"line\n")
        return f"s3://{BUCKETS['input']}/{key}"

    def scheduled_run(time: str) -> dict[str, Any]:
        described = flow.execute(asl, {"scheduledTime": time})
        result = output(described)
        if result.get("args"):  # stand in for the dedup job, which completes the run's ledger entry
            s3.put_object(Bucket=BUCKETS["output"], Key=f"deduplicated/run={result['run']['runId']}/_SUCCESS", Body=b"")
        return result

    first_files = [put("enriched/2026/11/22/01/part-0.gz"), put("enriched/2026/11/22/02/part-0.gz")]
    first = scheduled_run("2026-11-22T03:00:00Z")
    assert dedup_arguments(first) == [
        "dedup", "--input", f"s3://{BUCKETS['input']}/enriched/", "--output", f"s3://{BUCKETS['output']}/deduplicated",
        "--run-id", "2026-11-22-03-00-00", "--config", dedup_arguments(first)[8], "--manifest",
        "dynamodb://winnow-dev-manifest", "--shredded", f"s3://{BUCKETS['output']}/shredded", "--incremental",
    ]  # fmt: skip
    assert first["plan"]["files"] == 2 and first["plan"]["entry"] == 1

    second_files = [put("enriched/2026/11/22/03/part-0.gz")]
    second = scheduled_run("2026-11-22T04:00:00Z")
    assert second["plan"]["files"] == 1 and second["plan"]["entry"] == 2

    third = scheduled_run("2026-11-22T05:00:00Z")
    assert (third["plan"]["files"], "jobs" in third) == (0, False)  # nothing new: no job run started
    named = f"arn:aws:states:{flow.REGION}:{flow.ACCOUNT}:execution:winnow-dev-pipeline:run-2026-11-22-05-00-00"
    assert "Dedup" not in flow.states_entered(named)

    entries = [
        json.loads(s3.get_object(Bucket=BUCKETS["output"], Key=f"deduplicated/_ledger/{n:020d}.json")["Body"].read())
        for n in (1, 2)
    ]
    assert [[file["path"] for file in entry["files"]] for entry in entries] == [first_files, second_files]


@pytest.mark.usefixtures("aws")
def test_a_backlog_is_worked_off_over_several_runs_within_the_configured_cap(dev: Synthesized) -> None:
    s3 = lake(dev, {"input": {"max_files": 2}})
    for hour in range(5):
        s3.put_object(Bucket=BUCKETS["input"], Key=f"enriched/2026/11/21/{hour:02d}/part-0.gz", Body=b"line\n")
    taken = []
    for hour in range(4):
        result = output(flow.execute(succeeding(dev), {"scheduledTime": f"2026-11-22T0{hour}:00:00Z"}))
        taken.append((result["plan"]["files"], result["plan"]["backlogFiles"]))
        key = f"deduplicated/run={result['run']['runId']}/_SUCCESS"
        s3.put_object(Bucket=BUCKETS["output"], Key=key, Body=b"")
    assert taken == [(2, 3), (2, 1), (1, 0), (0, 0)]


@pytest.mark.usefixtures("aws")
def test_a_run_while_an_earlier_one_is_unfinished_fails_naming_it(dev: Synthesized) -> None:
    s3 = lake(dev)
    s3.put_object(Bucket=BUCKETS["input"], Key="enriched/2026/11/22/01/part-0.gz", Body=b"line\n")
    assert output(flow.execute(succeeding(dev), {"scheduledTime": "2026-11-22T03:00:00Z"}))["plan"]["files"] == 1
    # No _SUCCESS for run 03:00 (it failed, or is still running): the next run does not start.
    described = flow.execute(succeeding(dev), {"scheduledTime": "2026-11-22T04:00:00Z"})
    assert (described["status"], described["error"]) == ("FAILED", "IncrementalRunError")
    assert "run 2026-11-22-03-00-00 (ledger entry 1, 1 files) has not completed" in described["cause"]
    assert flow.states_entered(described["executionArn"])[-3:] == ["PlanInput", "NotifyFailure", "Failed"]


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize(
    ("scheduled_time", "run_id"),
    [("2026-11-22T03:00:00Z", "2026-11-22-03-00-00"), ("2027-01-05T23:59:07.250Z", "2027-01-05-23-59-07")],
)
def test_scheduled_runs_take_their_run_id_from_the_scheduled_time(
    dev: Synthesized, scheduled_time: str, run_id: str
) -> None:
    lake(dev).put_object(Bucket=BUCKETS["input"], Key="enriched/2026/11/22/02/part-0.gz", Body=b"line\n")
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

    described = flow.execute(asl, {"runId": "2026-11-22-03-00-00", "inputPrefix": "enriched/"})

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


@pytest.mark.usefixtures("aws")
def test_each_job_s_figures_reach_cloudwatch_from_its_summary(dev: Synthesized) -> None:
    s3 = lake(dev)
    run_id = "2026-11-22-03-00-00"
    summaries = {
        "deduplicated": {"wall_time_seconds": 31.5, "input_files": {"files": 3},
                         "counts": {"input": 100, "good": 90, "bad": 2, "duplicates": 7, "quarantined": 1, "dropped": 0}},
        "shredded": {"wall_time_seconds": 12.0, "counts": {"input": 90, "good": 89, "bad": 1}},
    }  # fmt: skip
    for prefix, summary in summaries.items():
        s3.put_object(Bucket=BUCKETS["output"], Key=f"{prefix}/run={run_id}/summary.json", Body=json.dumps(summary))
    result = output(flow.execute(succeeding(dev), {"runId": run_id, "inputPrefix": "enriched/"}))
    assert "metricsErrors" not in result
    cloudwatch = boto3.client("cloudwatch", region_name=flow.REGION)
    published = {}
    for metric in cloudwatch.list_metrics(Namespace="Winnow")["Metrics"]:
        dimensions = {d["Name"]: d["Value"] for d in metric["Dimensions"]}
        assert dimensions["Env"] == "dev"
        stats = cloudwatch.get_metric_statistics(
            Namespace="Winnow", MetricName=metric["MetricName"], Dimensions=metric["Dimensions"],
            StartTime=datetime.now(UTC) - timedelta(hours=1), EndTime=datetime.now(UTC) + timedelta(hours=1),
            Period=3600, Statistics=["Sum"],
        )["Datapoints"]  # fmt: skip
        published[(dimensions["Job"], metric["MetricName"])] = stats[0]["Sum"]
    assert published == {
        ("dedup", "DurationSeconds"): 31.5, ("dedup", "InputLines"): 100, ("dedup", "Duplicates"): 7,
        ("dedup", "Quarantined"): 1, ("dedup", "Bad"): 2,
        ("shred", "DurationSeconds"): 12.0, ("shred", "InputLines"): 90, ("shred", "Bad"): 1,
    }  # fmt: skip


@pytest.mark.usefixtures("aws")
def test_a_missing_summary_is_recorded_and_never_fails_the_run(dev: Synthesized) -> None:
    lake(dev)
    result = output(flow.execute(succeeding(dev), {"runId": "2026-11-22-03-00-00", "inputPrefix": "enriched/"}))
    assert set(result["metricsErrors"]) == {"dedup", "shred"}
    assert result["metricsErrors"]["dedup"]["Error"].endswith("NoSuchKeyException")


LOADER_QUEUE = "winnow-dev-shredding-complete.fifo"


def shredding_complete(run_id: str, types: int) -> str:
    """A `shredding_complete` message (compact JSON, as the shred job writes it) of a run with `types` entity
    types: 100 of them make it longer than the 10,000 characters `States.Hash` takes."""
    message = {
        "schema": "iglu:com.snowplowanalytics.snowplow.storage.rdbloader/shredding_complete/jsonschema/2-0-1",
        "data": {
            "base": f"s3://{BUCKETS['output']}/shredded/run={run_id}/",
            "typesInfo": {"transformation": "SHREDDED", "types": [
                {"schemaKey": f"iglu:com.acme/entity_{n}/jsonschema/1-0-0", "format": "JSON",
                 "snowplowEntity": "CONTEXT"} for n in range(types)
            ]},
            "timestamps": {"jobStarted": "2026-11-22T03:10:00.000Z", "jobCompleted": "2026-11-22T03:20:00.000Z",
                           "min": None, "max": None},
            "compression": "GZIP", "processor": {"artifact": "winnow", "version": "0.1.0"}, "count": {"good": 89},
        },
    }  # fmt: skip
    return json.dumps(message, separators=(",", ":"))


def put_loader_message(s3: Any, run_id: str, text: str) -> str:
    """Stand in for the shred job: the run folder's message file; its ETag."""
    key = f"shredded/run={run_id}/shredding_complete.json"
    etag: str = s3.put_object(Bucket=BUCKETS["output"], Key=key, Body=text.encode())["ETag"]
    return etag


@pytest.mark.usefixtures("aws")
def test_a_shred_run_s_message_reaches_the_loader_queue_once(dev: Synthesized) -> None:
    s3 = lake(dev)
    sqs = boto3.client("sqs", region_name=flow.REGION)
    # Without content-based deduplication: the state machine's deduplication id is what keeps a resend out.
    queue = sqs.create_queue(QueueName=LOADER_QUEUE, Attributes={"FifoQueue": "true"})["QueueUrl"]
    run_id = "2026-11-22-03-00-00"
    text = shredding_complete(run_id, types=100)
    assert len(text) > 10_000
    etag = put_loader_message(s3, run_id, text)
    asl = flow.with_jobs_as_pass(dev, loader=True)

    described = flow.execute(asl, {"runId": run_id, "inputPrefix": "enriched/"})
    # The run again (a redo of the same run id, or a redrive): the same file, sent again within SQS's 5 minutes,
    # is not queued twice (and RDB Loader's manifest would skip a loaded folder anyway).
    again = flow.start(asl, {"runId": run_id, "inputPrefix": "enriched/"}, name=f"run-{run_id}-again")

    result = output(described)
    assert output(again)["loaderMessage"]["messageId"]
    # After the shred job's metrics step (here it fails: no summary.json, which never stops the run).
    assert flow.states_entered(described["executionArn"])[-4:] == [
        "ReadShredSummary", "ReadLoaderMessage", "SendLoaderMessage", "Succeeded",
    ]  # fmt: skip
    queued = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    assert queued == {"ApproximateNumberOfMessages": "1"}
    (message,) = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert message["Body"] == text
    assert result["loaderMessage"] == {"messageId": message["MessageId"]}  # the text is not kept in the output
    assert message["Attributes"]["MessageGroupId"] == "shredding"
    assert message["Attributes"]["MessageDeduplicationId"] == hashlib.sha256(f"{run_id} {etag}".encode()).hexdigest()


@pytest.mark.usefixtures("aws")
def test_a_message_that_cannot_be_sent_fails_the_run_saying_the_loader_was_not_told(dev: Synthesized) -> None:
    s3 = lake(dev)
    run_id = "2026-11-22-03-00-00"
    put_loader_message(s3, run_id, shredding_complete(run_id, types=2))
    asl = flow.with_jobs_as_pass(dev, loader=True)
    for state in ("ReadLoaderMessage", "SendLoaderMessage"):  # the same retries, faster
        asl["States"][state]["Retry"] = [
            {**retry, "IntervalSeconds": 1, "BackoffRate": 1} for retry in asl["States"][state]["Retry"]
        ]
    sns, sqs = boto3.client("sns", region_name=flow.REGION), boto3.client("sqs", region_name=flow.REGION)
    failures = sqs.create_queue(QueueName="failures")["QueueUrl"]
    failures_arn = sqs.get_queue_attributes(QueueUrl=failures, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topic = sns.create_topic(Name=flow.topic_name(asl))["TopicArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=failures_arn)

    described = flow.execute(asl, {"runId": run_id, "inputPrefix": "enriched/"})  # no loader queue exists

    assert (described["status"], described["error"]) == ("FAILED", "LoaderMessageNotSent")
    folder = f"s3://{BUCKETS['output']}/shredded/run={run_id}/"
    assert re.fullmatch(
        re.escape(
            f"Run {run_id} is complete ({folder} is sealed with _SUCCESS) but RDB Loader was not told: sending its "
            f"shredding_complete.json to sqs://{LOADER_QUEUE} failed with sqs.QueueDoesNotExistException: The "
            "specified queue does not exist. (Service: sqs, Status Code: 400, Request ID: "
        )
        + r"\w+\)\. "
        + re.escape(
            f"Redrive this execution, or start one named run-{run_id}-resend with this runId (the run is redone, "
            "rerun-safe, and its message sent)"
        ),
        described["cause"],
    ), described["cause"]
    assert flow.states_entered(described["executionArn"])[-5:] == [
        "ReadLoaderMessage", "SendLoaderMessage", "LoaderNotTold", "NotifyFailure", "Failed",
    ]  # fmt: skip
    assert flow.task_failures(described["executionArn"], "aws-sdk:sqs") == 4  # the first attempt and 3 retries
    (message,) = sqs.receive_message(QueueUrl=failures, MaxNumberOfMessages=10)["Messages"]
    notification = json.loads(json.loads(message["Body"])["Message"])
    assert (notification["error"], notification["cause"]) == ("LoaderMessageNotSent", described["cause"])
    assert notification["run"]["runId"] == run_id
