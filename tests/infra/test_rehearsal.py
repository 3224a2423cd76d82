"""`make rehearse` (scripts/rehearse_artifacts.py), without building a venv: what it submits is what the synthesized
state machine submits, its local command lines change only what a local machine cannot have, and its environments
hold no path of the checkout. The rehearsal itself runs in CI (`make rehearse`)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from cdk.artifact_layout import DEPS_ARCHIVE, DEPS_DIR, ENTRYPOINT, PACKAGE_ZIP
from scripts.rehearsal.checks import check_origins
from scripts.rehearsal.deployment import RUN_ID, Deployment, evaluate, render_deployment
from scripts.rehearsal.environment import ROOT, clean_environment, in_checkout, job_environment
from scripts.rehearsal.steps import RehearsalError, holding, run_logged
from scripts.rehearsal.workspace import DRIVER_ENV, Workspace, submit_command
from tests.infra import flow
from tests.infra.helpers import Synthesized

SCHEDULED_TIME = "2026-11-22T03:00:00Z"
"""The scheduled time whose run id is the rehearsal's RUN_ID."""


@pytest.fixture(scope="module")
def deployment(dev: Synthesized, build_dir: Path) -> Deployment:
    """What the rehearsal submits for dev, rendered for the account the moto flow resolves references to."""
    return render_deployment(dev.config, build_dir, account=flow.ACCOUNT)


def test_the_rehearsal_submits_the_job_runs_of_the_state_machine(dev: Synthesized, deployment: Deployment) -> None:
    """EntryPoint and SparkSubmitParameters of both job tasks in the synthesized ASL, to the character."""
    states = flow.definition(dev)["States"]
    for job in ("Dedup", "Shred"):
        submit = states[job]["Parameters"]["JobDriver"]["SparkSubmit"]
        assert (submit["EntryPoint"], submit["SparkSubmitParameters"]) == (
            deployment.entrypoint,
            deployment.spark_submit_parameters,
        )


