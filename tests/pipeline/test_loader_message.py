"""The RDB Loader `shredding_complete` message: its exact encoding, the 2-0-1 schema, and sending it (moto)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import boto3
import jsonschema  # type: ignore[import-untyped]
import pytest
from moto import mock_aws

from jobs.contract import QueueTarget, parse_queue
from jobs.errors import InvalidConfigError, LoaderMessageError, WinnowError
from jobs.shred.message import (
    SCHEMA_URI,
    LoaderType,
    base_uri,
    collector_instant,
    instant_text,
    message_text,
    send,
    shredding_complete,
)

SCHEMA_FILE = (
    Path(__file__).parent.parent
    / "data/iglu/com.snowplowanalytics.snowplow.storage/shredding_complete/jsonschema/2-0-1"
)
STARTED = datetime(2026, 11, 22, 4, 0, 0, tzinfo=UTC)
COMPLETED = datetime(2026, 11, 22, 4, 3, 7, 123456, tzinfo=UTC)
EVENT_A = "iglu:com.acme/event-a/jsonschema/1-0-0"
CONTEXT_B = "iglu:com.acme/context-b/jsonschema/1-0-10"
CONTEXT_B_EARLIER = "iglu:com.acme/context-b/jsonschema/1-0-9"
ACCOUNT = "123456789012"

# LoaderMessageSpec.ShreddedMessageJson and WideRowMessageJson (snowplow-rdb-loader, modules/common/src/test).
UPSTREAM_TIMESTAMPS = {
    "jobStarted": "2020-09-17T11:32:21.145Z",
    "jobCompleted": "2020-09-17T11:32:21.145Z",
    "min": None,
    "max": None,
}
UPSTREAM_SHREDDED: dict[str, Any] = {
    "schema": "iglu:com.snowplowanalytics.snowplow.storage.rdbloader/shredding_complete/jsonschema/2-0-1",
    "data": {
        "base": "s3://bucket/folder/",
        "typesInfo": {
            "transformation": "SHREDDED",
            "types": [
                {
                    "schemaKey": "iglu:com.acme/event-a/jsonschema/1-0-0",
                    "format": "TSV",
                    "snowplowEntity": "SELF_DESCRIBING_EVENT",
                },
            ],
        },
        "timestamps": UPSTREAM_TIMESTAMPS,
        "compression": "GZIP",
        "processor": {"artifact": "test-shredder", "version": "1.1.2"},
        "count": None,
    },
}
UPSTREAM_WIDEROW: dict[str, Any] = {
    "schema": "iglu:com.snowplowanalytics.snowplow.storage.rdbloader/shredding_complete/jsonschema/2-0-1",
    "data": {
        "base": "s3://bucket/folder/",
        "typesInfo": {
            "transformation": "WIDEROW",
            "fileFormat": "JSON",
            "types": [
                {"schemaKey": "iglu:com.acme/event-a/jsonschema/1-0-0", "snowplowEntity": "SELF_DESCRIBING_EVENT"},
                {"schemaKey": "iglu:com.acme/event-b/jsonschema/2-0-0", "snowplowEntity": "CONTEXT"},
            ],
        },
        "timestamps": UPSTREAM_TIMESTAMPS,
        "compression": "GZIP",
        "processor": {"artifact": "test-shredder", "version": "1.1.2"},
        "count": None,
    },
}
UPSTREAM_JOB_TIME = datetime.fromtimestamp(1600342341.145, tz=UTC)  # Instant.ofEpochMilli(1600342341145L)


def shredded(**overrides: Any) -> dict[str, Any]:
    """A small SHREDDED message: two contexts (one twice, versions out of order) and one event."""
    arguments: dict[str, Any] = {
        "base": "s3://lake/shredded/run=2026-11-22-04-00-00/",
        "transformation": "SHREDDED",
        "types": [
            LoaderType(schema_key=EVENT_A, entity="SELF_DESCRIBING_EVENT", format="TSV"),
            LoaderType(schema_key=CONTEXT_B, entity="CONTEXT", format="JSON"),
            LoaderType(schema_key=CONTEXT_B_EARLIER, entity="CONTEXT", format="JSON"),
            LoaderType(schema_key=CONTEXT_B, entity="CONTEXT", format="JSON"),
        ],
        "job_started": STARTED,
        "job_completed": COMPLETED,
        "min_tstamp": "2026-11-21 23:00:00.9671",
        "max_tstamp": "2026-11-22 03:59:59",
        "compression": "gzip",
        "processor_version": "0.1.0",
        "good": 48_894,
        "bad": 3,
    }
    return shredding_complete(**(arguments | overrides))


def widerow() -> dict[str, Any]:
    return shredding_complete(
        base="file:///tmp/lake/shredded/run=2026-11-22-04-00-00/",
        transformation="WIDEROW",
        file_format="PARQUET",
        types=[
            LoaderType(schema_key=EVENT_A, entity="SELF_DESCRIBING_EVENT"),
            LoaderType(schema_key=CONTEXT_B, entity="CONTEXT"),
        ],
        job_started=STARTED,
        job_completed=COMPLETED,
        min_tstamp=None,
        max_tstamp=None,
        compression="none",
        processor_version="0.1.0",
        good=0,
        bad=0,
    )


def test_shredded_message_exactly() -> None:
    assert shredded() == {
        "schema": SCHEMA_URI,
        "data": {
            "base": "s3://lake/shredded/run=2026-11-22-04-00-00/",
            "typesInfo": {
                "transformation": "SHREDDED",
                "types": [
                    {"schemaKey": CONTEXT_B_EARLIER, "format": "JSON", "snowplowEntity": "CONTEXT"},
                    {"schemaKey": CONTEXT_B, "format": "JSON", "snowplowEntity": "CONTEXT"},
                    {"schemaKey": EVENT_A, "format": "TSV", "snowplowEntity": "SELF_DESCRIBING_EVENT"},
                ],
            },
            "timestamps": {
                "jobStarted": "2026-11-22T04:00:00Z",
                "jobCompleted": "2026-11-22T04:03:07.123Z",
                "min": "2026-11-21T23:00:00.967100Z",
                "max": "2026-11-22T03:59:59Z",
            },
            "compression": "GZIP",
            "processor": {"artifact": "winnow", "version": "0.1.0"},
            "count": {"good": 48_894, "bad": 3},
        },
    }
    assert list(shredded()["data"]) == ["base", "typesInfo", "timestamps", "compression", "processor", "count"]


def test_widerow_message_exactly() -> None:
    assert widerow()["data"] == {
        "base": "file:///tmp/lake/shredded/run=2026-11-22-04-00-00/",
        "typesInfo": {
            "transformation": "WIDEROW",
            "fileFormat": "PARQUET",
            "types": [
                {"schemaKey": CONTEXT_B, "snowplowEntity": "CONTEXT"},
                {"schemaKey": EVENT_A, "snowplowEntity": "SELF_DESCRIBING_EVENT"},
            ],
        },
        "timestamps": {
            "jobStarted": "2026-11-22T04:00:00Z",
            "jobCompleted": "2026-11-22T04:03:07.123Z",
            "min": None,
            "max": None,
        },
        "compression": "NONE",
        "processor": {"artifact": "winnow", "version": "0.1.0"},
        "count": {"good": 0, "bad": 0},
    }


def upstream_example(**arguments: Any) -> dict[str, Any]:
    """A message from the inputs of upstream's LoaderMessageSpec examples, with `arguments` added."""
    return shredding_complete(
        base="s3://bucket/folder/",
        job_started=UPSTREAM_JOB_TIME,
        job_completed=UPSTREAM_JOB_TIME,
        min_tstamp=None,
        max_tstamp=None,
        compression="gzip",
        processor_version="1.1.2",
        good=None,
        bad=None,
        processor_artifact="test-shredder",
        **arguments,
    )


