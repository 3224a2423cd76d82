"""`make rehearse` (scripts/rehearse_artifacts.py), without building a venv: what it submits is what the synthesized
state machine submits, its local command lines change only what a local machine cannot have, and its environments
hold no path of the checkout. The rehearsal itself runs in CI (`make rehearse`)."""

from __future__ import annotations

import gzip
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from cdk.artifact_layout import DEPS_ARCHIVE, DEPS_DIR, ENTRYPOINT, PACKAGE_ZIP
from scripts.rehearsal.checks import AWS_SETTINGS, check_origins, check_same_outputs
from scripts.rehearsal.cluster import EXECUTOR_SIZE, daemon_environment, daemons
from scripts.rehearsal.deployment import RUN_ID, Deployment, evaluate, render_deployment
from scripts.rehearsal.environment import ROOT, clean_environment, in_checkout, job_environment
from scripts.rehearsal.steps import RehearsalError, holding, run_logged
from scripts.rehearsal.workspace import DRIVER_ENV, Target, Workspace, submit_command
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
        "aws": AWS_SETTINGS,
    }
    assert check_origins({"driver": side, "executor": side}, venv, ["boto3"])
    leaked = {**side, "sys_path": [*side["sys_path"], str(ROOT)]}
    with pytest.raises(RehearsalError, match=r"executor: given \{'sys.path entries of the checkout'"):
        check_origins({"driver": side, "executor": leaked}, venv, ["boto3"])
    unset = {**side, "aws": ["AWS_REGION"]}  # an executor the job gave no credentials nor endpoint
    with pytest.raises(RehearsalError, match=r"executor: given \{'AWS settings': \['AWS_REGION'\]\}"):
        check_origins({"driver": side, "executor": unset}, venv, ["boto3"])


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


def test_the_cluster_runs_a_master_and_two_workers_on_loopback_each_in_its_own_folder(tmp_path: Path) -> None:
    venv, root = tmp_path / "venv", tmp_path / "cluster"
    ports = {"master": 7001, "master-ui": 7002, "worker-1-ui": 7003, "worker-2-ui": 7004}
    spark_class = str(venv / "bin" / "spark-class")
    found = {daemon.name: (daemon.command, daemon.folder) for daemon in daemons(venv, root, ports)}
    assert found == {
        "master": ([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "7001",
                    "--webui-port", "7002"], root / "master"),
        **{f"worker-{n}": ([spark_class, "org.apache.spark.deploy.worker.Worker", "spark://127.0.0.1:7001", "--host",
                            "127.0.0.1", "--cores", "1", "--memory", "1g", "--work-dir", str(root / f"worker-{n}" / "work"),
                            "--webui-port", str(7002 + n)], root / f"worker-{n}") for n in (1, 2)},
    }  # fmt: skip
    env = daemon_environment(clean_environment(venv, {}), root / "worker-1")
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert not [key for key in env if key.startswith("AWS_")]  # executors get them from the job, as on EMR


def test_a_job_run_on_the_cluster_gives_executors_the_aws_settings_and_a_size_a_worker_has(
    deployment: Deployment, tmp_path: Path
) -> None:
    workspace, venv = Workspace(tmp_path / "work"), tmp_path / "venv"
    local, _ = submit_command(deployment, workspace, venv, "dedup")
    aws = {"spark.executorEnv.AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "spark.executorEnv.AWS_ACCESS_KEY_ID": "x"}
    target = Target("spark://127.0.0.1:7001", {**EXECUTOR_SIZE, **aws})
    command, _ = submit_command(deployment, workspace, venv, "dedup", target=target)
    assert command[1:3] == ["--master", "spark://127.0.0.1:7001"]
    settings = dict(command[i + 1].split("=", 1) for i, token in enumerate(command) if token == "--conf")
    deployed = dict(command[i + 1].split("=", 1) for i, token in enumerate(local) if token == "--conf")
    assert settings == {**deployed, **EXECUTOR_SIZE, **aws}  # each key once: the deployment's size replaced
    assert command[-len(deployment.arguments["dedup"]) :] == local[-len(deployment.arguments["dedup"]) :]


def test_the_cluster_outputs_must_hold_local_outputs_lines_folder_by_folder(tmp_path: Path) -> None:
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    for root, parts in ((local, [b"a\nb\n", b"c\n"]), (cluster, [b"c\nb\n", b"a\n"])):
        (root / "run=1" / "good").mkdir(parents=True)
        for n, part in enumerate(parts):
            (root / "run=1" / "good" / f"part-{n}.gz").write_bytes(gzip.compress(part))
        (root / "run=1" / "summary.json").write_text(str(root), encoding="utf-8")  # differs: not compared
    assert check_same_outputs(local, cluster) == "1 output folders, 3 lines, the same as local[2]'s"
    (cluster / "run=1" / "good" / "part-1.gz").write_bytes(gzip.compress(b"a\na\n"))
    with pytest.raises(RehearsalError, match=r"^output folder run=1/good: 4 lines on the cluster against 3 in local"):
        check_same_outputs(local, cluster)
