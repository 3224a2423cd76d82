"""RDB Loader's queue: the FIFO queue the Storage stack creates (`loader.create_queue`) or an existing queue or topic
(`jobs.output.queue`), the job role's permission to send to exactly that one, and the deployed config naming it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdk.artifact_layout import CONFIG
from cdk.components.job_execution_role import JobExecutionRoleProps
from cdk.components.loader_queue import LoaderQueueProps
from cdk.config import CONFIG_DIR, EnvConfigError, config_from_data
from jobs.config import JobConfig, config_from_dict
from tests.infra.helpers import Synthesized, only, policy_statements, resources, synthesize

ACCOUNTS = {"dev": "${AWS::AccountId}", "prod": "123456789012"}  # dev names no account: the CLI's
QUEUE = "${LoaderQueueB19E8514}"  # the queue's logical id: its Ref is the URL
TOPIC = "arn:aws:sns:eu-west-1:210987654321:snowplow-shredding-complete.fifo"
KEY = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
LOADER_SIDS = {"SendLoaderMessage", "PublishLoaderMessage", "EncryptLoaderMessage"}


def env_data(env: str, *, loader: dict[str, Any], queue: str | None = None) -> dict[str, Any]:
    """`configs/<env>.json` with `loader` replaced and, when given, `jobs.output.queue` set."""
    data: dict[str, Any] = json.loads((CONFIG_DIR / f"{env}.json").read_text(encoding="utf-8"))
    data["loader"] = loader
    if queue is not None:
        data["jobs"]["output"]["queue"] = queue
    return data


def deployed_config(synth: Synthesized) -> dict[str, Any]:
    (config,) = [json.loads(path.read_text(encoding="utf-8")) for path in synth.outdir.glob(f"asset.*/{CONFIG}")]
    return config  # type: ignore[no-any-return]


def loader_statements(synth: Synthesized) -> list[dict[str, Any]]:
    statements = policy_statements(synth.template("Processing"), "JobRole")
    return [statement for statement in statements if statement.get("Sid") in LOADER_SIDS]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_loader_queue_is_fifo_deduplicating_encrypted_and_keeps_messages_14_days(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    queue = only(synthesized[env].template("Storage"), "AWS::SQS::Queue")["Properties"]
    assert {key: queue[key] for key in queue if key != "Tags"} == {
        "QueueName": f"winnow-{env}-shredding-complete.fifo",
        "FifoQueue": True,
        "ContentBasedDeduplication": True,  # the job also sets MessageDeduplicationId (the body's sha256)
        "SqsManagedSseEnabled": True,  # SSE-SQS: no customer key, so no key grant for the job role
        "MessageRetentionPeriod": 14 * 86400,
    }


def test_the_loader_queue_denies_requests_without_tls(dev: Synthesized) -> None:
    policy = only(dev.template("Storage"), "AWS::SQS::QueuePolicy")["Properties"]
    assert policy["Queues"] == [QUEUE]
    assert policy["PolicyDocument"]["Statement"] == [
        {
            "Action": "sqs:*",
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Resource": "${LoaderQueueB19E8514.Arn}",
        }
    ]


def test_prod_retains_the_loader_queue_dev_deletes_it(dev: Synthesized, prod: Synthesized) -> None:
    def policies(synth: Synthesized) -> tuple[str, str]:
        queue = only(synth.template("Storage"), "AWS::SQS::Queue")
        return queue["DeletionPolicy"], queue["UpdateReplacePolicy"]

    assert (policies(prod), policies(dev)) == (("Retain", "Retain"), ("Delete", "Delete"))


def test_the_storage_stack_outputs_what_a_loader_config_needs(dev: Synthesized) -> None:
    """RDB Loader's `messageQueue` takes the name; the URL and ARN are for policies and the console."""
    assert dev.template("Storage").find_outputs("*") == {
        "LoaderQueueName": {"Value": {"Fn::GetAtt": ["LoaderQueueB19E8514", "QueueName"]}},
        "LoaderQueueUrl": {"Value": {"Ref": "LoaderQueueB19E8514"}},
        "LoaderQueueArn": {"Value": {"Fn::GetAtt": ["LoaderQueueB19E8514", "Arn"]}},
    }


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_job_role_may_send_to_the_created_queue_only(synthesized: dict[str, Synthesized], env: str) -> None:
    assert loader_statements(synthesized[env]) == [
        {
            "Sid": "SendLoaderMessage",
            "Action": ["sqs:GetQueueUrl", "sqs:SendMessage"],  # the job resolves sqs://NAME, then sends
            "Effect": "Allow",
            "Resource": f"arn:aws:sqs:eu-west-1:{ACCOUNTS[env]}:winnow-{env}-shredding-complete.fifo",
        }
    ]
    every_action = [
        action
        for statement in policy_statements(synthesized[env].template("Processing"), "JobRole")
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    ]
    assert [action for action in every_action if action.startswith(("sqs:", "sns:", "kms:"))] == [
        "sqs:GetQueueUrl",
        "sqs:SendMessage",
    ]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_deployed_config_names_the_created_queue(synthesized: dict[str, Synthesized], env: str) -> None:
    synth = synthesized[env]
    assert synth.config.job_config.output.queue is None  # as written: the queue is derived at synth time
    deployed = deployed_config(synth)
    assert deployed["output"] == {"compression": "gzip", "queue": f"sqs://winnow-{env}-shredding-complete.fifo"}
    assert {key: value for key, value in deployed.items() if key != "output"} == {
        key: value for key, value in synth.config.jobs.items() if key != "output"
    }
    # What the jobs read on EMR (`--config s3://…/config.json`) accepts it.
    assert config_from_dict(JobConfig, deployed).output.queue == f"sqs://winnow-{env}-shredding-complete.fifo"


