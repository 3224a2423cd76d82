"""The rehearsal's steps in order (stage the build, the venvs, the input, moto, the probe, dedup, shred, the
planner; then the probe, dedup and shred again on a standalone cluster, their outputs compared), and its command
line."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

from cdk.artifact_layout import BUILD_FILES, DEPS_ARCHIVE, DEPS_DIR, IGLU_RESOLVER, PACKAGE_ZIP
from cdk.components.input_planner import RUNTIME as LAMBDA_RUNTIME
from cdk.config import EMR_SPARK_VERSIONS, EnvConfig, load_config
from scripts import rehearsal as rehearsal_package
from scripts.rehearsal.checks import (
    check_dedup,
    check_origins,
    check_plan,
    check_same_counts,
    check_same_outputs,
    check_shred,
    marked,
    planner_invocation_source,
    probe_job_source,
    read_summary,
)
from scripts.rehearsal.cluster import EXECUTOR_SIZE, WORKER_CORES, WORKERS, standalone_cluster
from scripts.rehearsal.deployment import RUN_ID, Deployment, deploy_to_moto, render_deployment
from scripts.rehearsal.environment import (
    CACHE_DIR,
    ROOT,
    aws_environment,
    clean_environment,
    ensure_venv,
    job_environment,
    pinned,
    venv_python,
)
from scripts.rehearsal.moto_server import moto_server, reset
from scripts.rehearsal.steps import RehearsalError, Steps, holding, run_logged
from scripts.rehearsal.workspace import Target, Workspace, local_argument, submit_command


@dataclass(frozen=True)
class Options:
    """The command line's options."""

    env: str
    build: Path
    cache: Path
    python: str
    """The EMR Python's name on PATH (`pythonX.Y`)."""
    events: int
    keep: bool


