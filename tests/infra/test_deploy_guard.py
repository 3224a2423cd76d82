"""`make deploy` stops an idle EMR application first and refuses while it runs jobs (moto's EMR Serverless)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from scripts.quiesce_application import DeployBlockedError, quiesce

ROOT = Path(__file__).resolve().parents[2]
NAME = "winnow-dev"


@pytest.fixture
def emr(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "eu-west-1"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield boto3.client("emr-serverless")


def application(client: Any) -> str:
    app_id: str = client.create_application(name=NAME, releaseLabel="emr-7.12.0", type="SPARK")["applicationId"]
    # An ended job run (moto ends them at once): moto's ListJobRuns answers "no such application" before the
    # first job run of an application, where AWS answers an empty list.
    start_job_run(client, app_id, "earlier")
    return app_id


def start_job_run(client: Any, app_id: str, name: str) -> str:
    run_id: str = client.start_job_run(
        applicationId=app_id, executionRoleArn="arn:aws:iam::123456789012:role/r", name=name,
        jobDriver={"sparkSubmit": {"entryPoint": "s3://a/emr_main.py"}},
    )["jobRunId"]  # fmt: skip
    return run_id


def test_an_idle_started_application_is_stopped_before_the_deploy(emr: Any) -> None:
    app_id = application(emr)
    assert emr.get_application(applicationId=app_id)["application"]["state"] == "STARTED"  # moto: started at once
    assert quiesce(emr, NAME, sleep=lambda _: None) == (
        f"{NAME} ({app_id}) was idle and is stopped now, so the deploy can update it; the next job run starts it"
    )
    assert emr.get_application(applicationId=app_id)["application"]["state"] == "STOPPED"
    assert quiesce(emr, NAME) == f"{NAME} ({app_id}) is STOPPED; nothing to stop"


def test_a_deploy_is_refused_while_job_runs_are_in_progress(emr: Any) -> None:
    from moto.emrserverless.models import emrserverless_backends

    app_id = application(emr)
    run_id = start_job_run(emr, app_id, "dedup-x")
    backend = emrserverless_backends["123456789012"]["eu-west-1"]
    (job,) = [job for job in backend.job_runs[app_id] if job.id == run_id]
    job.state = "RUNNING"  # moto ends job runs at once; a real one runs for minutes
    with pytest.raises(DeployBlockedError) as blocked:
        quiesce(emr, NAME)
    assert str(blocked.value).startswith(f"{NAME} ({app_id}) has 1 job run(s) in progress: dedup-x (RUNNING); ")
    assert emr.get_application(applicationId=app_id)["application"]["state"] == "STARTED"  # left alone


def test_no_application_yet_is_nothing_to_stop(emr: Any) -> None:
    assert quiesce(emr, NAME) == f"{NAME}: no EMR Serverless application yet; nothing to stop"


def test_make_deploy_quiesces_first_and_deploys_every_stack_even_if_unchanged() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^deploy:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None
    lines = [line.strip() for line in recipe.group(1).splitlines()]
    assert lines[0] == "$(PY) -m scripts.quiesce_application --env $(ENV)"
    assert lines[1].startswith("$(CDK) deploy --all --force $(CDK_FLAGS)")
