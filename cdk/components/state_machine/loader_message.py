"""RDB Loader's message: after the shred job succeeded, its run folder's `shredding_complete.json` is sent to
RDB Loader's queue or topic.

From the state machine, not the job: an EMR Serverless application without a VPC reaches S3, but is not
documented to reach SQS or SNS.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from cdk.nag import acknowledge, resource_finding

READ_LOADER_MESSAGE_STATE = "ReadLoaderMessage"
SEND_LOADER_MESSAGE_STATE = "SendLoaderMessage"
LOADER_NOT_TOLD_STATE = "LoaderNotTold"
LOADER_NOT_TOLD_ERROR = "LoaderMessageNotSent"
LOADER_MESSAGE_FILE = "shredding_complete.json"
"""What the shred job (rdb layout) writes in its run folder before `_SUCCESS`: RDB Loader's message, as JSON."""
LOADER_MESSAGE_GROUP = "shredding"
"""The FIFO message group id upstream's transformer sends with (and the job, when it sends itself)."""
LOADER_RETRY_ATTEMPTS, LOADER_RETRY_INTERVAL_SECONDS, LOADER_RETRY_BACKOFF = 3, 5, 2
"""Retries of reading and of sending the message: after 5, 10 and 20 seconds."""


@dataclass(frozen=True, kw_only=True)
class LoaderTarget:
    """Where the state machine sends RDB Loader's `shredding_complete` message: one SQS FIFO queue or one SNS FIFO
    topic, and the customer managed KMS key it is encrypted with, if any."""

    uri: str
    """`sqs://NAME` or `sns://ARN`, named in the failure's cause (no CloudFormation token)."""
    queue_url: str | None = None
    """The queue's URL (sqs:SendMessage's QueueUrl); with `queue_arn`."""
    queue_arn: str | None = None
    """The queue's ARN: sqs:SendMessage on it only."""
    topic_arn: str | None = None
    """The topic's ARN, instead of a queue: sns:Publish on it only."""
    key_arn: str | None = None
    """The customer managed KMS key of the queue or topic: kms:GenerateDataKey and kms:Decrypt on it. None: SSE-SQS
    or an AWS managed key, nothing to grant."""

    def __post_init__(self) -> None:
        queue = self.queue_url is not None and self.queue_arn is not None
        if (self.queue_url is None) != (self.queue_arn is None) or queue == (self.topic_arn is not None):
            raise ValueError(
                f"loader target {self.uri}: given queue_url {self.queue_url is not None}, queue_arn "
                f"{self.queue_arn is not None}, topic_arn {self.topic_arn is not None}; allowed: queue_url with "
                "queue_arn, or topic_arn"
            )
        if any(char in self.uri for char in "'{}\\"):
            raise ValueError(f"loader target uri: given {self.uri!r}; allowed: no quote, brace or backslash")


@dataclass(frozen=True, kw_only=True)
class LoaderMessageProps:
    """Props of `LoaderMessage`. S3 prefixes end in '/'."""

    target: LoaderTarget
    """The queue or topic the message goes to."""
    output_bucket_name: str
    """Where the shred job writes its run folders."""
    shred_prefix: str
    """The prefix of the shred job's run folders (`<prefix>run=<run id>/shredding_complete.json`)."""
    on_failure: sfn.IChainable
    """Where a message not sent after retries goes (the failure notification), with the error at `$.error`."""


