"""An older copy of a manifest put back in its place (a backup restored, a file copied over), found before it is used.

Such a copy lacks the pairs of the runs that completed after it was taken: every later run would deliver their
events again, exit 0. Each dedup run with a manifest records its completion in the manifest
(`jobs.manifest.completions`: its run key and the id of this attempt; recorded just before its `_SUCCESS`), then
names that completion in its output's `_LAST_COMPLETED.json`, one entry per manifest. A run first looks the entry for its manifest up in the manifest: a
manifest that lacks it (or holds an earlier attempt of it) was copied before that run completed, and the run stops before it
writes anything. Runs on one manifest are serialized by its writer lease, so a copy that holds the newest completion
holds every earlier one: whatever other outputs did with the copy since, whatever the ids' order.

Back-filling what the copy lacks (`populate-manifest` over the output) records that completion again. An output
whose runs predate `_LAST_COMPLETED.json` is checked the earlier way: the manifest's count of registered runs
(`RunRegister.generation`) against the one its newest run recorded in `summary.json` (`manifest.generation`)."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from jobs.contract import LAST_COMPLETED, SUCCESS_MARKER, SUMMARY
from jobs.errors import DamagedFileError
from jobs.fs import store
from jobs.fs.paths import normalized
from jobs.fs.runs import RUN_ID_PATTERN
from jobs.manifest.base import RegisteredRun
from jobs.manifest.completions import CompletedRuns, ManifestUsed
from jobs.manifest.registration import sealed_marked_runs
from jobs.manifest.unfinished import RunRegister
from jobs.prog import local_prog

RUN_FOLDER = re.compile(f"run=({RUN_ID_PATTERN.pattern})")
BACK_FILLED_ATTEMPT = "0-back-filled"
"""The attempt recorded for a run that no `_LAST_COMPLETED.json` names (it sorts before every attempt id)."""


class StaleManifestError(DamagedFileError):
    """The manifest counts fewer registered runs than a completed run of the output recorded (exit 1)."""


def recorded_generation(output_root: str, manifest_uri: str) -> tuple[str, int] | None:
    """The summary of the newest completed run directly under `output_root` that used `manifest_uri`, and the
    generation it recorded; None when there is none, or that run recorded none (it predates the count)."""
    root = output_root.rstrip("/")
    runs = sorted((name for name in store.subfolders(root) if RUN_FOLDER.fullmatch(name)), reverse=True)
    for name in runs:
        folder = f"{root}/{name}"
        if not store.exists(f"{folder}/{SUCCESS_MARKER}"):
            continue
        path = f"{folder}/{SUMMARY}"
        summary = store.read_json(path, "restore it from a copy, or redo its run")
        manifest = (summary or {}).get("manifest") if isinstance(summary, dict) else None
        if not isinstance(manifest, dict) or manifest.get("uri") != manifest_uri:
            continue  # a run without a manifest, or with another one
        generation = manifest.get("generation")
        return (path, generation) if isinstance(generation, int) else None
    return None


def highest_recorded_generation(run_folders: list[str], manifest_uri: str) -> int:
    """The highest generation the summaries of the completed `run_folders` recorded for `manifest_uri` (0: none)."""
    found = [0]
    for folder in run_folders:
        summary = store.read_json(f"{folder.rstrip('/')}/{SUMMARY}", "restore it from a copy, or redo its run")
        manifest = summary.get("manifest") if isinstance(summary, dict) else None
        if isinstance(manifest, dict) and manifest.get("uri") == manifest_uri:
            generation = manifest.get("generation")
            found.append(generation if isinstance(generation, int) else 0)
    return max(found)


def require_not_older(register: RunRegister, output_root: str, manifest_uri: str) -> None:
    """Stop when the manifest counts fewer registered runs than the newest completed run of `output_root` recorded.

    Raises:
        StaleManifestError: named, with the two ways on (nothing was written).
    """
    current = register.generation()
    recorded = recorded_generation(output_root, manifest_uri) if current is not None else None
    if recorded is None or current is None or current >= recorded[1]:
        return
    path, generation = recorded
    raise StaleManifestError(
        f"manifest {manifest_uri} is an older copy: {path} records it at generation {generation} (each run adds to "
        f"it), and it is at {current}, so the events of the runs completed after the copy was taken would be "
        f"delivered again; nothing was written. {_ways_on(output_root, manifest_uri)}"
    )


def last_completed(output_root: str, manifest: ManifestUsed) -> tuple[str, dict[str, Any] | None]:
    """The path of `output_root`'s `_LAST_COMPLETED.json` and its entry for `manifest` (None: there is none)."""
    path = f"{output_root.rstrip('/')}/{LAST_COMPLETED}"
    return path, next((entry for entry in _entries(path) if manifest.names(entry)), None)


