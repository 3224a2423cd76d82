"""The job metrics: after each job run, its summary.json's figures are put in CloudWatch.

From the state machine, not the job: an EMR Serverless application without a VPC reaches S3, but is not documented
to reach CloudWatch metrics (docs/deploy.md, "Network"). A failure here is recorded (`$.metricsErrors.<job>`) and never fails the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Aws
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from cdk.nag import acknowledge, resource_finding


@dataclass(frozen=True, kw_only=True)
class JobMetricsProps:
    """Props of `JobMetrics`. S3 prefixes end in '/'."""

    output_bucket_name: str
    """Where the jobs write their run folders (each with its summary.json)."""
    prefixes: Mapping[str, str]
    """Per job: the prefix of its run folders (`<prefix>run=<run id>/summary.json`)."""
    env: str
    """The environment (the `Env` dimension of the job metrics)."""
    metrics_namespace: str
    """Where each job's figures are put (CloudWatch namespace)."""
    job_metrics: Mapping[str, tuple[tuple[str, str, str], ...]]
    """Per job: (metric name, path of the figure in summary.json, unit)."""


class JobMetrics(Construct):
    """`Read<Job>Summary` → `<Job>Figures` → `Publish<Job>Metrics` after a job's state (`publish`); `grant` lets
    the state machine read the summaries and put metrics in the namespace."""

    def __init__(self, scope: Construct, construct_id: str, props: JobMetricsProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props

    def publish(self, job: str, then: sfn.State) -> sfn.CustomState:
        """Read the job run's summary.json (S3) and put its figures in CloudWatch, then go on to `then`."""
        p = self.props
        jp = sfn.JsonPath
        title = job.capitalize()
        dimensions = [{"Name": "Env", "Value": p.env}, {"Name": "Job", "Value": job}]
        data = [
            {"MetricName": name, "Dimensions": dimensions, "Value.$": f"$.summaries.{job}.{path}", "Unit": unit}
            for name, path, unit in p.job_metrics[job]
        ]
        catch = {"ErrorEquals": [sfn.Errors.ALL], "ResultPath": f"$.metricsErrors.{job}", "Next": then.state_id}
        read = sfn.CustomState(
            self,
            f"Read{title}Summary",
            state_json={
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:s3:getObject",
                "Parameters": {
                    "Bucket": p.output_bucket_name,
                    "Key.$": f"States.Format('{p.prefixes[job]}run={{}}/summary.json', $.run.runId)",
                },
                "ResultSelector": {"summary.$": "States.StringToJson($.Body)"},
                "ResultPath": f"$.summaries.{job}",
                "Catch": [catch],
            },
        )
        # Only the figures stay in the execution's data (a summary can list many input files).
        flatten = sfn.Pass(
            self,
            f"{title}Figures",
            parameters={
                field: jp.object_at(f"$.summaries.{job}.summary.{field}") for field in ("wall_time_seconds", "counts")
            },
            result_path=f"$.summaries.{job}",
        )
        put = sfn.CustomState(
            self,
            f"Publish{title}Metrics",
            state_json={
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:cloudwatch:putMetricData",
                "Parameters": {"Namespace": p.metrics_namespace, "MetricData": data},
                "ResultPath": jp.DISCARD,
                "Catch": [catch],
            },
        )
        read.next(flatten).next(put).next(then)
        return read

    def grant(self, state_machine: sfn.StateMachine) -> None:
        """s3:GetObject on each job's run summaries; cloudwatch:PutMetricData in the namespace."""
        p = self.props
        summaries = [
            f"arn:{Aws.PARTITION}:s3:::{p.output_bucket_name}/{prefix}run=*/summary.json"
            for prefix in p.prefixes.values()
        ]
        state_machine.add_to_role_policy(
            iam.PolicyStatement(sid="ReadRunSummaries", actions=["s3:GetObject"], resources=summaries)
        )
        # PutMetricData has no resource-level permissions: scoped to the namespace by condition instead.
        state_machine.add_to_role_policy(
            iam.PolicyStatement(
                sid="PutJobMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": p.metrics_namespace}},
            )
        )
        for summary in summaries:
            acknowledge(
                state_machine,
                "IAM5",
                "ReadRunSummaries: run ids are only known at run time; only each run's summary.json",
                resource_finding(self, summary),
            )
        acknowledge(
            state_machine,
            "IAM5",
            "cloudwatch:PutMetricData supports no resource-level permissions; the statement is limited to the "
            f"{p.metrics_namespace} namespace by condition",
            "Resource::*",
        )