def test_creating_the_queue_and_naming_one_exclude_each_other() -> None:
    data = env_data("dev", loader={"create_queue": True}, queue="sqs://acme-loader.fifo")
    with pytest.raises(EnvConfigError) as both:
        config_from_data("dev", data)
    assert str(both.value) == (
        'jobs.output.queue: given "sqs://acme-loader.fifo"; allowed: null while loader.create_queue is true: set '
        "one or the other (loader.create_queue creates the env's loader queue and deploys the jobs' config with "
        "output.queue set to it; jobs.output.queue names an existing queue or topic)"
    )


@pytest.mark.parametrize(
    ("loader", "queue", "message"),
    [
        ({}, "sqs://acme-loader", r'jobs.output.queue: given "sqs://acme-loader"; allowed: null, sqs://NAME of a FIFO'),
        ({}, "sns://arn:aws:sns:eu-west-1:123456789012:loader", r"allowed: null, sqs://NAME .* only FIFO"),
        ({"create_queue": True, "kms_key_arn": KEY}, None, r"loader.kms_key_arn: given .*; allowed: null while "
         r"loader.create_queue is true \(the created queue is encrypted with SQS-managed keys\)"),
        ({"kms_key_arn": KEY}, None, r"loader.kms_key_arn: given .*; allowed: null while no queue is set"),
        ({"kms_key_arn": "alias/aws/sqs"}, "sqs://x.fifo", r'loader.kms_key_arn: given "alias/aws/sqs"; allowed: '
         r"null or a KMS key ARN"),
        ({"create_queue": "yes"}, None, r'loader.create_queue: given "yes"; allowed: true or false'),
        ({"create": True}, None, r"unknown key 'loader.create'; allowed keys in loader: create_queue, kms_key_arn"),
    ],
)  # fmt: skip
def test_bad_loader_settings_name_the_key_and_what_is_allowed(
    loader: dict[str, Any], queue: str | None, message: str
) -> None:
    with pytest.raises(EnvConfigError, match=message):
        config_from_data("dev", env_data("dev", loader=loader, queue=queue))


def test_an_sns_topic_gets_sns_publish_on_that_topic_only(build_dir: Path, tmp_path: Path) -> None:
    synth = synthesize(config_from_data("dev", env_data("dev", loader={}, queue=f"sns://{TOPIC}")), build_dir, tmp_path)
    assert loader_statements(synth) == [
        {"Sid": "PublishLoaderMessage", "Action": "sns:Publish", "Effect": "Allow", "Resource": TOPIC}
    ]
    assert resources(synth.template("Storage"), "AWS::SQS::Queue") == {}
    assert synth.template("Storage").find_outputs("*") == {}
    assert deployed_config(synth)["output"] == {"compression": "gzip", "queue": f"sns://{TOPIC}"}
    assert synth.nag_error is None


def test_an_existing_queue_by_name_is_scoped_by_the_env_account_and_region_with_its_key(
    build_dir: Path, tmp_path: Path
) -> None:
    data = env_data("prod", loader={"kms_key_arn": KEY}, queue="sqs://acme-loader.fifo")
    synth = synthesize(config_from_data("prod", data), build_dir, tmp_path)
    assert loader_statements(synth) == [
        {
            "Sid": "SendLoaderMessage",
            "Action": ["sqs:GetQueueUrl", "sqs:SendMessage"],
            "Effect": "Allow",
            "Resource": "arn:aws:sqs:eu-west-1:123456789012:acme-loader.fifo",
        },
        {"Sid": "EncryptLoaderMessage", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Effect": "Allow",
         "Resource": KEY},
    ]  # fmt: skip
    assert resources(synth.template("Storage"), "AWS::SQS::Queue") == {}
    assert deployed_config(synth) == data["jobs"]  # named by the user: deployed as written
    assert synth.nag_error is None


def test_without_a_queue_the_job_role_gets_no_queue_permission(build_dir: Path, tmp_path: Path) -> None:
    synth = synthesize(config_from_data("dev", env_data("dev", loader={"create_queue": False})), build_dir, tmp_path)
    assert loader_statements(synth) == []
    assert resources(synth.template("Storage"), "AWS::SQS::Queue") == {}
    assert "queue" not in deployed_config(synth)["output"]
    assert synth.nag_error is None


def test_the_loader_queue_is_fifo_by_name() -> None:
    with pytest.raises(ValueError, match=r"queue_name: given 'loader'; allowed: a FIFO queue name ending in"):
        LoaderQueueProps(queue_name="loader", retain=False)


def test_the_job_role_sends_to_one_queue_or_one_topic() -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_s3 as s3

    stack = cdk.Stack(cdk.App(), "Props")
    bucket = s3.Bucket.from_bucket_name(stack, "Bucket", "bucket")
    table = dynamodb.Table.from_table_name(stack, "Table", "table")
    common: dict[str, Any] = dict(
        input_bucket=bucket, input_prefix="in/", output_bucket=bucket, output_prefixes=("out/",),
        manifest_table=table, artifacts_bucket=bucket, artifacts_prefix="jobs/", log_bucket=bucket, log_prefix="emr/",
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"given both; allowed: one or neither"):
        JobExecutionRoleProps(**common, loader_queue_arn="arn:aws:sqs:eu-west-1:1:q.fifo", loader_topic_arn=TOPIC)
    with pytest.raises(ValueError, match=r"loader_key_arn: given without a queue or topic"):
        JobExecutionRoleProps(**common, loader_key_arn=KEY)
