"""app.py as the CDK CLI runs it: context in CDK_CONTEXT_JSON, output in CDK_OUTDIR."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cdk.pipeline import cdk_json_context

ROOT = Path(__file__).resolve().parents[2]


def run_app(context: dict[str, object], outdir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": str(outdir)}
    env.pop("CDK_DEFAULT_ACCOUNT", None)
    return subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)


def test_app_synthesizes_prod_with_cdk_nag(build_dir: Path, tmp_path: Path) -> None:
    context = {**cdk_json_context(), "env": "prod", "@winnow/artifactsDir": str(build_dir)}
    result = run_app(context, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.glob("*.template.json")) == [
        "Winnow-prod-Orchestration.template.json",
        "Winnow-prod-Processing.template.json",
        "Winnow-prod-Storage.template.json",
    ]
    manifest = json.loads((tmp_path / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["artifacts"]["Winnow-prod-Storage"]["environment"] == "aws://123456789012/eu-west-1"


def test_app_rejects_an_unknown_env_with_the_allowed_ones(tmp_path: Path) -> None:
    result = run_app({**cdk_json_context(), "env": "staging"}, tmp_path)
    assert result.returncode != 0
    assert "EnvConfigError: unknown env 'staging'; allowed: dev, prod" in result.stderr


def test_app_without_a_build_says_to_run_make_package(tmp_path: Path) -> None:
    result = run_app({**cdk_json_context(), "env": "dev", "@winnow/artifactsDir": str(tmp_path / "none")}, tmp_path)
    assert result.returncode != 0
    assert "run `make package` first" in result.stderr


def test_cdk_json_defaults_to_dev_and_carries_the_feature_flags() -> None:
    cdk_json = json.loads((ROOT / "cdk.json").read_text(encoding="utf-8"))
    assert cdk_json["app"] == "python3 app.py"
    assert cdk_json["context"]["env"] == "dev"
    assert sum(key.startswith("@aws-cdk") for key in cdk_json["context"]) >= 80
    package = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
    # Exact pins (no ranges): the CDK CLI, and the state-machine validator `make synth` runs.
    assert package["devDependencies"] == {"asl-validator": "4.0.0", "aws-cdk": "2.1148.1"}
