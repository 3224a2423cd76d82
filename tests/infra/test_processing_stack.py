"""The Processing stack: the EMR Serverless application, the job role's least privilege, versioned artifacts."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from cdk.artifact_layout import BUILD_FILES, CONFIG, IGLU_DIR, IGLU_RESOLVER
from cdk.components.job_artifacts import artifacts_version, built_files
from cdk.errors import ArtifactsNotBuiltError
from tests.infra.helpers import Synthesized, deployed_files, only, policy_statements, resources

ACCOUNT = "${AWS::AccountId}"  # dev names no account


def s3_arn(purpose: str, key: str | None = None) -> str:
    bucket = f"arn:aws:s3:::winnow-dev-{purpose}-{ACCOUNT}-eu-west-1"
    return bucket if key is None else f"{bucket}/{key}"


def version_of(dev: Synthesized) -> str:
    return dev.pipeline.processing.artifacts.version


def test_spark_application_release_capacity_autostart_autostop(dev: Synthesized) -> None:
    app = only(dev.template("Processing"), "AWS::EMRServerless::Application")["Properties"]
    assert {key: app[key] for key in app if key != "Tags"} == {
        "Name": "winnow-dev",
        "Type": "SPARK",
        "ReleaseLabel": "emr-spark-8.0.0",
        "Architecture": "X86_64",
        "AutoStartConfiguration": {"Enabled": True},
        "AutoStopConfiguration": {"Enabled": True, "IdleTimeoutMinutes": 10},
        "MaximumCapacity": {"Cpu": "16 vCPU", "Memory": "64 GB", "Disk": "200 GB"},
        "MonitoringConfiguration": {
            "S3MonitoringConfiguration": {"LogUri": f"s3://winnow-dev-job-logs-{ACCOUNT}-eu-west-1/emr/"}
        },
        # The warnings jobs/runtime/log4j2.properties silences locally as expected in our plans, silenced on EMR too.
        "RuntimeConfiguration": [
            {"Classification": classification, "Properties": {
                "logger.planstring.name": "org.apache.spark.sql.catalyst.util.SparkStringUtils",
                "logger.planstring.level": "error",
                "logger.planstringcommon.name": "org.apache.spark.util.SparkStringUtils",
                "logger.planstringcommon.level": "error",
                "logger.window.name": "org.apache.spark.sql.execution.window.WindowExec",
                "logger.window.level": "error",
            }}
            for classification in ("spark-driver-log4j2", "spark-executor-log4j2")
        ],
    }  # fmt: skip
    assert "InitialCapacity" not in app  # nothing pre-initialized: nothing billed while idle


def test_job_role_is_assumed_by_emr_serverless_only(dev: Synthesized) -> None:
    roles = resources(dev.template("Processing"), "AWS::IAM::Role")
    (job_role,) = [role for logical_id, role in roles.items() if logical_id.startswith("JobRole")]
    assert job_role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "emr-serverless.amazonaws.com"}}
    ]
    assert "ManagedPolicyArns" not in job_role["Properties"]


def data_statements() -> list[dict[str, object]]:
    """The job role's statements before the manifest's, whatever the manifest backend."""
    prefix = "jobs/*"  # every artifacts version: a run started before a deploy still reads its own
    return [
        {"Sid": "ReadInput", "Action": "s3:GetObject", "Effect": "Allow", "Resource": s3_arn("input", "enriched*")},
        {
            "Sid": "WriteOutput",
            "Action": ["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject"],
            "Effect": "Allow",
            # dedup and shred; keyed (runs and state) and table (scripts/job_run.py)
            "Resource": [s3_arn("output", f"{name}*") for name in ("deduplicated", "keyed", "shredded", "tables")],
        },
        {"Sid": "ReadArtifacts", "Action": "s3:GetObject", "Effect": "Allow", "Resource": s3_arn("artifacts", prefix)},
        {"Sid": "WriteLogs", "Action": "s3:PutObject", "Effect": "Allow", "Resource": s3_arn("job-logs", "emr/*")},
    ]


def test_job_role_has_exactly_the_statements_the_jobs_need(dev: Synthesized) -> None:
    statements = policy_statements(dev.template("Processing"), "JobRole")  # CDK sorts the actions
    assert statements == [
        *data_statements(),
        {
            "Sid": "Manifest",
            "Action": [
                "dynamodb:DeleteItem",
                "dynamodb:DescribeTable",
                "dynamodb:DescribeTimeToLive",
                "dynamodb:GetItem",
                "dynamodb:PutItem",
                "dynamodb:Query",
                "dynamodb:Scan",
                "dynamodb:UpdateItem",
            ],
            "Effect": "Allow",
            "Resource": f"arn:aws:dynamodb:eu-west-1:{ACCOUNT}:table/winnow-dev-manifest",
        },
        # No SQS, SNS or KMS: the state machine sends RDB Loader's message (tests/infra/test_loader_queue.py).
        {
            "Sid": "ListData",
            "Action": "s3:ListBucket",
            "Effect": "Allow",
            "Resource": [s3_arn("artifacts"), s3_arn("input"), s3_arn("output")],
        },
    ]


def test_imported_buckets_are_used_by_name(build_dir: Path, tmp_path: Path) -> None:
    """Existing input/output buckets are imported, not created, and the job role is scoped to them."""
    from cdk.config import config_from_data
    from tests.infra.helpers import synthesize

    data = json.loads((Path(__file__).resolve().parents[2] / "configs" / "dev.json").read_text(encoding="utf-8"))
    data["storage"].update(input_bucket="acme-enriched", output_bucket="acme-warehouse", input_prefix="good/")
    synth = synthesize(config_from_data("dev", data), build_dir, tmp_path)
    created = {b["Properties"]["BucketName"] for b in resources(synth.template("Storage"), "AWS::S3::Bucket").values()}
    assert not {"acme-enriched", "acme-warehouse"} & created
    assert len(created) == 3
    by_sid = {s["Sid"]: s for s in policy_statements(synth.template("Processing"), "JobRole")}
    assert by_sid["ReadInput"]["Resource"] == "arn:aws:s3:::acme-enriched/good*"
    assert by_sid["WriteOutput"]["Resource"] == [
        "arn:aws:s3:::acme-warehouse/deduplicated*",
        "arn:aws:s3:::acme-warehouse/keyed*",
        "arn:aws:s3:::acme-warehouse/shredded*",
        "arn:aws:s3:::acme-warehouse/tables*",
    ]
    assert by_sid["ListData"]["Resource"] == [
        "arn:aws:s3:::acme-enriched",
        "arn:aws:s3:::acme-warehouse",
        "arn:aws:s3:::winnow-dev-artifacts-${AWS::AccountId}-eu-west-1",
    ]
    assert synth.nag_error is None


def test_job_runs_policy_is_scoped_to_the_application_and_the_job_role(dev: Synthesized) -> None:
    (policy,) = resources(dev.template("Processing"), "AWS::IAM::ManagedPolicy").values()
    app, role = "${SparkApplicationB8D0239C.Arn}", "${JobRoleA8EE24A2.Arn}"
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {"Sid": "StartJobRun", "Action": "emr-serverless:StartJobRun", "Effect": "Allow", "Resource": app},
        {
            "Sid": "WatchJobRuns",
            "Action": ["emr-serverless:CancelJobRun", "emr-serverless:GetJobRun", "emr-serverless:TagResource"],
            "Effect": "Allow",
            "Resource": f"{app}/jobruns/*",
        },
        {
            "Sid": "PassJobRole",
            "Action": "iam:PassRole",
            "Condition": {"StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}},
            "Effect": "Allow",
            "Resource": role,
        },
        {
            "Sid": "SyncEventsRule",
            "Action": ["events:DescribeRule", "events:PutRule", "events:PutTargets"],
            "Effect": "Allow",
            "Resource": "arn:${AWS::Partition}:events:${AWS::Region}:${AWS::AccountId}:rule/"
            "StepFunctionsGetEventsForEMRServerlessJobRule",
        },
    ]


def test_artifacts_go_to_an_immutable_versioned_prefix(dev: Synthesized) -> None:
    (upload,) = resources(dev.template("Processing"), "Custom::CDKBucketDeployment").values()
    props = upload["Properties"]
    assert re.fullmatch(r"0\.1\.0-[0-9a-f]{12}", version_of(dev))
    assert props["DestinationBucketName"] == f"winnow-dev-artifacts-{ACCOUNT}-eu-west-1"
    assert props["DestinationBucketKeyPrefix"] == f"jobs/{version_of(dev)}/"
    assert (props["Prune"], props["RetainOnDelete"], props["Extract"]) == (False, True, True)
    assert len(props["SourceObjectKeys"]) == 2  # the build folder and config.json


def test_the_deployed_config_is_the_env_jobs_section_without_a_loader_queue(dev: Synthesized) -> None:
    configs = [json.loads(path.read_text(encoding="utf-8")) for path in dev.outdir.glob(f"asset.*/{CONFIG}")]
    assert dev.config.jobs == {
        "dedup": {"synthetic": "reid"},
        "manifest": {"ttl_days": 30},
        "output": {"compression": "gzip"},
        "shred": {"iglu_config": "iglu/resolver.json"},
    }
    assert configs == [
        {
            "dedup": {"synthetic": "reid"},
            "manifest": {"ttl_days": 30},
            "output": {"compression": "gzip"},  # no queue: the state machine sends RDB Loader's message
            "shred": {"iglu_config": "iglu/resolver.json"},  # relative to config.json: the deployed iglu/ folder
        }
    ]


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_the_upload_puts_the_iglu_folder_beside_config_json(
    env: str, synthesized: dict[str, Synthesized], build_dir: Path
) -> None:
    """The one BucketDeployment uploads the build folder as a whole: the iglu/ tree lands under the version's prefix
    byte for byte, next to the config.json whose `shred.iglu_config` names its resolver config."""
    files = deployed_files(synthesized[env])
    assert sorted(files) == sorted([*built_files(build_dir), CONFIG])
    iglu = sorted(name for name in files if name.startswith(f"{IGLU_DIR}/"))
    assert IGLU_RESOLVER in iglu and len(iglu) >= 30
    for name in iglu:
        assert files[name] == (build_dir / name).read_bytes(), name
    assert json.loads(files[CONFIG])["shred"]["iglu_config"] == IGLU_RESOLVER
    assert synthesized[env].config.job_config.shred.iglu_config == IGLU_RESOLVER  # validated, still relative


def test_spark_submit_parameters_ship_package_dependencies_python_and_sizes(dev: Synthesized) -> None:
    base = f"s3://winnow-dev-artifacts-{ACCOUNT}-eu-west-1/jobs/{version_of(dev)}"
    params = dev.pipeline.processing.resolve(dev.pipeline.processing.spark_submit_parameters)
    from tests.infra.helpers import render

    assert render(params).split(" --conf ") == [
        f"--py-files {base}/winnow_jobs.zip",
        f"spark.archives={base}/deps.tar.gz#deps",
        "spark.emr-serverless.driverEnv.PYTHONPATH=./deps",
        "spark.executorEnv.PYTHONPATH=./deps",
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON=/usr/bin/python3.11",
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON=/usr/bin/python3.11",
        "spark.executorEnv.PYSPARK_PYTHON=/usr/bin/python3.11",
        "spark.emr-serverless.driverEnv.AWS_REGION=eu-west-1",
        "spark.emr-serverless.driverEnv.AWS_DEFAULT_REGION=eu-west-1",
        "spark.executorEnv.AWS_REGION=eu-west-1",
        "spark.executorEnv.AWS_DEFAULT_REGION=eu-west-1",
        "spark.driver.cores=2",
        "spark.driver.memory=4g",
        "spark.executor.cores=4",
        "spark.executor.memory=8g",
        "spark.dynamicAllocation.maxExecutors=3",
    ]


def test_version_changes_with_code_or_config_and_only_then(build_dir: Path, tmp_path: Path) -> None:
    config: dict[str, Any] = {"dedup": {"synthetic": "reid"}}
    same = artifacts_version(build_dir, config)
    assert artifacts_version(build_dir, dict(config)) == same
    assert artifacts_version(build_dir, {"dedup": {"synthetic": "drop"}}) != same
    copy = tmp_path / "build"
    shutil.copytree(build_dir, copy)
    assert artifacts_version(copy, config) == same
    (copy / "emr_main.py").write_text("# changed\n", encoding="utf-8")
    assert artifacts_version(copy, config) != same


def test_a_changed_or_added_schema_is_a_new_version(build_dir: Path, tmp_path: Path) -> None:
    config: dict[str, Any] = {"shred": {"iglu_config": "iglu/resolver.json"}}
    copy = tmp_path / "build"
    shutil.copytree(build_dir, copy)
    same = artifacts_version(copy, config)
    schema = copy / "iglu/embedded/schemas/com.snowplowanalytics.snowplow/web_page/jsonschema/1-0-0"
    original = schema.read_bytes()
    schema.write_bytes(original + b"\n")  # the same schema, other bytes: a new version all the same
    changed = artifacts_version(copy, config)
    assert changed != same
    schema.write_bytes(original)
    assert artifacts_version(copy, config) == same
    added = copy / "iglu/embedded/schemas/com.acme/checkout/jsonschema/1-0-0"
    added.parent.mkdir(parents=True)
    added.write_text("{}\n", encoding="utf-8")
    assert artifacts_version(copy, config) not in (same, changed)
    added.unlink()
    (copy / IGLU_RESOLVER).write_text("{}\n", encoding="utf-8")  # the resolver config counts too
    assert artifacts_version(copy, config) not in (same, changed)


def test_missing_build_says_to_run_make_package(tmp_path: Path) -> None:
    with pytest.raises(ArtifactsNotBuiltError, match=r"missing " + ", ".join(BUILD_FILES) + r"; run `make package`"):
        artifacts_version(tmp_path, {})


def test_a_build_without_the_iglu_resolver_config_is_not_built(build_dir: Path, tmp_path: Path) -> None:
    """An older build (from before iglu/ was packaged) would deploy a config.json naming a file it lacks."""
    copy = tmp_path / "build"
    shutil.copytree(build_dir, copy, ignore=shutil.ignore_patterns(IGLU_DIR))
    message = rf"job artifacts in {copy}: missing iglu/resolver.json; run `make package` first"
    with pytest.raises(ArtifactsNotBuiltError, match=message):
        artifacts_version(copy, {})


def test_the_spark_application_keeps_only_the_fixed_tags(prod: Synthesized) -> None:
    """A tag change would update the application, which fails while it is STARTED: only project and env reach it."""
    template = prod.template("Processing")
    app = only(template, "AWS::EMRServerless::Application")["Properties"]
    assert sorted((tag["Key"], tag["Value"]) for tag in app["Tags"]) == [("env", "prod"), ("project", "winnow")]
    role = next(iter(resources(template, "AWS::IAM::Role").values()))["Properties"]
    assert {"owner", "cost-center"} <= {tag["Key"] for tag in role["Tags"]}


def test_with_the_lake_manifest_the_job_role_reaches_its_prefix_and_no_table(dev_lake: Synthesized) -> None:
    statements = policy_statements(dev_lake.template("Processing"), "JobRole")  # CDK sorts the actions
    assert statements == [
        *data_statements(),
        {
            # Commits, descriptor and lease created with If-None-Match (s3:PutObject), Spark's segment files
            # (multipart), expired segments and the lease deleted; `lake*` also covers EMRFS's `lake_$folder$`.
            "Sid": "Manifest",
            "Action": ["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject"],
            "Effect": "Allow",
            "Resource": s3_arn("manifest", "lake*"),
        },
        # Unconditioned like the data buckets': a missing key (`lake/_commits` before the first commit) must be 404.
        {
            "Sid": "ListData",
            "Action": "s3:ListBucket",
            "Effect": "Allow",
            "Resource": [s3_arn("artifacts"), s3_arn("input"), s3_arn("manifest"), s3_arn("output")],
        },
    ]
    template = dev_lake.template("Processing").to_json()
    assert "dynamodb" not in json.dumps(template)  # no table statement, no table reference at all


def test_the_job_role_takes_exactly_one_manifest() -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_s3 as s3

    from cdk.components.job_execution_role import JobExecutionRoleProps

    stack = cdk.Stack(cdk.App(), "Role")
    bucket = s3.Bucket.from_bucket_name(stack, "Bucket", "bucket")
    table = dynamodb.Table.from_table_name(stack, "Table", "table")
    common: dict[str, Any] = {
        "input_bucket": bucket, "input_prefix": "in/", "output_bucket": bucket, "output_prefixes": ("out/",),
        "artifacts_bucket": bucket, "artifacts_prefix": "jobs/", "log_bucket": bucket, "log_prefix": "emr/",
    }  # fmt: skip
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, "False, manifest_bucket False"),
        ({"manifest_table": table, "manifest_bucket": bucket}, "True, manifest_bucket True"),
    ]
    for manifests, given in cases:
        with pytest.raises(ValueError, match=rf"given manifest_table {given}; allowed: exactly one"):
            JobExecutionRoleProps(**common, **manifests)


def test_the_deployed_config_never_names_a_manifest() -> None:
    """The state machine passes `--manifest` from `manifest.backend`: a `jobs.manifest.uri` stays out of config.json."""
    from cdk.config import config_from_data
    from cdk.stacks.processing_stack import deployed_job_config

    data = json.loads((Path(__file__).resolve().parents[2] / "configs" / "dev.json").read_text(encoding="utf-8"))
    data["jobs"]["manifest"] = {"uri": "dynamodb://another-table", "ttl_days": 30}
    assert deployed_job_config(config_from_data("dev", data)) == {
        "dedup": {"synthetic": "reid"},
        "manifest": {"ttl_days": 30},
        "output": {"compression": "gzip"},
        "shred": {"iglu_config": "iglu/resolver.json"},
    }
