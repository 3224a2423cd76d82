"""The template validators (scripts/validate_templates.py): asl-validator on the state machine, parliament on every
IAM policy document, checkov on every template; no unacknowledged finding in any env (or the dev variants), and a
probe app with known defects proves each tool's findings reach the harness (so a pass above means something)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn

from cdk.audit import AUDIT_KEY, CHECKOV_KEY, acknowledge_checkov, acknowledge_parliament
from scripts import policy_audit
from scripts.cfn_render import Renderer, load
from scripts.findings import Finding
from scripts.validate_templates import (
    ASL_VALIDATOR,
    AUDIT_VENV,
    check_asl,
    state_machines,
    validate,
    validate_environments,
)
from tests.infra.helpers import Synthesized, synthesized_variant

VARIANTS = ["dev", "prod", "dev-lake", "dev-vpc", "dev-new-vpc"]
"""Every env and the dev variants (lake manifest, `emr.vpc` existing or created), as test_nag_and_lint.py."""
TOOLS = ["asl-validator", "parliament", "checkov"]


@pytest.fixture(scope="session")
def audit_venv() -> Path:
    """The audit venv and node_modules (`make audit-setup`; `make test` builds them first)."""
    missing = [str(path) for path in (AUDIT_VENV / "bin" / "checkov", ASL_VALIDATOR) if not path.exists()]
    assert missing == [], f"missing {missing}: run `make audit-setup`"
    return AUDIT_VENV


PROBES = ["probe", "probe-twin"]
"""The probe app (below) twice: two environments whose stacks have the same names, as dev and dev-lake."""


@pytest.fixture(scope="module")
def validated(
    request: pytest.FixtureRequest, audit_venv: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[Finding]]:
    """Every variant's findings and the probes', by name, validated once for all the tool tests (one run of each
    tool: its start is most of its time)."""
    variants = {name: templates(synthesized_variant(request, name)) for name in VARIANTS}
    probes = {name: probe_app(tmp_path_factory.mktemp(name)) for name in PROBES}
    return validate_environments(variants | probes, audit_venv)


@pytest.fixture
def variant(request: pytest.FixtureRequest) -> Synthesized:
    return synthesized_variant(request, request.param)


def templates(synth: Synthesized) -> list[Path]:
    paths = sorted(synth.outdir.glob("*.template.json"))
    assert len(paths) == 3
    return paths


@pytest.mark.parametrize("tool", TOOLS)
@pytest.mark.parametrize("name", VARIANTS)
def test_no_unacknowledged_finding(name: str, tool: str, validated: dict[str, list[Finding]]) -> None:
    assert [f.line() for f in validated[name] if f.tool == tool] == []


def test_environments_validated_together_each_get_their_own_findings(
    validated: dict[str, list[Finding]], audit_venv: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The probe twice among the variants, validated in one run of each tool: each gets exactly what it gets alone."""
    alone = probe_app(tmp_path_factory.mktemp("probe-alone"))
    findings = validate(alone, audit_venv)
    assert findings != []
    assert {name: validated[name] for name in PROBES} == dict.fromkeys(PROBES, findings)
    with pytest.raises(ValueError, match="in two environments"):
        validate_environments({"one": alone, "two": alone}, audit_venv)


@pytest.mark.parametrize("variant", VARIANTS, indirect=True)
def test_the_validators_see_the_state_machine_and_policies_rendered_to_arns(variant: Synthesized) -> None:
    """Nothing left unrendered: no intrinsic, no `${…}`; every policy resource an ARN (or `*`)."""
    stacks = load(templates(variant))
    renderer = Renderer(stacks)
    (definition,) = state_machines(renderer, stacks).values()
    assert "${" not in json.dumps(definition) and "Fn::" not in json.dumps(definition)
    policies = [policy for stack in stacks for policy in policy_audit.documents(renderer, stack)]
    assert len(policies) >= 10
    for policy in policies:
        for statement in policy.document["Statement"]:
            given = statement.get("Resource", [])
            for resource in [given] if isinstance(given, str) else given:
                assert resource == "*" or resource.startswith("arn:aws:"), (policy.resource, resource)


# The probe: one small app with a defect for each tool, and acknowledgements of each kind.

BAD_TYPE = {"StartAt": "Run", "States": {"Run": {"Type": "Taks", "Resource": "arn:aws:states:::sqs:sendMessage"}}}
NO_NEXT = {"StartAt": "Wait", "States": {"Wait": {"Type": "Pass"}}}
GOOD = {
    "StartAt": "Send",
    "States": {
        "Send": {
            "Type": "Task",
            "Resource": "arn:aws:states:::sqs:sendMessage",
            "Parameters": {"QueueUrl": "${QueueUrl}", "MessageBody.$": "$"},
            "End": True,
        }
    },
}


