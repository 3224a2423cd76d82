"""The EventBridge Scheduler schedule that starts pipeline runs, passing the scheduled time."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import TimeZone
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct


@dataclass(frozen=True, kw_only=True)
class PipelineScheduleProps:
    """Props of `PipelineSchedule`."""

    state_machine: sfn.IStateMachine
    expression: str
    """`cron(...)` or `rate(...)`."""
    timezone: str = "UTC"
    """IANA time zone the cron expression is read in."""
    enabled: bool
    """Whether the schedule starts runs (a disabled one can be switched on in the console)."""
    description: str = "Starts a Winnow pipeline run"


class PipelineSchedule(Construct):
    """Starts the state machine with `{"scheduledTime": <aws.scheduler.scheduled-time>}`.

    The run id derives from the scheduled time, so the scheduler's own retries of a start reuse it.
    """

    def __init__(self, scope: Construct, construct_id: str, props: PipelineScheduleProps) -> None:
        super().__init__(scope, construct_id)
        self.schedule = scheduler.Schedule(
            self,
            "Schedule",
            schedule=scheduler.ScheduleExpression.expression(props.expression, TimeZone.of(props.timezone)),
            target=targets.StepFunctionsStartExecution(
                props.state_machine,
                input=scheduler.ScheduleTargetInput.from_object(
                    {"scheduledTime": scheduler.ContextAttribute.scheduled_time}
                ),
                retry_attempts=3,
            ),
            enabled=props.enabled,
            description=props.description,
        )
