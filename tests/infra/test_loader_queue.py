"""RDB Loader's queue: the FIFO queue the Storage stack creates (`loader.create_queue`) or an existing queue or topic
(`jobs.output.queue`); the state machine's states and permission that send each shred run's `shredding_complete`
to exactly that one; the job role and the deployed job config without any (see tests/infra/test_state_machine_flow.py
for the states executed in moto)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdk.artifact_layout import CONFIG
from cdk.components.loader_queue import LoaderQueueProps
from cdk.components.state_machine.loader_message import LoaderTarget
from cdk.config import CONFIG_DIR, EnvConfigError, config_from_data
from jobs.config import JobConfig, config_from_dict
from tests.infra.helpers import Synthesized, only, policy_statements, resources, state_machine_definition, synthesize

ACCOUNTS = {"dev": "${AWS::AccountId}", "prod": "123456789012"}  # dev names no account: the CLI's
QUEUE = "${LoaderQueueB19E8514}"  # the queue's logical id: its Ref is the URL
# The Storage stack's outputs the Orchestration stack reads (weak cross-stack references, Fn::GetStackOutput).
QUEUE_URL_OUTPUT = "PublishOutputRefLoaderQueueB19E8514C7DB63B5"
QUEUE_ARN_OUTPUT = "PublishOutputFnGetAttLoaderQueueB19E8514Arn47AF589C"
TOPIC = "arn:aws:sns:eu-west-1:210987654321:snowplow-shredding-complete.fifo"
KEY = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
LOADER_SIDS = {"ReadLoaderMessage", "SendLoaderMessage", "PublishLoaderMessage", "EncryptLoaderMessage"}
LOADER_STATES = ("ReadLoaderMessage", "SendLoaderMessage", "LoaderNotTold")
DEDUPLICATION_ID = "States.Hash(States.Format('{} {}', $.run.runId, $.loaderMessage.etag), 'SHA-256')"


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
    """The state machine role's statements about RDB Loader's message, in order."""
    statements = policy_statements(synth.template("Orchestration"), "PipelineStateMachineRole")
    return [statement for statement in statements if statement.get("Sid") in LOADER_SIDS]


def loader_states(synth: Synthesized) -> dict[str, dict[str, Any]]:
    states = state_machine_definition(synth.template("Orchestration"))["States"]
    return {name: states[name] for name in LOADER_STATES if name in states}


def job_role_actions(synth: Synthesized) -> list[str]:
    return [
        action
        for statement in policy_statements(synth.template("Processing"), "JobRole")
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    ]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_loader_queue_is_fifo_deduplicating_encrypted_and_keeps_messages_14_days(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    queue = only(synthesized[env].template("Storage"), "AWS::SQS::Queue")["Properties"]
    assert {key: queue[key] for key in queue if key != "Tags"} == {
        "QueueName": f"winnow-{env}-shredding-complete.fifo",
        "FifoQueue": True,
        "ContentBasedDeduplication": True,  # the state machine also sets MessageDeduplicationId
        "SqsManagedSseEnabled": True,  # SSE-SQS: no customer key, so no key grant for the state machine
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
    """RDB Loader's `messageQueue` takes the name; the URL and ARN are for policies and the console. The
    `PublishOutput…` ones are CDK's, for the Orchestration stack (the state machine sends to the queue)."""
    assert dev.template("Storage").find_outputs("*") == {
        "LoaderQueueName": {"Value": {"Fn::GetAtt": ["LoaderQueueB19E8514", "QueueName"]}},
        "LoaderQueueUrl": {"Value": {"Ref": "LoaderQueueB19E8514"}},
        "LoaderQueueArn": {"Value": {"Fn::GetAtt": ["LoaderQueueB19E8514", "Arn"]}},
        QUEUE_URL_OUTPUT: {"Value": {"Ref": "LoaderQueueB19E8514"}},
        QUEUE_ARN_OUTPUT: {"Value": {"Fn::GetAtt": ["LoaderQueueB19E8514", "Arn"]}},
    }


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_state_machine_may_read_run_messages_and_send_to_the_created_queue_only(
    synthesized: dict[str, Synthesized], env: str
) -> None:
    output = f"arn:${{AWS::Partition}}:s3:::winnow-{env}-output-{ACCOUNTS[env]}-eu-west-1"
    assert loader_statements(synthesized[env]) == [
        {
            "Sid": "ReadLoaderMessage",
            "Action": "s3:GetObject",
            "Effect": "Allow",
            "Resource": f"{output}/shredded/run=*/shredding_complete.json",
        },
        {
            "Sid": "SendLoaderMessage",
            "Action": "sqs:SendMessage",
            "Effect": "Allow",
            "Resource": f"${{Import:Winnow-{env}-Storage:{QUEUE_ARN_OUTPUT}}}",  # the Storage stack's queue
        },
    ]
    assert synthesized[env].nag_error is None


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_job_role_has_no_loader_permission(synthesized: dict[str, Synthesized], env: str) -> None:
    """On EMR the state machine sends RDB Loader's message: the job only writes it to the run folder."""
    assert [
        action for action in job_role_actions(synthesized[env]) if action.startswith(("sqs:", "sns:", "kms:"))
    ] == []


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_deployed_config_names_no_queue(synthesized: dict[str, Synthesized], env: str) -> None:
    synth = synthesized[env]
    deployed = deployed_config(synth)
    assert deployed == synth.config.jobs  # written without a queue: deployed as written
    assert deployed["output"] == {"compression": "gzip"}
    # What the jobs read on EMR (`--config s3://…/config.json`): the shred job writes the message, sends none.
    assert config_from_dict(JobConfig, deployed).output.queue is None


