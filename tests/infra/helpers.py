"""Helpers of the infrastructure tests: synthesize an environment, read its templates (render CloudFormation
values, find resources, the ASL)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import cdk_nag
import pytest
from aws_cdk.assertions import Template

from cdk.config import ENVIRONMENTS, EnvConfig
from cdk.pipeline import Pipeline, build_pipeline, cdk_json_context

Resolver = Callable[[str, Any], str]


def render(value: Any, resolve: Resolver | None = None) -> Any:
    """A resolved CloudFormation value as plain data: `Fn::Join` joined, intrinsics rendered by `resolve`.

    By default a reference renders as `${Name}` / `${Logical.Attr}` / `${Import:Stack:Output}`, readable
    in assertions; the moto tests pass a resolver that gives real-looking ARNs.
    """
    resolve = resolve or _placeholder
    if isinstance(value, list):
        return [render(item, resolve) for item in value]
    if isinstance(value, dict):
        if len(value) == 1:
            ((key, argument),) = value.items()
            if key == "Fn::Join":
                separator, parts = argument
                return str(separator).join(str(render(part, resolve)) for part in parts)
            if key in ("Ref", "Fn::GetAtt", "Fn::GetStackOutput", "Fn::ImportValue"):
                return resolve(key, argument)
        return {key: render(item, resolve) for key, item in value.items()}
    return value


def _placeholder(function: str, argument: Any) -> str:
    if function == "Ref":
        return f"${{{argument}}}"
    if function == "Fn::GetAtt":
        return f"${{{argument[0]}.{argument[1]}}}"
    if function == "Fn::GetStackOutput":
        return f"${{Import:{argument['StackName']}:{argument['OutputName']}}}"
    return f"${{Import:{argument}}}"


def resources(template: Template, type_name: str) -> dict[str, dict[str, Any]]:
    """The resources of one type, by logical id, properties rendered."""
    found: Mapping[str, Any] = template.find_resources(type_name)
    return {logical_id: render(resource) for logical_id, resource in found.items()}


def only(template: Template, type_name: str) -> dict[str, Any]:
    """The one resource of a type (fails when there are none or several)."""
    found = resources(template, type_name)
    assert len(found) == 1, f"expected one {type_name}, found {sorted(found)}"
    return next(iter(found.values()))


def policy_statements(template: Template, logical_id_prefix: str) -> list[dict[str, Any]]:
    """Every statement of the IAM policies (inline or managed) whose logical id starts with the prefix."""
    statements: list[dict[str, Any]] = []
    for type_name in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for logical_id, resource in resources(template, type_name).items():
            if logical_id.startswith(logical_id_prefix):
                statements.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return statements


def deployed_files(synth: Synthesized) -> dict[str, bytes]:
    """What the artifacts upload (the Processing stack's BucketDeployment) writes under its version prefix: every
    file of its sources, as staged in cdk.out (each a folder CDK zips on publishing), by key below the prefix."""
    (upload,) = resources(synth.template("Processing"), "Custom::CDKBucketDeployment").values()
    manifest = json.loads((synth.outdir / f"Winnow-{synth.config.env}-Processing.assets.json").read_text("utf-8"))
    sources = {next(iter(a["destinations"].values()))["objectKey"]: a["source"] for a in manifest["files"].values()}
    files: dict[str, bytes] = {}
    for key in upload["Properties"]["SourceObjectKeys"]:
        assert sources[key]["packaging"] == "zip", sources[key]  # a folder, extracted under the prefix
        folder = synth.outdir / sources[key]["path"]
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            name = path.relative_to(folder).as_posix()
            assert name not in files, f"{name} is in two sources"
            files[name] = path.read_bytes()
    return files


def state_machine_definition(template: Template, resolve: Resolver | None = None) -> dict[str, Any]:
    """The state machine's ASL, parsed (its DefinitionString is an Fn::Join of text and references)."""
    (machine,) = template.find_resources("AWS::StepFunctions::StateMachine").values()
    definition: dict[str, Any] = json.loads(render(machine["Properties"]["DefinitionString"], resolve))
    return definition


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


class Environments(dict[str, Synthesized]):
    """Every env of `ENVIRONMENTS`, each synthesized once, when first asked for: a test process (`make test` runs
    two) whose tests need dev only never synthesizes prod."""

    def __init__(self, build: Callable[[str], Synthesized]) -> None:
        super().__init__()
        self._build = build

    def __missing__(self, env: str) -> Synthesized:
        if env not in ENVIRONMENTS:
            raise KeyError(env)
        self[env] = synthesized = self._build(env)
        return synthesized

    def all(self) -> dict[str, Synthesized]:
        return {env: self[env] for env in ENVIRONMENTS}


def synthesized_variant(request: pytest.FixtureRequest, name: str) -> Synthesized:
    """An env's synth (session fixture `synthesized`), or a dev variant's (the session fixture of its name)."""
    if name in ENVIRONMENTS:
        synthesized: dict[str, Synthesized] = request.getfixturevalue("synthesized")
        return synthesized[name]
    variant: Synthesized = request.getfixturevalue(name.replace("-", "_"))
    return variant
