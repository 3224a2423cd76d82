"""The pipeline state machine: work out the run, run dedup then shred on EMR Serverless, tell RDB Loader, notify on
failure.

The states come from the parts in `cdk.components.state_machine` (run input, hand-over, input plan, EMR jobs, job
metrics, loader message, failure notification); this construct connects them, makes the state machine and has each
part grant what its states need.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from cdk.audit import LOGS_WITHOUT_CMK, acknowledge_checkov
from cdk.components.state_machine.emr_job import EmrJobs, EmrJobsProps
from cdk.components.state_machine.failure_notification import FailureNotification, FailureNotificationProps
from cdk.components.state_machine.input_plan import InputPlan, InputPlanProps
from cdk.components.state_machine.job_metrics import JobMetrics, JobMetricsProps
from cdk.components.state_machine.loader_message import LoaderMessage, LoaderMessageProps, LoaderTarget
from cdk.components.state_machine.run_hand_over import RUN_EXECUTION_PREFIX, RunHandOver, RunHandOverProps
from cdk.components.state_machine.run_input import RunInput, RunInputProps
from cdk.nag import acknowledge

__all__ = ["LoaderTarget", "PipelineStateMachine", "PipelineStateMachineProps"]

NOTHING_TO_DO_STATE = "NothingToDo"


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
    manifest_uri: str
    """The events manifest dedup checks, its `--manifest`: `dynamodb://<table>` or `lake:s3://<bucket>/<prefix>`."""
    create_manifest: bool = False
    """Pass dedup `--create` too: the lake manifest's descriptor is then made by the first run (a conditional put,
    nothing when it exists; it is checked either way). The DynamoDB table is the Storage stack's."""
    planner: lambda_.IFunction
    """The input planner of incremental runs (`InputPlanner`)."""
    env: str
    """The environment (the `Env` dimension of the job metrics)."""
    metrics_namespace: str
    """Where each job's figures are put (CloudWatch namespace)."""
    job_metrics: Mapping[str, tuple[tuple[str, str, str], ...]]
    """Per job: (metric name, path of the figure in summary.json, unit)."""
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
    loader: LoaderTarget | None = None
    """Where to send the shred run's `shredding_complete.json` for RDB Loader after the shred job succeeded.
    None: no loader states at all (no target, or the legacy layout, which writes no message)."""


