"""Where the artifacts run: fresh venvs holding only what a runtime provides, and `env -i` style environments
that hold no path of the checkout."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from scripts.rehearsal.steps import RehearsalError, run_logged

ROOT = Path(__file__).resolve().parents[2]
"""The checkout."""
CACHE_DIR = ROOT / "dist" / "rehearsal"
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "rehearsal", "AWS_SECRET_ACCESS_KEY": "rehearsal"}
VENV_BASE = {"pip", "setuptools", "wheel"}
"""What `python -m venv` itself may put in a venv."""


# ----------------------------------------------------------------------------------------------------------------
# Clean environments


def in_checkout(path: str, cache: Path = CACHE_DIR) -> bool:
    """True for an absolute path of the checkout (its sources, the dev venv, …), except under the rehearsal's
    cache: the cached venvs hold only what the runtimes provide. A relative path is no path of the checkout (it is
    relative to the job's working dir)."""
    if not path.startswith("/"):
        return False
    cache = cache.resolve()
    # As given (a venv's bin/python is a link out of it) and with links resolved (a link into the checkout).
    return any(
        candidate.is_relative_to(ROOT) and not candidate.is_relative_to(cache)
        for candidate in (Path(os.path.normpath(path)), Path(path).resolve())
    )


def clean_environment(venv: Path, extra: Mapping[str, str], cache: Path = CACHE_DIR) -> dict[str, str]:
    """An `env -i` style environment: PATH (the venv's bin first, then the current PATH's absolute folders outside
    the checkout), HOME, LANG, JAVA_HOME if set, then `extra`.

    Raises:
        RehearsalError: a value names a path of the checkout (other than under `cache`).
    """
    path = [str(venv / "bin")] + [
        entry for entry in os.environ.get("PATH", os.defpath).split(os.pathsep)
        if entry.startswith("/") and not in_checkout(entry, cache)
    ]  # fmt: skip
    env = {"PATH": os.pathsep.join(path), "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    env.update(extra)
    leaked = sorted(key for key, value in env.items() for part in value.split(os.pathsep) if in_checkout(part, cache))
    if leaked:
        raise RehearsalError(f"environment {leaked}: given paths of the checkout {ROOT}; expected none")
    return env


def job_environment(
    venv: Path, driver_env: Mapping[str, str], endpoint: str, region: str, cache: Path = CACHE_DIR
) -> dict[str, str]:
    """A job run's driver environment: the clean one, SPARK_LOCAL_IP, PYSPARK_PYTHON (the venv's Python), the
    deployment's driver settings, then fake credentials, the region and moto's endpoint.

    Raises:
        RehearsalError: a driver setting names a path of the checkout.
    """
    spark = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": str(venv / "bin" / "python")}
    return clean_environment(venv, {**spark, **driver_env, **aws_environment(endpoint, region)}, cache)


def aws_environment(endpoint: str, region: str) -> dict[str, str]:
    """Fake credentials, the region and moto's endpoint (boto3 and the jobs' DynamoDB manifest read it)."""
    return {**FAKE_CREDENTIALS, "AWS_REGION": region, "AWS_DEFAULT_REGION": region, "AWS_ENDPOINT_URL": endpoint}


# ----------------------------------------------------------------------------------------------------------------
# Fresh venvs

_CLOSURE = """
import importlib.metadata as md, json, re, sys
def key(text): return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", text)[0]).lower()
todo, seen = [key(r) for r in sys.argv[1:]], set()
while todo:
    name = todo.pop()
    if name not in seen:
        seen.add(name)
        todo += [key(r) for r in md.requires(name) or [] if "extra ==" not in r]
print(json.dumps({"required": sorted(seen), "installed": sorted(key(d.metadata["Name"]) for d in md.distributions())}))
"""
"""Run in a venv with the requirements as arguments: what they need (their closure without extras) and what is
installed."""


def venv_python(name: str) -> tuple[str, str]:
    """The interpreter named `name` (e.g. python3.11) on PATH, and its `major.minor`.

    Raises:
        RehearsalError: there is none.
    """
    found = shutil.which(name)
    match = re.fullmatch(r"python(\d+\.\d+)", name)
    if found is None or match is None:
        raise RehearsalError(f"python {name!r}: not found on PATH; expected an interpreter named pythonX.Y")
    return found, match[1]


def ensure_venv(folder: Path, python: str, requirements: list[str], log: Path) -> bool:
    """A venv at `folder` holding `requirements` and what they need, nothing else: reused when an earlier rehearsal
    completed it (True), else built anew (False).

    Raises:
        RehearsalError: building failed, or the venv holds a distribution the requirements do not need.
    """
    marker = folder / ".rehearsal-requirements"
    reused = marker.is_file() and marker.read_text(encoding="utf-8").split() == requirements
    if not reused:
        shutil.rmtree(folder, ignore_errors=True)
        run_logged([python, "-m", "venv", str(folder)], log)
        pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--no-input"]
        run_logged([*pip, *requirements], log)
        marker.write_text("\n".join(requirements) + "\n", encoding="utf-8")
    found = json.loads(run_logged([str(folder / "bin" / "python"), "-I", "-c", _CLOSURE, *requirements], log))
    extra = sorted(set(found["installed"]) - set(found["required"]) - VENV_BASE)
    if extra:
        raise RehearsalError(f"venv {folder}: holds {extra} beyond {requirements} and what they need; expected "
                             f"nothing else (delete the folder to rebuild it)", log)  # fmt: skip
    return reused


def pinned(requirements: Path, names: Iterable[str]) -> list[str]:
    """The `name==version` lines of a requirements file for `names`.

    Raises:
        RehearsalError: one is not pinned there.
    """
    lines = [line.split("#")[0].strip() for line in requirements.read_text(encoding="utf-8").splitlines()]
    pins = {line.split("==")[0].lower(): line for line in lines if "==" in line}
    missing = [name for name in names if name not in pins]
    if missing:
        raise RehearsalError(f"{requirements}: no `name==version` line for {missing}; expected a pin of each")
    return [pins[name] for name in names]
