"""Run ids: `YYYY-MM-DD-HH-MM-SS` in UTC, the folder name `run=ID` and the run's timestamp.

Also the names around a job's run folders, with no Spark, so the incremental planner (a Lambda function)
and the jobs read the same layout: `OUT/run=ID/` sealed by `_SUCCESS` (jobs/contract.py), its lease `OUT/_leases/run=ID.json`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from jobs.errors import InvalidArgumentError, WinnowError

RUN_ID_FORMAT = "%Y-%m-%d-%H-%M-%S"
LEASES = "_leases"
"""Beside the run folders, so clearing a run folder never touches its lease."""
# ASCII digits only: `\d` would take other scripts' digits, and strptime would read them as the ASCII run's time.


class UnfinishedShredError(WinnowError):
    """An earlier run's dedup completed and its shred did not: the next run stops before writing (exit 1)."""

    exit_code = 1


RUN_ID_PATTERN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{2}-[0-9]{2}-[0-9]{2}")


def new_run_id(now: datetime | None = None) -> str:
    """The run id for `now` (default: the current UTC time)."""
    return (now or datetime.now(UTC)).astimezone(UTC).strftime(RUN_ID_FORMAT)


def run_timestamp(run_id: str) -> datetime:
    """The UTC time a run id names.

    Raises:
        InvalidArgumentError: the id is not of the form YYYY-MM-DD-HH-MM-SS or names no real time.
    """
    if not RUN_ID_PATTERN.fullmatch(run_id):
        raise InvalidArgumentError(
            f"--run-id: given {run_id!r}; allowed: YYYY-MM-DD-HH-MM-SS, e.g. 2026-11-22-03-00-00"
        )
    try:
        return datetime.strptime(run_id, RUN_ID_FORMAT).replace(tzinfo=UTC)
    except ValueError as err:
        raise InvalidArgumentError(f"--run-id: given {run_id!r}, which is not a real time ({err})") from None


def run_folder(output: str, run_id: str) -> str:
    """`OUT/run=ID`, the folder of run `run_id` under the output `output`."""
    return f"{output.rstrip('/')}/run={run_id}"


def run_lease(output: str, run_id: str) -> str:
    """`OUT/_leases/run=ID.json`, the lease a writer of that run folder holds."""
    return f"{output.rstrip('/')}/{LEASES}/run={run_id}.json"
