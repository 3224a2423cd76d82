"""Synthesize every environment once per test session (with cdk-nag), from a test build of the artifacts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from cdk.config import CONFIG_DIR, config_from_data, load_config
from scripts.package_jobs import build
from tests.infra.helpers import Environments, Synthesized, synthesize


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real package zip and entry point; an empty dependencies archive (no network in tests)."""
    out = tmp_path_factory.mktemp("package")
    build(out, requirements=None)
    return out


@pytest.fixture(scope="session")
def synthesized(build_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Environments:
    return Environments(lambda env: synthesize(load_config(env), build_dir, tmp_path_factory.mktemp(f"cdk-{env}")))


@pytest.fixture(scope="session")
def dev(synthesized: dict[str, Synthesized]) -> Synthesized:
    return synthesized["dev"]


@pytest.fixture(scope="session")
def prod(synthesized: dict[str, Synthesized]) -> Synthesized:
    return synthesized["prod"]


@pytest.fixture(scope="session")
def dev_lake(build_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """dev with `manifest.backend` lake (the one synth beyond the envs': the lake manifest's bucket, job role,
    `--manifest`, dashboard)."""
    data = json.loads((CONFIG_DIR / "dev.json").read_text(encoding="utf-8"))
    data["manifest"]["backend"] = "lake"
    return synthesize(config_from_data("dev", data), build_dir, tmp_path_factory.mktemp("cdk-dev-lake"))