class LoaderMessage(Construct):
    """`ReadLoaderMessage` (`start`) → `SendLoaderMessage` (`end`): read the shred run's `shredding_complete.json`
    (S3) and send its text to RDB Loader; the message id is in the output (`loaderMessage`).

    The run folder is complete (the job wrote `_SUCCESS`), so a failure here, after retries, fails the execution
    with a cause that says so (`LoaderNotTold`, then `on_failure`); a redrive sends again. A second copy of the
    message is harmless: RDB Loader's manifest skips a folder it has loaded. `grant` lets the state machine read
    the message files and send to the one queue or topic (and use its key).
    """

    def __init__(self, scope: Construct, construct_id: str, props: LoaderMessageProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props
        read = self._read()
        send = self._send()
        not_told = self._not_told()
        not_told.next(props.on_failure)
        for state in (read, send):
            state.add_retry(
                errors=[sfn.Errors.ALL],
                interval=Duration.seconds(LOADER_RETRY_INTERVAL_SECONDS),
                max_attempts=LOADER_RETRY_ATTEMPTS,
                backoff_rate=LOADER_RETRY_BACKOFF,
            )
            state.add_catch(not_told, errors=[sfn.Errors.ALL], result_path="$.error")
        read.next(send)
        self.start: sfn.CustomState = read
        """`ReadLoaderMessage`."""
        self.end: sfn.CustomState = send
        """`SendLoaderMessage`: go on from it with `end.next(…)`."""

    def grant(self, state_machine: sfn.StateMachine) -> None:
        """Read each shred run's message file; send to the one queue or topic (and use its key)."""
        p, loader = self.props, self.props.target
        message = f"arn:{Aws.PARTITION}:s3:::{p.output_bucket_name}/{p.shred_prefix}run=*/{LOADER_MESSAGE_FILE}"
        statements = [("ReadLoaderMessage", ["s3:GetObject"], message)]
        if loader.queue_arn is not None:
            statements.append(("SendLoaderMessage", ["sqs:SendMessage"], loader.queue_arn))
        if loader.topic_arn is not None:
            statements.append(("PublishLoaderMessage", ["sns:Publish"], loader.topic_arn))
        if loader.key_arn is not None:
            statements.append(("EncryptLoaderMessage", ["kms:GenerateDataKey", "kms:Decrypt"], loader.key_arn))
        for sid, actions, resource in statements:
            state_machine.add_to_role_policy(iam.PolicyStatement(sid=sid, actions=actions, resources=[resource]))
        acknowledge(
            state_machine,
            "IAM5",
            f"ReadLoaderMessage: run ids are only known at run time; only each shred run's {LOADER_MESSAGE_FILE}",
            resource_finding(self, message),
        )

    def _read(self) -> sfn.CustomState:
        """Get the shred run's `shredding_complete.json`: its text and ETag, at `$.loaderMessage`."""
        p = self.props
        key = f"{p.shred_prefix}run={{}}/{LOADER_MESSAGE_FILE}"
        return sfn.CustomState(
            self,
            READ_LOADER_MESSAGE_STATE,
            state_json={
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:s3:getObject",
                "Parameters": {"Bucket": p.output_bucket_name, "Key.$": f"States.Format('{key}', $.run.runId)"},
                # The text is the message; the ETag identifies this version of the file (the deduplication id).
                "ResultSelector": {"body.$": "$.Body", "etag.$": "$.ETag"},
                "ResultPath": "$.loaderMessage",
            },
        )

    def _send(self) -> sfn.CustomState:
        """Send the text to the queue (sqs:SendMessage) or topic (sns:Publish); its message id replaces it."""
        loader = self.props.target
        # FIFO: the group upstream uses, and a deduplication id (so a queue without content-based deduplication
        # takes it too) of the run and the file's version: a retried send within SQS's 5 minutes is not queued
        # twice. Not States.Hash of the text itself: that takes at most 10,000 characters, and a run with many
        # entity types has a longer message (the failure would be a States.Runtime error, which no Catch sees).
        fifo = {
            "MessageGroupId": LOADER_MESSAGE_GROUP,
            "MessageDeduplicationId.$": "States.Hash(States.Format('{} {}', $.run.runId, $.loaderMessage.etag), "
            "'SHA-256')",
        }
        parameters: dict[str, str]
        if loader.queue_url is not None:
            resource = "arn:aws:states:::aws-sdk:sqs:sendMessage"
            parameters = {"QueueUrl": loader.queue_url, "MessageBody.$": "$.loaderMessage.body", **fifo}
        else:
            assert loader.topic_arn is not None  # LoaderTarget: a queue or a topic
            resource = "arn:aws:states:::aws-sdk:sns:publish"
            parameters = {"TopicArn": loader.topic_arn, "Message.$": "$.loaderMessage.body", **fifo}
        return sfn.CustomState(
            self,
            SEND_LOADER_MESSAGE_STATE,
            state_json={
                "Type": "Task",
                "Resource": resource,
                "Parameters": parameters,
                "ResultSelector": {"messageId.$": "$.MessageId"},
                "ResultPath": "$.loaderMessage",  # the message id replaces the text in the execution's output
            },
        )

    def _not_told(self) -> sfn.CustomState:
        """Put the error `LoaderMessageNotSent` at `$.error`, with a cause that says the run is complete and how to
        send the message again."""
        p, loader = self.props, self.props.target
        folder = f"s3://{p.output_bucket_name}/{p.shred_prefix}run={{}}/"
        return sfn.CustomState(
            self,
            LOADER_NOT_TOLD_STATE,
            state_json={
                "Type": "Pass",
                "Parameters": {
                    "Error": LOADER_NOT_TOLD_ERROR,
                    "Cause.$": f"States.Format('Run {{}} is complete ({folder} is sealed with _SUCCESS) but RDB "
                    f"Loader was not told: sending its {LOADER_MESSAGE_FILE} to {loader.uri} failed with {{}}: {{}}. "
                    "Redrive this execution, or start one named run-{}-resend with this runId (the run is redone, "
                    "rerun-safe, and its message sent)', $.run.runId, $.run.runId, $.error.Error, $.error.Cause, "
                    "$.run.runId)",
                },
                "ResultPath": "$.error",
            },
        )
