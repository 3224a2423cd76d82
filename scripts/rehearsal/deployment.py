"""What the deployment submits, rendered from the CDK constructs for a fake account (nothing deployed), and what
deploying puts in AWS, put into moto instead."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn

from cdk.components.job_artifacts import JobArtifacts, JobArtifactsProps
from cdk.components.state_machine.emr_job import EmrJobs, EmrJobsProps
from cdk.components.state_machine.input_plan import InputPlan, InputPlanProps
from cdk.components.state_machine.run_input import RunInput, RunInputProps
from cdk.config import EnvConfig
from cdk.naming import ResourceNames, resource_names
from cdk.pipeline import cdk_json_context
from cdk.stacks.orchestration_stack import manifest_uri
from cdk.stacks.processing_stack import DEDUP_PREFIX, SHRED_PREFIX, deployed_job_config, spark_submit_parameters
from scripts.rehearsal.steps import RehearsalError

ACCOUNT = "123456789012"
"""The fake account the names are rendered for (moto's default)."""
RUN_ID = "2026-11-22-03-00-00"


@dataclass(frozen=True)
class Deployment:
    """What the deployed env gives a job run and the planner, for run `RUN_ID` of the input prefix."""

    entrypoint: str
    """The job runs' EntryPoint (`s3://…/emr_main.py`)."""
    spark_submit_parameters: str
    """The job runs' SparkSubmitParameters, as the state machine's Dedup task holds them."""
    arguments: dict[str, list[str]]
    """EntryPointArguments by job (`dedup`, `shred`), as the state machine renders them."""
    planner_event: dict[str, Any]
    """The input planner's event, as the state machine's PlanInput task renders it."""
    artifacts_prefix: str
    """`s3://<artifacts bucket>/jobs/<version>/`: where the build and config.json are deployed."""
    job_config: dict[str, Any]
    """config.json as deployed."""
    data_buckets: tuple[str, ...]
    """The buckets the jobs read and write with Spark (input, output, lake manifest)."""
    manifest: str
    region: str
    python: str
    """`emr.python`: the Python the job runs' settings name."""


def render_deployment(config: EnvConfig, build_dir: Path, account: str = ACCOUNT) -> Deployment:
    """Build the artifacts, run input, job and planner constructs in a throwaway stack and read their states.

    Raises:
        RehearsalError: a state's parameters use an intrinsic function `evaluate` does not know.
    """
    names = resource_names(config, account)
    with tempfile.TemporaryDirectory(prefix="winnow-rehearsal-cdk-") as outdir:
        app = cdk.App(context=cdk_json_context(), outdir=outdir)  # cdk.json's feature flags, as app.py's
        stack = cdk.Stack(app, "Rehearsal", env=cdk.Environment(account=account, region=config.region))
        job_config = deployed_job_config(config)
        bucket = s3.Bucket.from_bucket_name(stack, "ArtifactsBucket", names.artifacts_bucket)
        artifacts = JobArtifacts(
            stack, "Artifacts", JobArtifactsProps(bucket=bucket, build_dir=build_dir, job_config=job_config)
        )
        manifest = manifest_uri(config, names)
        settings = run_settings(stack, config, names, artifacts.config_uri, manifest)
        failed = sfn.Pass(stack, "Failed")
        jobs = EmrJobs(
            stack,
            "Jobs",
            EmrJobsProps(
                name=f"winnow-{config.env}",
                application_id="rehearsal",
                execution_role=iam.Role.from_role_arn(stack, "JobRole", f"arn:aws:iam::{account}:role/rehearsal"),
                job_runs_policy=iam.ManagedPolicy.from_managed_policy_name(stack, "JobRuns", "rehearsal"),
                entrypoint_uri=artifacts.entrypoint_uri,
                spark_submit_parameters=spark_submit_parameters(config, artifacts),
                create_manifest=config.manifest.backend == "lake",  # as OrchestrationStack passes it
                job_timeout_minutes=config.emr.job_timeout_minutes,
                job_retries=0,
                retry_interval_seconds=1,
                on_failure=failed,
            ),
        )
        planner = lambda_.Function.from_function_arn(
            stack, "Planner", f"arn:aws:lambda:{config.region}:{account}:function:rehearsal"
        )
        plan = InputPlan(stack, "InputPlan", InputPlanProps(planner=planner, on_failure=failed))
        data = {"run": {"runId": RUN_ID, "inputPrefix": config.storage.input_prefix}, "settings": settings}
        submit = stack.resolve(jobs.dedup.to_state_json())["Parameters"]["JobDriver"]["SparkSubmit"]
        return Deployment(
            entrypoint=submit["EntryPoint"],
            spark_submit_parameters=submit["SparkSubmitParameters"],
            arguments=evaluate(jobs.arguments.to_state_json()["Parameters"], data)["args"],
            planner_event=evaluate(stack.resolve(plan.state.to_state_json())["Parameters"]["Payload"], data),
            artifacts_prefix=f"s3://{names.artifacts_bucket}/{artifacts.prefix}",
            job_config=job_config,
            data_buckets=(names.input_bucket, names.output_bucket, names.manifest_bucket),
            manifest=manifest,
            region=config.region,
            python=config.emr.python,
        )


def run_settings(
    stack: cdk.Stack, config: EnvConfig, names: ResourceNames, config_uri: str, manifest: str
) -> dict[str, Any]:
    """The settings the state machine's `Run` state gives every later state (buckets, outputs, config, manifest)."""
    props = RunInputProps(
        input_bucket_name=names.input_bucket,
        input_prefix=config.storage.input_prefix,
        output_bucket_name=names.output_bucket,
        dedup_prefix=DEDUP_PREFIX,
        shred_prefix=SHRED_PREFIX,
        config_uri=config_uri,
        manifest_uri=manifest,
    )
    settings: dict[str, Any] = RunInput(stack, "RunInput", props).end.to_state_json()["Parameters"]["settings"]
    return settings


def deploy_to_moto(deployment: Deployment, build_dir: Path) -> int:
    """What deploying puts in AWS, into moto (boto3 of this process reaches it through the environment): the
    buckets, the build and config.json under the artifacts version, the DynamoDB manifest table; the files put.

    Raises:
        botocore.exceptions.ClientError: moto refused a call (a bucket or the table exists already).
    """
    import boto3

    client = boto3.client("s3")
    artifacts_bucket, _, prefix = deployment.artifacts_prefix.removeprefix("s3://").partition("/")
    for bucket in (artifacts_bucket, *deployment.data_buckets):
        client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": deployment.region})
    files = sorted(path for path in build_dir.rglob("*") if path.is_file())
    for path in files:
        client.put_object(Bucket=artifacts_bucket, Key=prefix + path.relative_to(build_dir).as_posix(),
                          Body=path.read_bytes())  # fmt: skip
    config = json.dumps(deployment.job_config).encode()
    client.put_object(Bucket=artifacts_bucket, Key=f"{prefix}config.json", Body=config)
    if deployment.manifest.startswith("dynamodb://"):
        from jobs.manifest import open_manifest

        open_manifest(deployment.manifest).create()  # what the Storage stack creates
    return len(files) + 1


# ----------------------------------------------------------------------------------------------------------------
# Step Functions' Parameters, evaluated as the state machine would

_TOKEN = re.compile(r"\s*(?:(?P<string>'(?:\\.|[^'\\])*')|(?P<call>States\.\w+)\(|(?P<path>\$[\w.]*)|(?P<end>[,)]))")


def evaluate(template: Any, data: Mapping[str, Any]) -> Any:
    """Step Functions' Parameters over `data`: `key.$` values are JSONPaths or the intrinsic functions
    States.Array and States.Format; other values are taken as they are.

    Raises:
        RehearsalError: a `.$` value is neither (another intrinsic function, or not an expression at all).
        KeyError: a JSONPath names what `data` does not hold.
    """
    if isinstance(template, list):
        return [evaluate(item, data) for item in template]
    if not isinstance(template, dict):
        return template
    return {
        key.removesuffix(".$"): _Expression(value, data).value() if key.endswith(".$") else evaluate(value, data)
        for key, value in template.items()
    }


def _format(template: str, values: Iterator[Any]) -> str:
    """States.Format: each `{}` of the template replaced by the next value."""
    return re.sub(r"\{\}", lambda _: str(next(values)), template)


_FUNCTIONS: dict[str, Callable[[list[Any]], Any]] = {
    "States.Array": list,
    "States.Format": lambda args: _format(args[0], iter(args[1:])),
}
"""The intrinsic functions the job and planner states use."""


class _Expression:
    """One `.$` value: a JSONPath (`$.a.b`) or an intrinsic function of literals, paths and functions."""

    def __init__(self, text: str, data: Mapping[str, Any]) -> None:
        """The expression `text`, read from its start, its paths looked up in `data`."""
        self.text, self.data, self.at = text, data, 0

    def value(self) -> Any:
        """The whole expression's value.

        Raises:
            RehearsalError: it is not one operand, or something follows it.
        """
        result = self._operand()
        if self.text[self.at :].strip():
            raise self._refused("nothing after the expression")
        return result

    def _token(self) -> re.Match[str]:
        """The next token (a string literal, a function's name and `(`, a path, `,` or `)`), consumed.

        Raises:
            RehearsalError: none of these comes next.
        """
        match = _TOKEN.match(self.text, self.at)
        if match is None:
            raise self._refused("a string literal, a JSONPath, States.Array( or States.Format(")
        self.at = match.end()
        return match

    def _operand(self) -> Any:
        """The next operand's value: a string literal unescaped, a path's value in the data, a function's result.

        Raises:
            RehearsalError: a function other than those of `_FUNCTIONS`, or a malformed operand.
            KeyError: a path names what the data does not hold.
        """
        token = self._token()
        if token["string"] is not None:
            return re.sub(r"\\(.)", r"\1", token["string"][1:-1])
        if token["path"] is not None:
            found: Any = self.data
            for part in token["path"].split(".")[1:]:
                found = found[part]
            return found
        if token["call"] is None or token["call"] not in _FUNCTIONS:
            raise self._refused(f"one of {', '.join(_FUNCTIONS)}")
        args: list[Any] = []
        while True:
            args.append(self._operand())
            if self._token()["end"] == ")":
                return _FUNCTIONS[token["call"]](args)

    def _refused(self, expected: str) -> RehearsalError:
        """The error for the expression at the current position, saying what was expected there."""
        return RehearsalError(f"state parameter {self.text!r} at {self.at}: expected {expected}")
