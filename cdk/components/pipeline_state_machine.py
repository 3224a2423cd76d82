"""The pipeline state machine: work out the run, run dedup then shred on EMR Serverless, notify on failure."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from cdk.nag import acknowledge

START_JOB_RUN_SYNC = "arn:aws:states:::emr-serverless:startJobRun.sync"
DEDUP_STATE = "Dedup"
SHRED_STATE = "Shred"
NOTIFY_STATE = "NotifyFailure"
RUN_ID_DELIMITERS = "-T:.Z"
"""Splitting an ISO 8601 UTC time (`2026-11-22T03:00:00.123Z`) on these characters gives its date and time fields."""


@dataclass(frozen=True, kw_only=True)
class PipelineStateMachineProps:
    """Props of `PipelineStateMachine`. S3 prefixes end in '/'; URIs are `s3://…`."""

    name: str
    """Pipeline name, e.g. `winnow-dev` (job run names, notifications)."""
    application_id: str
    """The EMR Serverless application the jobs run on."""
    execution_role: iam.IRole
    """The role job runs assume (passed to EMR Serverless)."""
    job_runs_policy: iam.IManagedPolicy
    """Lets the state machine start and watch job runs as `execution_role` (`SparkApplication.job_runs_policy`)."""
    entrypoint_uri: str
    """`s3://…/emr_main.py` of the deployed artifacts version."""
    spark_submit_parameters: str
    """`--py-files …` and `--conf …` of every job run (`ProcessingStack.spark_submit_parameters`)."""
    config_uri: str
    """The deployed job config, passed to both jobs as `--config`."""
    input_bucket_name: str
    """Where the enriched input lies."""
    input_prefix: str
    """Default input prefix (an execution input may name another one under it)."""
    output_bucket_name: str
    """Where both jobs write: dedup under `dedup_prefix`, shred under `shred_prefix`."""
    dedup_prefix: str = "deduplicated/"
    shred_prefix: str = "shredded/"
    manifest_table_name: str
    """The DynamoDB events manifest dedup checks (`--manifest dynamodb://<name>`)."""
    failure_topic: sns.ITopic
    """Notified with the error, its cause and the run when a run fails."""
    job_timeout_minutes: int
    """EMR cancels a job run after this many minutes."""
    job_retries: int = 1
    """Retries of a failed job run (the jobs are rerun-safe: same run id, same result)."""
    retry_interval_seconds: int = 120
    """Wait before the first retry (doubled for each next one)."""
    timeout: Duration
    """The whole execution's timeout."""
    retain_logs: bool
    """RETAIN the execution log group on stack deletion."""


