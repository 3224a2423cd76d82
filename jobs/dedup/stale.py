"""An older copy of a manifest put back in its place (a backup restored, a file copied over), found before it is used.

Such a copy lacks the pairs of the runs that completed after it was taken: every later run would deliver their
events again, exit 0. The manifest's register counts the runs that register in it (`RunRegister.generation`), and
each dedup run records the count after its own writes in its `summary.json` (`manifest.generation`). A run first reads the
summary of the newest completed run of its output that used the same manifest: a manifest whose count is below
the one recorded there is an older copy, and the run stops before it writes anything.

Back-filling what the copy lacks (`populate-manifest` over the output) raises the count to the highest its completed
run folders recorded (`advance`), which lets runs go on. Runs completed before the count was kept record none:
nothing is checked for them. The lake's count is its commit number (a back-fill raises it in a commit of its own).
"""

from __future__ import annotations

import re
import shlex

from jobs.contract import SUCCESS_MARKER, SUMMARY
from jobs.errors import DamagedFileError
from jobs.fs import store
from jobs.fs.runs import RUN_ID_PATTERN
from jobs.manifest.unfinished import RunRegister
from jobs.prog import local_prog

RUN_FOLDER = re.compile(f"run=({RUN_ID_PATTERN.pattern})")


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
    newest = RUN_FOLDER.fullmatch(path.rstrip("/").rsplit("/", 2)[-2])
    run_id = newest.group(1) if newest else ""
    back_fill = (  # at the newest run's time: the pairs then count as earlier for every run after it
        f"{local_prog()} populate-manifest --input {shlex.quote(output_root)} --manifest {shlex.quote(manifest_uri)} "
        f"--run-id {run_id}"
    )
    raise StaleManifestError(
        f"manifest {manifest_uri} is an older copy: {path} records it at generation {generation} (each run adds to "
        f"it), and it is at {current}, so the events of the runs completed after the copy was taken would be delivered again; "
        f"nothing was written. Put the newest copy back, or back-fill the completed runs into it ({back_fill}, "
        "and the same for every other output that uses it), then run again"
    )
