"""Run parliament on IAM policy documents: a JSON list on stdin, a JSON list of finding lists on stdout.

Run by the audit venv's interpreter (`.venv-audit`, see requirements-audit.txt), not the dev venv's: parliament
imports `pkg_resources`, which the dev venv's pinned setuptools no longer has. So this module imports nothing of
the project.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def findings(documents: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each document's findings as the parliament CLI reports them (its default config, severity LOW and up)."""
    import parliament
    from parliament.cli import is_finding_filtered

    results = []
    for document in documents:
        policy = parliament.analyze_policy_string(json.dumps(document), include_community_auditors=False)
        found = []
        for finding in policy.findings:
            finding = parliament.enhance_finding(finding)
            if is_finding_filtered(finding):
                continue
            location = {key: value for key, value in finding.location.items() if key != "filepath"}
            found.append(
                {
                    "issue": finding.issue,
                    "severity": finding.severity,
                    "title": finding.title,
                    "detail": finding.detail,
                    "location": location,
                }
            )
        results.append(found)
    return results


def main() -> int:
    documents = json.load(sys.stdin)
    json.dump(findings(documents), sys.stdout, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
