"""One execution per run id: an execution not named after its run starts the run as an execution of this state
machine named `run-<run id>`, and ends."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

HAND_OVER_STATE = "StartNamedRun"
RUN_EXECUTION_PREFIX = "run-"
"""Executions named `run-<run id>` run the pipeline; any other hands the run over to one of that name."""
EXECUTION_ALREADY_EXISTS = "StepFunctions.ExecutionAlreadyExistsException"


@dataclass(frozen=True, kw_only=True)
class RunHandOverProps:
    """Props of `RunHandOver`."""

    state_machine_name: str
    """The name of the state machine the states are in (it starts an execution of itself)."""
    on_failure: sfn.IChainable
    """Where a failed start goes (the failure notification), with the error at `$.error`."""


class RunHandOver(Construct):
    """`StartNamedRun` (`state`): start this run as an execution named `run-<run id>`, then `HandedOver`.

    Step Functions refuses a second execution of that name, so a run id runs once: `RunAlreadyStarted` fails the
    execution with how to redo the run (a redrive, or a start named `run-<run id>-…`).
    """

    def __init__(self, scope: Construct, construct_id: str, props: RunHandOverProps) -> None:
        super().__init__(scope, construct_id)
        jp = sfn.JsonPath
        # By name, not by reference: a state machine cannot refer to itself.
        this = sfn.StateMachine.from_state_machine_name(self, "This", props.state_machine_name)
        start = tasks.StepFunctionsStartExecution(
            self,
            HAND_OVER_STATE,
            state_machine=this,
            name=jp.format(f"{RUN_EXECUTION_PREFIX}{{}}", jp.string_at("$.run.runId")),
            # The input as given, with the run id it resolved to (a later start time must not change it).
            input=sfn.TaskInput.from_json_path_at(
                jp.json_merge(jp.object_at("$.runDefaults"), jp.object_at("$.given"))
            ),
            integration_pattern=sfn.IntegrationPattern.REQUEST_RESPONSE,
            result_selector={"executionArn": jp.string_at("$.ExecutionArn")},
            result_path="$.handedOverTo",
        )
        already = sfn.Fail(
            self,
            "RunAlreadyStarted",
            error="RunAlreadyStarted",
            cause_path=jp.format(
                "Run {} already has an execution named run-{}: a run id runs once. Redrive that execution, or "
                "start one named run-{}-<anything> to redo the run",
                jp.string_at("$.run.runId"),
                jp.string_at("$.run.runId"),
                jp.string_at("$.run.runId"),
            ),
        )
        start.add_catch(already, errors=[EXECUTION_ALREADY_EXISTS], result_path="$.error")
        start.add_catch(props.on_failure, errors=[sfn.Errors.ALL], result_path="$.error")
        start.next(sfn.Succeed(self, "HandedOver"))
        self.state: sfn.TaskStateBase = start
        """`StartNamedRun`."""