def test_the_loader_states_read_the_run_s_message_and_send_it_to_the_created_queue(dev: Synthesized) -> None:
    states = state_machine_definition(dev.template("Orchestration"))["States"]
    retry = [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": 5, "MaxAttempts": 3, "BackoffRate": 2}]
    catch = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "LoaderNotTold"}]
    # After the shred job's metrics step, whether it succeeded or not (it never fails the run).
    assert states["PublishShredMetrics"]["Next"] == "ReadLoaderMessage"
    assert states["PublishShredMetrics"]["Catch"][0]["Next"] == "ReadLoaderMessage"
    assert states["ReadLoaderMessage"] == {
        "Type": "Task",
        "Resource": "arn:aws:states:::aws-sdk:s3:getObject",
        "Parameters": {
            "Bucket": "winnow-dev-output-${AWS::AccountId}-eu-west-1",
            "Key.$": "States.Format('shredded/run={}/shredding_complete.json', $.run.runId)",
        },
        "ResultSelector": {"body.$": "$.Body", "etag.$": "$.ETag"},
        "ResultPath": "$.loaderMessage",
        "Retry": retry,
        "Catch": catch,
        "Next": "SendLoaderMessage",
    }
    assert states["SendLoaderMessage"] == {
        "Type": "Task",
        "Resource": "arn:aws:states:::aws-sdk:sqs:sendMessage",
        "Parameters": {
            "QueueUrl": f"${{Import:Winnow-dev-Storage:{QUEUE_URL_OUTPUT}}}",
            "MessageBody.$": "$.loaderMessage.body",
            "MessageGroupId": "shredding",
            # The run and the file's version, hashed: not the text, which may exceed States.Hash's 10,000 characters.
            "MessageDeduplicationId.$": DEDUPLICATION_ID,
        },
        "ResultSelector": {"messageId.$": "$.MessageId"},
        "ResultPath": "$.loaderMessage",
        "Retry": retry,
        "Catch": catch,
        "Next": "Succeeded",
    }
    assert states["LoaderNotTold"] == {
        "Type": "Pass",
        "Parameters": {
            "Error": "LoaderMessageNotSent",
            "Cause.$": "States.Format('Run {} is complete (s3://winnow-dev-output-${AWS::AccountId}-eu-west-1/shredded/"
            "run={}/ is sealed with _SUCCESS) but RDB Loader was not told: sending its shredding_complete.json to "
            "sqs://winnow-dev-shredding-complete.fifo failed with {}: {}. Redrive this execution, or start one named "
            "run-{}-resend with this runId (the run is redone, rerun-safe, and its message sent)', "
            "$.run.runId, $.run.runId, $.error.Error, $.error.Cause, $.run.runId)",
        },
        "ResultPath": "$.error",
        "Next": "NotifyFailure",  # the failure path: notify the topic, then fail with this error and cause
    }


