"""The deployed job role allows every DynamoDB operation the jobs call on the manifest: moto checks no IAM, so a
call the role lacks would pass every local test and fail on AWS with AccessDenied (an `update_item` and a `scan`
once did)."""

from __future__ import annotations

import re
from pathlib import Path

from cdk.components.job_execution_role import MANIFEST_ACTIONS

JOBS = Path(__file__).resolve().parents[2] / "jobs"
OPERATION = re.compile(r"""\.call\(\s*"([a-z_]+)"|"(put_item|update_item|get_item|delete_item|query|scan)",""")
ONLY_WITH_CREATE = {"create_table", "update_time_to_live"}
"""`--create` makes a table locally; the deployed table is CDK's, and the deployed jobs are never given it."""


def iam_action(operation: str) -> str:
    return "dynamodb:" + "".join(part.capitalize() for part in operation.split("_"))


def test_every_dynamodb_operation_the_jobs_call_is_allowed_to_the_deployed_job_role() -> None:
    called = {
        next(group for group in found.groups() if group)
        for path in JOBS.rglob("*.py")
        for found in OPERATION.finditer(path.read_text(encoding="utf-8"))
    }
    assert {"put_item", "query", "scan", "update_item"} <= called  # the scan finds them
    assert sorted(iam_action(op) for op in called - ONLY_WITH_CREATE) == sorted(MANIFEST_ACTIONS)
