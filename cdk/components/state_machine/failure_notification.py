"""The failure notification: a failed run publishes its error, cause and run to the failure topic, then fails."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

NOTIFY_STATE = "NotifyFailure"


@dataclass(frozen=True, kw_only=True)
class FailureNotificationProps:
    """Props of `FailureNotification`."""

    name: str
    """Pipeline name, e.g. `winnow-dev` (the notification's subject and message)."""
    failure_topic: sns.ITopic
    """Notified with the error, its cause and the run when a run fails."""


class FailureNotification(Construct):
    """Where every state that can fail a run goes (`state`): publish the error, its cause and the run to the
    failure topic, then fail with that error. The SNS task grants the state machine sns:Publish on the topic."""

    def __init__(self, scope: Construct, construct_id: str, props: FailureNotificationProps) -> None:
        super().__init__(scope, construct_id)
        jp = sfn.JsonPath
        notify = tasks.SnsPublish(
            self,
            NOTIFY_STATE,
            topic=props.failure_topic,
            subject=f"{props.name}: pipeline run failed",
            message=sfn.TaskInput.from_object(
                {
                    "pipeline": props.name,
                    "execution": jp.execution_id,
                    "run": jp.object_at("$.run"),
                    "error": jp.string_at("$.error.Error"),
                    "cause": jp.string_at("$.error.Cause"),
                }
            ),
            result_path=jp.DISCARD,
        )
        notify.next(sfn.Fail(self, "Failed", error_path="$.error.Error", cause_path="$.error.Cause"))
        self.state: sfn.TaskStateBase = notify
        """`NotifyFailure`: catch into it with `result_path="$.error"`."""
