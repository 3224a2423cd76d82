"""Validate an environment's synthesized templates with three tools AWS users trust; print one line per
unacknowledged finding and exit non-zero if there is any.

- asl-validator (npm, package.json) on every state machine's definition, rendered with realistic ARNs;
- parliament on every IAM policy document, rendered likewise (scripts/policy_audit.py);
- checkov's CloudFormation checks on every template.

Acknowledgements are the templates' own metadata, written next to the construct (cdk/audit.py). parliament and
checkov run in the audit venv (`make audit-setup`: their pins conflict with the dev venv's).

    python -m scripts.validate_templates cdk.out/Winnow-dev-*.template.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from cdk.audit import CHECKOV_KEY
from scripts import policy_audit
from scripts.cfn_render import Renderer, StackTemplate, load, substitute
from scripts.findings import Finding, require_reason

ROOT = Path(__file__).resolve().parent.parent
AUDIT_VENV = ROOT / ".venv-audit"
ASL_VALIDATOR = ROOT / "node_modules" / "asl-validator"
ASL_SCRIPT = ROOT / "scripts" / "asl_validate.cjs"
STATE_MACHINE = "AWS::StepFunctions::StateMachine"


def validate(paths: list[Path], venv: Path = AUDIT_VENV) -> list[Finding]:
    """Every unacknowledged finding of the three tools in one environment's templates (all of its stacks, so
    cross-stack references render)."""
    return validate_environments({"": paths}, venv)[""]


def validate_environments(environments: Mapping[str, list[Path]], venv: Path = AUDIT_VENV) -> dict[str, list[Finding]]:
    """`validate` for several environments at once, by name: one process of each tool for them all (their start-up
    is most of their time). Each environment is rendered on its own; its findings name its stacks as `validate`'s do.

    Raises:
        FileNotFoundError: the audit venv or node_modules is missing.
        ValueError: a template is given in two environments (checkov reports a file once).
    """
    given = [path.resolve() for paths in environments.values() for path in paths]
    if len(given) != len(set(given)):
        twice = sorted({str(path) for path in given if given.count(path) > 1})
        raise ValueError(f"templates given in two environments: {twice}; allowed: each template in one")
    for tool in ("python", "checkov"):
        if not (venv / "bin" / tool).exists():
            raise FileNotFoundError(f"{venv / 'bin' / tool} is missing: `make audit-setup` builds the audit venv")
    machines: dict[tuple[str, str], Any] = {}
    policies: list[policy_audit.PolicyDocument] = []
    tagged: list[StackTemplate] = []
    for environment, paths in environments.items():
        templates = load(paths)
        renderer = Renderer(templates)
        for (stack, logical_id), definition in state_machines(renderer, templates).items():
            machines[_tag(environment, stack), logical_id] = definition
        for template in templates:
            policies += [
                replace(policy, stack=_tag(environment, policy.stack))
                for policy in policy_audit.documents(renderer, template)
            ]
            tagged.append(replace(template, name=_tag(environment, template.name)))
    findings = [
        *check_asl(machines),
        *policy_audit.audit(policies, venv / "bin" / "python"),
        *check_templates(tagged, venv / "bin" / "checkov"),
    ]
    return {
        environment: sorted(
            replace(finding, stack=finding.stack.removeprefix(_tag(environment, "")))
            for finding in findings
            if finding.stack.startswith(_tag(environment, ""))
        )
        for environment in environments
    }


def _tag(environment: str, stack: str) -> str:
    """A stack's name, made unique across the environments validated together (two envs may name a stack alike)."""
    return f"{environment}|{stack}" if environment else stack