def test_the_rehearsal_runs_the_command_lines_the_state_machine_renders(
    dev: Synthesized, deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The EntryPointArguments of a run named by its input prefix (the rehearsal's), as moto executes the flow."""
    run = {"runId": RUN_ID, "inputPrefix": dev.config.storage.input_prefix}
    with flow.moto_flow(monkeypatch):
        described = flow.execute(flow.with_jobs_as_pass(dev), run)
    assert described["status"] == "SUCCEEDED", described
    jobs = json.loads(described["output"])["jobs"]
    for job in ("dedup", "shred"):
        assert jobs[job]["JobDriver"]["SparkSubmit"]["EntryPointArguments"] == deployment.arguments[job]


def test_the_rehearsal_calls_the_planner_with_the_event_the_state_machine_sends(
    dev: Synthesized, deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

    events: list[dict[str, Any]] = []

    def invoke(parameters: dict[str, Any], region: str, state_credentials: Any) -> dict[str, Any]:
        events.append(json.loads(parameters["Payload"]))
        nothing = {"files": 0, "bytes": 0, "entry": None, "reused": False, "backlogFiles": 0, "message": "none"}
        return {"StatusCode": 200, "Payload": nothing}

    with flow.moto_flow(monkeypatch):
        monkeypatch.setattr(lambda_eval_utils, "_invoke_lambda_function", invoke)
        described = flow.execute(flow.with_jobs_as_pass(dev), {"scheduledTime": SCHEDULED_TIME})
    assert described["status"] == "SUCCEEDED", described
    assert events == [deployment.planner_event]


def test_the_local_command_line_changes_only_what_a_local_machine_cannot_have(
    deployment: Deployment, tmp_path: Path
) -> None:
    """Artifacts as the local build, data buckets as folders, driver settings as the environment, the EMR Python
    as the venv's; every other setting and argument as deployed (the config and DynamoDB manifest stay remote)."""
    workspace, venv = Workspace(tmp_path / "work"), tmp_path / "venv"
    command, driver_env = submit_command(deployment, workspace, venv, "dedup")
    deployed = shlex.split(deployment.spark_submit_parameters)
    assert deployed[:2] == ["--py-files", deployment.artifacts_prefix + PACKAGE_ZIP]
    settings = dict(value.split("=", 1) for value in deployed[3::2])
    python, archive = str(venv / "bin" / "python"), f"{workspace.artifacts / DEPS_ARCHIVE}#{DEPS_DIR}"

    def local(key: str, value: str) -> str:
        """A setting as the rehearsal submits it: the EMR Python as the venv's, the archive as the local one."""
        return python if value == deployment.python else {"spark.archives": archive}.get(key, value)

    jobs_zip = str(workspace.artifacts / PACKAGE_ZIP)
    assert command[:5] == [str(venv / "bin" / "spark-submit"), "--master", "local[2]", "--py-files", jobs_zip]
    application = command[-len(deployment.arguments["dedup"]) - 1 :]
    assert dict(value.split("=", 1) for value in command[6 : -len(application) : 2]) == {
        key: local(key, value) for key, value in settings.items() if not key.startswith(DRIVER_ENV)
    }
    assert driver_env == {
        key.removeprefix(DRIVER_ENV): local(key, value) for key, value in settings.items() if key.startswith(DRIVER_ENV)
    }
    assert driver_env["PYTHONPATH"] == f"./{DEPS_DIR}"
    entrypoint, *arguments = application
    assert entrypoint == str(workspace.artifacts / ENTRYPOINT)
    given = deployment.arguments["dedup"]
    changed = {given[i - 1]: arguments[i] for i in range(len(given)) if arguments[i] != given[i]}
    assert set(changed) == {"--input", "--output", "--shredded"}  # the config and the manifest stay remote
    assert all(path.startswith(f"{workspace.buckets}/winnow-dev-") for path in changed.values())


def test_a_script_is_submitted_the_way_the_jobs_are(deployment: Deployment, tmp_path: Path) -> None:
    workspace, venv, script = Workspace(tmp_path / "work"), tmp_path / "venv", tmp_path / "probe.py"
    job, driver_env = submit_command(deployment, workspace, venv, "dedup")
    probe, probe_env = submit_command(deployment, workspace, venv, "dedup", script)
    assert probe == [*job[: -len(deployment.arguments["dedup"]) - 1], str(script)]
    assert probe_env == driver_env


def test_the_job_environment_holds_no_path_of_the_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Whatever the calling shell has (the dev venv on PATH, a relative entry, its own PYTHONPATH), the job gets the
    venv's bin, the PATH's other absolute folders, HOME, LANG, JAVA_HOME, then what the job run sets."""
    monkeypatch.setenv("PATH", f"{ROOT / '.venv' / 'bin'}:.:/usr/bin:{ROOT}:/bin")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("JAVA_HOME", "/usr/lib/jvm/java-17")
    venv = tmp_path / "venv"
    env = job_environment(venv, {"PYTHONPATH": "./deps"}, "http://127.0.0.1:5000", "eu-west-1")
    assert env["PATH"] == f"{venv / 'bin'}:/usr/bin:/bin"
    assert (env["PYTHONPATH"], env["PYSPARK_PYTHON"], env["JAVA_HOME"]) == (
        "./deps",
        f"{venv}/bin/python",
        "/usr/lib/jvm/java-17",
    )
    assert not [key for key, value in env.items() if str(ROOT) in value]
    assert set(env) == {
        "PATH", "HOME", "LANG", "JAVA_HOME", "SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYTHONPATH", "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL",
    }  # fmt: skip


def test_a_path_of_the_checkout_is_refused_but_the_cached_venvs(tmp_path: Path) -> None:
    with pytest.raises(RehearsalError, match=r"environment \['PYTHONPATH'\]: given paths of the checkout"):
        clean_environment(tmp_path, {"PYTHONPATH": f"./deps:{ROOT / 'jobs'}"})
    cache = ROOT / "dist" / "rehearsal"
    assert not in_checkout(str(cache / "emr-py3.11-pyspark-4.0.2" / "bin" / "python"), cache)
    assert in_checkout(str(ROOT / ".venv" / "bin" / "python"), cache)
    assert not in_checkout("./deps", cache)  # relative: to the job's working dir


def test_the_probe_check_refuses_a_path_of_the_checkout_on_sys_path(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    side = {
        "python": f"{venv}/bin/python",
        "sys_path": ["/tmp/w/driver/deps"],
        "modules": {
            "jobs": f"/tmp/w/artifacts/{PACKAGE_ZIP}/jobs/__init__.py",
            "boto3": "/tmp/w/driver/deps/boto3/__init__.py",
            "pyspark": f"{venv}/lib/python3.11/site-packages/pyspark/__init__.py",
        },
        "archive": ["boto3", "__pycache__"],
    }
    assert check_origins({"driver": side, "executor": side}, venv, ["boto3"])
    leaked = {**side, "sys_path": [*side["sys_path"], str(ROOT)]}
    with pytest.raises(RehearsalError, match=r"executor: given \{'sys.path entries of the checkout'"):
        check_origins({"driver": side, "executor": leaked}, venv, ["boto3"])


def test_step_functions_parameters_are_evaluated_as_step_functions_does() -> None:
    template = {
        "plain": {"kept.$": "$.a.b", "literal": "$.not.a.path"},
        "list.$": "States.Array('x', States.Format('s3://{}/{}', $.a.b, $.c), 'it\\'s')",
    }
    assert evaluate(template, {"a": {"b": "bucket"}, "c": "key/"}) == {
        "plain": {"kept": "bucket", "literal": "$.not.a.path"},
        "list": ["x", "s3://bucket/key/", "it's"],
    }
    with pytest.raises(RehearsalError, match=r"expected one of States.Array, States.Format"):
        evaluate({"id.$": "States.UUID()"}, {})


def test_a_failed_command_is_said_with_its_error_and_its_log(tmp_path: Path) -> None:
    log = tmp_path / "step.log"
    with pytest.raises(
        RehearsalError, match=r"exited 1 \(ModuleNotFoundError: No module named 'no_such_module'\)"
    ) as err:
        run_logged([sys.executable, "-c", "import no_such_module"], log)
    assert err.value.log == log
    assert "Traceback" in log.read_text(encoding="utf-8")


def test_a_second_rehearsal_on_the_same_cache_stops_at_once_naming_the_first(tmp_path: Path) -> None:
    """A rehearsal clears the cache's logs and rebuilds a venv it finds unfinished: one at a time."""
    cache = tmp_path / "rehearsal"
    with holding(cache):
        (cache / "venv-in-progress").mkdir()
        with pytest.raises(RehearsalError) as refused, holding(cache):
            pass
        assert (refused.value.step, str(refused.value)) == (
            "cache",
            f"{cache} is in use by another rehearsal (pid {os.getpid()}); nothing was changed: run again once it "
            "has ended",
        )
        assert (cache / "venv-in-progress").is_dir()
    with holding(cache):  # released with the first
        pass
