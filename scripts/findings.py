"""A validator's finding, as scripts/validate_templates.py prints it (one line each)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Finding:
    """One unacknowledged finding of one tool on one resource."""

    tool: str
    """`asl-validator`, `parliament`, `checkov`."""
    stack: str
    resource: str
    """The logical id of the resource in the stack's template."""
    id: str
    """The tool's id of the finding: its error code, issue or check id."""
    subject: str
    """What in the resource it is about (an action, a state); may be empty."""
    message: str

    def line(self) -> str:
        subject = f" [{self.subject}]" if self.subject else ""
        return f"{self.tool} {self.stack}/{self.resource}: {self.id}{subject} {self.message}"


def require_reason(tool: str, stack: str, resource: str, finding_id: str, subject: str, reason: str) -> list[Finding]:
    """A finding when an acknowledgement in a template has no reason (cdk/audit.py refuses those; a hand-edited or
    foreign template may still have one)."""
    if reason.strip():
        return []
    return [Finding(tool, stack, resource, finding_id, subject, "acknowledged without a reason")]
