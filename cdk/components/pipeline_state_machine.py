"""The pipeline state machine: work out the run, run dedup then shred on EMR Serverless, tell RDB Loader, notify on
failure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from cdk.nag import acknowledge, resource_finding

START_JOB_RUN_SYNC = "arn:aws:states:::emr-serverless:startJobRun.sync"
DEDUP_STATE = "Dedup"
SHRED_STATE = "Shred"
NOTIFY_STATE = "NotifyFailure"
PLAN_STATE = "PlanInput"
HAND_OVER_STATE = "StartNamedRun"
NOTHING_TO_DO_STATE = "NothingToDo"
RUN_EXECUTION_PREFIX = "run-"
"""Executions named `run-<run id>` run the pipeline; any other hands the run over to one of that name."""
EXECUTION_ALREADY_EXISTS = "StepFunctions.ExecutionAlreadyExistsException"
RUN_ID_DELIMITERS = "-T:.Z"
"""Splitting an ISO 8601 UTC time (`2026-11-22T03:00:00.123Z`) on these characters gives its date and time fields."""
READ_LOADER_MESSAGE_STATE = "ReadLoaderMessage"
SEND_LOADER_MESSAGE_STATE = "SendLoaderMessage"
LOADER_NOT_TOLD_STATE = "LoaderNotTold"
LOADER_NOT_TOLD_ERROR = "LoaderMessageNotSent"
LOADER_MESSAGE_FILE = "shredding_complete.json"
"""What the shred job (rdb layout) writes in its run folder before `_SUCCESS`: RDB Loader's message, as JSON."""
LOADER_MESSAGE_GROUP = "shredding"
"""The FIFO message group id upstream's transformer sends with (and the job, when it sends itself)."""
LOADER_RETRY_ATTEMPTS, LOADER_RETRY_INTERVAL_SECONDS, LOADER_RETRY_BACKOFF = 3, 5, 2
"""Retries of reading and of sending the message: after 5, 10 and 20 seconds."""


