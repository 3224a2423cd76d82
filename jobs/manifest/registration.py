"""The output's own record of its runs that write to a manifest: `OUT/_registered/run=ID.json`.

The manifest's register of unfinished runs (`jobs.manifest.unfinished`) is the record later runs stop on; this is
its second copy, kept where the run's events go. A dedup run with a manifest writes its marker as it registers, just
before its first manifest write and before a completed output of it is cleared (naming the manifest, whether the
folder held a completed run, and the command that redoes it), and removes it after its completion is recorded: a
run that stops before (bad input, say) leaves neither. So when the manifest's entry is gone (a row deleted, a
lake's `_runs/` lost, an older copy put back), the next run of the output still finds the run that did not complete
and stops; and a redo of a completed run whose `_COMPLETED_BEFORE` was removed is still held to the manifest it
completed with (`jobs.dedup.redo`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from jobs.contract import SUCCESS_MARKER
from jobs.errors import DamagedFileError
from jobs.fs import store
from jobs.manifest.base import RegisteredRun
from jobs.manifest.completions import ManifestUsed
from jobs.manifest.unfinished import RunRegister, UnfinishedRunError

REGISTERED = "_registered"
"""Beside the run folders (hidden from Spark and from the listers, as `_leases` and `_ledger` are)."""


def marker_path(output_root: str, run_id: str) -> str:
    return f"{output_root.rstrip('/')}/{REGISTERED}/run={run_id}.json"


def write_marker(output_root: str, run: RegisteredRun, manifest: dict[str, Any]) -> None:
    """Before the run clears its folder or writes to the manifest: `manifest` as `_LAST_COMPLETED.json` names it."""
    document = {**asdict(run), "manifest": manifest}
    store.write_bytes(marker_path(output_root, run.run_id), (json.dumps(document, indent=1) + "\n").encode())


def remove_marker(output_root: str, run_id: str) -> None:
    store.delete(marker_path(output_root, run_id))


def read_marker(output_root: str, run_id: str) -> dict[str, Any] | None:
    """The marker of run `run_id`, if any.

    Raises:
        DamagedFileError: it is cut or of another kind (named).
    """
    path = marker_path(output_root, run_id)
    document = store.read_json(path, _way_out(path))
    if document is not None and not (isinstance(document, dict) and isinstance(document.get("manifest"), dict)):
        raise DamagedFileError(f"{path} is no marker of a dedup run; {_way_out(path)}")
    return document


def _way_out(path: str) -> str:
    return (
        f"restore it from a copy, or remove {path} and run again (the manifest's register still names that run if it "
        "did not complete, and the next run then prints its redo)"
    )


def marked_run(output_root: str, run_id: str, manifest: ManifestUsed) -> RegisteredRun | None:
    """The run `run_id` of `output_root` as its marker records it, when the marker names `manifest`."""
    marker = read_marker(output_root, run_id)
    if marker is None or not manifest.names(marker["manifest"]):
        return None
    return RegisteredRun(**{name: marker[name] for name in RegisteredRun.__dataclass_fields__})


def sealed_marked_runs(
    output_root: str, manifest: ManifestUsed, own_run_id: str = ""
) -> list[tuple[str, RegisteredRun]]:
    """The runs of `output_root` (but `own_run_id`, whose marker its run writes anew) whose marker names `manifest`
    and whose folder is sealed (killed between their `_SUCCESS` and the marker's removal), with their marker's path."""
    found = []
    for file in store.list_files(f"{output_root.rstrip('/')}/{REGISTERED}"):
        run_id = file.path.rsplit("/run=", 1)[-1].removesuffix(".json")
        run = marked_run(output_root, run_id, manifest) if run_id != own_run_id else None
        if run is not None and store.exists(f"{run.folder}/{SUCCESS_MARKER}"):
            found.append((file.path, run))
    return found


def require_registered(register: RunRegister, output_root: str, manifest: ManifestUsed, own_run_id: str) -> None:
    """Stop when a run of `output_root` marked as writing to this manifest has not completed and the manifest's
    register has no entry for it (the entry's stop, with its own line, comes from the register); a marker whose run
    sealed its folder (killed before removing it) is removed.

    Raises:
        UnfinishedRunError: named, with the command that redoes the run (nothing was written).
    """
    folder, manifest_uri = f"{output_root.rstrip('/')}/{REGISTERED}", manifest.uri
    keys = {run.key for run in register.unfinished()}
    for file in store.list_files(folder):
        run_id = file.path.rsplit("/run=", 1)[-1].removesuffix(".json")
        run = marked_run(output_root, run_id, manifest) if run_id != own_run_id else None
        if run is None:
            continue
        if store.exists(f"{run.folder}/{SUCCESS_MARKER}"):
            remove_marker(output_root, run_id)
        elif run.key not in keys:
            abandon = (
                ""
                if run.completed_before
                else f"If its input is gone for good, {run.abandon_command(manifest_uri)} abandons it (its events "
                "then wait for a later batch). Else r"
            )
            raise UnfinishedRunError(
                f"manifest {manifest_uri}: run {run_id} of {output_root} wrote to it and has not completed (no "
                f"{run.folder}/{SUCCESS_MARKER}; {file.path} says so), and the manifest's register of unfinished runs "
                "has lost its entry (removed by hand, or with the lake's _runs/), so no later run may decide against "
                f"its events; nothing was written. {abandon or 'R'}edo it first: {run.redo}"
            )
