"""The checks before a redo of a completed run (or of its redo, stopped before its seal) writes anything: later runs
decided against the events it recorded in its manifest, so the redo must use that manifest and an input that still
holds those events."""

from __future__ import annotations

import shlex
from typing import Any

from pyspark.sql import DataFrame

from jobs.contract import SUCCESS_MARKER
from jobs.errors import DamagedFileError, InvalidArgumentError
from jobs.fs.run_folder import RunFolder
from jobs.manifest import Manifest, ManifestRun
from jobs.manifest.registration import read_marker
from jobs.runtime.invocation import absolute_uri


def refuse_another_manifest(folder: RunFolder, given: str | None) -> bool:
    """A redo of a completed run (or of its redo, stopped before its seal) must use the manifest the run completed
    with: later runs decided against its entries there, and a redo elsewhere (or with none) checks nothing of them.
    Returns whether the folder holds (or held) a completed run.

    Raises:
        InvalidArgumentError: the run completed with another manifest, or with none (nothing was written).
    """
    completed = folder.completed_summary()
    marker = _own_marker(folder) if completed is None else None
    if completed is None and marker is not None and marker.get("completed_before"):  # its `_COMPLETED_BEFORE` lost
        completed = {"manifest": marker["manifest"]}
    if completed is None:
        return False
    recorded = completed.get("manifest", {}).get("uri") if isinstance(completed.get("manifest"), dict) else None
    if _same_manifest(recorded, given):
        return True
    allowed = f"--manifest {shlex.quote(absolute_uri(recorded))}" if recorded else "no --manifest"
    raise InvalidArgumentError(
        f"--manifest: run {folder.run_id} completed in {folder.path} with {recorded or 'no manifest'}, and this redo "
        f"gives {given or 'none'}: it could not check the events later runs decided against there. Allowed: "
        f"{allowed} (as it completed), or a new run id for the batch. Nothing was written"
    )


def _own_marker(folder: RunFolder) -> dict[str, Any] | None:
    """The run's own marker (`jobs.manifest.registration`); a damaged one counts as none: this run writes it anew
    as it registers (attack 58's 09: its line said to redo the run, which then stopped on it)."""
    try:
        return read_marker(folder.path.rstrip("/").rsplit("/", 1)[0], folder.run_id)
    except DamagedFileError:
        return None


def _same_manifest(recorded: str | None, given: str | None) -> bool:
    """Whether `given` names the manifest a summary recorded: summaries before absolute URIs hold the path as given,
    relative to a folder they do not name, which matches any manifest path ending in it."""
    if recorded is None or given is None:
        return recorded == given
    wanted = absolute_uri(given)
    if wanted == absolute_uri(recorded):
        return True
    scheme = next((prefix for prefix in ("sqlite:", "lake:") if recorded.startswith(prefix)), None)
    relative = recorded.removeprefix(scheme or "")
    if scheme is None or relative.startswith(("/", "s3://")):
        return False
    return wanted.startswith(scheme) and wanted.endswith("/" + relative.removeprefix("./"))


def refuse_a_shrunk_redo(manifest: Manifest, pairs: DataFrame, run: ManifestRun, folder: RunFolder) -> None:
    """A redo of a completed run (or of its redo, stopped before its seal) would remove the entries of the events its
    input no longer holds; a later run may have found those events as copies of this run's, so they would be in no
    completed output.

    Raises:
        InvalidArgumentError: the batch lacks events the completed attempt recorded (nothing was written).
    """
    lacking = manifest.leftovers(pairs, run)
    if not lacking:
        return
    recorded = (
        f"--input: run {run.run_id} completed in {folder.path}, recording {lacking:,} event(s) in {manifest.uri} "
        "that this input no longer holds; a redo would take them out of the manifest, and a later run may have found "
        "them as copies, so they would be in no completed output."
    )
    if folder.sealed:
        raise InvalidArgumentError(
            f"{recorded} Allowed: the input it completed with (restore the files), or a new run id for the changed "
            "batch (the completed run stays as it is). Nothing was written"
        )
    raise InvalidArgumentError(
        f"{recorded} A redo of it stopped before its seal (no {folder.path}/{SUCCESS_MARKER}), so only an input "
        "holding them may redo it: the files it completed with, and any file its stopped redo read besides; restore "
        "them, then run again. Nothing was written"
    )
