"""The processing stack: the EMR Serverless application (and its network), the job execution role and the job
artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk.components.job_artifacts import JobArtifacts, JobArtifactsProps
from cdk.components.job_execution_role import JobExecutionRole, JobExecutionRoleProps
from cdk.components.job_network import JobNetwork, JobNetworkProps, JobPlacement, check_registries_reachable
from cdk.components.lake_manifest_bucket import LAKE_PREFIX
from cdk.components.spark_application import SparkApplication, SparkApplicationProps
from cdk.config import EnvConfig
from cdk.naming import resource_names
from cdk.stacks.storage_stack import StorageStack
from jobs.contract import expected_warning_loggers

DEDUP_PREFIX = "deduplicated/"
SHRED_PREFIX = "shredded/"
KEYED_PREFIX = "keyed/"
TABLES_PREFIX = "tables/"
GENERIC_PREFIXES = (KEYED_PREFIX, TABLES_PREFIX)
"""Where `keyed` (its runs and its state, e.g. keyed/orders/runs and keyed/orders/state) and `table` (one folder
a table) work in the output bucket (`scripts/job_run.py`)."""
JOB_LOG_PREFIX = "emr/"


class ProcessingStack(Stack):
    """Runs the packaged jobs: a Spark application (in the VPC `emr.vpc` creates, if it does), the role its job runs
    assume, and one artifacts version.

    The storage stack's buckets and table are referred to by name (cdk/naming.py), deployed after it.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvConfig,
        storage: StorageStack,
        build_dir: Path,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.add_stack_dependency(storage)
        names = resource_names(config, self.account)

        def bucket(construct_id: str, name: str) -> s3.IBucket:
            return s3.Bucket.from_bucket_name(self, construct_id, name)

        input_bucket = bucket("InputBucket", names.input_bucket)
        output_bucket = bucket("OutputBucket", names.output_bucket)
        artifacts_bucket = bucket("ArtifactsBucket", names.artifacts_bucket)
        job_logs_bucket = bucket("JobLogsBucket", names.job_logs_bucket)
        # The job role reaches one manifest: the table, or the lake's bucket (the table is not touched then).
        lake = config.manifest.backend == "lake"
        manifest_table = None if lake else dynamodb.Table.from_table_name(self, "ManifestTable", names.manifest_table)
        manifest_bucket = bucket("ManifestBucket", names.manifest_bucket) if lake else None
        emr = config.emr
        self.network: JobNetwork | None = None
        if emr.vpc is not None and emr.vpc.create:
            check_registries_reachable(config.job_config.shred.iglu_config, build_dir)
            self.network = JobNetwork(
                self, "Network", JobNetworkProps(max_azs=emr.vpc.azs, retain_logs=config.retain_data)
            )
        self.spark = SparkApplication(
            self,
            "Spark",
            SparkApplicationProps(
                name=f"winnow-{config.env}",
                release_label=emr.release_label,
                architecture=emr.architecture,
                max_vcpu=emr.max_vcpu,
                max_memory_gb=emr.max_memory_gb,
                max_disk_gb=emr.max_disk_gb,
                idle_timeout_minutes=emr.idle_timeout_minutes,
                log_bucket=job_logs_bucket,
                log_prefix=JOB_LOG_PREFIX,
                # Spark's warnings expected in our plans, silenced on EMR as locally (jobs/runtime/log4j2.properties).
                log4j2=expected_warning_loggers(),
                network=self.network.placement if self.network else existing_placement(config),
            ),
        )
        self.artifacts = JobArtifacts(
            self,
            "Artifacts",
            JobArtifactsProps(bucket=artifacts_bucket, build_dir=build_dir, job_config=deployed_job_config(config)),
        )
        self.execution_role = JobExecutionRole(
            self,
            "JobRole",
            JobExecutionRoleProps(
                input_bucket=input_bucket,
                input_prefix=config.storage.input_prefix,
                output_bucket=output_bucket,
                output_prefixes=(DEDUP_PREFIX, SHRED_PREFIX, *GENERIC_PREFIXES),
                manifest_table=manifest_table,
                manifest_bucket=manifest_bucket,
                manifest_prefix=f"{LAKE_PREFIX}/",
                artifacts_bucket=artifacts_bucket,
                artifacts_prefix=self.artifacts.root,  # every version: versions are immutable
                log_bucket=job_logs_bucket,
                log_prefix=JOB_LOG_PREFIX,
            ),
        ).role
        self.job_runs_policy = self.spark.job_runs_policy(self.execution_role)
        self.spark_submit_parameters = spark_submit_parameters(config, self.artifacts)
        # What `scripts/job_run.py` needs to start keyed and table job runs (aws cloudformation describe-stacks).
        for output_id, value in {
            "ApplicationId": self.spark.application_id,
            "JobRoleArn": self.execution_role.role_arn,
            "EntryPoint": self.artifacts.entrypoint_uri,
            "SparkSubmitParameters": self.spark_submit_parameters,
            "ConfigUri": self.artifacts.config_uri,
            "OutputBucketName": names.output_bucket,
        }.items():
            CfnOutput(self, output_id, value=value)


def existing_placement(config: EnvConfig) -> JobPlacement | None:
    """The subnets and security groups `emr.vpc` names (an existing VPC), or None (no VPC, or a created one)."""
    vpc = config.emr.vpc
    if vpc is None or vpc.create:
        return None
    return JobPlacement(subnet_ids=vpc.subnet_ids, security_group_ids=vpc.security_group_ids)


DEPLOYED_WITHOUT = {"output": "queue", "manifest": "uri"}
"""Per section, the key the deployed job config leaves out because the state machine decides it on EMR."""


def deployed_job_config(config: EnvConfig) -> dict[str, Any]:
    """The env's `jobs` section as deployed (`config.json`), without `output.queue` and `manifest.uri`.

    On EMR the state machine sends RDB Loader's message (`jobs.output.queue` or the created queue, see
    OrchestrationStack); the shred job only writes it to the run folder (an EMR Serverless application without a
    VPC reaches S3, but is not documented to reach SQS or SNS). And it passes dedup the env's manifest
    (`--manifest`, from `manifest.backend`), so the deployed config never names another one.
    """
    return {
        key: {name: value for name, value in section.items() if name != DEPLOYED_WITHOUT[key]}
        if key in DEPLOYED_WITHOUT
        else section
        for key, section in config.jobs.items()
    }


def spark_submit_parameters(config: EnvConfig, artifacts: JobArtifacts) -> str:
    """The spark-submit options of every job run: the package, the dependencies, Python, sizes from config."""
    deps = artifacts.deps_dir
    python = config.emr.python
    conf = {
        "spark.archives": f"{artifacts.deps_uri}#{deps}",
        # The archive unpacks to ./deps in the driver's and each executor's working dir.
        "spark.emr-serverless.driverEnv.PYTHONPATH": f"./{deps}",
        "spark.executorEnv.PYTHONPATH": f"./{deps}",
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": python,
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON": python,
        "spark.executorEnv.PYSPARK_PYTHON": python,
        # boto3 (config, manifest, metrics) finds its region in the environment: no instance metadata on EMR.
        "spark.emr-serverless.driverEnv.AWS_REGION": config.region,
        "spark.emr-serverless.driverEnv.AWS_DEFAULT_REGION": config.region,
        "spark.executorEnv.AWS_REGION": config.region,
        "spark.executorEnv.AWS_DEFAULT_REGION": config.region,
        **config.emr.spark_conf,
    }
    return " ".join([f"--py-files {artifacts.package_uri}", *(f"--conf {key}={value}" for key, value in conf.items())])
