"""Abandoning a run that can never be redone (its input is gone): `python -m jobs manifest abandon`.

A run that recorded its pairs and did not complete stops every later run (`unfinished`) until it is redone. When
its input is gone for good, it cannot be: abandoning it removes its pairs (by its run key; entries recorded
without a key at its second, before run keys, are its own too) and its register entry, under the manifest's
writer lease. Its events are then in no completed output and in no manifest entry: a later batch holding them
delivers them.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from jobs.contract import COMPLETED_BEFORE, SUCCESS_MARKER, Progress
from jobs.errors import InvalidArgumentError
from jobs.fs.hadoop import FileSystem
from jobs.fs.paths import absolute
from jobs.fs.runs import run_folder, run_timestamp
from jobs.manifest.base import Manifest, ManifestRun, RegisteredRun, run_key
from jobs.manifest.completions import ManifestUsed, completed_runs, manifest_place
from jobs.manifest.lake import LakeManifest
from jobs.manifest.registration import marked_run, remove_marker
from jobs.manifest.requests import RequestManifest
from jobs.manifest.unfinished import run_register
from jobs.manifest.writer_lease import writer_lease


def abandon(spark: SparkSession, manifest: Manifest, output: str, run_id: str, progress: Progress) -> dict[str, Any]:
    """Remove run `run_id` of output `output` from `manifest`: its pairs and its register entry.

    Raises:
        InvalidArgumentError: the run folder has its `_SUCCESS`: the run completed, there is nothing to abandon.
        LeaseHeldError: the manifest's writer lease is held (a run is writing): nothing is changed.
    """
    folder = run_folder(absolute(output), run_id)
    for marker in (SUCCESS_MARKER, COMPLETED_BEFORE):  # a completed run, or the redo of one
        if FileSystem(spark).exists(f"{folder}/{marker}"):
            raise InvalidArgumentError(_completed(run_id, output, f"{folder}/{marker} exists"))
    key = run_key(folder, run_id)
    etl_time = int(run_timestamp(run_id).timestamp())
    with writer_lease(spark, manifest, "manifest abandon", run_id):
        register = run_register(manifest)
        entry = register.entry(key) or _marked(manifest, output, run_id)  # the output's record, if the entry was lost
        if entry is None:
            raise InvalidArgumentError(_not_registered(run_id, output, folder, manifest.uri, register.unfinished()))
        if entry.completed_before:  # its folder's marker removed by hand
            raise InvalidArgumentError(
                _completed(run_id, output, f"its entry in the register of {manifest.uri} says so")
            )
        progress(f"removing the pairs of run {run_id} ({folder}) from {manifest.uri}")
        if isinstance(manifest, LakeManifest):
            removed = manifest.abandon(ManifestRun(run_id, etl_time, 0, "manifest abandon", key))
        elif isinstance(manifest, RequestManifest):
            removed = manifest.remove_pairs(key, manifest.own_pairs(key, etl_time), etl_time)
        else:
            raise TypeError(f"no abandon for {type(manifest).__name__}")
        register.complete(entry)
        remove_marker(absolute(output), run_id)  # the output's record of the run (`jobs.manifest.registration`)
    return {
        "job": "manifest abandon", "run_id": run_id, "folder": folder, "manifest": manifest.uri,
        "removed": removed, "register_entry": True,
    }  # fmt: skip


def _marked(manifest: Manifest, output: str, run_id: str) -> RegisteredRun | None:
    """The run as its output's marker records it (`jobs.manifest.registration`), when the marker names `manifest`."""
    completions = completed_runs(manifest)
    used = ManifestUsed(manifest.uri, manifest_place(manifest), completions.identity())
    return marked_run(absolute(output), run_id, used)


def _not_registered(run_id: str, output: str, folder: str, uri: str, unfinished: list[RegisteredRun]) -> str:
    """The refusal of a run the register does not hold: nothing to abandon there, and where the run id is."""
    same_id = [run.folder for run in unfinished if run.run_id == run_id]
    where = (
        f"run {run_id} is registered for {', '.join(same_id)}: give --output the folder that holds that run=ID "
        "(for a `run`, its OUT/deduplicated)"
        if same_id
        else "allowed: a run that recorded its events and did not complete, as the line that stopped a later run "
        "names it"
    )
    return (
        f"--output: no unfinished run {run_id} of {output} ({folder}) is registered in {uri}; nothing was changed. "
        f"{where}"
    )


def _completed(run_id: str, output: str, evidence: str) -> str:
    """The refusal of a run that completed once: later runs decided against its events."""
    return (
        f"--run-id: run {run_id} of {output} completed ({evidence}): later runs decided against its events, so "
        "abandoning them would lose them; nothing was changed. Allowed: a run that recorded events and never "
        "completed (a completed run's stopped redo is redone with its input)"
    )
