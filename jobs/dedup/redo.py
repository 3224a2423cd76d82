"""The checks before a redo of a completed run (or of its redo, stopped before its seal) writes anything: later runs
decided against the events it recorded in its manifest, so the redo must use that manifest and an input that still
holds those events."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame

from jobs.contract import SUCCESS_MARKER
from jobs.dedup.stale import earlier_roots, last_completed
from jobs.errors import DamagedFileError, InvalidArgumentError
from jobs.fs.paths import normalized
from jobs.fs.run_folder import RunFolder
from jobs.fs.runs import run_folder
from jobs.manifest import Manifest, ManifestRun
from jobs.manifest.base import run_key
from jobs.manifest.completions import CompletedRuns, ManifestUsed
from jobs.manifest.registration import read_marker
from jobs.runtime.invocation import absolute_uri


def refuse_another_manifest(folder: RunFolder, given: str | None, identity_of_given: Callable[[], str | None]) -> bool:
    """A redo of a completed run (or of its redo, stopped before its seal) must use the manifest the run completed
    with (by its URI, or by the identity a copy of it keeps, `identity_of_given`), in the folder it completed in:
    later runs decided against its entries there, and a redo elsewhere (or with none) checks nothing of them.
    Returns whether the folder holds (or held) a completed run.

    Raises:
        InvalidArgumentError: the run completed with another manifest, or with none, or in another folder (nothing
            was written).
    """
    completed = folder.completed_summary()
    marker = _own_marker(folder) if completed is None else None
    if completed is None and marker is not None and marker.get("completed_before"):  # its `_COMPLETED_BEFORE` lost
        completed = {"manifest": marker["manifest"], "output": marker.get("folder")}
    if completed is None:
        return False
    used: dict[str, Any] = completed["manifest"] if isinstance(completed.get("manifest"), dict) else {}
    recorded = used.get("uri")
    if recorded is not None:
        _refuse_another_folder(folder, used, completed.get("output"))
    if _same_manifest(recorded, given) or (
        given is not None and used.get("identity") is not None and used["identity"] == identity_of_given()
    ):
        return True
    allowed = f"--manifest {shlex.quote(absolute_uri(recorded))}" if recorded else "no --manifest"
    raise InvalidArgumentError(
        f"--manifest: run {folder.run_id} completed in {folder.path} with {recorded or 'no manifest'}, and this redo "
        f"gives {given or 'none'}: it could not check the events later runs decided against there. Allowed: "
        f"{allowed} (as it completed), or a new run id for the batch. Nothing was written"
    )


def _refuse_another_folder(folder: RunFolder, used: dict[str, Any], recorded: Any) -> None:
    """The manifest knows a run's events by its run key, made of the folder it ran in (resolved): a redo in the same
    output moved, named another way, or through a link that leads elsewhere now would take them for another run's
    (attack 58's 05: 195 events in no completed output, exit 0; attack 59's 05, a link repointed: 148). The key the
    summary recorded is compared; summaries from before it, by their folder (as given: absolute paths only)."""
    key = run_key(folder.path, folder.run_id)
    if isinstance(used.get("run_key"), str):
        if used["run_key"] != key:
            raise _moved(folder.run_id, str(used.get("run_folder") or recorded), normalized(folder.path))
        return
    if isinstance(recorded, str) and recorded.startswith(("/", "s3")) and run_key(recorded, folder.run_id) != key:
        raise _moved(folder.run_id, recorded, folder.path)


def refuse_a_moved_run(completions: CompletedRuns, output_root: str, manifest: ManifestUsed, run_id: str) -> None:
    """As `_refuse_another_folder`, for a run folder whose summary is gone (or the folder itself, to redo it clean):
    the manifest holds a completion of run `run_id` at a place the output's `_LAST_COMPLETED.json` says its runs
    completed at before it was moved (attack 59's 01: 0 of 149 events delivered, exit 0).

    Raises:
        InvalidArgumentError: named, with the way on (nothing was written).
    """
    root = normalized(output_root)
    _, entry = last_completed(root, manifest)
    for earlier in earlier_roots(entry, root):
        then = run_folder(earlier, run_id)
        if completions.attempt(run_key(then, run_id)) is not None:
            raise _moved(run_id, then, run_folder(root, run_id))


TIMED_ATTEMPT = re.compile(r"\d{8}T\d{12}Z-[0-9a-f]+")
"""`bookkeeping.new_attempt`'s ids, which sort by time (the first ones, a bare random hex, do not)."""


def refuse_an_overtaken_redo(completions: CompletedRuns, key: str, folder: RunFolder, manifest_uri: str) -> None:
    """A completed run's redo, when another output's run of the same id completed after it: that run decided
    against this one's entries, and the entries of both have one second, so which came first is known only from
    their completions; with cross-batch synthetic detection, a redo would take that run's records of the synthetic
    copies it found as delivered before it (attack 59's 04: 2 events in no completed output, exit 0).

    Raises:
        InvalidArgumentError: named, with the way on (nothing was written).
    """
    own = completions.attempt(key)
    if own is None or not TIMED_ATTEMPT.fullmatch(own):
        return
    after = sorted(
        other for other, attempt in completions.of_run_id(folder.run_id).items()
        if other != key and TIMED_ATTEMPT.fullmatch(attempt) and attempt > own
    )  # fmt: skip
    if after:
        raise InvalidArgumentError(
            f"--run-id: run {folder.run_id} completed in {folder.path}, and after it another output's run of the same "
            f"id on {manifest_uri} (run key {after[0]}) decided against its events; the entries of both runs have "
            "one time, so a redo could not tell which came first and would take that run's copies of its events as "
            "delivered before it. Allowed: the completed run as it is (a new run id for a new batch). Nothing was "
            "written"
        )


def _moved(run_id: str, then: str, now: str) -> InvalidArgumentError:
    root = then.rstrip("/").rsplit("/", 1)[0]
    return InvalidArgumentError(
        f"--output: run {run_id} completed in {then}, not {now} (the output was moved, or is named another way or "
        "through a link that leads elsewhere now): "
        "its manifest knows the run's events by the folder it completed in, so a redo here would take them for "
        f"another run's and deliver none of them. Allowed: the output where it completed (--output "
        f"{shlex.quote(root)}: move it back first), or a new run id for the batch. Nothing was written"
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
