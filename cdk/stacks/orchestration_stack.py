"""The orchestration stack: the pipeline state machine (which also tells RDB Loader), its schedule, failure
notifications and the dashboard."""

from __future__ import annotations

from typing import Any

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk.components.input_planner import InputPlanner, InputPlannerProps
from cdk.components.lake_manifest_bucket import lake_manifest_uri
from cdk.components.loader_queue import loader_queue_name
from cdk.components.pipeline_monitoring import (
    JOB_METRICS,
    METRICS_NAMESPACE,
    FailureTopic,
    FailureTopicProps,
    PipelineMonitoring,
    PipelineMonitoringProps,
)
from cdk.components.pipeline_schedule import PipelineSchedule, PipelineScheduleProps
from cdk.components.pipeline_state_machine import PipelineStateMachine, PipelineStateMachineProps
from cdk.components.state_machine.loader_message import LoaderTarget
from cdk.config import RETRY_INTERVAL_SECONDS, EnvConfig
from cdk.naming import ResourceNames, resource_names
from cdk.stacks.processing_stack import DEDUP_PREFIX, SHRED_PREFIX, ProcessingStack
from cdk.stacks.storage_stack import StorageStack
from jobs.contract import parse_queue


class OrchestrationStack(Stack):
    """Runs dedup then shred on a schedule or from the console, and tells someone when a run fails."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: EnvConfig,
        storage: StorageStack,
        processing: ProcessingStack,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.add_stack_dependency(processing)
        names = resource_names(config, self.account)
        manifest_table = (
            dynamodb.Table.from_table_name(self, "ManifestTable", names.manifest_table)
            if config.manifest.backend == "dynamodb"
            else None
        )
        name = f"winnow-{config.env}"
        self.failure_topic = FailureTopic(
            self, "Failures", FailureTopicProps(name=f"{name} failures", emails=config.alarm.emails)
        ).topic

        def bucket(construct_id: str, bucket_name: str) -> s3.IBucket:
            return s3.Bucket.from_bucket_name(self, construct_id, bucket_name)

        self.planner = InputPlanner(
            self,
            "InputPlanner",
            InputPlannerProps(
                name=name,
                package_zip=processing.artifacts.package_zip,
                input_bucket=bucket("InputBucket", names.input_bucket),
                input_prefix=config.storage.input_prefix,
                output_bucket=bucket("OutputBucket", names.output_bucket),
                dedup_prefix=DEDUP_PREFIX,
                artifacts_bucket=bucket("ArtifactsBucket", names.artifacts_bucket),
                artifacts_prefix=processing.artifacts.root,
                retain_logs=config.retain_data,
            ),
        ).function
        self.pipeline = PipelineStateMachine(
            self,
            "Pipeline",
            PipelineStateMachineProps(
                name=name,
                application_id=processing.spark.application_id,
                job_runs_policy=processing.job_runs_policy,
                execution_role=processing.execution_role,
                entrypoint_uri=processing.artifacts.entrypoint_uri,
                spark_submit_parameters=processing.spark_submit_parameters,
                config_uri=processing.artifacts.config_uri,
                input_bucket_name=names.input_bucket,
                input_prefix=config.storage.input_prefix,
                output_bucket_name=names.output_bucket,
                dedup_prefix=DEDUP_PREFIX,
                shred_prefix=SHRED_PREFIX,
                manifest_uri=manifest_uri(config, names),
                # The lake's descriptor is a job-format object the Storage stack cannot make: the first run does.
                create_manifest=config.manifest.backend == "lake",
                planner=self.planner,
                env=config.env,
                metrics_namespace=METRICS_NAMESPACE,
                job_metrics=JOB_METRICS,
                failure_topic=self.failure_topic,
                job_timeout_minutes=config.emr.job_timeout_minutes,
                job_retries=config.pipeline.job_retries,
                retry_interval_seconds=RETRY_INTERVAL_SECONDS,
                timeout=Duration.minutes(config.pipeline.timeout_minutes),
                retain_logs=config.retain_data,
                loader=self.loader_target(config, storage),
            ),
        )
        self.schedule = PipelineSchedule(
            self,
            "Schedule",
            PipelineScheduleProps(
                state_machine=self.pipeline.state_machine,
                expression=config.schedule.expression,
                timezone=config.schedule.timezone,
                enabled=config.schedule.enabled,
                description=f"Starts a {name} pipeline run",
            ),
        )
        self.monitoring = PipelineMonitoring(
            self,
            "Monitoring",
            PipelineMonitoringProps(
                env=config.env,
                dashboard_name=f"{name}-pipeline",
                state_machine=self.pipeline.state_machine,
                manifest_table=manifest_table,
                alarm_topic=self.failure_topic,
            ),
        )

    def loader_target(self, config: EnvConfig, storage: StorageStack) -> LoaderTarget | None:
        """Where the state machine sends RDB Loader's message: the queue the Storage stack created
        (`loader.create_queue`), else `jobs.output.queue` (`sqs://NAME`, a queue of the env's account and region,
        or `sns://ARN`); None without either, or with the legacy layout (its runs have no message)."""
        if config.job_config.shred.layout != "rdb":
            return None
        if storage.loader_queue is not None:
            queue = storage.loader_queue
            uri = f"sqs://{loader_queue_name(config.env)}"
            return LoaderTarget(uri=uri, queue_url=queue.queue_url, queue_arn=queue.queue_arn)
        if config.job_config.output.queue is None:
            return None
        target, key = parse_queue(config.job_config.output.queue), config.loader.kms_key_arn
        if target.service == "sns":
            return LoaderTarget(uri=target.uri, topic_arn=target.name, key_arn=key)
        return LoaderTarget(
            uri=target.uri,
            # A queue's URL, as SQS gives it (GetQueueUrl), in the env's account, region and partition.
            queue_url=f"https://sqs.{self.region}.{self.url_suffix}/{self.account}/{target.name}",
            queue_arn=self.format_arn(service="sqs", resource=target.name, arn_format=ArnFormat.NO_RESOURCE_NAME),
            key_arn=key,
        )


def manifest_uri(config: EnvConfig, names: ResourceNames) -> str:
    """Dedup's `--manifest` for the env's `manifest.backend`: the table, or the lake in the manifest bucket."""
    if config.manifest.backend == "lake":
        return lake_manifest_uri(names.manifest_bucket)
    return f"dynamodb://{names.manifest_table}"
