"""Run ids: `YYYY-MM-DD-HH-MM-SS` in UTC, the folder name `run=ID` and the run's timestamp.

Also the names around a job's run folders, with no Spark, so the incremental planner (a Lambda function)
and the jobs read the same layout: `OUT/run=ID/` sealed by `_SUCCESS` (jobs/contract.py), its lease `OUT/_leases/run=ID.json`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from jobs.contract import SUCCESS_MARKER
from jobs.errors import InvalidArgumentError, WinnowError
from jobs.fs import store

RUN_ID_FORMAT = "%Y-%m-%d-%H-%M-%S"
LEASES = "_leases"
"""Beside the run folders, so clearing a run folder never touches its lease."""
# ASCII digits only: `\d` would take other scripts' digits, and strptime would read them as the ASCII run's time.


class UnfinishedShredError(WinnowError):
    """An earlier run's dedup completed and its shred did not: the next run stops before writing (exit 1)."""

    exit_code = 1


_RUN_ID_PATTERN = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{2}-[0-9]{2}-[0-9]{2}")


def new_run_id(now: datetime | None = None) -> str:
    """The run id for `now` (default: the current UTC time)."""
    return (now or datetime.now(UTC)).astimezone(UTC).strftime(RUN_ID_FORMAT)


def run_timestamp(run_id: str) -> datetime:
    """The UTC time a run id names.

    Raises:
        InvalidArgumentError: the id is not of the form YYYY-MM-DD-HH-MM-SS or names no real time.
    """
    if not _RUN_ID_PATTERN.fullmatch(run_id):
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


def require_earlier_shred_complete(deduplicated: str, shredded: str, run_id: str, shred_options: str = "") -> None:
    """Stop when the latest run before `run_id` under `deduplicated` completed and its shred under `shredded` did
    not: that batch would never reach the warehouse. Only the latest needs a look: each run before it passed this
    check. Local and `s3://` outputs (no Spark: the check runs before Spark starts).

    Raises:
        UnfinishedShredError: named, with the shred command that completes it (`shred_options` appended).
    """
    earlier = [name.removeprefix("run=") for name in store.children(deduplicated) if name.startswith("run=")]
    earlier = [other for other in earlier if other < run_id]
    if not earlier:
        return
    latest = max(earlier)
    dedup_folder, shred_folder = run_folder(deduplicated, latest), run_folder(shredded, latest)
    if not store.exists(f"{dedup_folder}/{SUCCESS_MARKER}") or store.exists(f"{shred_folder}/{SUCCESS_MARKER}"):
        return  # an unfinished dedup is stopped by its own checks (the ledger, the manifest's register)
    lease = run_lease(shredded, latest)
    stale = f" Its lease {lease} is still there: once that run is gone, remove it first." if store.exists(lease) else ""
    raise UnfinishedShredError(
        f"run {latest}: its dedup completed and its shred did not (no {shred_folder}/{SUCCESS_MARKER}), so its "
        f"events are not in the warehouse yet; nothing was written. Complete it first: python -m jobs shred --input "
        f"{dedup_folder}/good --output {shredded.rstrip('/')} --run-id {latest}{shred_options}, with its --config as "
        f"it was.{stale}"
    )