def test_upstream_shredded_example_reproduced() -> None:
    message = upstream_example(
        transformation="SHREDDED",
        types=[LoaderType(schema_key=EVENT_A, entity="SELF_DESCRIBING_EVENT", format="TSV")],
    )
    assert message == UPSTREAM_SHREDDED
    assert message_text(message) == json.dumps(UPSTREAM_SHREDDED, separators=(",", ":"))


def test_upstream_widerow_example_reproduced_in_upstream_type_order() -> None:
    """Upstream's example lists the event first; its own `wideRowTypeOrdering` (and ours) puts contexts first."""
    message = upstream_example(
        transformation="WIDEROW",
        file_format="JSON",
        types=[
            LoaderType(schema_key=EVENT_A, entity="SELF_DESCRIBING_EVENT"),
            LoaderType(schema_key="iglu:com.acme/event-b/jsonschema/2-0-0", entity="CONTEXT"),
        ],
    )
    expected = copy.deepcopy(UPSTREAM_WIDEROW)
    expected["data"]["typesInfo"]["types"].reverse()
    assert message == expected


@pytest.mark.parametrize("message", [shredded(), widerow(), UPSTREAM_SHREDDED, UPSTREAM_WIDEROW])
def test_message_validates_against_iglu_schema(message: dict[str, Any]) -> None:
    schema = json.loads(SCHEMA_FILE.read_text())
    for key in ("$schema", "self"):  # the Iglu meta-schema's keys, not Draft 4's
        del schema[key]
    jsonschema.Draft4Validator.check_schema(schema)
    validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    assert message["schema"] == SCHEMA_URI
    validator.validate(message["data"])


