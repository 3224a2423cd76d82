"""The input plan of an incremental run: the input planner (a Lambda function) records the files no earlier run
read in the run's ledger entry; the dedup job then reads those (`--incremental`)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from cdk.nag import acknowledge, resource_finding

PLAN_STATE = "PlanInput"


@dataclass(frozen=True, kw_only=True)
class InputPlanProps:
    """Props of `InputPlan`."""

    planner: lambda_.IFunction
    """The input planner of incremental runs (`InputPlanner`)."""
    on_failure: sfn.IChainable
    """Where a failed plan goes (the failure notification), with the error at `$.error`."""


class InputPlan(Construct):
    """`PlanInput` (`state`): invoke the planner with the run id, the input, dedup's output and the job config;
    its answer goes to `$.plan`. The Lambda task grants the state machine lambda:InvokeFunction (`grant`
    acknowledges its `:*`)."""

    def __init__(self, scope: Construct, construct_id: str, props: InputPlanProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props
        jp = sfn.JsonPath
        plan = tasks.LambdaInvoke(
            self,
            PLAN_STATE,
            lambda_function=props.planner,
            payload=sfn.TaskInput.from_object(
                {
                    "runId": jp.string_at("$.run.runId"),
                    "input": jp.format(
                        "s3://{}/{}", jp.string_at("$.settings.inputBucket"), jp.string_at("$.run.inputPrefix")
                    ),
                    "output": jp.string_at("$.settings.dedupOutput"),
                    "config": jp.string_at("$.settings.config"),
                }
            ),
            result_selector={
                key: jp.string_at(f"$.Payload.{key}")
                for key in ("files", "bytes", "entry", "reused", "backlogFiles", "message")
            },
            result_path="$.plan",
            retry_on_service_exceptions=True,
        )
        plan.add_catch(props.on_failure, errors=[sfn.Errors.ALL], result_path="$.error")
        self.state: sfn.TaskStateBase = plan
        """`PlanInput`: go on from it with `state.next(…)`."""

    def grant(self, state_machine: sfn.StateMachine) -> None:
        """Acknowledge what the Lambda task granted the state machine: the planner's versions and aliases too."""
        acknowledge(
            state_machine,
            "IAM5",
            "CDK's grant to invoke the input planner also covers its versions and aliases (<function>:*); "
            "only that function",
            resource_finding(self, f"{self.props.planner.function_arn}:*"),
        )
