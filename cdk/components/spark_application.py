"""The EMR Serverless Spark application the jobs run on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aws_cdk import Aws
from aws_cdk import aws_emrserverless as emr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk.components.job_network import JobPlacement
from cdk.nag import acknowledge, resource_finding


@dataclass(frozen=True, kw_only=True)
class SparkApplicationProps:
    """Props of `SparkApplication`."""

    name: str
    """Application name shown in the EMR console."""
    release_label: str
    """EMR release, e.g. `emr-spark-8.0.0` (paired with the local pyspark pin, see cdk/config.py)."""
    architecture: str = "X86_64"
    """X86_64 or ARM64."""
    max_vcpu: int = 32
    """Cap on vCPUs across all running jobs."""
    max_memory_gb: int = 128
    """Cap on memory across all running jobs."""
    max_disk_gb: int = 500
    """Cap on disk across all running jobs."""
    idle_timeout_minutes: int = 15
    """Stop after this many idle minutes (no pre-initialized capacity: nothing is billed while stopped)."""
    log_bucket: s3.IBucket
    """Where the job runs' driver and executor logs go (under `log_prefix`)."""
    log_prefix: str = "emr/"
    """Key prefix of the job logs."""
    log4j2: Mapping[str, str] = field(default_factory=dict)
    """log4j2 properties set on the driver's and the executors' log4j2.properties (EMR's own file otherwise)."""
    network: JobPlacement | None = None
    """The subnets and security groups of the workers (`emr.vpc`); None: no VPC."""


EMR_EVENTS_RULE = "StepFunctionsGetEventsForEMRServerlessJobRule"
"""The EventBridge rule Step Functions manages to learn when a `.sync` EMR Serverless job run ends."""


class SparkApplication(Construct):
    """A SPARK application that starts on job submission and stops when idle, with a capacity cap."""

    def __init__(self, scope: Construct, construct_id: str, props: SparkApplicationProps) -> None:
        super().__init__(scope, construct_id)
        self.log_uri = props.log_bucket.s3_url_for_object(props.log_prefix)
        self.application = emr.CfnApplication(
            self,
            "Application",
            name=props.name,
            release_label=props.release_label,
            type="SPARK",
            architecture=props.architecture,
            auto_start_configuration=emr.CfnApplication.AutoStartConfigurationProperty(enabled=True),
            auto_stop_configuration=emr.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=props.idle_timeout_minutes
            ),
            maximum_capacity=emr.CfnApplication.MaximumAllowedResourcesProperty(
                cpu=f"{props.max_vcpu} vCPU", memory=f"{props.max_memory_gb} GB", disk=f"{props.max_disk_gb} GB"
            ),
            monitoring_configuration=emr.CfnApplication.MonitoringConfigurationProperty(
                s3_monitoring_configuration=emr.CfnApplication.S3MonitoringConfigurationProperty(log_uri=self.log_uri)
            ),
            runtime_configuration=[
                emr.CfnApplication.ConfigurationObjectProperty(classification=name, properties=dict(props.log4j2))
                for name in ("spark-driver-log4j2", "spark-executor-log4j2")
            ]
            if props.log4j2
            else None,
            network_configuration=emr.CfnApplication.NetworkConfigurationProperty(
                subnet_ids=list(props.network.subnet_ids), security_group_ids=list(props.network.security_group_ids)
            )
            if props.network
            else None,
        )
        self.application_id: str = self.application.attr_application_id
        self.application_arn: str = self.application.attr_arn

    def job_runs_policy(self, execution_role: iam.IRole) -> iam.ManagedPolicy:
        """A managed policy for a Step Functions role to run jobs here as `execution_role` (`startJobRun.sync`):
        start, watch and cancel job runs of this application, pass that role only to EMR Serverless, and
        manage the events rule the `.sync` integration uses."""
        job_runs = f"{self.application_arn}/jobruns/*"
        policy = iam.ManagedPolicy(
            self,
            "JobRunsPolicy",
            description="Start, watch and cancel Winnow job runs on this EMR Serverless application",
            statements=[
                iam.PolicyStatement(
                    sid="StartJobRun", actions=["emr-serverless:StartJobRun"], resources=[self.application_arn]
                ),
                iam.PolicyStatement(
                    sid="WatchJobRuns",
                    # TagResource: job runs are started with tags.
                    actions=["emr-serverless:GetJobRun", "emr-serverless:CancelJobRun", "emr-serverless:TagResource"],
                    resources=[job_runs],
                ),
                iam.PolicyStatement(
                    sid="PassJobRole",
                    actions=["iam:PassRole"],
                    resources=[execution_role.role_arn],
                    conditions={"StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}},
                ),
                iam.PolicyStatement(
                    sid="SyncEventsRule",
                    actions=["events:PutTargets", "events:PutRule", "events:DescribeRule"],
                    resources=[f"arn:{Aws.PARTITION}:events:{Aws.REGION}:{Aws.ACCOUNT_ID}:rule/{EMR_EVENTS_RULE}"],
                ),
            ],
        )
        acknowledge(
            policy,
            "IAM5",
            "job run ids are generated per run; the statement is limited to this application's job runs",
            resource_finding(self, job_runs),
        )
        return policy
