"""The Lambda function that plans each scheduled run's input (`jobs/incremental/planner_lambda.py`) before EMR starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk.audit import LOGS_WITHOUT_CMK, acknowledge_checkov
from cdk.nag import acknowledge, resource_finding

HANDLER = "jobs.incremental.planner_lambda.handler"
RUNTIME = lambda_.Runtime.PYTHON_3_14


@dataclass(frozen=True, kw_only=True)
class InputPlannerProps:
    """Props of `InputPlanner`. Prefixes end in '/'."""

    name: str
    """Pipeline name, e.g. `winnow-dev` (the function is `<name>-input-planner`)."""
    package_zip: Path
    """The built `jobs` package (`winnow_jobs.zip`, `jobs/` at its root): the function's code."""
    input_bucket: s3.IBucket
    input_prefix: str
    """The planner lists input files only under this prefix."""
    output_bucket: s3.IBucket
    dedup_prefix: str
    """Where dedup writes: the planner reads the ledger, leases and `_SUCCESS` markers here and writes
    ledger entries under `<dedup_prefix>_ledger/`."""
    artifacts_bucket: s3.IBucket
    artifacts_prefix: str
    """Where the deployed job configs are (every version: an execution passes its own)."""
    retain_logs: bool


class InputPlanner(Construct):
    """A Python Lambda function with its own log group and a role scoped to the listing and the ledger."""

    def __init__(self, scope: Construct, construct_id: str, props: InputPlannerProps) -> None:
        super().__init__(scope, construct_id)
        function_name = f"{props.name}-input-planner"
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=f"/aws/lambda/{function_name}",
            retention=logs.RetentionDays.THREE_MONTHS,
            removal_policy=RemovalPolicy.RETAIN if props.retain_logs else RemovalPolicy.DESTROY,
        )
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Winnow input planner: list new input, read and write the run ledger, write its logs",
        )
        dedup = props.dedup_prefix
        statements = [
            ("WriteLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], [self.log_group.log_group_arn]),
            # Ledger entries, leases and each run's _SUCCESS marker (GetObject also answers HeadObject).
            ("ReadRuns", ["s3:GetObject"], [props.output_bucket.arn_for_objects(f"{dedup}*")]),
            ("WriteLedger", ["s3:PutObject"], [props.output_bucket.arn_for_objects(f"{dedup}_ledger/*")]),
            ("ReadConfig", ["s3:GetObject"], [props.artifacts_bucket.arn_for_objects(f"{props.artifacts_prefix}*")]),
        ]
        for sid, actions, resources in statements:
            role.add_to_policy(iam.PolicyStatement(sid=sid, actions=actions, resources=resources))
        # Not scoped by an s3:prefix condition: a HeadObject of a missing `_SUCCESS` carries no prefix, and
        # without s3:ListBucket S3 answers it 403 instead of 404, which would stop the planner. Names only.
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ListData",
                actions=["s3:ListBucket"],
                resources=[props.input_bucket.bucket_arn, props.output_bucket.bucket_arn],
            )
        )
        self.function = lambda_.Function(
            self,
            "Function",
            function_name=function_name,
            description="Plans a Winnow run: the input files no earlier run read (jobs.incremental)",
            runtime=RUNTIME,
            handler=HANDLER,
            code=lambda_.Code.from_asset(str(props.package_zip)),
            role=role,
            timeout=Duration.minutes(5),
            memory_size=512,
            log_group=self.log_group,
        )
        self._acknowledge_checkov()
        acknowledge(
            role,
            "IAM5",
            "The log streams of the function's own log group are created at run time: the statement is limited "
            "to that group",
            resource_finding(self, self.log_group.log_group_arn),
        )
        for sid, _, resources in statements[1:]:
            for resource in resources:
                acknowledge(
                    role,
                    "IAM5",
                    f"{sid}: ledger entries, leases and run markers are only known as a key prefix; the statement is "
                    "limited to it and to the listed actions",
                    resource_finding(self, resource),
                )

    def _acknowledge_checkov(self) -> None:
        acknowledge_checkov(self.log_group, "CKV_AWS_158", LOGS_WITHOUT_CMK)
        for check, reason in {
            "CKV_AWS_115": "no reserved concurrency: the state machine calls it once per run, and reserving would take "
            "from the account's unreserved pool (a deploy fails where that falls under 10)",
            "CKV_AWS_116": "Step Functions invokes it synchronously and retries or catches its errors; a dead-letter "
            "queue serves asynchronous invocations only",
            "CKV_AWS_117": "it calls only S3's API; in a VPC it would need an S3 endpoint for nothing",
        }.items():
            acknowledge_checkov(self.function, check, reason)
