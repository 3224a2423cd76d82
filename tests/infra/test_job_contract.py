"""Contract: the arguments the state machine gives the EMR entry point parse with the jobs' own command line."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

import pytest

from jobs.runtime.cli import build_parser
from tests.infra import flow
from tests.infra.helpers import Synthesized, deployed_files

CONSOLE_INPUT = {"runId": "2026-11-22-03-00-00", "inputPrefix": "enriched/2026/11/22/"}
"""The example console input of README "Deploy"."""


@pytest.fixture(scope="module")
def entry_point_arguments(dev: Synthesized) -> Iterator[dict[str, list[str]]]:
    """The EntryPointArguments of both job runs, rendered by executing the flow (EMR tasks as Pass states)."""
    with pytest.MonkeyPatch.context() as monkeypatch, flow.moto_flow(monkeypatch):
        described = flow.execute(flow.with_jobs_as_pass(dev), CONSOLE_INPUT)
    assert described["status"] == "SUCCEEDED", described
    jobs: dict[str, Any] = json.loads(described["output"])["jobs"]
    yield {job: jobs[job]["JobDriver"]["SparkSubmit"]["EntryPointArguments"] for job in ("dedup", "shred")}


def job_options(job: str) -> set[str] | None:
    """The option strings of a job's parser, or None when the job is not registered (yet)."""
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    sub = subparsers.choices.get(job)
    return None if sub is None else {option for action in sub._actions for option in action.option_strings}


def test_dedup_arguments_parse_with_the_jobs_command_line(
    entry_point_arguments: dict[str, list[str]], dev: Synthesized
) -> None:
    options = job_options("dedup")
    assert options is not None and "--manifest" in options
    args = build_parser().parse_args(entry_point_arguments["dedup"])
    version = dev.pipeline.processing.artifacts.version
    bucket = f"{flow.ACCOUNT}-{flow.REGION}"
    assert (args.job, args.input, args.output, args.run_id) == (
        "dedup",
        f"s3://winnow-dev-input-{bucket}/enriched/2026/11/22/",
        f"s3://winnow-dev-output-{bucket}/deduplicated",
        "2026-11-22-03-00-00",
    )
    assert args.config == f"s3://winnow-dev-artifacts-{bucket}/jobs/{version}/config.json"
    assert args.manifest == "dynamodb://winnow-dev-manifest"
    assert args.shredded == f"s3://winnow-dev-output-{bucket}/shredded"  # the shred step's --output


def test_shred_arguments_parse_with_the_jobs_command_line(
    entry_point_arguments: dict[str, list[str]], dev: Synthesized
) -> None:
    assert job_options("shred") is not None
    args = build_parser().parse_args(entry_point_arguments["shred"])
    bucket = f"{flow.ACCOUNT}-{flow.REGION}"
    assert (args.job, args.input, args.output, args.run_id) == (
        "shred",
        f"s3://winnow-dev-output-{bucket}/deduplicated/run=2026-11-22-03-00-00/good",
        f"s3://winnow-dev-output-{bucket}/shredded",
        "2026-11-22-03-00-00",
    )
    assert args.config.endswith(f"/jobs/{dev.pipeline.processing.artifacts.version}/config.json")


def test_the_rendered_arguments_are_the_documented_command_lines(entry_point_arguments: dict[str, list[str]]) -> None:
    """The option names and order the jobs' command line takes (`python -m jobs dedup|shred --help`)."""
    dedup, shred = entry_point_arguments["dedup"], entry_point_arguments["shred"]
    assert [dedup[i] for i in (0, 1, 3, 5, 7, 9, 11)] == [
        "dedup",
        "--input",
        "--output",
        "--run-id",
        "--config",
        "--manifest",
        "--shredded",
    ]
    assert [shred[i] for i in (0, 1, 3, 5, 7)] == ["shred", "--input", "--output", "--run-id", "--config"]
    assert (len(dedup), len(shred)) == (13, 9)