def _entries(path: str) -> list[dict[str, Any]]:
    """The entries of the `_LAST_COMPLETED.json` at `path`, one per manifest ([]: there is none)."""
    document = store.read_json(
        path, "put its earlier copy back, or remove it (its output's runs are then checked as before it was kept)"
    )
    entries = document.get("manifests", []) if isinstance(document, dict) else []
    return [entry for entry in entries if isinstance(entry, dict)]


def record_completion(completions: CompletedRuns, output_root: str, run: RegisteredRun, attempt: str) -> None:
    """Record in the manifest that `attempt` of `run` completed, before its folder is sealed: an outage here stops
    the run unsealed (its register entry asks for its redo), so a sealed run's completion is always in the manifest
    and a copy taken before it lacks it (attack 59's 02: sealed, unrecorded, then an older copy let through)."""
    completions.record(run.key, attempt, run.ttl, normalized(output_root))


def name_completion(output_root: str, manifest: ManifestUsed, run: RegisteredRun, attempt: str) -> None:
    """Once the run's folder is sealed: name its completion in `output_root`'s `_LAST_COMPLETED.json` (a kill
    before leaves the file naming the run before, which the manifest holds), with the output's earlier places
    (`moved_from`: the roots its runs completed at before it was moved, whose run keys the manifest knows)."""
    root = normalized(output_root)
    path = f"{root}/{LAST_COMPLETED}"
    entries = _entries(path)
    previous = next((entry for entry in entries if manifest.names(entry)), None)
    entries = [entry for entry in entries if entry is not previous]
    entries.append({
        "uri": manifest.uri, "place": manifest.place, "identity": manifest.identity, "run_id": run.run_id,
        "run_key": run.key, "attempt": attempt, "ttl": run.ttl, "folder": run.folder, "root": root,
        "moved_from": earlier_roots(previous, root),
    })  # fmt: skip
    store.write_bytes(path, (json.dumps({"manifests": entries}, indent=1) + "\n").encode())


def earlier_roots(entry: dict[str, Any] | None, root: str) -> list[str]:
    """The places other than `root` where the output's runs completed, as its `_LAST_COMPLETED.json` `entry` names
    them (its last run's place, resolved then: a link repointed since still names the old one; and the places it
    was moved from before)."""
    if entry is None:
        return []
    moved_from = entry.get("moved_from")
    roots = {str(place) for place in moved_from} if isinstance(moved_from, list) else set()
    if isinstance(entry.get("root"), str):
        roots.add(entry["root"])
    elif isinstance(entry.get("folder"), str):  # an entry from before `root`
        roots.add(normalized(entry["folder"].rstrip("/").rsplit("/", 1)[0]))
    return sorted(roots - {root})


