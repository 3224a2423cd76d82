"""The register of unfinished shreds: `OUT/_shred_pending/run=ID.json` beside the dedup run folders `OUT/run=ID/`.

A dedup run whose shred follows (`run`, or `dedup --shredded SHRED_OUT` as the deployed state machine runs it)
writes its marker just before it seals `OUT/run=ID/`; the shred of that run folder removes it after its own
`_SUCCESS`. The next such run stops while any other run's marker has no shred `_SUCCESS`, whatever the ids'
order (a late batch run with an earlier id is looked at as much as the latest). Local and `s3://` outputs
(`jobs.fs.store`): the check runs before Spark starts, and on AWS the markers lie under the dedup output prefix
the jobs already write.
"""

from __future__ import annotations

import json
import shlex
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from jobs.contract import SUCCESS_MARKER, SUMMARY
from jobs.fs import store
from jobs.fs.runs import UnfinishedShredError, run_folder, run_lease
from jobs.prog import local_prog

PENDING = "_shred_pending"
"""Beside the run folders (hidden from Spark and from the listers, as `_leases` and `_ledger` are)."""


class DamagedShredMarkerError(UnfinishedShredError):
    """A marker that is not the JSON a dedup run writes: changed by hand or damaged (exit 1)."""


@dataclass(frozen=True)
class PendingShred:
    """The shred that must follow dedup run `run_id`: its input (the dedup run folder), its output and options."""

    run_id: str
    deduplicated: str
    """The dedup output (the folder of the run folders)."""
    shredded: str
    """The shred output."""
    options: tuple[str, ...] = ()
    """The shred command's other arguments (`--config FILE`, `--format …`), paths as given to the run."""
    attempt: str = ""
    """The dedup attempt the marker was written by (a random token, new with each `write`): the shred that read it
    names it in its summary (`dedup_attempt`), so a shred of an earlier attempt of the run does not count."""

    @property
    def dedup_folder(self) -> str:
        return run_folder(self.deduplicated, self.run_id)

    @property
    def shred_folder(self) -> str:
        return run_folder(self.shredded, self.run_id)

    @property
    def marker(self) -> str:
        return marker_path(self.deduplicated, self.run_id)

    def command(self) -> str:
        """The shred command that completes it, every path shell-quoted (pasteable as printed)."""
        argv = ["--input", f"{self.dedup_folder}/good", "--output", self.shredded.rstrip("/"),
                "--run-id", self.run_id, *self.options]  # fmt: skip
        return f"{local_prog()} shred {shlex.join(argv)}"

    def write(self) -> None:
        """Write the marker whole (a temporary file renamed locally, one PUT on S3); a redo's replaces its own."""
        document = {"run_id": self.run_id, "dedup": self.dedup_folder, "shredded": self.shredded.rstrip("/"),
                    "options": list(self.options), "command": self.command(), "attempt": uuid.uuid4().hex}  # fmt: skip
        store.write_bytes(self.marker, (json.dumps(document, indent=2) + "\n").encode("utf-8"))


def marker_path(deduplicated: str, run_id: str) -> str:
    """`OUT/_shred_pending/run=ID.json`, the marker of dedup run `run_id` under the dedup output `deduplicated`."""
    return f"{deduplicated.rstrip('/')}/{PENDING}/run={run_id}.json"


def read_marker(deduplicated: str, run_id: str) -> PendingShred | None:
    """The marker of run `run_id`, or None when there is none.

    Raises:
        DamagedShredMarkerError: it is no marker a dedup run wrote (named, with the way out).
    """
    path = marker_path(deduplicated, run_id)
    data = store.read_bytes(path)
    if data is None:
        return None
    try:
        document = json.loads(data)
        pending = PendingShred(run_id, deduplicated.rstrip("/"), str(document["shredded"]),
                               tuple(str(option) for option in document["options"]), str(document["attempt"]))  # fmt: skip
    except (ValueError, KeyError, TypeError) as err:
        raise DamagedShredMarkerError(
            f"{path}: not a shred marker as a dedup run writes it ({type(err).__name__}: {err}); nothing was written. "
            f"Complete run {run_id}'s shred ({local_prog()} shred --input {shlex.quote(run_folder(deduplicated, run_id))}"
            f"/good with its pipeline's --output, --run-id {run_id} and options), then remove the marker"
        ) from None
    return pending


def pending_run_ids(deduplicated: str) -> list[str]:
    """The run ids with a marker under `deduplicated`, sorted (temporary and stray names left out)."""
    names = store.children(f"{deduplicated.rstrip('/')}/{PENDING}")
    return [name[len("run=") : -len(".json")] for name in names if name.startswith("run=") and name.endswith(".json")]


def require_shreds_complete(deduplicated: str, run_id: str) -> None:
    """Stop while a dedup run other than `run_id` sealed its folder and its shred has not: its events would never
    reach the warehouse. A marker whose shred is sealed (killed between `_SUCCESS` and the marker's removal) is
    removed; a marker whose dedup is not sealed is left to the dedup's own checks (the manifest's register, the
    ledger) until a redo seals it.

    Raises:
        UnfinishedShredError: the earliest such run named, with the shred command that completes it.
    """
    unfinished = []
    for other in pending_run_ids(deduplicated):
        pending = read_marker(deduplicated, other)
        if other == run_id or pending is None or not store.exists(f"{pending.dedup_folder}/{SUCCESS_MARKER}"):
            continue
        if shred_sealed(pending):
            store.delete(pending.marker)
            continue
        unfinished.append(pending)
    if unfinished:
        raise unfinished_shred(unfinished[0], [pending.run_id for pending in unfinished[1:]])