class PipelineStateMachine(Construct):
    """A STANDARD state machine, logging ALL with X-Ray tracing.

    Input (every key optional, so `{}` is valid): `runId` (`YYYY-MM-DD-HH-MM-SS`), `scheduledTime`
    (ISO 8601 UTC, what the schedule passes; default: the execution's start time) and `inputPrefix`.
    The run id, unless given, comes from `scheduledTime`, so a retried or redriven run keeps its id.
    """

    def __init__(self, scope: Construct, construct_id: str, props: PipelineStateMachineProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props
        jp = sfn.JsonPath

        # Defaults first, the execution input merged over them (JsonMerge: the second object wins).
        defaults = sfn.Pass(
            self,
            "Defaults",
            parameters={
                "given": jp.entire_payload,
                "defaults": {"scheduledTime": jp.execution_start_time, "inputPrefix": props.input_prefix},
            },
        )
        merge = sfn.Pass(
            self,
            "MergeInput",
            parameters={"run": jp.json_merge(jp.object_at("$.defaults"), jp.object_at("$.given"))},
        )
        fields = [
            jp.array_get_item(jp.string_split(jp.string_at("$.run.scheduledTime"), RUN_ID_DELIMITERS), i)
            for i in range(6)
        ]
        run_id = sfn.Pass(
            self,
            "RunIdFromTime",
            parameters={"given": jp.object_at("$.run"), "defaults": {"runId": jp.format("{}-{}-{}-{}-{}-{}", *fields)}},
        )
        # Static settings travel as data: intrinsic functions then never hold CloudFormation tokens.
        run = sfn.Pass(
            self,
            "Run",
            parameters={
                "run": jp.json_merge(jp.object_at("$.defaults"), jp.object_at("$.given")),
                "settings": {
                    "inputBucket": props.input_bucket_name,
                    "dedupOutput": f"s3://{props.output_bucket_name}/{props.dedup_prefix.rstrip('/')}",
                    "shredOutput": f"s3://{props.output_bucket_name}/{props.shred_prefix.rstrip('/')}",
                    "config": props.config_uri,
                    "manifest": f"dynamodb://{props.manifest_table_name}",
                },
            },
        )
        arguments = sfn.Pass(
            self,
            "JobArguments",
            parameters={
                "run": jp.object_at("$.run"),
                "args": {
                    "dedup": jp.array(
                        "dedup",
                        "--input",
                        jp.format(
                            "s3://{}/{}", jp.string_at("$.settings.inputBucket"), jp.string_at("$.run.inputPrefix")
                        ),
                        "--output",
                        jp.string_at("$.settings.dedupOutput"),
                        "--run-id",
                        jp.string_at("$.run.runId"),
                        "--config",
                        jp.string_at("$.settings.config"),
                        "--manifest",
                        jp.string_at("$.settings.manifest"),
                    ),
                    # dedup writes OUT/run=ID/good/: that is shred's input.
                    "shred": jp.array(
                        "shred",
                        "--input",
                        jp.format(
                            "{}/run={}/good", jp.string_at("$.settings.dedupOutput"), jp.string_at("$.run.runId")
                        ),
                        "--output",
                        jp.string_at("$.settings.shredOutput"),
                        "--run-id",
                        jp.string_at("$.run.runId"),
                        "--config",
                        jp.string_at("$.settings.config"),
                    ),
                },
            },
        )

        notify = tasks.SnsPublish(
            self,
            NOTIFY_STATE,
            topic=props.failure_topic,
            subject=f"{props.name}: pipeline run failed",
            message=sfn.TaskInput.from_object(
                {
                    "pipeline": props.name,
                    "execution": jp.execution_id,
                    "run": jp.object_at("$.run"),
                    "error": jp.string_at("$.error.Error"),
                    "cause": jp.string_at("$.error.Cause"),
                }
            ),
            result_path=jp.DISCARD,
        )
        failed = sfn.Fail(self, "Failed", error_path="$.error.Error", cause_path="$.error.Cause")
        notify.next(failed)

        dedup = self._job_state(DEDUP_STATE, "dedup", notify)
        shred = self._job_state(SHRED_STATE, "shred", notify)
        chain = (
            defaults.next(merge)
            .next(run_id)
            .next(run)
            .next(arguments)
            .next(dedup)
            .next(shred)
            .next(sfn.Succeed(self, "Succeeded"))
        )

        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=f"/aws/vendedlogs/states/{props.name}-pipeline",
            retention=logs.RetentionDays.THREE_MONTHS,
            removal_policy=RemovalPolicy.RETAIN if props.retain_logs else RemovalPolicy.DESTROY,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=f"{props.name}-pipeline",
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_chainable(chain),
            timeout=props.timeout,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
        )
        # A CustomState adds no IAM: the application's job-runs policy grants what startJobRun.sync needs.
        self.state_machine.role.add_managed_policy(props.job_runs_policy)
        acknowledge(
            self.state_machine,
            "IAM5",
            "CDK's statements for X-Ray tracing (PutTraceSegments, …) and "
            "CloudWatch Logs delivery (CreateLogDelivery, …): these APIs support no resource-level "
            "permissions",
            "Resource::*",
        )

    def _job_state(self, state_name: str, job: str, on_failure: sfn.IChainable) -> sfn.CustomState:
        """A `startJobRun.sync` task (there is no EMR Serverless task class): it waits for the job run to end."""
        p = self.props
        state = sfn.CustomState(
            self,
            state_name,
            state_json={
                "Type": "Task",
                "Resource": START_JOB_RUN_SYNC,
                "Parameters": {
                    "ApplicationId": p.application_id,
                    "ExecutionRoleArn": p.execution_role.role_arn,
                    "Name.$": f"States.Format('{job}-{{}}', $.run.runId)",
                    # A fresh token per attempt: a retry must start a new job run, not get the failed one back.
                    "ClientToken.$": "States.UUID()",
                    "ExecutionTimeoutMinutes": p.job_timeout_minutes,
                    "JobDriver": {
                        "SparkSubmit": {
                            "EntryPoint": p.entrypoint_uri,
                            "EntryPointArguments.$": f"$.args.{job}",
                            "SparkSubmitParameters": p.spark_submit_parameters,
                        }
                    },
                    "Tags": {"pipeline": p.name, "job": job},
                },
                "ResultPath": f"$.jobs.{job}",
            },
        )
        if p.job_retries:
            state.add_retry(
                errors=[sfn.Errors.TASKS_FAILED],
                interval=Duration.seconds(p.retry_interval_seconds),
                max_attempts=p.job_retries,
                backoff_rate=2,
            )
        state.add_catch(on_failure, errors=[sfn.Errors.ALL], result_path="$.error")
        return state
