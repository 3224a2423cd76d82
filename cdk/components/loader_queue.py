"""Snowplow RDB Loader's input queue: the pipeline state machine sends each shred run's `shredding_complete` here."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from cdk.audit import acknowledge_checkov
from cdk.nag import acknowledge
from cdk.naming import PROJECT

RETENTION_DAYS = 14
"""SQS's longest retention: a loader that is down for up to two weeks still finds every run."""


def loader_queue_name(env: str) -> str:
    """`winnow-<env>-shredding-complete.fifo`: the name of the queue `LoaderQueue` creates for `env`."""
    return f"{PROJECT}-{env}-shredding-complete.fifo"


@dataclass(frozen=True, kw_only=True)
class LoaderQueueProps:
    """Props of `LoaderQueue`."""

    queue_name: str
    """The queue's name, ending in `.fifo` (see `loader_queue_name`)."""
    retain: bool
    """RETAIN the queue on stack deletion (prod, with the other stateful resources); false: DESTROY it."""

    def __post_init__(self) -> None:
        if not self.queue_name.endswith(".fifo"):
            raise ValueError(f"queue_name: given {self.queue_name!r}; allowed: a FIFO queue name ending in '.fifo'")


class LoaderQueue(Construct):
    """An SQS FIFO queue as RDB Loader asks for it: content-based deduplication, SSE-SQS, TLS only, 14 days.

    The pipeline state machine sends one message per shred run (MessageGroupId `shredding`, a deduplication id of
    the run and the message file's version); RDB Loader (deployed elsewhere) receives and deletes them. `queue.queue_name` is what the loader's
    `messageQueue` setting takes.
    """

    def __init__(self, scope: Construct, construct_id: str, props: LoaderQueueProps) -> None:
        super().__init__(scope, construct_id)
        self.queue = sqs.Queue(
            self,
            "Queue",
            queue_name=props.queue_name,
            fifo=True,
            content_based_deduplication=True,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(RETENTION_DAYS),
            removal_policy=RemovalPolicy.RETAIN if props.retain else RemovalPolicy.DESTROY,
        )
        acknowledge_checkov(
            self.queue,
            "CKV_AWS_27",
            "encrypted with SSE-SQS (SqsManagedSseEnabled), as RDB Loader's docs set it up; checkov 3.3.30 counts only "
            "a KMS key, which would give the loader's role and the state machine a key to be granted",
        )
        acknowledge(
            self.queue,
            "SQS3",
            "no dead-letter queue: the only consumer is RDB Loader (deployed elsewhere), which deletes the messages "
            "it has loaded; a redrive policy counts the loader's receives, so it and its DLQ belong to the loader's "
            "deployment, and here it would move a run's only load message out of the loader's reach after "
            "repeated failed loads (e.g. during a warehouse outage)",
        )