def test_schema_rejects_a_wrong_message() -> None:
    """The validation above has teeth: a type without its format is not a SHREDDED message."""
    schema = {k: v for k, v in json.loads(SCHEMA_FILE.read_text()).items() if k not in ("$schema", "self")}
    broken = shredded()["data"]
    del broken["typesInfo"]["types"][0]["format"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(schema).validate(broken)


@pytest.mark.parametrize(
    ("collector", "instant"),
    [
        ("2014-05-29 18:16:35", "2014-05-29T18:16:35Z"),
        ("2014-05-29 18:16:35.000", "2014-05-29T18:16:35Z"),
        ("2014-05-29 18:16:35.000000000", "2014-05-29T18:16:35Z"),
        ("2014-05-29 18:16:35.9", "2014-05-29T18:16:35.900Z"),
        ("2014-05-29 18:16:35.967", "2014-05-29T18:16:35.967Z"),
        ("2014-05-29 18:16:35.9671", "2014-05-29T18:16:35.967100Z"),
        ("2014-05-29 18:16:35.000001", "2014-05-29T18:16:35.000001Z"),
        ("2014-05-29 18:16:35.967100001", "2014-05-29T18:16:35.967100001Z"),
        ("2014-05-29 00:00:00.00010", "2014-05-29T00:00:00.000100Z"),
        ("0000-01-01 00:00:00.000", "0000-01-01T00:00:00Z"),  # year 0: a date to java.time, not to Python
        ("0000-02-29 23:59:59.5", "0000-02-29T23:59:59.500Z"),
    ],
)
def test_collector_timestamps_render_like_instant_to_string(collector: str, instant: str) -> None:
    assert collector_instant(collector) == instant


@pytest.mark.parametrize(
    "text",
    ["2014-05-29", "2014-05-29 18:16", "2014-05-29 18:16:35.1234567890", "2014-02-30 00:00:00", "0001-02-29 00:00:00"],
)
def test_malformed_collector_timestamp(text: str) -> None:
    with pytest.raises(ValueError):
        collector_instant(text)


def test_job_times_truncate_to_the_millisecond_in_utc() -> None:
    assert instant_text(datetime(2026, 1, 2, 3, 4, 5, 999999, tzinfo=UTC)) == "2026-01-02T03:04:05.999Z"
    assert instant_text(datetime(2026, 1, 2, 3, 4, 5, 999, tzinfo=UTC)) == "2026-01-02T03:04:05Z"
    assert instant_text(datetime(2026, 1, 2, 5, 4, 5, 10000, tzinfo=timezone(timedelta(hours=2)))) == (
        "2026-01-02T03:04:05.010Z"
    )
    with pytest.raises(ValueError, match="naive"):
        instant_text(datetime(2026, 1, 2))


def test_types_must_fit_the_transformation() -> None:
    with pytest.raises(ValueError, match="SHREDDED"):
        shredded(types=[LoaderType(schema_key=EVENT_A, entity="CONTEXT")])
    with pytest.raises(ValueError, match="SHREDDED"):
        shredded(file_format="JSON")
    with pytest.raises(ValueError, match="schema_key"):
        LoaderType(schema_key="com.acme/x/jsonschema/1-0-0", entity="CONTEXT")


def test_message_text_is_compact_and_keeps_non_ascii() -> None:
    message = shredded(base="s3://lake/shrédded/run=2026-11-22-04-00-00/")
    text = message_text(message)
    assert text.startswith(
        '{"schema":"iglu:com.snowplowanalytics.snowplow.storage.rdbloader/shredding_complete/jsonschema/2-0-1",'
        '"data":{"base":"s3://lake/shrédded/run=2026-11-22-04-00-00/","typesInfo":{"transformation":"SHREDDED",'
    )
    assert " " not in text
    assert json.loads(text) == message


@pytest.mark.parametrize(
    ("path", "uri"),
    [
        ("s3://b/p/run=X", "s3://b/p/run=X/"),
        ("s3://b/p/run=X/", "s3://b/p/run=X/"),
        ("s3a://b/p/run=X", "s3://b/p/run=X/"),
        ("/tmp/lake/run=X", "file:///tmp/lake/run=X/"),
        ("file:///tmp/lake/run=X", "file:///tmp/lake/run=X/"),
        ("/tmp/my lake/run=X/", "file:///tmp/my%20lake/run=X/"),
    ],
)
def test_base_uri(path: str, uri: str) -> None:
    assert base_uri(path) == uri


def test_parse_queue() -> None:
    assert parse_queue("sqs://loader") == QueueTarget(service="sqs", name="loader")
    assert parse_queue("sqs://loader.fifo").fifo
    topic = parse_queue(f"sns://arn:aws:sns:us-east-1:{ACCOUNT}:loader.fifo")
    assert topic == QueueTarget(service="sns", name=f"arn:aws:sns:us-east-1:{ACCOUNT}:loader.fifo", region="us-east-1")
    assert topic.fifo
    assert not parse_queue(f"sns://arn:aws:sns:eu-west-1:{ACCOUNT}:loader").fifo


@pytest.mark.parametrize("uri", ["http://x", "sqs://", "sns://not-an-arn", "sqs://a/b", "loader"])
def test_parse_queue_says_what_is_allowed(uri: str) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        parse_queue(uri)
    assert str(raised.value) == (
        f'loader queue: given "{uri}"; allowed: sqs://QUEUE_NAME (an SQS queue name, standard or .fifo) or '
        "sns://arn:aws:sns:REGION:ACCOUNT:TOPIC (an SNS topic ARN, standard or .fifo)"
    )


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def received(queue_url: str) -> dict[str, Any]:
    sqs = boto3.client("sqs")
    messages = sqs.receive_message(QueueUrl=queue_url, MessageSystemAttributeNames=["All"], WaitTimeSeconds=0)
    [message] = messages["Messages"]
    return dict(message)


def test_send_to_standard_queue(aws: None) -> None:
    url = boto3.client("sqs").create_queue(QueueName="loader")["QueueUrl"]
    body = message_text(shredded())
    message_id = send("sqs://loader", body)
    message = received(url)
    assert message["MessageId"] == message_id
    assert message["Body"] == body
    assert "MessageGroupId" not in message["Attributes"]


def test_send_to_fifo_queue_without_content_based_dedup(aws: None) -> None:
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "false"}
    url = boto3.client("sqs").create_queue(QueueName="loader.fifo", Attributes=attributes)["QueueUrl"]
    body = message_text(shredded())
    message_id = send("sqs://loader.fifo", body)
    message = received(url)
    assert (message["MessageId"], message["Body"]) == (message_id, body)
    assert message["Attributes"]["MessageGroupId"] == "shredding"
    assert message["Attributes"]["MessageDeduplicationId"] == hashlib.sha256(body.encode()).hexdigest()


def test_send_to_topic_with_raw_sqs_subscription(aws: None) -> None:
    sqs, sns = boto3.client("sqs"), boto3.client("sns")
    url = sqs.create_queue(QueueName="loader")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    topic_arn = sns.create_topic(Name="shredded")["TopicArn"]
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    body = message_text(widerow())
    assert send(f"sns://{topic_arn}", body)
    assert received(url)["Body"] == body


def test_missing_queue_is_a_loader_message_error(aws: None) -> None:
    with pytest.raises(LoaderMessageError) as raised:
        send("sqs://no-such-queue", "{}")
    message = str(raised.value)
    assert message.startswith("loader message to sqs://no-such-queue not sent: ")
    assert message.endswith("; the run folder has no _SUCCESS, so a rerun of the same run id sends it again")
    assert "\n" not in message


def test_no_region_is_a_loader_message_error(aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(LoaderMessageError, match=r"sqs://loader not sent: .*region"):
        send("sqs://loader", "{}")


def test_loader_message_error_exits_1() -> None:
    """The command line turns a `WinnowError` into its `exit_code` (2 when it has none): this one is a failure."""
    assert issubclass(LoaderMessageError, WinnowError)
    assert LoaderMessageError.exit_code == 1