def test_an_incremental_run_gives_the_planner_and_the_dedup_job_the_same_input_and_output(dev: Synthesized) -> None:
    """The dedup job finds the ledger entry the planner wrote only if both name the same input root and output."""
    import boto3

    from jobs.incremental.entries import Ledger

    buckets = {kind: f"winnow-dev-{kind}-{flow.ACCOUNT}-{flow.REGION}" for kind in ("input", "output", "artifacts")}
    with pytest.MonkeyPatch.context() as monkeypatch, flow.moto_flow(monkeypatch):
        s3 = boto3.client("s3", region_name=flow.REGION)
        for bucket in buckets.values():
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": flow.REGION})
        version = dev.pipeline.processing.artifacts.version
        s3.put_object(Bucket=buckets["artifacts"], Key=f"jobs/{version}/config.json", Body=b"{}")
        s3.put_object(Bucket=buckets["input"], Key="enriched/2026/11/22/02/part-0.gz", Body=b"line\n")
        described = flow.execute(flow.with_jobs_as_pass(dev), {"scheduledTime": "2026-11-22T03:00:00Z"})
        assert described["status"] == "SUCCEEDED", described
        dedup = json.loads(described["output"])["jobs"]["dedup"]["JobDriver"]["SparkSubmit"]["EntryPointArguments"]
        args = build_parser().parse_args(dedup)
        assert args.incremental is True and args.run_id == "2026-11-22-03-00-00"
        (entry,) = Ledger(args.output).entries()
        assert (entry["run_id"], entry["input"]) == (args.run_id, args.input)


def test_with_the_lake_manifest_dedup_names_it_as_the_jobs_read_it(dev_lake: Synthesized) -> None:
    """The lake URI and `--create` parse with the jobs' command line, and name the bucket and prefix the job role
    and the lifecycle rules are scoped to."""
    from jobs.manifest import open_manifest
    from jobs.manifest.lake import LakeManifest

    with pytest.MonkeyPatch.context() as monkeypatch, flow.moto_flow(monkeypatch):
        described = flow.execute(flow.with_jobs_as_pass(dev_lake), CONSOLE_INPUT)
    assert described["status"] == "SUCCEEDED", described
    dedup = json.loads(described["output"])["jobs"]["dedup"]["JobDriver"]["SparkSubmit"]["EntryPointArguments"]
    args = build_parser().parse_args(dedup)
    bucket = f"winnow-dev-manifest-{flow.ACCOUNT}-{flow.REGION}"
    assert (args.manifest, args.create) == (f"lake:s3://{bucket}/lake", True)
    manifest = open_manifest(args.manifest)
    assert isinstance(manifest, LakeManifest) and manifest.root == f"s3://{bucket}/lake"


def test_on_emr_the_shred_job_reads_the_schemas_deployed_beside_its_config(dev: Synthesized) -> None:
    """The deployed version as EMR sees it (every file the upload writes, in a moto bucket): the config's relative
    `shred.iglu_config` names the deployed resolver config, whose embedded repository is the deployed folder."""
    import boto3

    from jobs.config import load_config
    from jobs.iglu.resolver import EmbeddedRepository, ResolutionFailure, SchemaKey
    from jobs.shred.plan import open_resolver

    bucket = f"winnow-dev-artifacts-{flow.ACCOUNT}-{flow.REGION}"
    version = f"s3://{bucket}/jobs/{dev.pipeline.processing.artifacts.version}"
    files = deployed_files(dev)
    web_page = "iglu/embedded/schemas/com.snowplowanalytics.snowplow/web_page/jsonschema/1-0-0"
    with pytest.MonkeyPatch.context() as monkeypatch, flow.moto_flow(monkeypatch):
        s3 = boto3.client("s3", region_name=flow.REGION)
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": flow.REGION})
        for name, body in files.items():
            s3.put_object(Bucket=bucket, Key=f"jobs/{dev.pipeline.processing.artifacts.version}/{name}", Body=body)
        config = load_config(f"{version}/config.json")
        assert config.shred.iglu_config == f"{version}/iglu/resolver.json"
        resolver = open_resolver(config.shred.iglu_config)
        (repository,) = resolver.repositories
        assert isinstance(repository, EmbeddedRepository) and repository.path == f"{version}/iglu/embedded"
        schema = resolver.lookup(SchemaKey.parse("iglu:com.snowplowanalytics.snowplow/web_page/jsonschema/1-0-0"))
        assert schema == json.loads(files[web_page])
        assert isinstance(schema, dict) and schema["self"]["name"] == "web_page"
        # A type the folder lacks is "not found" (its events become loader_iglu_error bad rows), not a crash.
        missing = resolver.lookup(SchemaKey.parse("iglu:com.acme/checkout/jsonschema/1-0-0"))
        assert isinstance(missing, ResolutionFailure)
        assert [(h.repository, [e.kind for e in h.errors]) for h in missing.history] == [
            ("Winnow embedded", ["NotFound"])
        ]