@dataclass(frozen=True, kw_only=True)
class LoaderTarget:
    """Where the state machine sends RDB Loader's `shredding_complete` message: one SQS FIFO queue or one SNS FIFO
    topic, and the customer managed KMS key it is encrypted with, if any."""

    uri: str
    """`sqs://NAME` or `sns://ARN`, named in the failure's cause (no CloudFormation token)."""
    queue_url: str | None = None
    """The queue's URL (sqs:SendMessage's QueueUrl); with `queue_arn`."""
    queue_arn: str | None = None
    """The queue's ARN: sqs:SendMessage on it only."""
    topic_arn: str | None = None
    """The topic's ARN, instead of a queue: sns:Publish on it only."""
    key_arn: str | None = None
    """The customer managed KMS key of the queue or topic: kms:GenerateDataKey and kms:Decrypt on it. None: SSE-SQS
    or an AWS managed key, nothing to grant."""

    def __post_init__(self) -> None:
        queue = self.queue_url is not None and self.queue_arn is not None
        if (self.queue_url is None) != (self.queue_arn is None) or queue == (self.topic_arn is not None):
            raise ValueError(
                f"loader target {self.uri}: given queue_url {self.queue_url is not None}, queue_arn "
                f"{self.queue_arn is not None}, topic_arn {self.topic_arn is not None}; allowed: queue_url with "
                "queue_arn, or topic_arn"
            )
        if any(char in self.uri for char in "'{}\\"):
            raise ValueError(f"loader target uri: given {self.uri!r}; allowed: no quote, brace or backslash")


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
        jp = sfn.JsonPath
        state_machine_name = f"{props.name}-pipeline"

        # Defaults first, the execution input merged over them (JsonMerge: the second object wins). The input
        # as given travels along: a hand-over passes it on unchanged.
        carried = {"given": jp.object_at("$.given"), "execution": jp.string_at("$.execution")}
        defaults = sfn.Pass(
            self,
            "Defaults",
            parameters={
                "given": jp.entire_payload,
                "execution": jp.execution_name,
                "defaults": {"scheduledTime": jp.execution_start_time, "inputPrefix": props.input_prefix},
            },
        )
        merge = sfn.Pass(
            self,
            "MergeInput",
            parameters={**carried, "run": jp.json_merge(jp.object_at("$.defaults"), jp.object_at("$.given"))},
        )
        fields = [
            jp.array_get_item(jp.string_split(jp.string_at("$.run.scheduledTime"), RUN_ID_DELIMITERS), i)
            for i in range(6)
        ]
        run_id = sfn.Pass(
            self,
            "RunIdFromTime",
            parameters={
                **carried,
                "run": jp.object_at("$.run"),
                "defaults": {"runId": jp.format("{}-{}-{}-{}-{}-{}", *fields)},
            },
        )
        # Static settings travel as data: intrinsic functions then never hold CloudFormation tokens.
        run = sfn.Pass(
            self,
            "Run",
            parameters={
                **carried,
                "runDefaults": jp.object_at("$.defaults"),
                "run": jp.json_merge(jp.object_at("$.defaults"), jp.object_at("$.run")),
                "settings": {
                    "inputBucket": props.input_bucket_name,
                    "dedupOutput": f"s3://{props.output_bucket_name}/{props.dedup_prefix.rstrip('/')}",
                    "shredOutput": f"s3://{props.output_bucket_name}/{props.shred_prefix.rstrip('/')}",
                    "config": props.config_uri,
                    "manifest": props.manifest_uri,
                },
            },
        )
        notify = self._failure_notification()
        hand_over = self._hand_over(state_machine_name, notify)
        dedup = self._job_state(DEDUP_STATE, "dedup", notify)
        shred = self._job_state(SHRED_STATE, "shred", notify)
        succeeded = sfn.Succeed(self, "Succeeded")
        after_shred: sfn.State = succeeded
        if props.loader is not None:
            after_shred = self._tell_loader(props.loader, succeeded, notify)
        dedup.next(self._publish_metrics("dedup", props.dedup_prefix, shred))
        shred.next(self._publish_metrics("shred", props.shred_prefix, after_shred))
        plan = tasks.LambdaInvoke(
            self,
            PLAN_STATE,
            lambda_function=props.planner,
            payload=sfn.TaskInput.from_object(
                {
                    "runId": jp.string_at("$.run.runId"),
                    "input": jp.format(
                        "s3://{}/{}", jp.string_at("$.settings.inputBucket"), jp.string_at("$.run.inputPrefix")
                    ),
                    "output": jp.string_at("$.settings.dedupOutput"),
                    "config": jp.string_at("$.settings.config"),
                }
            ),
            result_selector={
                key: jp.string_at(f"$.Payload.{key}")
                for key in ("files", "bytes", "entry", "reused", "backlogFiles", "message")
            },
            result_path="$.plan",
            retry_on_service_exceptions=True,
        )
        plan.add_catch(notify, errors=[sfn.Errors.ALL], result_path="$.error")
        plan.next(
            sfn.Choice(self, "AnythingNew")
            .when(sfn.Condition.number_equals("$.plan.files", 0), sfn.Succeed(self, NOTHING_TO_DO_STATE))
            .otherwise(self._arguments("IncrementalJobArguments", incremental=True).next(dedup))
        )
        mode = (
            sfn.Choice(self, "InputNamed")
            .when(sfn.Condition.is_present("$.given.inputPrefix"), self._arguments("JobArguments").next(dedup))
            .otherwise(plan)
        )
        named = (
            sfn.Choice(self, "NamedAfterRun")
            .when(sfn.Condition.string_matches("$.execution", f"{RUN_EXECUTION_PREFIX}*"), mode)
            .otherwise(hand_over)
        )
        chain = defaults.next(merge).next(run_id).next(run).next(named)

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
            state_machine_name=state_machine_name,
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
        acknowledge(
            self.state_machine,
            "IAM5",
            "CDK's grant to invoke the input planner also covers its versions and aliases (<function>:*); "
            "only that function",
            resource_finding(self, f"{props.planner.function_arn}:*"),
        )
        summaries = [
            f"arn:{Aws.PARTITION}:s3:::{props.output_bucket_name}/{prefix}run=*/summary.json"
            for prefix in (props.dedup_prefix, props.shred_prefix)
        ]
        self.state_machine.add_to_role_policy(
            iam.PolicyStatement(sid="ReadRunSummaries", actions=["s3:GetObject"], resources=summaries)
        )
        # PutMetricData has no resource-level permissions: scoped to the namespace by condition instead.
        self.state_machine.add_to_role_policy(
            iam.PolicyStatement(
                sid="PutJobMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": props.metrics_namespace}},
            )
        )
        for summary in summaries:
            acknowledge(
                self.state_machine,
                "IAM5",
                "ReadRunSummaries: run ids are only known at run time; only each run's summary.json",
                resource_finding(self, summary),
            )
        acknowledge(
            self.state_machine,
            "IAM5",
            "cloudwatch:PutMetricData supports no resource-level permissions; the statement is limited to the "
            f"{props.metrics_namespace} namespace by condition",
            "Resource::*",
        )
        if props.loader is not None:
            self._grant_loader(props.loader)

    def _grant_loader(self, loader: LoaderTarget) -> None:
        """Read each shred run's message file; send to the one queue or topic (and use its key)."""
        p = self.props
        message = f"arn:{Aws.PARTITION}:s3:::{p.output_bucket_name}/{p.shred_prefix}run=*/{LOADER_MESSAGE_FILE}"
        statements = [("ReadLoaderMessage", ["s3:GetObject"], message)]
        if loader.queue_arn is not None:
            statements.append(("SendLoaderMessage", ["sqs:SendMessage"], loader.queue_arn))
        if loader.topic_arn is not None:
            statements.append(("PublishLoaderMessage", ["sns:Publish"], loader.topic_arn))
        if loader.key_arn is not None:
            statements.append(("EncryptLoaderMessage", ["kms:GenerateDataKey", "kms:Decrypt"], loader.key_arn))
        for sid, actions, resource in statements:
            self.state_machine.add_to_role_policy(iam.PolicyStatement(sid=sid, actions=actions, resources=[resource]))
        acknowledge(
            self.state_machine,
            "IAM5",
            f"ReadLoaderMessage: run ids are only known at run time; only each shred run's {LOADER_MESSAGE_FILE}",
            resource_finding(self, message),
        )

    def _failure_notification(self) -> sfn.TaskStateBase:
        """Publish the error, its cause and the run to the failure topic, then fail with that error."""
        jp = sfn.JsonPath
        notify = tasks.SnsPublish(
            self,
            NOTIFY_STATE,
            topic=self.props.failure_topic,
            subject=f"{self.props.name}: pipeline run failed",
            message=sfn.TaskInput.from_object(
                {
                    "pipeline": self.props.name,
                    "execution": jp.execution_id,
                    "run": jp.object_at("$.run"),
                    "error": jp.string_at("$.error.Error"),
                    "cause": jp.string_at("$.error.Cause"),
                }
            ),
            result_path=jp.DISCARD,
        )
        notify.next(sfn.Fail(self, "Failed", error_path="$.error.Error", cause_path="$.error.Cause"))
        return notify

    def _hand_over(self, state_machine_name: str, on_failure: sfn.IChainable) -> sfn.TaskStateBase:
        """Start this run as an execution of this state machine named `run-<run id>`, then end."""
        jp = sfn.JsonPath
        # By name, not by reference: a state machine cannot refer to itself.
        this = sfn.StateMachine.from_state_machine_name(self, "This", state_machine_name)
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
        start.add_catch(on_failure, errors=[sfn.Errors.ALL], result_path="$.error")
        start.next(sfn.Succeed(self, "HandedOver"))
        return start

    def _publish_metrics(self, job: str, prefix: str, then: sfn.State) -> sfn.CustomState:
        """Read the job run's summary.json (S3) and put its figures in CloudWatch, then go on to `then`.

        From the state machine, not the job: an EMR Serverless application without a VPC reaches S3 but not
        CloudWatch metrics. A failure here is recorded (`$.metricsErrors.<job>`) and never fails the run.
        """
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
                    "Key.$": f"States.Format('{prefix}run={{}}/summary.json', $.run.runId)",
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

    def _tell_loader(self, loader: LoaderTarget, then: sfn.State, on_failure: sfn.IChainable) -> sfn.CustomState:
        """Read the shred run's `shredding_complete.json` (S3) and send its text to RDB Loader, then go on to `then`.

        From the state machine, not the job: an EMR Serverless application without a VPC reaches S3, but is not
        documented to reach SQS or SNS. The run folder is complete (the job wrote `_SUCCESS`), so a failure here,
        after retries, fails the execution with a cause that says so (`on_failure`); a redrive sends again. A
        second copy of the message is harmless: RDB Loader's manifest skips a folder it has loaded.
        """
        p = self.props
        key = f"{p.shred_prefix}run={{}}/{LOADER_MESSAGE_FILE}"
        read = sfn.CustomState(
            self,
            READ_LOADER_MESSAGE_STATE,
            state_json={
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:s3:getObject",
                "Parameters": {"Bucket": p.output_bucket_name, "Key.$": f"States.Format('{key}', $.run.runId)"},
                # The text is the message; the ETag identifies this version of the file (the deduplication id).
                "ResultSelector": {"body.$": "$.Body", "etag.$": "$.ETag"},
                "ResultPath": "$.loaderMessage",
            },
        )
        # FIFO: the group upstream uses, and a deduplication id (so a queue without content-based deduplication
        # takes it too) of the run and the file's version: a retried send within SQS's 5 minutes is not queued
        # twice. Not States.Hash of the text itself: that takes at most 10,000 characters, and a run with many
        # entity types has a longer message (the failure would be a States.Runtime error, which no Catch sees).
        fifo = {
            "MessageGroupId": LOADER_MESSAGE_GROUP,
            "MessageDeduplicationId.$": "States.Hash(States.Format('{} {}', $.run.runId, $.loaderMessage.etag), "
            "'SHA-256')",
        }
        parameters: dict[str, str]
        if loader.queue_url is not None:
            resource = "arn:aws:states:::aws-sdk:sqs:sendMessage"
            parameters = {"QueueUrl": loader.queue_url, "MessageBody.$": "$.loaderMessage.body", **fifo}
        else:
            assert loader.topic_arn is not None  # LoaderTarget: a queue or a topic
            resource = "arn:aws:states:::aws-sdk:sns:publish"
            parameters = {"TopicArn": loader.topic_arn, "Message.$": "$.loaderMessage.body", **fifo}
        send = sfn.CustomState(
            self,
            SEND_LOADER_MESSAGE_STATE,
            state_json={
                "Type": "Task",
                "Resource": resource,
                "Parameters": parameters,
                "ResultSelector": {"messageId.$": "$.MessageId"},
                "ResultPath": "$.loaderMessage",  # the message id replaces the text in the execution's output
            },
        )
        folder = f"s3://{p.output_bucket_name}/{p.shred_prefix}run={{}}/"
        not_told = sfn.CustomState(
            self,
            LOADER_NOT_TOLD_STATE,
            state_json={
                "Type": "Pass",
                "Parameters": {
                    "Error": LOADER_NOT_TOLD_ERROR,
                    "Cause.$": f"States.Format('Run {{}} is complete ({folder} is sealed with _SUCCESS) but RDB "
                    f"Loader was not told: sending its {LOADER_MESSAGE_FILE} to {loader.uri} failed with {{}}: {{}}. "
                    "Redrive this execution, or start one named run-{}-resend with this runId (the run is redone, "
                    "rerun-safe, and its message sent)', $.run.runId, $.run.runId, $.error.Error, $.error.Cause, "
                    "$.run.runId)",
                },
                "ResultPath": "$.error",
            },
        )
        not_told.next(on_failure)
        for state in (read, send):
            state.add_retry(
                errors=[sfn.Errors.ALL],
                interval=Duration.seconds(LOADER_RETRY_INTERVAL_SECONDS),
                max_attempts=LOADER_RETRY_ATTEMPTS,
                backoff_rate=LOADER_RETRY_BACKOFF,
            )
            state.add_catch(not_told, errors=[sfn.Errors.ALL], result_path="$.error")
        read.next(send).next(then)
        return read

    def _arguments(self, state_name: str, incremental: bool = False) -> sfn.Pass:
        """The command lines of both jobs: dedup's `--incremental` reads the run's ledger entry."""
        jp = sfn.JsonPath
        return sfn.Pass(
            self,
            state_name,
            parameters={
                "run": jp.object_at("$.run"),
                **({"plan": jp.object_at("$.plan")} if incremental else {}),
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
                        # An earlier execution whose shred did not complete stops this one before it writes.
                        "--shredded",
                        jp.string_at("$.settings.shredOutput"),
                        *(["--create"] if self.props.create_manifest else []),
                        *(["--incremental"] if incremental else []),
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
