"""The temp dir a rehearsal works in, and the deployment's job runs made local in it: the same spark-submit
parameters and arguments, with S3 URIs as local copies and folders."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from scripts.rehearsal.deployment import Deployment
from scripts.rehearsal.steps import RehearsalError

MASTER = "local[2]"
DRIVER_ENV = "spark.emr-serverless.driverEnv."
"""EMR Serverless sets the driver's environment from these settings; spark-submit here knows nothing of them."""


@dataclass(frozen=True)
class Workspace:
    """The temp dir (outside the checkout) a rehearsal works in."""

    root: Path

    @property
    def artifacts(self) -> Path:
        """The build, as EMR fetches it from the artifacts version."""
        return self.root / "artifacts"

    @property
    def driver(self) -> Path:
        """The driver's working dir: the dependencies archive unpacked in it (`./deps`), as on EMR."""
        return self.root / "driver"

    @property
    def buckets(self) -> Path:
        """The data buckets as folders, one per bucket name."""
        return self.root / "s3"

    @property
    def cluster(self) -> Path:
        """The standalone cluster's folders (the master's, each worker's and its executors' work dir)."""
        return self.root / "cluster"

    @property
    def local_outputs(self) -> Path:
        """local[2]'s output buckets, set aside before the cluster run writes to the same paths."""
        return self.root / "local-outputs"

    @property
    def task(self) -> Path:
        """The planner function's code, unzipped (Lambda's /var/task)."""
        return self.root / "lambda-task"


def local_resource(value: str, deployment: Deployment, workspace: Workspace) -> str:
    """A spark-submit resource (a comma-separated list of URIs, each maybe with a `#name`) with the artifacts'
    S3 URIs as the local copy of the build."""
    parts = []
    for uri in value.split(","):
        base, hash_, name = uri.partition("#")
        if base.startswith(deployment.artifacts_prefix):
            base = str(workspace.artifacts / base.removeprefix(deployment.artifacts_prefix))
        parts.append(base + hash_ + name)
    return ",".join(parts)


def local_argument(value: str, deployment: Deployment, workspace: Workspace) -> str:
    """A job argument with the data buckets' URIs as local folders (a `lake:` manifest too); anything else, the
    config and the DynamoDB manifest among it, as it is."""
    lake, uri = value.startswith("lake:"), value.removeprefix("lake:")
    for bucket in deployment.data_buckets:
        if uri.startswith(f"s3://{bucket}/") or uri == f"s3://{bucket}":
            uri = str(workspace.buckets / bucket / uri.removeprefix(f"s3://{bucket}").lstrip("/"))
    return f"lake:{uri}" if lake else uri


@dataclass(frozen=True)
class Target:
    """Where a job run is submitted: the master, and the settings replacing or added to the deployment's (an
    executor size a local worker can give, the AWS settings EMR gives executors)."""

    master: str = MASTER
    settings: Mapping[str, str] | None = None


def submit_command(
    deployment: Deployment,
    workspace: Workspace,
    venv: Path,
    job: str,
    script: Path | None = None,
    target: Target = Target(),
) -> tuple[list[str], dict[str, str]]:
    """The spark-submit command line of one job run on `target`, and the driver's environment settings; with
    `script`, that script instead of the entry point and the job's arguments, submitted the same way.

    Raises:
        RehearsalError: the parameters are not `--option value` pairs, or name an S3 URI outside the artifacts.
    """
    tokens = shlex.split(deployment.spark_submit_parameters)
    if len(tokens) % 2 or not all(flag.startswith("--") for flag in tokens[::2]):
        raise RehearsalError(
            f"SparkSubmitParameters: given {deployment.spark_submit_parameters!r}; expected '--option value' pairs"
        )
    python = str(venv / "bin" / "python")
    replaced = dict(target.settings or {})
    options: list[str] = []
    driver_env: dict[str, str] = {}
    for flag, value in zip(tokens[::2], tokens[1::2], strict=True):
        if flag != "--conf":
            options += [flag, local_resource(value, deployment, workspace)]
            continue
        key, _, setting = value.partition("=")
        setting = python if setting == deployment.python else local_resource(setting, deployment, workspace)
        setting = replaced.pop(key, setting)
        if key.startswith(DRIVER_ENV):
            driver_env[key.removeprefix(DRIVER_ENV)] = setting
        else:
            options += [flag, f"{key}={setting}"]
    options += [part for key, setting in replaced.items() for part in ("--conf", f"{key}={setting}")]
    remote = [option for option in options if "s3://" in option]
    if remote:
        raise RehearsalError(f"spark-submit options {remote}: S3 URIs outside {deployment.artifacts_prefix}; "
                             "expected the artifacts version only (there is no S3 filesystem here)")  # fmt: skip
    if script is not None:
        application = [str(script)]
    else:
        entrypoint = local_resource(deployment.entrypoint, deployment, workspace)
        application = [entrypoint, *(local_argument(arg, deployment, workspace) for arg in deployment.arguments[job])]
    return [str(venv / "bin" / "spark-submit"), "--master", target.master, *options, *application], driver_env
