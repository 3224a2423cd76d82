"""cdk-nag (AwsSolutions) acknowledgements: one finding each, with the reason, on the construct that causes it.

cdk-nag 3 findings are acknowledged through CDK's `Validations`; granular rules (IAM4, IAM5) need the exact
finding, e.g. `AwsSolutions-IAM5[Resource::arn:aws:s3:::bucket/prefix/*]`. `resource_finding` renders a
resource the way cdk-nag does, from the same value the policy uses, so an acknowledgement can never drift
from the statement it covers.
"""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
from constructs import IConstruct

PACK = "AwsSolutions"


def acknowledge(scope: IConstruct, rule: str, reason: str, finding: str | None = None) -> None:
    """Acknowledge `rule` (e.g. `IAM5`), or one `finding` of it, on `scope` and its children.

    Raises:
        ValueError: no reason is given.
    """
    if not reason.strip():
        raise ValueError(f"acknowledging {rule} {finding or ''} needs a reason")
    rule_id = f"{PACK}-{rule}" + (f"[{finding}]" if finding else "")
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=rule_id, reason=reason))


def resource_finding(scope: IConstruct, value: str) -> str:
    """`Resource::<value as cdk-nag renders it>` for an IAM resource `value` (string or token)."""
    return f"Resource::{_flatten(cdk.Stack.of(scope).resolve(value))}"


def _flatten(value: Any) -> str:
    """cdk-nag's rendering of a resolved CloudFormation value (utils/flatten-cfn-reference)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Fn::Join":
            separator, parts = argument
            return str(separator).join(_flatten(part) for part in parts)
        if function == "Ref":
            return f"<{argument}>"
        if function == "Fn::GetAtt":
            return f"<{argument[0]}.{argument[1]}>"
    return json.dumps(value, separators=(",", ":"))
