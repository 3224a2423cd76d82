"""The Orchestration stack: the state machine's shape and IAM, the schedule, the alarm and the dashboard."""

from __future__ import annotations

import json
from typing import Any

from tests.infra.helpers import Environments, Synthesized, only, policy_statements, resources, state_machine_definition

SYNC = "arn:aws:states:::emr-serverless:startJobRun.sync"


def definition(synth: Synthesized) -> dict[str, Any]:
    return state_machine_definition(synth.template("Orchestration"))


def test_flow_works_out_the_run_hands_it_over_plans_then_dedup_then_shred(dev: Synthesized) -> None:
    asl = definition(dev)
    states = asl["States"]
    order, state = [], asl["StartAt"]
    while "Next" in states[state]:
        order.append(state)
        state = states[state]["Next"]
    assert order == ["Defaults", "MergeInput", "RunIdFromTime", "Run"] and state == "NamedAfterRun"

    def choices(name: str) -> tuple[list[tuple[str, str]], str]:
        rules = [(rule["Variable"], rule["Next"]) for rule in states[name]["Choices"]]
        return rules, states[name]["Default"]

    assert states["NamedAfterRun"]["Choices"] == [
        {"Variable": "$.execution", "StringMatches": "run-*", "Next": "InputNamed"}
    ]
    assert choices("NamedAfterRun") == ([("$.execution", "InputNamed")], "StartNamedRun")
    assert states["InputNamed"]["Choices"] == [
        {"Variable": "$.given.inputPrefix", "IsPresent": True, "Next": "JobArguments"}
    ]
    assert choices("InputNamed") == ([("$.given.inputPrefix", "JobArguments")], "PlanInput")
    assert states["PlanInput"]["Next"] == "AnythingNew"
    assert states["AnythingNew"]["Choices"] == [{"Variable": "$.plan.files", "NumericEquals": 0, "Next": "NothingToDo"}]
    assert choices("AnythingNew") == ([("$.plan.files", "NothingToDo")], "IncrementalJobArguments")
    for arguments in ("JobArguments", "IncrementalJobArguments"):
        assert states[arguments]["Next"] == "Dedup"
    after: dict[str, list[str]] = {job: [] for job in ("Dedup", "Shred")}
    for job in after:
        state = states[job]["Next"]
        while state not in ("Shred", "Succeeded"):
            after[job].append(state)
            state = states[state]["Next"]
        after[job].append(state)
    assert after == {
        "Dedup": ["ReadDedupSummary", "DedupFigures", "PublishDedupMetrics", "Shred"],
        # Then RDB Loader's message (dev has a loader queue; tests/infra/test_loader_queue.py).
        "Shred": [
            "ReadShredSummary", "ShredFigures", "PublishShredMetrics", "ReadLoaderMessage", "SendLoaderMessage",
            "Succeeded",
        ],
    }  # fmt: skip
    assert states["StartNamedRun"]["Next"] == "HandedOver"
    assert {states[name]["Type"] for name in ("NothingToDo", "HandedOver", "Succeeded")} == {"Succeed"}
    assert asl["TimeoutSeconds"] == 250 * 60  # dev: both jobs, one retry each, the waits


def test_a_run_id_runs_once_as_the_execution_named_after_it(dev: Synthesized) -> None:
    states = definition(dev)["States"]
    start = states["StartNamedRun"]
    assert start["Resource"] == "arn:${AWS::Partition}:states:::states:startExecution"
    assert start["Parameters"] == {
        "StateMachineArn": "arn:aws:states:eu-west-1:${AWS::AccountId}:stateMachine:winnow-dev-pipeline",
        "Name.$": "States.Format('run-{}', $.run.runId)",
        "Input.$": "States.JsonMerge($.runDefaults, $.given, false)",
    }
    assert start["Catch"] == [
        {"ErrorEquals": ["StepFunctions.ExecutionAlreadyExistsException"], "ResultPath": "$.error",
         "Next": "RunAlreadyStarted"},
        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "NotifyFailure"},
    ]  # fmt: skip
    assert states["RunAlreadyStarted"]["Error"] == "RunAlreadyStarted"
    statements = policy_statements(dev.template("Orchestration"), "PipelineStateMachineRole")
    assert {"Action": "states:StartExecution", "Effect": "Allow",
            "Resource": "arn:aws:states:eu-west-1:${AWS::AccountId}:stateMachine:winnow-dev-pipeline"} in statements  # fmt: skip


