"""Acknowledgements of the template validators' findings (checkov, parliament): one finding each, with the reason,
on the construct that causes it, like cdk-nag's (cdk/nag.py).

They are written into the template as the resource's metadata, so the validators read them from the very template
they check (scripts/validate_templates.py):

- checkov: its own skip metadata, `{"checkov": {"skip": [{"id": "CKV_AWS_21", "comment": reason}]}}`, which checkov
  honours itself (it reports the check as skipped, with the comment);
- parliament: `{"winnow:audit": [{"tool": "parliament", "id": issue, "subject": …, "reason": …}]}`, where the
  subject names the one finding: the action of the policy that causes it as written there (`s3:List*`), or the
  finding's location (an unknown action).
"""

from __future__ import annotations

import re

import aws_cdk as cdk
from constructs import IConstruct

CHECKOV_KEY = "checkov"
AUDIT_KEY = "winnow:audit"
CHECKOV_ID = re.compile(r"CKV2?_AWS_\d+")
PARLIAMENT_ISSUE = re.compile(r"[A-Z][A-Z_]+")

LOGS_WITHOUT_CMK = (
    "CloudWatch Logs encrypts every log group at rest; a customer managed key would add a key policy for the logs "
    "service and a monthly cost, for logs of run ids, states and errors (no event data)"
)
"""The reason for checkov's CKV_AWS_158 (log group without a KMS key), the same for every log group here."""


def acknowledge_checkov(scope: IConstruct, check: str, reason: str) -> None:
    """Skip checkov's `check` (e.g. `CKV_AWS_21`) on `scope`'s CloudFormation resource, saying why.

    Raises:
        ValueError: no reason, a malformed check id, or no CloudFormation resource to put it on.
    """
    _require(reason, f"acknowledging checkov {check}")
    if not CHECKOV_ID.fullmatch(check):
        raise ValueError(f"checkov check id {check!r}: allowed are ids like CKV_AWS_21 or CKV2_AWS_6")
    resource = cfn_resource(scope)
    metadata = resource.get_metadata(CHECKOV_KEY) or {"skip": []}
    entry = {"id": check, "comment": reason.strip()}
    if _added(resource, metadata["skip"], entry, ("id",)):
        resource.add_metadata(CHECKOV_KEY, metadata)


def acknowledge_parliament(scope: IConstruct, issue: str, subject: str, reason: str) -> None:
    """Acknowledge parliament's `issue` (e.g. `RESOURCE_MISMATCH`) for `subject` in `scope`'s policy document.

    `subject` is the action as the policy writes it (`s3:List*`, for a finding about the actions it expands to), or,
    for a finding about no action, its location as parliament reports it.

    Raises:
        ValueError: no reason, a malformed issue or subject, or no CloudFormation resource to put it on.
    """
    _require(reason, f"acknowledging parliament {issue} {subject}")
    if not PARLIAMENT_ISSUE.fullmatch(issue):
        raise ValueError(f"parliament issue {issue!r}: allowed are parliament's issue ids like RESOURCE_MISMATCH")
    _require(subject, f"acknowledging parliament {issue}: the subject (the action or location it names)")
    resource = cfn_resource(scope)
    entries = list(resource.get_metadata(AUDIT_KEY) or [])
    entry = {"tool": "parliament", "id": issue, "subject": subject, "reason": reason.strip()}
    if _added(resource, entries, entry, ("tool", "id", "subject")):
        resource.add_metadata(AUDIT_KEY, entries)


def acknowledge_provider_lambda(handler: IConstruct, what: str, calls: str) -> None:
    """checkov's Lambda checks on a handler of CDK's own custom resources (`what`, e.g. "CDK's auto-delete-objects
    Lambda"), which CloudFormation runs synchronously on deploy or delete, calling only `calls` (e.g. "S3's API")."""
    why = f"{what} (library code, run by CloudFormation on deploy or delete only): "
    for check, reason in {
        "CKV_AWS_115": "no reserved concurrency, which would take from the account's unreserved pool",
        "CKV_AWS_116": "CloudFormation invokes it synchronously, so a dead-letter queue would never receive",
        "CKV_AWS_117": f"it calls only {calls}; a VPC would add endpoints for nothing",
    }.items():
        acknowledge_checkov(handler, check, why + reason)


def cfn_resource(scope: IConstruct) -> cdk.CfnResource:
    """`scope` itself when it is a CloudFormation resource, else its default child (an L2 construct's resource).

    Raises:
        ValueError: neither is a CloudFormation resource.
    """
    if isinstance(scope, cdk.CfnResource):
        return scope
    child = scope.node.default_child
    if isinstance(child, cdk.CfnResource):
        return child
    raise ValueError(
        f"{scope.node.path} ({type(scope).__name__}): allowed are a CloudFormation resource or a construct whose "
        "default child is one"
    )


def _added(
    resource: cdk.CfnResource, entries: list[dict[str, str]], entry: dict[str, str], key: tuple[str, ...]
) -> bool:
    """Append `entry` unless it is there: the same acknowledgement made twice (by each user of a shared construct,
    like CDK's one auto-delete provider per stack) is one; the same finding with another reason is refused."""
    for existing in entries:
        if all(existing[k] == entry[k] for k in key):
            if existing != entry:
                raise ValueError(f"{resource.node.path}: {entry} is already acknowledged otherwise: {existing}")
            return False
    entries.append(entry)
    return True


def _require(reason: str, what: str) -> None:
    if not reason.strip():
        raise ValueError(f"{what} needs a reason; given {reason!r}")