def require_completions(
    completions: CompletedRuns, register: RunRegister, output_root: str, manifest: ManifestUsed, now: int
) -> None:
    """Stop when the manifest lacks the last completion of a run of `output_root`, or of any other output whose runs
    completed with it (an older copy put back); an output without `_LAST_COMPLETED.json` for it: checked by count.

    Raises:
        StaleManifestError: named, with the two ways on (nothing was written).
    """
    root = normalized(output_root)
    path, entry = last_completed(root, manifest)
    if entry is None:
        require_not_older(register, output_root, manifest.uri)
    for output in [root, *sorted(set(completions.outputs()) - {root})]:  # its own output first
        if output != root:
            path, entry = last_completed(output, manifest)
        if entry is None or not isinstance(entry.get("ttl"), int) or entry["ttl"] <= now:
            continue  # none, or its pairs have expired with it
        found, named = completions.attempt(str(entry.get("run_key"))), str(entry.get("attempt"))
        if found is None or found < named:  # a later attempt: killed before the output named it
            raise StaleManifestError(_older_copy(manifest.uri, output, path, str(entry.get("run_id")), found))


def require_sealed_runs_recorded(
    completions: CompletedRuns, output_root: str, manifest: ManifestUsed, own_run_id: str
) -> None:
    """Stop when a run of `output_root` that sealed its folder after recording its completion, and was stopped
    before naming it in `_LAST_COMPLETED.json` (its marker is still there), is not in the manifest: an older copy
    (attack 59's 08: 7 events delivered again, exit 0).

    Raises:
        StaleManifestError: named, with the two ways on (nothing was written).
    """
    root = normalized(output_root)
    for path, run in sealed_marked_runs(root, manifest, own_run_id):
        if completions.attempt(run.key) is None:
            raise StaleManifestError(_older_copy(manifest.uri, root, path, run.run_id, None))


def newest_completed_run_id(output_root: str) -> str | None:
    """The highest run id of the completed run folders directly under `output_root`."""
    root = output_root.rstrip("/")
    runs = sorted((name for name in store.subfolders(root) if RUN_FOLDER.fullmatch(name)), reverse=True)
    sealed = (RUN_FOLDER.fullmatch(name) for name in runs if store.exists(f"{root}/{name}/{SUCCESS_MARKER}"))
    return next((found.group(1) for found in sealed if found), None)


def _older_copy(manifest_uri: str, output: str, path: str, run_id: str, found: str | None) -> str:
    holds = "holds an earlier attempt of it" if found is not None else "lacks it"
    return (
        f"manifest {manifest_uri} is an older copy: run {run_id} of {output} completed with it ({path}), and it "
        f"{holds}, so the events of the runs completed after the copy was taken would be delivered again; nothing "
        f"was written. {_ways_on(output, manifest_uri)}"
    )


def _ways_on(output: str, manifest_uri: str) -> str:
    back_fill = (  # each run folder at its own run's time; the run id: for files outside run folders
        f"{local_prog()} populate-manifest --input {shlex.quote(output)} --manifest {shlex.quote(manifest_uri)} "
        f"--run-id {newest_completed_run_id(output)}"
    )
    return (
        f"Put the newest copy back, or back-fill the completed runs into it ({back_fill}, and the same for every "
        "other output that uses it), then run again"
    )


def record_back_filled(completions: CompletedRuns, output_roots: list[str], manifest: ManifestUsed) -> None:
    """After a back-fill of the completed run folders under `output_roots` into the manifest: the last completion
    each output's `_LAST_COMPLETED.json` names for it recorded again, when that run's folder is sealed (its `good/`
    was back-filled)."""
    for output in output_roots:
        _, entry = last_completed(normalized(output), manifest)
        if entry is None or not store.exists(f"{str(entry.get('folder')).rstrip('/')}/{SUCCESS_MARKER}"):
            continue
        completions.record(str(entry["run_key"]), str(entry["attempt"]), int(entry["ttl"]), normalized(output))
    for output in output_roots:  # sealed runs stopped before naming their completion: recorded as back-filled
        for _, run in sealed_marked_runs(normalized(output), manifest):
            if completions.attempt(run.key) is None:
                completions.record(run.key, BACK_FILLED_ATTEMPT, run.ttl, normalized(output))