def test_creating_the_queue_and_naming_one_exclude_each_other() -> None:
    data = env_data("dev", loader={"create_queue": True}, queue="sqs://acme-loader.fifo")
    with pytest.raises(EnvConfigError) as both:
        config_from_data("dev", data)
    assert str(both.value) == (
        'jobs.output.queue: given "sqs://acme-loader.fifo"; allowed: null while loader.create_queue is true: set '
        "one or the other (loader.create_queue creates the env's loader queue and the state machine sends to it; "
        "jobs.output.queue names an existing queue or topic)"
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


def test_an_sns_topic_is_published_to_by_the_state_machine_only(build_dir: Path, tmp_path: Path) -> None:
    synth = synthesize(config_from_data("dev", env_data("dev", loader={}, queue=f"sns://{TOPIC}")), build_dir, tmp_path)
    send = loader_states(synth)["SendLoaderMessage"]
    assert send["Resource"] == "arn:aws:states:::aws-sdk:sns:publish"
    assert send["Parameters"] == {
        "TopicArn": TOPIC,
        "Message.$": "$.loaderMessage.body",
        "MessageGroupId": "shredding",
        "MessageDeduplicationId.$": DEDUPLICATION_ID,
    }
    assert (
        f"sending its shredding_complete.json to sns://{TOPIC} failed"
        in (loader_states(synth)["LoaderNotTold"]["Parameters"]["Cause.$"])
    )
    assert loader_statements(synth)[1:] == [
        {"Sid": "PublishLoaderMessage", "Action": "sns:Publish", "Effect": "Allow", "Resource": TOPIC}
    ]
    assert [action for action in job_role_actions(synth) if action.startswith(("sqs:", "sns:", "kms:"))] == []
    assert resources(synth.template("Storage"), "AWS::SQS::Queue") == {}
    assert synth.template("Storage").find_outputs("*") == {}
    assert deployed_config(synth)["output"] == {"compression": "gzip"}  # the env config's queue is not deployed
    assert synth.nag_error is None


def test_an_existing_queue_by_name_is_addressed_in_the_env_account_and_region_with_its_key(
    build_dir: Path, tmp_path: Path
) -> None:
    data = env_data("prod", loader={"kms_key_arn": KEY}, queue="sqs://acme-loader.fifo")
    synth = synthesize(config_from_data("prod", data), build_dir, tmp_path)
    send = loader_states(synth)["SendLoaderMessage"]
    assert send["Resource"] == "arn:aws:states:::aws-sdk:sqs:sendMessage"
    # The URL SQS gives the queue (GetQueueUrl), in the env's partition (its URL suffix).
    assert send["Parameters"]["QueueUrl"] == "https://sqs.eu-west-1.${AWS::URLSuffix}/123456789012/acme-loader.fifo"
    assert loader_statements(synth)[1:] == [
        {
            "Sid": "SendLoaderMessage",
            "Action": "sqs:SendMessage",
            "Effect": "Allow",
            "Resource": "arn:aws:sqs:eu-west-1:123456789012:acme-loader.fifo",
        },
        {"Sid": "EncryptLoaderMessage", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Effect": "Allow",
         "Resource": KEY},
    ]  # fmt: skip
    assert [action for action in job_role_actions(synth) if action.startswith(("sqs:", "sns:", "kms:"))] == []
    assert resources(synth.template("Storage"), "AWS::SQS::Queue") == {}
    jobs = {**data["jobs"], "output": {"compression": "gzip"}}
    assert deployed_config(synth) == jobs  # named by the user for the state machine: not deployed to the jobs
    assert synth.nag_error is None


def test_without_a_queue_the_state_machine_has_no_loader_state_or_permission(build_dir: Path, tmp_path: Path) -> None:
    synth = synthesize(config_from_data("dev", env_data("dev", loader={"create_queue": False})), build_dir, tmp_path)
    assert loader_states(synth) == {}
    assert state_machine_definition(synth.template("Orchestration"))["States"]["PublishShredMetrics"]["Next"] == (
        "Succeeded"
    )
    assert loader_statements(synth) == []
    assert resources(synth.template("Storage"), "AWS::SQS::Queue") == {}
    assert "queue" not in deployed_config(synth)["output"]
    assert synth.nag_error is None


def test_the_legacy_layout_sends_no_message(build_dir: Path, tmp_path: Path) -> None:
    """The R30-era layout writes no `shredding_complete.json`: nothing to read or send, even with a queue."""
    data = env_data("dev", loader={"create_queue": True})
    data["jobs"]["shred"] = {"layout": "legacy"}
    synth = synthesize(config_from_data("dev", data), build_dir, tmp_path)
    assert loader_states(synth) == {}
    assert loader_statements(synth) == []
    assert only(synth.template("Storage"), "AWS::SQS::Queue")["Properties"]["FifoQueue"] is True  # still created
    assert synth.nag_error is None


def test_the_loader_queue_is_fifo_by_name() -> None:
    with pytest.raises(ValueError, match=r"queue_name: given 'loader'; allowed: a FIFO queue name ending in"):
        LoaderQueueProps(queue_name="loader", retain=False)


def test_the_loader_target_is_one_queue_or_one_topic() -> None:
    queue = {"queue_url": "https://sqs.eu-west-1.amazonaws.com/1/q.fifo", "queue_arn": "arn:aws:sqs:eu-west-1:1:q.fifo"}
    allowed = r"allowed: queue_url with queue_arn, or topic_arn"
    with pytest.raises(ValueError, match=r"given queue_url True, queue_arn True, topic_arn True; " + allowed):
        LoaderTarget(uri="sqs://q.fifo", **queue, topic_arn=TOPIC)
    with pytest.raises(ValueError, match=r"given queue_url True, queue_arn False, topic_arn False; " + allowed):
        LoaderTarget(uri="sqs://q.fifo", queue_url=queue["queue_url"])
    with pytest.raises(ValueError, match=r"given queue_url False, queue_arn False, topic_arn False; " + allowed):
        LoaderTarget(uri="sqs://q.fifo", key_arn=KEY)
    with pytest.raises(ValueError, match=r"loader target uri: given \"sqs://q'.fifo\"; allowed: no quote, brace"):
        LoaderTarget(uri="sqs://q'.fifo", **queue)
