"""Synthesize every environment once per test session (with cdk-nag), from a test build of the artifacts."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
import cdk_nag
from aws_cdk.assertions import Template

from cdk.config import ENVIRONMENTS, EnvConfig, load_config
from cdk.pipeline import Pipeline, build_pipeline, cdk_json_context
from scripts.package_jobs import build


@dataclass(frozen=True)
class Synthesized:
    """One environment, synthesized: its config, stacks, templates and the cdk-nag outcome."""

    config: EnvConfig
    pipeline: Pipeline
    outdir: Path
    nag_error: str | None
    """The synth error when cdk-nag (or another validation) failed, else None."""

    def template(self, part: str) -> Template:
        """The synthesized template of the Storage, Processing or Orchestration stack."""
        path = self.outdir / f"Winnow-{self.config.env}-{part}.template.json"
        return Template.from_json(json.loads(path.read_text(encoding="utf-8")))

    def validation_report(self) -> dict[str, object]:
        report: dict[str, object] = json.loads((self.outdir / "validation-report.json").read_text(encoding="utf-8"))
        return report


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real package zip and entry point; an empty dependencies archive (no network in tests)."""
    out = tmp_path_factory.mktemp("package")
    build(out, requirements=None)
    return out


def synthesize(config: EnvConfig, build_dir: Path, outdir: Path) -> Synthesized:
    """Build the env's stacks as app.py does (no account: as in CI), with cdk-nag, and synthesize."""
    app = cdk.App(context=cdk_json_context(), outdir=str(outdir))
    pipeline = build_pipeline(app, config, build_dir)
    cdk.Validations.of(app).add_plugins(cdk_nag.AwsSolutionsChecks(app, verbose=False))
    try:
        app.synth()
        error = None
    except RuntimeError as err:  # ValidationFailed: the templates are written all the same
        error = str(err)
    return Synthesized(config, pipeline, outdir, error)


@pytest.fixture(scope="session")
def synthesized(build_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Synthesized]]:
    """Every env of `ENVIRONMENTS`, synthesized once."""
    yield {env: synthesize(load_config(env), build_dir, tmp_path_factory.mktemp(f"cdk-{env}")) for env in ENVIRONMENTS}


@pytest.fixture(scope="session")
def dev(synthesized: dict[str, Synthesized]) -> Synthesized:
    return synthesized["dev"]


@pytest.fixture(scope="session")
def prod(synthesized: dict[str, Synthesized]) -> Synthesized:
    return synthesized["prod"]
