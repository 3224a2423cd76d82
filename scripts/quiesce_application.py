"""Before a deploy: stop ENV's EMR Serverless application if it is idle, refuse to go on while it runs jobs.

EMR Serverless refuses most updates of a STARTED application (during job runs and for its idle timeout after),
so a deploy that changes it would fail halfway and roll back. `make deploy` runs this first:

    python -m scripts.quiesce_application --env dev

- no application yet, or already stopped (or being created): nothing to do;
- job runs in progress: exit 1 with one line naming them (wait for them, or cancel them, then deploy again);
- started and idle: stop it and wait until it is STOPPED (it starts again with the next job run, ~1-2 minutes).

A run that starts between this check and the deploy makes the application update fail with CloudFormation's
own message; deploying again after it ends is safe (the job role reads every artifacts version).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

ACTIVE_JOB_STATES = ("SUBMITTED", "PENDING", "SCHEDULED", "RUNNING", "QUEUED", "CANCELLING")
STOPPABLE = ("STARTED", "STARTING")


class DeployBlockedError(Exception):
    """The application runs jobs: a deploy now could not update it."""


def find_application(client: Any, name: str) -> dict[str, Any] | None:
    for page in client.get_paginator("list_applications").paginate():
        for application in page["applications"]:
            if application["name"] == name and application["state"] != "TERMINATED":
                found: dict[str, Any] = application
                return found
    return None


def active_job_runs(client: Any, application_id: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for page in client.get_paginator("list_job_runs").paginate(
        applicationId=application_id, states=list(ACTIVE_JOB_STATES)
    ):
        runs.extend(page["jobRuns"])
    return runs


def quiesce(
    client: Any,
    name: str,
    wait_seconds: float = 600,
    poll_seconds: float = 5,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Leave application `name` STOPPED (or absent); what was done, in one line.

    Raises:
        DeployBlockedError: job runs are in progress, or the application did not stop within `wait_seconds`.
    """
    application = find_application(client, name)
    if application is None:
        return f"{name}: no EMR Serverless application yet; nothing to stop"
    app_id, state = application["id"], application["state"]
    if state not in STOPPABLE:
        return f"{name} ({app_id}) is {state}; nothing to stop"
    runs = active_job_runs(client, app_id)
    if runs:
        listed = ", ".join(f"{run.get('name') or run['id']} ({run['state']})" for run in runs[:5])
        raise DeployBlockedError(
            f"{name} ({app_id}) has {len(runs)} job run(s) in progress: {listed}; EMR Serverless refuses to update a "
            "started application, so the deploy would fail. Deploy again when they have ended (or cancel them: "
            f"aws emr-serverless cancel-job-run --application-id {app_id} --job-run-id ID)"
        )
    client.stop_application(applicationId=app_id)
    deadline = time.monotonic() + wait_seconds
    while (state := client.get_application(applicationId=app_id)["application"]["state"]) != "STOPPED":
        if time.monotonic() > deadline:
            raise DeployBlockedError(f"{name} ({app_id}) did not stop within {wait_seconds:.0f} s (it is {state})")
        sleep(poll_seconds)
    return f"{name} ({app_id}) was idle and is stopped now, so the deploy can update it; the next job run starts it"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.quiesce_application", description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, help="the environment (configs/<env>.json)")
    args = parser.parse_args(argv)
    import boto3

    from cdk.config import load_config

    config = load_config(args.env)
    client = boto3.client("emr-serverless", region_name=config.region)
    try:
        print(quiesce(client, f"winnow-{args.env}"))
    except DeployBlockedError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
