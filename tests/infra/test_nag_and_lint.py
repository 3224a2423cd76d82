"""cdk-nag AwsSolutions: no unacknowledged finding in any env (or the dev variants); cfn-lint: no error in any
template."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import cdk_nag
import pytest
from aws_cdk import aws_s3 as s3

from cdk.nag import acknowledge
from tests.infra.helpers import Synthesized, synthesized_variant

VARIANTS = ["dev", "prod", "dev-lake", "dev-vpc", "dev-new-vpc"]
"""Every env; dev with the lake manifest (its bucket and job role statements), and with `emr.vpc` (existing
subnets; a created VPC with its endpoints, flow logs and security group)."""


@pytest.fixture
def variant(request: pytest.FixtureRequest) -> Synthesized:
    return synthesized_variant(request, request.param)


@pytest.mark.parametrize("variant", VARIANTS, indirect=True)
def test_no_unacknowledged_aws_solutions_finding(variant: Synthesized) -> None:
    synth = variant
    report = synth.validation_report()
    violations = [v for plugin in report["pluginReports"] for v in plugin["violations"]]  # type: ignore[attr-defined]
    assert (synth.nag_error, violations) == (None, [])


def test_the_nag_harness_reports_a_finding_and_an_exact_acknowledgement_clears_only_it(tmp_path: Path) -> None:
    """The same set-up as the real synth catches a plain bucket (so a pass above means something)."""
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Probe")
    bucket = s3.Bucket(stack, "Plain")
    acknowledge(bucket, "S1", "probe: access logs deliberately off")
    cdk.Validations.of(app).add_plugins(cdk_nag.AwsSolutionsChecks(app, verbose=False))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text(encoding="utf-8"))
    rules = {v["ruleName"] for plugin in report["pluginReports"] for v in plugin["violations"]}
    assert "AwsSolutions-S10" in rules  # no TLS enforcement
    assert "AwsSolutions-S1" not in rules  # acknowledged


def test_acknowledgements_need_a_reason() -> None:
    with pytest.raises(ValueError, match="reason"):
        acknowledge(cdk.Stack(cdk.App(), "Empty"), "S1", " ")


@pytest.fixture(scope="module")
def linted(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """cfn-lint's findings for every variant's templates, in one run (its start is most of its time)."""
    outdirs = [synthesized_variant(request, name).outdir for name in VARIANTS]
    templates = sorted(str(path) for outdir in outdirs for path in outdir.glob("*.template.json"))
    assert len(templates) == 3 * len(VARIANTS)
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--format", "json", "--", *templates],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode in (0, 4, 8, 12), result.stderr  # 2 would mean an error
    findings: list[dict[str, Any]] = json.loads(result.stdout or "[]")
    assert {f["Filename"] for f in findings} <= set(templates)  # each variant's own are those of its templates
    return findings


@pytest.mark.parametrize("variant", VARIANTS, indirect=True)
def test_cfn_lint_finds_no_error(variant: Synthesized, linted: list[dict[str, Any]]) -> None:
    templates = {str(path) for path in variant.outdir.glob("*.template.json")}
    assert len(templates) == 3
    errors = [
        f"{f['Rule']['Id']} {f['Filename']}: {f['Message']}"
        for f in linted
        if f["Level"] == "Error" and f["Filename"] in templates
    ]
    assert errors == []