def state_machines(renderer: Renderer, templates: list[StackTemplate]) -> dict[tuple[str, str], Any]:
    """Each state machine's ASL by (stack, logical id): `DefinitionString` rendered, `DefinitionSubstitutions`
    put in, parsed."""
    definitions = {}
    for template in templates:
        for logical_id, resource in template.resources.items():
            if resource["Type"] != STATE_MACHINE:
                continue
            properties = resource["Properties"]
            if "DefinitionString" not in properties:
                raise ValueError(
                    f"{template.name}/{logical_id}: given {sorted(properties)}; allowed: a DefinitionString "
                    "(DefinitionBody and DefinitionS3Location are not rendered)"
                )
            text = renderer.render(template, properties["DefinitionString"])
            text = substitute(text, renderer.render(template, properties.get("DefinitionSubstitutions", {})))
            definitions[template.name, logical_id] = json.loads(text)
    return definitions


def check_asl(definitions: dict[tuple[str, str], Any]) -> list[Finding]:
    """asl-validator's errors (JSON schema, transitions, paths, ARNs), from one Node process."""
    if not definitions:
        return []
    node = shutil.which("node")
    if node is None or not ASL_VALIDATOR.is_dir():
        raise FileNotFoundError(f"node and {ASL_VALIDATOR} are needed: `make cdk-install` installs asl-validator")
    named = {f"{stack}/{logical_id}": definition for (stack, logical_id), definition in definitions.items()}
    result = subprocess.run(
        [node, str(ASL_SCRIPT)], input=json.dumps(named), capture_output=True, text=True, check=False, cwd=ROOT
    )
    if result.returncode != 0:
        raise RuntimeError(f"asl-validator failed with exit code {result.returncode}: {result.stderr[-2000:]}")
    errors: dict[str, list[str]] = json.loads(result.stdout)
    findings = []
    for name, messages in errors.items():
        stack, logical_id = name.split("/", 1)
        for message in messages:
            code, _, text = message.partition(": ")
            findings.append(Finding("asl-validator", stack, logical_id, code, "", text))
    return findings


def check_templates(templates: list[StackTemplate], checkov: Path) -> list[Finding]:
    """checkov's failed CloudFormation checks over all the templates in one run, and skips without a comment (the
    skips themselves are checkov's: it reports those checks as skipped)."""
    args = [str(checkov), "--framework", "cloudformation", "--output", "json", "--soft-fail", "--skip-download"]
    for template in templates:
        args += ["--file", str(template.path)]
    # Offline: no Prisma Cloud guidelines, no version check.
    env = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    result = subprocess.run(args, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"checkov failed with exit code {result.returncode}: {result.stderr[-2000:]}")
    reports = json.loads(result.stdout or "[]")
    stacks = {template.path.resolve(): template.name for template in templates}
    findings = []
    for report in reports if isinstance(reports, list) else [reports]:
        if report.get("summary", {}).get("parsing_errors"):
            findings.append(Finding("checkov", "-", "-", "PARSING", "", f"parse errors: {report['results']}"))
        for check in report.get("results", {}).get("failed_checks", []):
            stack = stacks[Path(check["file_abs_path"]).resolve()]
            logical_id = str(check["resource"]).split(".", 1)[-1]
            findings.append(Finding("checkov", stack, logical_id, check["check_id"], "", check["check_name"]))
    for template in templates:
        for logical_id, resource in template.resources.items():
            for skip in resource.get("Metadata", {}).get(CHECKOV_KEY, {}).get("skip", []):
                reason = str(skip.get("comment", ""))
                findings.extend(require_reason("checkov", template.name, logical_id, skip["id"], "", reason))
    return findings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("templates", nargs="+", type=Path, help="one environment's cdk.out/<stack>.template.json")
    parser.add_argument("--venv", type=Path, default=AUDIT_VENV, help="the audit venv (parliament, checkov)")
    args = parser.parse_args(argv)
    findings = validate(args.templates, args.venv)
    for finding in findings:
        print(finding.line())
    names = ", ".join(path.name for path in args.templates)
    print(f"asl-validator, parliament, checkov: {len(findings)} unacknowledged finding(s) in {names}", file=sys.stderr)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