def probe_app(outdir: Path) -> list[Path]:
    app = cdk.App(outdir=str(outdir))
    stack = cdk.Stack(app, "Probe", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    queue = sqs.Queue(stack, "Queue")
    for name, definition in {"BadType": BAD_TYPE, "NoNext": NO_NEXT, "Good": GOOD}.items():
        sfn.StateMachine(
            stack,
            name,
            definition_body=sfn.DefinitionBody.from_string(json.dumps(definition)),
            definition_substitutions={"QueueUrl": queue.queue_url},
        )
    # No public access block (CKV_AWS_53 to 56), no access logs (CKV_AWS_18, acknowledged), no versioning
    # (CKV_AWS_21, acknowledged by hand without a comment).
    bucket = s3.CfnBucket(stack, "Plain")
    acknowledge_checkov(bucket, "CKV_AWS_18", "probe: access logs deliberately off")
    bucket.add_metadata(CHECKOV_KEY, {"skip": [*bucket.get_metadata(CHECKOV_KEY)["skip"], {"id": "CKV_AWS_21"}]})
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    objects = cdk.Fn.join("", [cdk.Fn.get_att(bucket.logical_id, "Arn").to_string(), "/*"])
    typo = iam.Policy(stack, "Typo", statements=[iam.PolicyStatement(actions=["s3:GetObjekt"], resources=[objects])])
    typo.attach_to_role(role)
    acknowledged = iam.Policy(
        stack, "Acknowledged", statements=[iam.PolicyStatement(actions=["s3:PutObjekt"], resources=[objects])]
    )
    acknowledged.attach_to_role(role)
    acknowledge_parliament(acknowledged, "UNKNOWN_ACTION", "s3:PutObjekt", "probe: an exact acknowledgement")
    acknowledge_parliament(acknowledged, "RESOURCE_MISMATCH", "s3:List*", "probe: names no finding (stale)")
    unreasoned = iam.Policy(
        stack, "Unreasoned", statements=[iam.PolicyStatement(actions=["s3:DeleteObjekt"], resources=[objects])]
    )
    unreasoned.attach_to_role(role)
    entry = {"tool": "parliament", "id": "UNKNOWN_ACTION", "subject": "s3:DeleteObjekt", "reason": " "}
    assert isinstance(unreasoned.node.default_child, cdk.CfnResource)
    unreasoned.node.default_child.add_metadata(AUDIT_KEY, [entry])
    app.synth()
    return [outdir / "Probe.template.json"]


@pytest.fixture(scope="module")
def probe(validated: dict[str, list[Finding]]) -> list[Finding]:
    return validated["probe"]


def of(findings: list[Finding], tool: str, resource_prefix: str) -> set[tuple[str, str]]:
    return {(f.id, f.subject) for f in findings if f.tool == tool and f.resource.startswith(resource_prefix)}


def test_asl_validator_catches_a_misspelt_type_and_a_missing_next(probe: list[Finding]) -> None:
    assert of(probe, "asl-validator", "BadType") != set()
    # A Pass state with neither Next nor End: not terminal, and nothing ends the machine.
    assert of(probe, "asl-validator", "NoNext") == {("TERMINAL_STATE_WITH_NEXT", ""), ("MISSING_TERMINAL_STATE", "")}
    assert of(probe, "asl-validator", "Good") == set()  # its DefinitionSubstitutions rendered to the queue's URL


def test_parliament_catches_an_unknown_action_and_an_exact_acknowledgement_clears_only_it(probe: list[Finding]) -> None:
    assert of(probe, "parliament", "Typo") == {("UNKNOWN_ACTION", "s3:GetObjekt")}
    # The acknowledged finding is gone; the acknowledgement that names no finding is reported (stale).
    assert of(probe, "parliament", "Acknowledged") == {("RESOURCE_MISMATCH", "s3:List*")}


def test_checkov_catches_a_bucket_open_to_public_policies_and_honours_its_skip_metadata(probe: list[Finding]) -> None:
    found = {check for check, _ in of(probe, "checkov", "Plain")}
    assert {"CKV_AWS_53", "CKV_AWS_54", "CKV_AWS_55", "CKV_AWS_56"} <= found  # no public access block
    assert "CKV_AWS_18" not in found  # acknowledged with a reason


def test_an_acknowledgement_without_reason_in_a_template_is_a_finding(probe: list[Finding]) -> None:
    unreasoned = {(f.tool, f.id, f.message) for f in probe if f.message == "acknowledged without a reason"}
    assert unreasoned == {
        ("checkov", "CKV_AWS_21", "acknowledged without a reason"),
        ("parliament", "UNKNOWN_ACTION", "acknowledged without a reason"),
    }


@pytest.mark.parametrize(
    ("acknowledge", "args"),
    [
        (acknowledge_checkov, ("CKV_AWS_21", " ")),
        (acknowledge_parliament, ("RESOURCE_MISMATCH", "s3:List*", "")),
    ],
)
def test_acknowledging_needs_a_reason(acknowledge: Any, args: tuple[str, ...]) -> None:
    bucket = s3.Bucket(cdk.Stack(cdk.App(), "Empty"), "Bucket")
    with pytest.raises(ValueError, match="needs a reason"):
        acknowledge(bucket, *args)


def test_an_acknowledgement_names_one_finding_on_a_resource() -> None:
    stack = cdk.Stack(cdk.App(), "Empty")
    with pytest.raises(ValueError, match="allowed are ids like CKV_AWS_21"):
        acknowledge_checkov(s3.Bucket(stack, "Bucket"), "S3 versioning", "a reason")
    with pytest.raises(ValueError, match="allowed are a CloudFormation resource"):
        acknowledge_checkov(stack, "CKV_AWS_21", "a reason")


def test_the_asl_harness_reports_a_real_definition_broken(dev: Synthesized, audit_venv: Path) -> None:
    """The rendered dev definition passes; the same with one state's type misspelt, or its Next dropped, fails."""
    stacks = load(templates(dev))
    ((key, definition),) = state_machines(Renderer(stacks), stacks).items()
    first = definition["StartAt"]
    misspelt, no_next = copy.deepcopy(definition), copy.deepcopy(definition)
    misspelt["States"][first]["Type"] = "Taks"
    no_next["States"][first].pop("Next")
    found = check_asl({key: definition, ("misspelt", "-"): misspelt, ("no-next", "-"): no_next})
    assert {f.stack for f in found} == {"misspelt", "no-next"}