def test_the_input_planner_lists_input_and_writes_only_ledger_entries(dev: Synthesized) -> None:
    template = dev.template("Orchestration")
    function = only(template, "AWS::Lambda::Function")["Properties"]
    assert (function["Runtime"], function["Handler"]) == ("python3.14", "jobs.incremental.planner_lambda.handler")
    assert (function["FunctionName"], function["Timeout"], function["MemorySize"]) == (
        "winnow-dev-input-planner",
        300,
        512,
    )
    plan = definition(dev)["States"]["PlanInput"]
    assert plan["Parameters"]["Payload"] == {
        "runId.$": "$.run.runId",
        "input.$": "States.Format('s3://{}/{}', $.settings.inputBucket, $.run.inputPrefix)",
        "output.$": "$.settings.dedupOutput",
        "config.$": "$.settings.config",
    }
    assert plan["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "NotifyFailure"}]
    output = "arn:aws:s3:::winnow-dev-output-${AWS::AccountId}-eu-west-1"
    statements = {s.get("Sid"): s for s in policy_statements(template, "InputPlannerRole")}
    assert statements["ReadRuns"]["Action"] == "s3:GetObject"
    assert statements["ReadRuns"]["Resource"] == f"{output}/deduplicated/*"
    assert statements["WriteLedger"] == {
        "Sid": "WriteLedger", "Action": "s3:PutObject", "Effect": "Allow",
        "Resource": f"{output}/deduplicated/_ledger/*",
    }  # fmt: skip
    # Unconditioned: S3 answers a HeadObject of a missing key 404 only with s3:ListBucket (no s3:prefix in it).
    assert statements["ListData"] == {
        "Sid": "ListData", "Action": "s3:ListBucket", "Effect": "Allow",
        "Resource": ["arn:aws:s3:::winnow-dev-input-${AWS::AccountId}-eu-west-1", output],
    }  # fmt: skip
    assert set(statements) == {"WriteLogs", "ReadRuns", "WriteLedger", "ReadConfig", "ListData"}


def test_run_id_comes_from_the_scheduled_time_unless_given(dev: Synthesized) -> None:
    states = definition(dev)["States"]
    assert states["Defaults"]["Parameters"] == {
        "given.$": "$",
        "execution.$": "$$.Execution.Name",
        "defaults": {"scheduledTime.$": "$$.Execution.StartTime", "inputPrefix": "enriched/"},
    }
    split = "States.StringSplit($.run.scheduledTime, '-T:.Z')"
    fields = ", ".join(f"States.ArrayGetItem({split}, {i})" for i in range(6))
    assert states["RunIdFromTime"]["Parameters"]["defaults"] == {
        "runId.$": f"States.Format('{{}}-{{}}-{{}}-{{}}-{{}}-{{}}', {fields})"
    }
    assert states["Run"]["Parameters"]["run.$"] == "States.JsonMerge($.defaults, $.run, false)"


def test_job_tasks_run_the_packaged_jobs_with_retries_and_a_catch(dev: Synthesized) -> None:
    states = definition(dev)["States"]
    version = dev.pipeline.processing.artifacts.version
    base = f"s3://winnow-dev-artifacts-${{AWS::AccountId}}-eu-west-1/jobs/{version}"
    for name, job in (("Dedup", "dedup"), ("Shred", "shred")):
        task = states[name]
        assert task["Resource"] == SYNC
        params = task["Parameters"]
        assert params["ApplicationId"].startswith("${Import:Winnow-dev-Processing:")
        assert "SparkApplication" in params["ApplicationId"] and "JobRole" in params["ExecutionRoleArn"]
        assert params["Name.$"] == f"States.Format('{job}-{{}}', $.run.runId)"
        assert params["ClientToken.$"] == "States.UUID()"
        assert params["ExecutionTimeoutMinutes"] == 60
        assert params["JobDriver"]["SparkSubmit"]["EntryPoint"] == f"{base}/emr_main.py"
        assert params["JobDriver"]["SparkSubmit"]["EntryPointArguments.$"] == f"$.args.{job}"
        assert params["JobDriver"]["SparkSubmit"]["SparkSubmitParameters"].startswith(
            f"--py-files {base}/winnow_jobs.zip --conf spark.archives={base}/deps.tar.gz#deps"
        )
        assert task["ResultPath"] == f"$.jobs.{job}"
        assert task["Retry"] == [
            {"ErrorEquals": ["States.TaskFailed"], "IntervalSeconds": 120, "MaxAttempts": 1, "BackoffRate": 2}
        ]
        assert task["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "NotifyFailure"}]


def test_failure_notifies_the_topic_and_fails_with_the_cause(dev: Synthesized) -> None:
    states = definition(dev)["States"]
    notify = states["NotifyFailure"]
    assert notify["Resource"] == "arn:${AWS::Partition}:states:::sns:publish"
    assert notify["Parameters"]["TopicArn"].startswith("${FailuresTopic")
    assert notify["Parameters"]["Message"] == {
        "pipeline": "winnow-dev",
        "execution.$": "$$.Execution.Id",
        "run.$": "$.run",
        "error.$": "$.error.Error",
        "cause.$": "$.error.Cause",
    }
    assert (notify["ResultPath"], notify["Next"]) == (None, "Failed")
    assert states["Failed"] == {"Type": "Fail", "ErrorPath": "$.error.Error", "CausePath": "$.error.Cause"}


def test_state_machine_logs_all_traces_and_uses_the_job_runs_policy(dev: Synthesized) -> None:
    template = dev.template("Orchestration")
    machine = only(template, "AWS::StepFunctions::StateMachine")["Properties"]
    assert machine["StateMachineType"] == "STANDARD"
    assert machine["TracingConfiguration"] == {"Enabled": True}
    assert machine["LoggingConfiguration"]["Level"] == "ALL"
    assert machine["LoggingConfiguration"]["IncludeExecutionData"] is True
    log_groups = sorted(
        group["Properties"]["LogGroupName"] for group in resources(template, "AWS::Logs::LogGroup").values()
    )
    assert log_groups == ["/aws/lambda/winnow-dev-input-planner", "/aws/vendedlogs/states/winnow-dev-pipeline"]
    (role,) = [r for k, r in resources(template, "AWS::IAM::Role").items() if k.startswith("PipelineStateMachine")]
    assert role["Properties"]["ManagedPolicyArns"] == [
        "${Import:Winnow-dev-Processing:" + role["Properties"]["ManagedPolicyArns"][0].split(":")[-1]
    ]
    assert "SparkJobRunsPolicy" in role["Properties"]["ManagedPolicyArns"][0]
    inline = policy_statements(template, "PipelineStateMachineRole")
    sns_publish = [s for s in inline if s["Action"] == "sns:Publish"]
    assert sns_publish == [{"Action": "sns:Publish", "Effect": "Allow", "Resource": sns_publish[0]["Resource"]}]
    assert sns_publish[0]["Resource"].startswith("${FailuresTopic")
    assert not [s for s in inline if str(s["Action"]).startswith(("emr-serverless", "iam:"))]


def test_schedule_passes_the_scheduled_time_and_is_on_in_prod_only(dev: Synthesized, prod: Synthesized) -> None:
    for synth, state in ((dev, "DISABLED"), (prod, "ENABLED")):
        schedule = only(synth.template("Orchestration"), "AWS::Scheduler::Schedule")["Properties"]
        assert schedule["State"] == state
        assert schedule["ScheduleExpression"] == "cron(0 3 * * ? *)"
        assert schedule["ScheduleExpressionTimezone"] == "UTC"
        assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
        assert json.loads(schedule["Target"]["Input"]) == {"scheduledTime": "<aws.scheduler.scheduled-time>"}
        assert schedule["Target"]["Arn"].startswith("${PipelineStateMachine")


def test_alarm_on_unsuccessful_executions_notifies_the_topic(dev: Synthesized) -> None:
    alarm = only(dev.template("Orchestration"), "AWS::CloudWatch::Alarm")["Properties"]
    assert (alarm["Threshold"], alarm["EvaluationPeriods"]) == (1, 1)
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"][0].startswith("${FailuresTopic")
    metrics = {m["Id"]: m for m in alarm["Metrics"]}
    assert metrics["expr_1"]["Expression"] == "failed + timedOut + aborted"
    assert {metrics[i]["MetricStat"]["Metric"]["MetricName"] for i in ("failed", "timedOut", "aborted")} == {
        "ExecutionsFailed",
        "ExecutionsTimedOut",
        "ExecutionsAborted",
    }


def test_dashboard_shows_durations_duplicates_and_manifest_throttles(dev: Synthesized) -> None:
    dashboard = only(dev.template("Orchestration"), "AWS::CloudWatch::Dashboard")["Properties"]
    assert dashboard["DashboardName"] == "winnow-dev-pipeline"
    body = json.loads(dashboard["DashboardBody"])
    titles = [widget["properties"]["title"] for widget in body["widgets"]]
    assert titles == [
        "Pipeline executions",
        "Job durations (seconds)",
        "Duplicates found (dedup)",
        "Manifest throttles",
    ]
    metrics = json.dumps(body, separators=(",", ":"))
    for expected in (
        '"Winnow","DurationSeconds","Env","dev","Job","dedup"',
        '"Winnow","Duplicates","Env","dev"',
        '"AWS/DynamoDB","WriteThrottleEvents","TableName","winnow-dev-manifest"',
    ):
        assert expected in metrics


def test_topic_enforces_tls_and_prod_subscribes_the_alarm_emails(dev: Synthesized, prod: Synthesized) -> None:
    (policy,) = resources(dev.template("Orchestration"), "AWS::SNS::TopicPolicy").values()
    (deny,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert (deny["Effect"], deny["Condition"]) == ("Deny", {"Bool": {"aws:SecureTransport": "false"}})
    assert resources(dev.template("Orchestration"), "AWS::SNS::Subscription") == {}
    (subscription,) = resources(prod.template("Orchestration"), "AWS::SNS::Subscription").values()
    assert (subscription["Properties"]["Protocol"], subscription["Properties"]["Endpoint"]) == (
        "email",
        "data-platform-alerts@example.com",
    )


def test_every_stack_is_named_and_every_taggable_resource_tagged(synthesized: Environments) -> None:
    for env, synth in synthesized.all().items():
        tagged = 0
        for part in ("Storage", "Processing", "Orchestration"):
            assert getattr(synth.pipeline, part.lower()).stack_name == f"Winnow-{env}-{part}"
            for logical_id, resource in synth.template(part).to_json()["Resources"].items():
                tags = resource.get("Properties", {}).get("Tags")
                if isinstance(tags, list):
                    tagged += 1
                    pairs = {tag["Key"]: tag["Value"] for tag in tags}
                    # The EMR application keeps the fixed tags only (test_processing_stack says why).
                    owner = None if resource["Type"] == "AWS::EMRServerless::Application" else "data-platform"
                    assert (pairs["project"], pairs["env"], pairs.get("owner")) == ("winnow", env, owner), logical_id
        assert tagged >= 10


def test_job_metrics_are_put_by_the_state_machine_from_each_run_summary(dev: Synthesized) -> None:
    states = definition(dev)["States"]
    read = states["ReadDedupSummary"]
    assert read["Resource"] == "arn:aws:states:::aws-sdk:s3:getObject"
    assert read["Parameters"] == {
        "Bucket": "winnow-dev-output-${AWS::AccountId}-eu-west-1",
        "Key.$": "States.Format('deduplicated/run={}/summary.json', $.run.runId)",
    }
    put = states["PublishShredMetrics"]
    assert put["Resource"] == "arn:aws:states:::aws-sdk:cloudwatch:putMetricData"
    assert [(datum["MetricName"], datum["Value.$"]) for datum in put["Parameters"]["MetricData"]] == [
        ("DurationSeconds", "$.summaries.shred.wall_time_seconds"),
        ("InputLines", "$.summaries.shred.counts.input"),
        ("Bad", "$.summaries.shred.counts.bad"),
    ]
    # A metrics failure never fails the run: both steps go on to the next job.
    for name in ("ReadDedupSummary", "PublishDedupMetrics"):
        assert states[name]["Catch"] == [
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.metricsErrors.dedup", "Next": "Shred"}
        ]
    template = dev.template("Orchestration")
    statements = {s.get("Sid"): s for s in policy_statements(template, "PipelineStateMachineRole")}
    assert statements["PutJobMetrics"]["Condition"] == {"StringEquals": {"cloudwatch:namespace": "Winnow"}}
    output = "arn:${AWS::Partition}:s3:::winnow-dev-output-${AWS::AccountId}-eu-west-1"
    assert statements["ReadRunSummaries"]["Resource"] == [
        f"{output}/deduplicated/run=*/summary.json",
        f"{output}/shredded/run=*/summary.json",
    ]
    job_role = policy_statements(dev.template("Processing"), "JobRole")
    assert not [s for s in job_role if "cloudwatch" in str(s["Action"])]  # the jobs no longer put metrics


def test_with_the_lake_manifest_dedup_gets_the_lake_uri_and_creates_it_once(
    dev: Synthesized, dev_lake: Synthesized
) -> None:
    lake, table = definition(dev_lake)["States"], definition(dev)["States"]
    settings = lake["Run"]["Parameters"]["settings"]
    assert settings["manifest"] == "lake:s3://winnow-dev-manifest-${AWS::AccountId}-eu-west-1/lake"
    assert table["Run"]["Parameters"]["settings"]["manifest"] == "dynamodb://winnow-dev-manifest"
    # `--create` after the manifest (the descriptor is put if absent, then checked): the lake only.
    for state, tail in (("JobArguments", ")"), ("IncrementalJobArguments", ", '--incremental')")):
        dedup = lake[state]["Parameters"]["args"]["dedup.$"]
        shredded = "'--shredded', $.settings.shredOutput"
        assert dedup.endswith(f"'--manifest', $.settings.manifest, {shredded}, '--create'{tail}"), dedup
        assert table[state]["Parameters"]["args"]["dedup.$"].endswith(
            f"'--manifest', $.settings.manifest, {shredded}{tail}"
        )


def test_with_the_lake_manifest_the_dashboard_shows_no_table(dev_lake: Synthesized) -> None:
    template = dev_lake.template("Orchestration")
    body = json.loads(only(template, "AWS::CloudWatch::Dashboard")["Properties"]["DashboardBody"])
    titles = [widget["properties"]["title"] for widget in body["widgets"]]
    assert titles == ["Pipeline executions", "Job durations (seconds)", "Duplicates found (dedup)"]
    assert "AWS/DynamoDB" not in json.dumps(body)
    # The one alarm is on the state machine's executions, whatever the backend.
    alarm = only(template, "AWS::CloudWatch::Alarm")["Properties"]
    assert alarm["AlarmDescription"] == "A Winnow pipeline execution failed, timed out or was aborted"