@dataclass
class Rehearsal:
    """One rehearsal: its options, the rendered deployment, the workspace, the venvs, moto's endpoint.

    Each step method runs as a named step of `steps`, and raises RehearsalError (naming the step) if it fails.
    """

    args: Options
    config: EnvConfig
    steps: Steps
    workspace: Workspace
    deployment: Deployment
    endpoint: str = ""
    target: Target = field(default_factory=Target)
    """Where the job runs are submitted: local[2], or the standalone cluster."""
    where: str = ""
    """What the steps' names end with (` on the cluster`)."""
    emr_venv: Path = Path()
    lambda_venv: Path = Path()
    lines: int = 0
    """Lines of the generated input."""

    def option(self, job: str, name: str) -> str:
        """The value of a job's option as the state machine passes it, data buckets as local folders.

        Raises:
            ValueError: the job's arguments have no option `name`.
        """
        arguments = self.deployment.arguments[job]
        return local_argument(arguments[arguments.index(name) + 1], self.deployment, self.workspace)

    def venvs(self) -> None:
        """The EMR venv (the release label's pyspark) and the Lambda venv (boto3 as requirements.txt pins it)."""
        pyspark = f"pyspark=={EMR_SPARK_VERSIONS[self.config.emr.release_label]}"
        self.emr_venv = self._venv("emr venv", self.args.python, [pyspark])
        runtime = LAMBDA_RUNTIME.name
        python = runtime if shutil.which(runtime) else self.args.python
        self.lambda_venv = self._venv("lambda venv", python, pinned(ROOT / "requirements.txt", ("boto3", "botocore")))

    def _venv(self, name: str, python_name: str, requirements: list[str]) -> Path:
        """Step `name`: the cached venv of `python_name` holding `requirements` (built if not cached); its folder."""
        with self.steps.step(name) as notes:
            python, version = venv_python(python_name)
            folder = self.args.cache / f"{name.split()[0]}-py{version}-{requirements[0].replace('==', '-')}"
            reused = ensure_venv(folder, python, requirements, self.steps.log(name))
            notes.append(f"{python_name}, {' '.join(requirements)}, {'cached' if reused else 'built'}: {folder}")
            if name.startswith("lambda") and python_name != LAMBDA_RUNTIME.name:
                notes.append(f"{python_name} stands in for the runtime's {LAMBDA_RUNTIME.name}, not on PATH here")
            return folder

    def generate(self) -> None:
        """The input, generated into the folder standing for the input prefix (data, made with the dev venv)."""
        with self.steps.step("generate input") as notes:
            folder = Path(self.option("dedup", "--input"))
            command = [sys.executable, "-m", "jobs", "generate", "--output", str(folder), "--events"]
            run_logged([*command, str(self.args.events), "--batches", "1", "--seed", "7"],
                       self.steps.log("generate input"), cwd=ROOT)  # fmt: skip
            self.lines = count_lines(folder)
            notes.append(f"{self.lines} lines in {folder}")

    def submit(self, job: str, log: Path, script: Path | None = None) -> str:
        """spark-submit one job run (or `script`, submitted the same way) from the driver's working dir; its output.

        Raises:
            RehearsalError: the command line or environment cannot be made local, or spark-submit failed.
        """
        command, driver_env = submit_command(self.deployment, self.workspace, self.emr_venv, job, script, self.target)
        env = job_environment(self.emr_venv, driver_env, self.endpoint, self.deployment.region, self.args.cache)
        return run_logged(command, log, env=env, cwd=self.workspace.driver)

    def deploy(self, endpoint: str) -> None:
        """What deploying puts in AWS, into the moto server at `endpoint` (which this process's boto3 reaches too)."""
        self.endpoint = endpoint
        os.environ.update(aws_environment(endpoint, self.config.region))
        with self.steps.step("deploy to moto" + self.where) as notes:
            files = deploy_to_moto(self.deployment, self.args.build)
            notes.append(f"{files} files under the artifacts version, manifest {self.deployment.manifest}")

    def probe(self) -> None:
        """A probe job submitted as dedup is: where its driver and an executor import from (`check_origins`)."""
        name = "probe imports" + self.where
        with self.steps.step(name) as notes:
            script = self.workspace.root / "probe" / "probe.py"
            script.parent.mkdir(exist_ok=True)
            script.write_text(probe_job_source(), encoding="utf-8")
            log = self.steps.log(name)
            probed = marked(self.submit("dedup", log, script), log)
            with tarfile.open(self.args.build / DEPS_ARCHIVE) as deps:
                archive = sorted({member.name.split("/")[0] for member in deps.getmembers()})
            executors = self.workspace.cluster if self.where else None
            notes += check_origins(probed, self.emr_venv, archive, self.args.cache, executors)

    def dedup(self) -> int:
        """Dedup as the state machine submits it; its good lines."""
        with self.steps.step("dedup" + self.where) as notes:
            self.submit("dedup", self.steps.log("dedup" + self.where))
            summary = read_summary(Path(self.option("dedup", "--output")) / f"run={RUN_ID}")
            notes.append(
                check_dedup(
                    summary, self.lines, local_argument(self.deployment.manifest, self.deployment, self.workspace)
                )
            )
            good: int = summary["counts"]["good"]
            return good

    def shred(self, good: int) -> None:
        """Shred as the state machine submits it, over dedup's `good` lines (`check_shred`)."""
        with self.steps.step("shred" + self.where) as notes:
            self.submit("shred", self.steps.log("shred" + self.where))
            run_folder = Path(self.option("shred", "--output")) / f"run={RUN_ID}"
            resolver = self.deployment.artifacts_prefix + IGLU_RESOLVER
            notes.append(check_shred(read_summary(run_folder), good, resolver, run_folder))

    def planner(self) -> None:
        """The handler imported from the unzipped package alone, called with the state machine's event, against
        moto holding one input file."""
        import boto3

        with self.steps.step("planner") as notes:
            event, task = self.deployment.planner_event, self.workspace.task
            bucket, _, prefix = event["input"].removeprefix("s3://").partition("/")
            source = min(path for path in Path(self.option("dedup", "--input")).rglob("*") if path.is_file())
            boto3.client("s3").put_object(Bucket=bucket, Key=prefix + source.name, Body=source.read_bytes())
            with zipfile.ZipFile(self.workspace.artifacts / PACKAGE_ZIP) as package:
                package.extractall(task)
            script = self.workspace.root / "lambda" / "invoke.py"
            script.parent.mkdir()
            script.write_text(planner_invocation_source(), encoding="utf-8")
            runtime = {"PYTHONPATH": str(task), "LAMBDA_TASK_ROOT": str(task)}
            aws = aws_environment(self.endpoint, self.deployment.region)
            env = clean_environment(self.lambda_venv, {**runtime, **aws}, self.args.cache)
            command = [str(self.lambda_venv / "bin" / "python"), str(script), json.dumps(event)]
            log = self.steps.log("planner")
            answer = marked(run_logged(command, log, env=env, cwd=script.parent), log)
            notes.append(check_plan(answer, task, source.stat().st_size, self.args.cache))


