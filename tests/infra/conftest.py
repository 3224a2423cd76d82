"""Synthesize every environment once per test session (with cdk-nag), from a test build of the artifacts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

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


EXISTING_VPC = {
    "subnet_ids": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"],
    "security_group_ids": ["sg-0123456789abcdef0"],
}
"""`emr.vpc` of the `dev_vpc` variant: an existing VPC's subnets and security group."""


def dev_variant(build_dir: Path, outdir: Path, **emr: Any) -> Synthesized:
    """dev with `emr` keys changed, synthesized (with cdk-nag)."""
    data = json.loads((CONFIG_DIR / "dev.json").read_text(encoding="utf-8"))
    data["emr"].update(emr)
    return synthesize(config_from_data("dev", data), build_dir, outdir)


@pytest.fixture(scope="session")
def dev_vpc(build_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """dev with `emr.vpc` naming existing subnets and a security group (the application's NetworkConfiguration)."""
    return dev_variant(build_dir, tmp_path_factory.mktemp("cdk-dev-vpc"), vpc=EXISTING_VPC)


@pytest.fixture(scope="session")
def dev_new_vpc(build_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """dev with `emr.vpc` `create` (the JobNetwork: VPC, gateway endpoints, flow logs, security group)."""
    return dev_variant(build_dir, tmp_path_factory.mktemp("cdk-dev-new-vpc"), vpc={"create": True})