class PipelineStateMachine(Construct):
    """A STANDARD state machine, logging ALL with X-Ray tracing.

    Input (every key optional, so `{}` is valid): `runId` (`YYYY-MM-DD-HH-MM-SS`), `scheduledTime`
    (ISO 8601 UTC, what the schedule passes; default: the execution's start time) and `inputPrefix`.
    The run id, unless given, comes from `scheduledTime`, so a retried or redriven run keeps its id.

    One execution per run id: an execution whose name does not start with `run-` (the schedule's, a console
    start left unnamed) starts the run as a new execution named `run-<run id>` and ends; Step Functions
    refuses a second execution of that name, so a run id runs once (a redo is a redrive, or a start named
    `run-<run id>-…`). Without `inputPrefix` the run is incremental: the input planner (a Lambda function)
    records the files no earlier run read in the run's ledger entry and the dedup job reads those
    (`--incremental`); with nothing new the execution succeeds without starting a job run. With
    `inputPrefix` the jobs read everything under it.

    With a loader target, a run whose shred job succeeded then reads the run folder's `shredding_complete.json`
    and sends it to RDB Loader's queue or topic (from the state machine, not the job: an EMR Serverless
    application without a VPC reaches S3, but is not documented to reach SQS or SNS); the message id is in the
    output (`loaderMessage`). When that fails after retries, the run is complete but the loader does not know:
    the execution fails (`LoaderMessageNotSent`, notified), and a redrive sends the message again.
    """

    def __init__(self, scope: Construct, construct_id: str, props: PipelineStateMachineProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props
        state_machine_name = f"{props.name}-pipeline"
        # The parts in this order (hand-over, jobs, loader, plan): the order of their transitions into NotifyFailure
        # decides the order of the states in the ASL, so the template.
        notify = FailureNotification(
            self, "Failure", FailureNotificationProps(name=props.name, failure_topic=props.failure_topic)
        ).state
        hand_over = RunHandOver(
            self, "HandOver", RunHandOverProps(state_machine_name=state_machine_name, on_failure=notify)
        ).state
        self.jobs = EmrJobs(self, "Jobs", self._emr_jobs_props(notify))
        self.loader: LoaderMessage | None = None
        if props.loader is not None:
            loader_props = LoaderMessageProps(
                target=props.loader,
                output_bucket_name=props.output_bucket_name,
                shred_prefix=props.shred_prefix,
                on_failure=notify,
            )
            self.loader = LoaderMessage(self, "Loader", loader_props)
        self.input_plan = InputPlan(self, "InputPlan", InputPlanProps(planner=props.planner, on_failure=notify))
        self.run_input = RunInput(self, "RunInput", self._run_input_props())
        self.metrics = JobMetrics(self, "Metrics", self._job_metrics_props())
        self._connect(hand_over)
        self.log_group, self.state_machine = self._state_machine(state_machine_name)
        self._grant()

    def _emr_jobs_props(self, on_failure: sfn.IChainable) -> EmrJobsProps:
        p = self.props
        return EmrJobsProps(
            name=p.name,
            application_id=p.application_id,
            execution_role=p.execution_role,
            job_runs_policy=p.job_runs_policy,
            entrypoint_uri=p.entrypoint_uri,
            spark_submit_parameters=p.spark_submit_parameters,
            create_manifest=p.create_manifest,
            job_timeout_minutes=p.job_timeout_minutes,
            job_retries=p.job_retries,
            retry_interval_seconds=p.retry_interval_seconds,
            on_failure=on_failure,
        )

    def _run_input_props(self) -> RunInputProps:
        p = self.props
        return RunInputProps(
            input_bucket_name=p.input_bucket_name,
            input_prefix=p.input_prefix,
            output_bucket_name=p.output_bucket_name,
            dedup_prefix=p.dedup_prefix,
            shred_prefix=p.shred_prefix,
            config_uri=p.config_uri,
            manifest_uri=p.manifest_uri,
        )

    def _job_metrics_props(self) -> JobMetricsProps:
        p = self.props
        return JobMetricsProps(
            output_bucket_name=p.output_bucket_name,
            prefixes={"dedup": p.dedup_prefix, "shred": p.shred_prefix},
            env=p.env,
            metrics_namespace=p.metrics_namespace,
            job_metrics=p.job_metrics,
        )

    def _connect(self, hand_over: sfn.IChainable) -> None:
        """Run input → named after its run? (no: hand over) → input named? (no: plan, anything new?) → job
        arguments → Dedup → its metrics → Shred → its metrics → the loader message, if any → Succeeded."""
        jobs, plan = self.jobs, self.input_plan.state
        succeeded = sfn.Succeed(self, "Succeeded")
        after_shred: sfn.State = succeeded
        if self.loader is not None:
            self.loader.end.next(succeeded)
            after_shred = self.loader.start
        jobs.dedup.next(self.metrics.publish("dedup", jobs.shred))
        jobs.shred.next(self.metrics.publish("shred", after_shred))
        plan.next(
            sfn.Choice(self, "AnythingNew")
            .when(sfn.Condition.number_equals("$.plan.files", 0), sfn.Succeed(self, NOTHING_TO_DO_STATE))
            .otherwise(jobs.incremental_arguments)
        )
        mode = (
            sfn.Choice(self, "InputNamed")
            .when(sfn.Condition.is_present("$.given.inputPrefix"), jobs.arguments)
            .otherwise(plan)
        )
        named = (
            sfn.Choice(self, "NamedAfterRun")
            .when(sfn.Condition.string_matches("$.execution", f"{RUN_EXECUTION_PREFIX}*"), mode)
            .otherwise(hand_over)
        )
        self.run_input.end.next(named)

    def _state_machine(self, state_machine_name: str) -> tuple[logs.LogGroup, sfn.StateMachine]:
        """The execution log group and the state machine, from the run input's first state."""
        props = self.props
        log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=f"/aws/vendedlogs/states/{props.name}-pipeline",
            retention=logs.RetentionDays.THREE_MONTHS,
            removal_policy=RemovalPolicy.RETAIN if props.retain_logs else RemovalPolicy.DESTROY,
        )
        acknowledge_checkov(log_group, "CKV_AWS_158", LOGS_WITHOUT_CMK)
        state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=state_machine_name,
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_chainable(self.run_input.start),
            timeout=props.timeout,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
        )
        return log_group, state_machine

    def _grant(self) -> None:
        """What the parts' states need beyond what CDK's task classes grant; X-Ray and log delivery acknowledged."""
        self.jobs.grant(self.state_machine)
        acknowledge(
            self.state_machine,
            "IAM5",
            "CDK's statements for X-Ray tracing (PutTraceSegments, …) and "
            "CloudWatch Logs delivery (CreateLogDelivery, …): these APIs support no resource-level "
            "permissions",
            "Resource::*",
        )
        self.input_plan.grant(self.state_machine)
        self.metrics.grant(self.state_machine)
        if self.loader is not None:
            self.loader.grant(self.state_machine)