def shred_sealed(pending: PendingShred) -> bool:
    """True when the shred folder the marker names is sealed by a shred of the marker's dedup attempt."""
    if not store.exists(f"{pending.shred_folder}/{SUCCESS_MARKER}"):
        return False
    try:
        summary = json.loads(store.read_bytes(f"{pending.shred_folder}/{SUMMARY}") or b"{}")
    except ValueError:
        return False  # a damaged summary seals nothing: the shred is done again
    return isinstance(summary, dict) and summary.get("dedup_attempt") == pending.attempt


def unfinished_shred(pending: PendingShred, others: Sequence[str] = ()) -> UnfinishedShredError:
    """The one-line error naming the run, its stale lease if any, and the command that completes its shred."""
    lease = run_lease(pending.shredded, pending.run_id)
    stale = f" Its lease {lease} is still there: once that run is gone, remove it first." if store.exists(lease) else ""
    more = f" The shreds of {len(others)} more run(s) have not completed either: {', '.join(others)}." if others else ""
    return UnfinishedShredError(
        f"run {pending.run_id}: its dedup completed and its shred did not (no {pending.shred_folder}/{SUCCESS_MARKER}),"
        f" so its events are not in the warehouse yet; nothing was written.{stale}{more} Complete it first, then run "
        f"again: {pending.command()}"
    )


def _dedup_run_of(input_path: str) -> tuple[str, str] | None:
    """(dedup output, run id) of a shred input `OUT/run=ID/good`; None for any other input."""
    dedup_folder, _, good = input_path.rstrip("/").rpartition("/")
    deduplicated, _, name = dedup_folder.rpartition("/")
    if good != "good" or not name.startswith("run=") or not deduplicated or not store.supported(dedup_folder):
        return None
    return deduplicated, name.removeprefix("run=")


def consumed_attempt(input_path: str) -> str | None:
    """The dedup attempt a shred of `input_path` consumes (read before its input): its marker's token, or None
    when the input is no dedup run folder with a readable marker."""
    run = _dedup_run_of(input_path)
    try:
        pending = read_marker(*run) if run else None
    except DamagedShredMarkerError:
        return None
    return pending.attempt if pending else None


def shred_completed(input_path: str, shred_folder: str, attempt: str | None) -> None:
    """Remove the marker of the dedup run folder `input_path` (`OUT/run=ID/good`) is, once the shred into
    `shred_folder` that consumed dedup `attempt` has sealed: only a marker naming that folder and attempt (or an
    unreadable one), so a shred written elsewhere, or of an earlier attempt, leaves the pending one pending."""
    run = _dedup_run_of(input_path)
    if run is None:
        return
    try:
        pending = read_marker(*run)
    except DamagedShredMarkerError:
        store.delete(marker_path(*run))  # this shred consumed that very dedup run folder
        return
    if pending is not None and pending.shred_folder == shred_folder.rstrip("/") and pending.attempt == attempt:
        store.delete(pending.marker)


def require_earlier_shred_complete(deduplicated: str, shredded: str, run_id: str, options: Sequence[str] = ()) -> None:
    """`require_shreds_complete`, then the check of the runs before the markers: the latest run before `run_id`
    whose dedup completed and whose shred under `shredded` did not, with no marker, stops the run too (`options`:
    the shred command's other arguments, this run's). A run sealed since the markers has one until its shred has
    sealed, so this only ever stops on a run from before them (or a dedup run with no shred meant to follow).

    Raises:
        UnfinishedShredError: named, with the shred command that completes it.
    """
    require_shreds_complete(deduplicated, run_id)
    earlier = [name.removeprefix("run=") for name in store.children(deduplicated) if name.startswith("run=")]
    earlier = [other for other in earlier if other < run_id]
    if not earlier:
        return
    latest = PendingShred(max(earlier), deduplicated.rstrip("/"), shredded.rstrip("/"), tuple(options))
    if store.exists(f"{latest.dedup_folder}/{SUCCESS_MARKER}") and not store.exists(
        f"{latest.shred_folder}/{SUCCESS_MARKER}"
    ):
        raise unfinished_shred(latest)


def is_sealed_dedup_output(path: str) -> bool:
    """`path` is a completed dedup run folder, or its `good/` (local or `s3://`, no Spark): a batch whose lines may
    all have been removed (each a copy of an earlier run's event, or bad), which shred turns into an empty, sealed
    run rather than refusing (a refusal would leave that run's shred unfinished for good)."""
    folder = path.rstrip("/").removesuffix("/good")
    if not store.exists(f"{folder}/{SUCCESS_MARKER}"):
        return False
    summary = store.read_json(f"{folder}/{SUMMARY}", "restore it from a copy, or redo that dedup run")
    return isinstance(summary, dict) and summary.get("job") == "dedup"
