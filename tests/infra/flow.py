"""Run the synthesized state machine in moto: EMR tasks swapped for stand-ins, everything else as deployed.

moto's Step Functions interpreter cannot run `emr-serverless:startJobRun.sync`, so a test replaces each job
task with a Pass state that keeps the task's Parameters (so the output shows exactly what EMR would get),
or with a task that fails in moto, keeping the task's Retry and Catch.

The SDK integrations run as deployed, against moto: `aws-sdk:s3:getObject` (with the Body shim below),
`aws-sdk:cloudwatch:putMetricData`, and `aws-sdk:sqs:sendMessage` (moto 5.2.5 passes the state's PascalCase
Parameters to boto3's `send_message` as they are, which are boto3's names too: no shim; a failure is named
`sqs.<Code>Exception`, where AWS names it `Sqs.<Code>Exception`).
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.config import DefaultConfig

from tests.infra.helpers import Synthesized, state_machine_definition

ACCOUNT = "123456789012"  # moto's account
REGION = "eu-west-1"
URL_SUFFIX = "amazonaws.com"
MOTO_CONFIG: DefaultConfig = {"stepfunctions": {"execute_state_machine": True}}
"""moto's config switch that makes Step Functions executions actually run (its ASL interpreter)."""


def iso_start_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give `$$.Execution.StartTime` as AWS does, an ISO 8601 string (moto 5.2.5 puts a datetime there)."""
    from datetime import UTC, datetime

    from moto.stepfunctions.parser.asl.eval.states import ExecutionData
    from moto.stepfunctions.parser.backend import execution_worker

    original = ExecutionData

    def execution_data(**fields: Any) -> Any:
        start = fields.get("StartTime")
        if isinstance(start, datetime):
            fields["StartTime"] = start.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return original(**fields)

    monkeypatch.setattr(execution_worker, "ExecutionData", execution_data)


@contextmanager
def moto_flow(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto with its ASL interpreter on: dummy credentials, the flow's region, no endpoint override."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    iso_start_time(monkeypatch)
    planner_in_process(monkeypatch)
    step_functions_integration_names(monkeypatch)
    with mock_aws(config=MOTO_CONFIG):
        yield


LOADER_STATES = ("ReadLoaderMessage", "SendLoaderMessage", "LoaderNotTold")
"""The states that read the shred run's `shredding_complete.json` and send it to RDB Loader (rdb layout with a
loader target: dev and prod)."""


def with_jobs_as_pass(synth: Synthesized, loader: bool = False) -> dict[str, Any]:
    """The synthesized definition with both EMR job tasks swapped for Pass states (their Parameters kept).

    The loader states are left out (`without_loader`) unless `loader`: a stand-in shred job writes no
    `shredding_complete.json`, so a test of them puts one in S3 and creates the queue."""
    asl = as_pass(as_pass(definition(synth), "Dedup"), "Shred")
    return asl if loader else without_loader(asl)


def without_loader(asl: dict[str, Any]) -> dict[str, Any]:
    """`asl` without the loader states: what led to them leads to where they lead (the run's end)."""
    if LOADER_STATES[0] not in asl["States"]:
        return asl
    swapped = copy.deepcopy(asl)
    after = swapped["States"]["SendLoaderMessage"]["Next"]
    for name in LOADER_STATES:
        del swapped["States"][name]
    for state in swapped["States"].values():
        for transition in [state, *state.get("Catch", [])]:
            if transition.get("Next") in LOADER_STATES:
                transition["Next"] = after
    return swapped


def resolve(function: str, argument: Any) -> str:
    """Real-looking values for the definition's references (the failure topic is a real moto topic)."""
    if function == "Ref":
        pseudo = {
            "AWS::Partition": "aws",
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::URLSuffix": URL_SUFFIX,
        }
        return pseudo.get(argument, f"arn:aws:sns:{REGION}:{ACCOUNT}:{argument}")
    if function == "Fn::GetStackOutput" and "LoaderQueue" in argument["OutputName"]:  # the Storage stack's queue
        env = argument["StackName"].split("-")[1]  # Winnow-<env>-Storage
        name = f"winnow-{env}-shredding-complete.fifo"
        if argument["OutputName"].startswith("PublishOutputRef"):
            return f"https://sqs.{REGION}.{URL_SUFFIX}/{ACCOUNT}/{name}"
        return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
    if function == "Fn::GetStackOutput":
        return f"stand-in-{argument['OutputName']}"
    if function == "Fn::GetAtt" and argument[1] == "Arn":  # the input planner function
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{argument[0]}"
    return f"stand-in-{json.dumps(argument)}"


def definition(synth: Synthesized) -> dict[str, Any]:
    return state_machine_definition(synth.template("Orchestration"), resolve)


def topic_name(asl: dict[str, Any]) -> str:
    arn: str = asl["States"]["NotifyFailure"]["Parameters"]["TopicArn"]
    return arn.rsplit(":", 1)[1]


def as_pass(asl: dict[str, Any], state: str) -> dict[str, Any]:
    """`asl` with the task `state` replaced by a Pass state with the same Parameters and ResultPath."""
    task = asl["States"][state]
    swapped = copy.deepcopy(asl)
    swapped["States"][state] = {
        "Type": "Pass",
        "Parameters": task["Parameters"],
        "ResultPath": task["ResultPath"],
        **({"Next": task["Next"]} if "Next" in task else {"End": True}),
    }
    return swapped


def as_failing_task(asl: dict[str, Any], state: str) -> dict[str, Any]:
    """`asl` with the task `state` calling a missing DynamoDB table: it fails, is retried (interval cut to
    1 s), then caught by the task's own Catch."""
    task = asl["States"][state]
    swapped = copy.deepcopy(asl)
    swapped["States"][state] = {
        **{key: task[key] for key in ("ResultPath", "Next", "Catch")},
        "Type": "Task",
        "Resource": "arn:aws:states:::dynamodb:getItem",
        "Parameters": {"TableName": "no-such-table", "Key": {"eventId": {"S": "x"}}},
        "Retry": [{**retry, "IntervalSeconds": 1} for retry in task["Retry"]],
    }
    return swapped


def machine_name(asl: dict[str, Any]) -> str:
    """The state machine's deployed name (the hand-over starts executions of it by name)."""
    arn: str = asl["States"]["StartNamedRun"]["Parameters"]["StateMachineArn"]
    return arn.rsplit(":", 1)[1]


def create_machine(asl: dict[str, Any]) -> str:
    """Create (or update) the state machine in moto under its deployed name; its ARN."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    name = machine_name(asl)
    for machine in sfn.list_state_machines()["stateMachines"]:
        if machine["name"] == name:
            sfn.update_state_machine(stateMachineArn=machine["stateMachineArn"], definition=json.dumps(asl))
            return str(machine["stateMachineArn"])
    arn: str = sfn.create_state_machine(
        name=name, definition=json.dumps(asl), roleArn=f"arn:aws:iam::{ACCOUNT}:role/winnow-test"
    )["stateMachineArn"]
    return arn


def wait(execution_arn: str, timeout: float = 30) -> dict[str, Any]:
    """describe_execution's answer once the execution has ended (or after `timeout` seconds)."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    deadline = time.monotonic() + timeout
    while True:
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING" or time.monotonic() > deadline:
            return described
        time.sleep(0.1)


def start(
    asl: dict[str, Any], execution_input: dict[str, Any], name: str | None = None, timeout: float = 30
) -> dict[str, Any]:
    """Start one execution and wait for it to end: describe_execution's answer (no hand-over followed)."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    arn = create_machine(asl)
    # Unnamed, AWS gives an execution a UUID as its name (moto 5.2.5 would name every one "None").
    name = name or str(uuid.uuid4())
    execution = sfn.start_execution(stateMachineArn=arn, input=json.dumps(execution_input), name=name)["executionArn"]
    return wait(execution, timeout)


def execute(asl: dict[str, Any], execution_input: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
    """Run the pipeline as the schedule or an unnamed console start does: the execution started, or, when it
    handed the run over, the execution named after the run, once it has ended."""
    described = start(asl, execution_input, timeout=timeout)
    handed_over = json.loads(described.get("output") or "{}").get("handedOverTo")
    return wait(handed_over["executionArn"], timeout) if handed_over else described


def step_functions_integration_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give moto's `states:startExecution` integration the names AWS uses (moto 5.2.5 passes the state's
    `StateMachineArn`/`Name`/`Input` to boto3 as they are, which wants `stateMachineArn`/…, and returns boto3's
    `executionArn`/`startDate` where Step Functions returns `ExecutionArn`/`StartDate`)."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_sfn

    service = state_task_service_sfn.StateTaskServiceSfn
    normalise_parameters = service._normalise_parameters

    def parameters(self: Any, parameters: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        normalise_parameters(self, parameters, *args, **kwargs)
        for key in [key for key in parameters if key in ("StateMachineArn", "Name", "Input")]:
            parameters[key[0].lower() + key[1:]] = parameters.pop(key)

    def response(self: Any, response: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(response, dict):
            for key in [key for key in response if key in ("executionArn", "startDate")]:
                response[key[0].upper() + key[1:]] = response.pop(key)

    monkeypatch.setattr(service, "_normalise_parameters", parameters)
    monkeypatch.setattr(service, "_normalise_response", response)

    # aws-sdk:s3:getObject answers with the object's Body as text (moto 5.2.5 leaves boto3's stream there).
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_aws_sdk

    def body_as_text(self: Any, response: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(response, dict) and hasattr(response.get("Body"), "read"):
            response["Body"] = response["Body"].read().decode("utf-8")

    monkeypatch.setattr(state_task_service_aws_sdk.StateTaskServiceAwsSdk, "_normalise_response", body_as_text)


def planner_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Answer the state machine's `lambda:invoke` of the input planner by calling its handler in this process
    (moto runs Lambda code only in Docker), as the Lambda runtime would: the result, or the error as
    `FunctionError` with `errorType` and `errorMessage`."""
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

    from jobs.incremental.planner_lambda import handler

    def invoke(parameters: dict[str, Any], region: str, state_credentials: Any) -> dict[str, Any]:
        assert "InputPlanner" in parameters["FunctionName"], parameters["FunctionName"]
        try:
            return {"StatusCode": 200, "Payload": handler(json.loads(parameters["Payload"]))}
        except Exception as err:
            error = {"errorType": type(err).__name__, "errorMessage": str(err)}
            return {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": error}

    monkeypatch.setattr(lambda_eval_utils, "_invoke_lambda_function", invoke)


def states_entered(execution_arn: str) -> list[str]:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    events = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    return [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]


def task_failures(execution_arn: str, resource_type: str | None = None) -> int:
    """How many task attempts failed (a retried task fails once per attempt), of one resource type (e.g.
    `aws-sdk:sqs`) when given."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    events = sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)["events"]
    return sum(
        1
        for e in events
        if e["type"] == "TaskFailed"
        and resource_type in (None, e.get("taskFailedEventDetails", {}).get("resourceType"))
    )