def count_lines(folder: Path) -> int:
    """The lines of every file under `folder` (the generated input)."""
    return sum(len(path.read_bytes().splitlines()) for path in folder.rglob("*") if path.is_file())


def stage(args: Options, config: EnvConfig, steps: Steps, workspace: Workspace) -> Deployment:
    """Render the deployment; copy the build as EMR fetches it, and unpack its archive in the driver's dir.

    Raises:
        RehearsalError: the build is incomplete, or rendering or copying failed.
    """
    build = args.build
    with steps.step("artifacts") as notes:
        missing = [name for name in BUILD_FILES if not (build / name).is_file()]
        if missing:
            raise RehearsalError(f"{build}: no {', '.join(missing)}; expected a build (run `make package`)")
        deployment = render_deployment(config, build)
        shutil.copytree(build, workspace.artifacts)
        deps = workspace.driver / DEPS_DIR
        deps.mkdir(parents=True)
        with tarfile.open(build / DEPS_ARCHIVE) as archive:
            archive.extractall(deps, filter="data")
        notes.append(f"{deployment.artifacts_prefix}, {sum(1 for _ in deps.rglob('*.py'))} .py files in ./{DEPS_DIR}")
        return deployment


def rehearse(args: Options, config: EnvConfig, workspace: Workspace) -> None:
    """Every step; raises RehearsalError at the first that fails."""
    steps = Steps(args.cache / "logs")
    shutil.rmtree(steps.logs, ignore_errors=True)
    rehearsal = Rehearsal(args, config, steps, workspace, stage(args, config, steps, workspace))
    rehearsal.venvs()
    rehearsal.generate()
    with moto_server() as endpoint:
        rehearsal.deploy(endpoint)
        rehearsal.probe()
        rehearsal.shred(rehearsal.dedup())
        rehearsal.planner()
        reset(endpoint)  # a fresh deployment for the cluster run, the manifest empty again
        rehearse_on_cluster(rehearsal, endpoint)


def rehearse_on_cluster(rehearsal: Rehearsal, endpoint: str) -> None:
    """The probe, dedup and shred again, on a standalone cluster and deployed anew to moto at `endpoint`, after
    local[2]'s outputs are set aside; then the outputs and summary counts compared with local[2]'s."""
    steps, workspace, venv = rehearsal.steps, rehearsal.workspace, rehearsal.emr_venv
    outputs = set_aside(rehearsal, workspace.local_outputs)
    with ExitStack() as stack:
        with steps.step("start the cluster") as notes:
            # The daemons' environment holds no AWS settings: executors get them from the job, as on EMR.
            env = clean_environment(venv, {}, rehearsal.args.cache)
            master = stack.enter_context(standalone_cluster(venv, workspace.cluster, env))
            notes.append(f"{master}, {WORKERS} workers of {WORKER_CORES} core in {workspace.cluster}")
        cluster = replace(rehearsal, where=" on the cluster")
        cluster.deploy(endpoint)
        aws = aws_environment(cluster.endpoint, cluster.deployment.region)
        executor_env = {f"spark.executorEnv.{key}": value for key, value in aws.items()}
        cluster.target = Target(master, {**EXECUTOR_SIZE, **executor_env})
        cluster.probe()
        cluster.shred(cluster.dedup())
        compare_with_local(cluster, "cluster against local[2]", ("dedup", "shred"), outputs)
        dedup_against_the_lake(cluster)


def dedup_against_the_lake(cluster: Rehearsal) -> None:
    """Dedup once more on the cluster, as the state machine submits it when `manifest.backend` is lake (the lake
    made by this run in the manifest bucket's folder), the cluster's first outputs set aside; its outputs and counts
    compared with local[2]'s dedup against DynamoDB: both manifests start empty, so the decisions are the same."""
    config = replace(cluster.config, manifest=replace(cluster.config.manifest, backend="lake"))
    with cluster.steps.step("render the lake's deployment") as notes:
        deployment = render_deployment(config, cluster.args.build)
        notes.append(f"dedup --manifest {deployment.manifest}")
    set_aside(cluster, cluster.workspace.root / "cluster-outputs")
    lake = replace(cluster, config=config, deployment=deployment, where=" against the lake on the cluster")
    lake.dedup()
    run_folder = Path(lake.option("dedup", "--output")) / f"run={RUN_ID}"
    local = lake.workspace.local_outputs / run_folder.relative_to(lake.workspace.buckets)
    compare_with_local(lake, "the lake's dedup against local[2]", ("dedup",), [(local, run_folder)])


