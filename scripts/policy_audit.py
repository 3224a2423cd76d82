"""parliament over every IAM policy document of an environment's templates, with their intrinsics rendered.

The documents: `AWS::IAM::Policy` and `AWS::IAM::ManagedPolicy`, the inline policies of `AWS::IAM::Role`, and the
resource policies of buckets, queues and topics. Trust policies (`AssumeRolePolicyDocument`) are not: parliament
reads every statement as an identity policy's and calls one without `Resource` malformed.

A finding is named by its issue and subject (cdk/audit.py): for a finding about actions (`RESOURCE_MISMATCH`, an
escalation), the action as the policy writes it, so a wildcard CDK grants (`s3:List*`) is acknowledged once for all
the actions parliament expands it to.
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdk.audit import AUDIT_KEY
from scripts.cfn_render import Renderer, StackTemplate
from scripts.findings import Finding, require_reason

POLICY_TYPES = {
    "AWS::IAM::Policy",
    "AWS::IAM::ManagedPolicy",
    "AWS::S3::BucketPolicy",
    "AWS::SQS::QueuePolicy",
    "AWS::SNS::TopicPolicy",
}
ALLOWED_ACTION = re.compile(r"does allow (\S+)")


@dataclass(frozen=True)
class PolicyDocument:
    """One rendered policy document and the resource that holds it (where its acknowledgements are)."""

    stack: str
    resource: str
    document: dict[str, Any]
    acknowledged: dict[tuple[str, str], str]
    """Reason by (issue, subject)."""


def documents(renderer: Renderer, template: StackTemplate) -> Iterator[PolicyDocument]:
    for logical_id, resource in template.resources.items():
        properties = resource.get("Properties", {})
        found = []
        if resource["Type"] in POLICY_TYPES:
            found.append(properties["PolicyDocument"])
        if resource["Type"] == "AWS::IAM::Role":
            found.extend(policy["PolicyDocument"] for policy in properties.get("Policies", []))
        entries = resource.get("Metadata", {}).get(AUDIT_KEY, [])
        acknowledged = {(e["id"], e["subject"]): e.get("reason", "") for e in entries if e.get("tool") == "parliament"}
        for document in found:
            yield PolicyDocument(template.name, logical_id, renderer.render(template, document), acknowledged)


def audit(policies: list[PolicyDocument], python: Path) -> list[Finding]:
    """parliament's findings not acknowledged, acknowledgements without a reason, and acknowledgements that name no
    finding (stale: the statement changed)."""
    results = run_parliament([policy.document for policy in policies], python)
    findings: list[Finding] = []
    for policy, raw in zip(policies, results, strict=True):
        found = {(issue, subject): message for issue, subject, message in named(policy.document, raw)}
        for (issue, subject), message in sorted(found.items()):
            reason = policy.acknowledged.get((issue, subject))
            if reason is None:
                findings.append(Finding("parliament", policy.stack, policy.resource, issue, subject, message))
            else:
                findings.extend(require_reason("parliament", policy.stack, policy.resource, issue, subject, reason))
        findings.extend(
            Finding("parliament", policy.stack, policy.resource, issue, subject, "acknowledged, but no such finding")
            for issue, subject in sorted(set(policy.acknowledged) - set(found))
        )
    return findings


def run_parliament(documents: list[dict[str, Any]], python: Path) -> list[list[dict[str, Any]]]:
    """parliament's raw findings per document, from one process of the audit venv (scripts/parliament_worker.py)."""
    result = subprocess.run(
        [str(python), "-m", "scripts.parliament_worker"],
        input=json.dumps(documents),
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    if result.returncode != 0:
        raise RuntimeError(f"parliament ({python}) failed with exit code {result.returncode}: {result.stderr[-2000:]}")
    found: list[list[dict[str, Any]]] = json.loads(result.stdout)
    return found


def named(document: dict[str, Any], raw: list[dict[str, Any]]) -> Iterator[tuple[str, str, str]]:
    """(issue, subject, message) of each of a document's raw findings; one per written action it concerns."""
    written = written_actions(document)
    for finding in raw:
        issue, detail = finding["issue"], finding["detail"]
        if isinstance(detail, list) and all(isinstance(item, dict) and "action" in item for item in detail):
            for action in sorted({source(item["action"], written) for item in detail}):
                expanded = sorted(item["action"] for item in detail if source(item["action"], written) == action)
                yield issue, action, f"{finding['title']}: {', '.join(expanded)}"
        elif isinstance(detail, str) and (allowed := ALLOWED_ACTION.search(detail)):
            yield issue, source(allowed.group(1), written), detail
        else:
            subject = str(finding["location"].get("string", detail))
            yield issue, subject, f"{finding['title']}: {detail}".rstrip(": ")


def written_actions(document: dict[str, Any]) -> list[str]:
    """Every action (and NotAction) the document's statements write, in their order."""
    statements = document.get("Statement", [])
    actions: list[str] = []
    for statement in statements if isinstance(statements, list) else [statements]:
        for key in ("Action", "NotAction"):
            value = statement.get(key, [])
            actions.extend([value] if isinstance(value, str) else value)
    return actions


def source(action: str, written: list[str]) -> str:
    """The written action (or wildcard) that `action` comes from, the most specific one (`s3:List*` rather than a
    TLS-only Deny's `s3:*`); `action` itself when none matches."""
    matching = [pattern for pattern in written if fnmatch.fnmatchcase(action.lower(), pattern.lower())]
    return max(matching, key=lambda pattern: len(pattern.replace("*", "")), default=action)
