"""Failure notifications, the failed-executions alarm and the pipeline dashboard."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from cdk.audit import acknowledge_checkov

METRICS_NAMESPACE = "Winnow"
"""Where the state machine publishes each job's figures (dimensions `Env` and `Job`)."""
JOBS = ("dedup", "shred")
JOB_METRICS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "dedup": (
        ("DurationSeconds", "wall_time_seconds", "Seconds"),
        ("InputLines", "counts.input", "Count"),
        ("Duplicates", "counts.duplicates", "Count"),
        ("Quarantined", "counts.quarantined", "Count"),
        ("Bad", "counts.bad", "Count"),
    ),
    "shred": (
        ("DurationSeconds", "wall_time_seconds", "Seconds"),
        ("InputLines", "counts.input", "Count"),
        ("Bad", "counts.bad", "Count"),
    ),
}
"""Per job: (metric name, the figure's path in the run's summary.json, unit)."""


@dataclass(frozen=True, kw_only=True)
class FailureTopicProps:
    """Props of `FailureTopic`."""

    name: str
    """Display name, e.g. `winnow-dev failures`."""
    emails: tuple[str, ...] = ()
    """Subscribed email addresses."""


class FailureTopic(Construct):
    """The SNS topic failed runs and the alarm notify (TLS-only publishing)."""

    def __init__(self, scope: Construct, construct_id: str, props: FailureTopicProps) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Topic", display_name=props.name, enforce_ssl=True)
        acknowledge_checkov(
            self.topic,
            "CKV_AWS_26",
            "unencrypted: CloudWatch alarms cannot publish to a topic under the AWS managed key (aws/sns), and its "
            "messages are run ids and error causes, no event data",
        )
        for email in props.emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))


@dataclass(frozen=True, kw_only=True)
class PipelineMonitoringProps:
    """Props of `PipelineMonitoring`."""

    env: str
    """The environment (the `Env` dimension of the jobs' metrics)."""
    dashboard_name: str
    state_machine: sfn.IStateMachine
    manifest_table: dynamodb.ITable | None
    """The DynamoDB manifest, whose throttles the dashboard shows; None with the lake manifest (no table in use)."""
    alarm_topic: sns.ITopic


class PipelineMonitoring(Construct):
    """An alarm when an execution fails, times out or is aborted; a dashboard of runs, jobs and the manifest table
    (when the table is the manifest)."""

    def __init__(self, scope: Construct, construct_id: str, props: PipelineMonitoringProps) -> None:
        super().__init__(scope, construct_id)
        sm = props.state_machine
        period = Duration.minutes(5)
        unsuccessful = cloudwatch.MathExpression(
            expression="failed + timedOut + aborted",
            using_metrics={
                "failed": sm.metric_failed(period=period, statistic="Sum"),
                "timedOut": sm.metric_timed_out(period=period, statistic="Sum"),
                "aborted": sm.metric_aborted(period=period, statistic="Sum"),
            },
            label="Unsuccessful executions",
            period=period,
        )
        self.alarm = cloudwatch.Alarm(
            self,
            "FailedExecutions",
            alarm_description="A Winnow pipeline execution failed, timed out or was aborted",
            metric=unsuccessful,
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.alarm.add_alarm_action(cw_actions.SnsAction(props.alarm_topic))

        def job_metric(name: str, job: str, statistic: str) -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=METRICS_NAMESPACE,
                metric_name=name,
                dimensions_map={"Env": props.env, "Job": job},
                statistic=statistic,
                period=Duration.hours(1),
                label=f"{job} {name}",
            )

        table = props.manifest_table
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=props.dashboard_name)
        widgets: list[cloudwatch.IWidget] = [
            cloudwatch.GraphWidget(
                title="Pipeline executions",
                left=[
                    sm.metric_succeeded(statistic="Sum"),
                    sm.metric_failed(statistic="Sum"),
                    sm.metric_timed_out(statistic="Sum"),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Job durations (seconds)",
                left=[job_metric("DurationSeconds", job, "Maximum") for job in JOBS],
                right=[sm.metric_time(statistic="Maximum")],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Duplicates found (dedup)",
                left=[job_metric("Duplicates", "dedup", "Sum"), job_metric("Quarantined", "dedup", "Sum")],
                right=[job_metric("InputLines", "dedup", "Sum")],
                width=12,
            ),
        ]
        if table is not None:
            widgets.append(
                cloudwatch.GraphWidget(
                    title="Manifest throttles",
                    left=[
                        table.metric("WriteThrottleEvents", statistic="Sum"),
                        table.metric("ReadThrottleEvents", statistic="Sum"),
                    ],
                    right=[table.metric_consumed_write_capacity_units(statistic="Sum")],
                    width=12,
                )
            )
        self.dashboard.add_widgets(*widgets)