def compare_with_local(cluster: Rehearsal, name: str, jobs: tuple[str, ...], pairs: list[tuple[Path, Path]]) -> None:
    """Step `name`: the summary counts of `jobs` and the outputs of each (local[2]'s, the cluster's) folder pair
    are the same on the cluster as in local[2] (`check_same_counts`, `check_same_outputs`)."""
    workspace = cluster.workspace
    with cluster.steps.step(name) as notes:
        for job in jobs:
            run_folder = Path(cluster.option(job, "--output")) / f"run={RUN_ID}"
            local = workspace.local_outputs / run_folder.relative_to(workspace.buckets)
            check_same_counts(job, read_summary(local), read_summary(run_folder))
        notes += [check_same_outputs(expected, given) for expected, given in pairs]


def set_aside(rehearsal: Rehearsal, folder: Path) -> list[tuple[Path, Path]]:
    """The output folders written so far (every data bucket's but the input's) moved under `folder`, so that
    the next run writes to the same paths; (the moved, the next run's) folder pairs."""
    workspace = rehearsal.workspace
    input_bucket = Path(rehearsal.option("dedup", "--input")).relative_to(workspace.buckets).parts[0]
    pairs = []
    for bucket in rehearsal.deployment.data_buckets:
        written = workspace.buckets / bucket
        if bucket != input_bucket and written.is_dir():
            folder.mkdir(exist_ok=True)
            pairs.append((written.rename(folder / bucket), written))
    return pairs


def parse_options(argv: list[str] | None) -> tuple[Options, EnvConfig]:
    """The command line's options, and the config of the env they name.

    Raises:
        SystemExit: the command line is wrong (argparse's usage message), or asked for `--help`.
        EnvConfigError: the env is unknown, or its config file is missing or invalid.
    """
    description = (rehearsal_package.__doc__ or "").partition("\n")[0]
    parser = argparse.ArgumentParser(prog="python -m scripts.rehearse_artifacts", description=description)
    parser.add_argument("--env", default="dev", help="configs/<env>.json: release label, job settings, job config")
    parser.add_argument("--build", type=Path, default=ROOT / "dist" / "package", help="default: dist/package")
    parser.add_argument("--cache", type=Path, default=CACHE_DIR, help="the venvs and logs; default: dist/rehearsal")
    parser.add_argument("--python", help="the EMR Python's name on PATH; default: emr.python's (python3.11)")
    parser.add_argument("--events", type=int, default=2000, help="input lines to generate; default: 2000")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (kept anyway when a step fails)")
    given = parser.parse_args(argv)
    config = load_config(given.env)
    args = Options(
        env=given.env,
        build=given.build.resolve(),
        cache=given.cache.resolve(),
        python=given.python or Path(config.emr.python).name,
        events=given.events,
        keep=given.keep,
    )
    return args, config


def main(argv: list[str] | None = None) -> int:
    """Rehearse with the command line's options; 0 when every step passed, else 1 (the failed step said on stderr,
    the work dir kept).

    Raises:
        SystemExit, EnvConfigError: as `parse_options` does.
    """
    args, config = parse_options(argv)
    started = time.monotonic()
    workspace = Workspace(Path(tempfile.mkdtemp(prefix="winnow-rehearsal-")))
    pyspark = EMR_SPARK_VERSIONS[config.emr.release_label]
    print(f"rehearse: env {args.env}, {config.emr.release_label} (pyspark {pyspark}), work dir {workspace.root}")
    try:
        with holding(args.cache):
            rehearse(args, config, workspace)
    except RehearsalError as err:
        log = f"; log: {err.log}" if err.log else ""
        print(f"rehearse: FAILED {err.step}: {err}{log} (work dir kept: {workspace.root})", file=sys.stderr)
        return 1
    if not args.keep:
        shutil.rmtree(workspace.root, ignore_errors=True)
    print(f"rehearse: all steps ok in {time.monotonic() - started:.0f} s", flush=True)
    return 0
