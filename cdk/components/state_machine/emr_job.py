"""The EMR Serverless job runs: the command lines of both jobs, and a `startJobRun.sync` task per job (job driver,
spark-submit parameters, retries)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

START_JOB_RUN_SYNC = "arn:aws:states:::emr-serverless:startJobRun.sync"
DEDUP_STATE = "Dedup"
SHRED_STATE = "Shred"


@dataclass(frozen=True, kw_only=True)
class EmrJobsProps:
    """Props of `EmrJobs`."""

    name: str
    """Pipeline name, e.g. `winnow-dev` (the job runs' `pipeline` tag)."""
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
    create_manifest: bool
    """Pass dedup `--create` too (the lake manifest's descriptor is made by the first run)."""
    job_timeout_minutes: int
    """EMR cancels a job run after this many minutes."""
    job_retries: int
    """Retries of a failed job run (the jobs are rerun-safe: same run id, same result)."""
    retry_interval_seconds: int
    """Wait before the first retry (doubled for each next one)."""
    on_failure: sfn.IChainable
    """Where a failed job run goes after its retries (the failure notification), with the error at `$.error`."""


class EmrJobs(Construct):
    """`Dedup` and `Shred`: each a `startJobRun.sync` task that waits for its job run to end, its result at
    `$.jobs.<job>`; and the states that put both command lines at `$.args` before `Dedup`: `arguments` (read
    everything under the run's input prefix) and `incremental_arguments` (dedup `--incremental`: the files of the
    run's ledger entry). Both job states go on with `dedup.next(…)` and `shred.next(…)`.
    """

    def __init__(self, scope: Construct, construct_id: str, props: EmrJobsProps) -> None:
        super().__init__(scope, construct_id)
        self.props = props
        self.dedup = self._job_state(DEDUP_STATE, "dedup")
        self.shred = self._job_state(SHRED_STATE, "shred")
        self.incremental_arguments = self._arguments("IncrementalJobArguments", incremental=True)
        self.arguments = self._arguments("JobArguments")
        # In this order: the order of the transitions into Dedup decides the order of the states in the ASL.
        self.incremental_arguments.next(self.dedup)
        self.arguments.next(self.dedup)

    def grant(self, state_machine: sfn.StateMachine) -> None:
        """A CustomState adds no IAM: the application's job-runs policy grants what startJobRun.sync needs."""
        state_machine.role.add_managed_policy(self.props.job_runs_policy)

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

    def _job_state(self, state_name: str, job: str) -> sfn.CustomState:
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
        state.add_catch(p.on_failure, errors=[sfn.Errors.ALL], result_path="$.error")
        return state
