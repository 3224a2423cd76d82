"""Back-fill the events manifest from historical enriched data, so the first runs have no cold start."""

from __future__ import annotations

import dataclasses
import functools
import re
import time
from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import __version__
from jobs.config import JobConfig
from jobs.contract import (
    BAD,
    COMPLETED_BEFORE,
    DEDUPLICATED,
    DUPLICATES,
    GOOD,
    QUARANTINE,
    SUCCESS_MARKER,
    SUMMARY,
    Progress,
)
from jobs.dedup.job import manifest_for, tasks_at_once
from jobs.dedup.stale import highest_recorded_generation, record_back_filled
from jobs.dedup.synthetic import original_event_key
from jobs.enriched.fields import FIELD_INDEX
from jobs.enriched.parse import event_key, parse_events
from jobs.errors import InvalidArgumentError
from jobs.fs import store
from jobs.fs.input import count_lines, open_input, read_whole, require_input, text_lines
from jobs.fs.paths import absolute, qualified
from jobs.fs.runs import RUN_ID_PATTERN, run_timestamp
from jobs.manifest import Manifest, ManifestRun, open_manifest
from jobs.manifest.base import SEEN_EARLIER, ManifestStats, back_filled_key, run_key
from jobs.manifest.completions import ManifestUsed, completed_runs, manifest_place
from jobs.manifest.registration import marked_run
from jobs.manifest.unfinished import run_register
from jobs.manifest.writer_lease import writer_lease
from jobs.runtime.invocation import absolute_uri
from jobs.runtime.summary import table

# The names a dedup run writes in its run folder `run=ID/`, and a file it writes there: `…/run=ID/good/…`.
DEDUP_RUN_ENTRIES = (GOOD, DUPLICATES, QUARANTINE, BAD, SUMMARY)
DEDUP_RUN_FOLDER = f"run={RUN_ID_PATTERN.pattern}"
DEDUP_RUN_OUTPUT = re.compile(
    f"^(?P<run>.*/{DEDUP_RUN_FOLDER})/(?P<folder>{'|'.join(map(re.escape, DEDUP_RUN_ENTRIES))})(?:/|$)"
)
NO_MANIFEST_URI = (
    "--manifest: none given and the config has no manifest.uri; allowed: sqlite:PATH, dynamodb://TABLE or lake:PATH"
)


def require_manifest_uri(config: JobConfig) -> None:
    """Raises: InvalidArgumentError: no manifest URI (a back-fill needs one)."""
    if config.manifest.uri is None:
        raise InvalidArgumentError(NO_MANIFEST_URI)


def run(
    spark: SparkSession,
    config: JobConfig,
    input_path: str,
    run_id: str,
    progress: Progress = lambda message: None,
    create_manifest: bool = False,
    input_format: str = "enriched",
) -> dict[str, Any]:
    """Record every distinct (event_id, fingerprint) of the input in the manifest: a completed dedup run folder's
    `good/` as that run, every other file as run `run_id` (`back_filled_runs`).

    Idempotent: rerunning with the same run id records the same pairs again (they pass as this back-fill's own);
    pairs a run recorded are left as they are and counted as already present. With `input_format`
    "dynamodb-export", the input is a DynamoDB manifest table's export, loaded into an empty lake manifest.
    """
    started_at, started = datetime.now(UTC), time.monotonic()
    run_timestamp(run_id)  # a malformed run id stops the back-fill before anything is read
    require_manifest_uri(config)
    input_path = absolute(input_path)
    require_input(spark, input_path)
    if input_format == "enriched":  # refused before the manifest is created or touched
        listing, not_delivered = delivered_files(input_path, config.manifest.uri)
    manifest = manifest_for(config, create_manifest)
    if manifest is None:  # cannot happen with a URI set; narrows the type
        raise InvalidArgumentError(NO_MANIFEST_URI)
    if input_format == "dynamodb-export":
        return _load_export(spark, manifest, input_path, run_id, progress, started_at, started)
    manifest, pacing = manifest.paced(tasks_at_once(spark))  # a back-fill is the heaviest load a table gets
    with writer_lease(spark, manifest, "populate-manifest", run_id):
        progress(f"reading every input file under {input_path} once")
        source, _ = read_whole(spark, open_input(spark, input_path, listing), config.input.skip_unreadable, count_lines)
        readable = set(source.files)
        files = [file.path for file in listing.files if qualified(file.path) in readable]
        summary = _populate_runs(spark, config, manifest, back_filled_runs(input_path, files, run_id, config), progress)
        if pacing is not None:
            summary["manifest"]["pacing"] = pacing
        if input_format == "enriched":  # what the back-filled runs recorded of the manifest (`jobs.dedup.stale`)
            _record_back_filled(manifest, input_path)
    return {
        "job": "populate-manifest",
        "version": __version__,
        "run_id": run_id,
        "input": input_path,
        "input_files": {**source.summary(), "not_delivered": not_delivered},
        **summary,
        "started_at": started_at.isoformat(timespec="seconds"),
        "wall_time_seconds": round(time.monotonic() - started, 3),
    }


def _marked_for(run_folder: str, manifest_uri: str | None) -> bool:
    """Whether the output's marker of the unfinished run in `run_folder` names the manifest `manifest_uri`."""
    if manifest_uri is None:
        return False
    output, name = run_folder.rstrip("/").rsplit("/", 1)
    used = ManifestUsed(manifest_uri, manifest_place(open_manifest(manifest_uri)), None)
    return marked_run(output, name.removeprefix("run="), used) is not None


def delivered_files(input_path: str, manifest_uri: str | None = None) -> tuple[store.Listing, dict[str, int]]:
    """The input files a back-fill records, and how many it leaves out by folder. Of a dedup run folder under the
    input (`…/run=ID/good/…`), only the `good/` of a completed run was delivered: its `duplicates/`, `quarantine/`,
    `bad/` and `summary.json` are left out, and a run folder without `_SUCCESS` stops the back-fill. Every other
    file is read.

    The run folders directly under the input are found by listing its folders, not only by their files: a completed
    run whose redo stopped right after clearing it holds `_COMPLETED_BEFORE` and hidden files only, and one killed
    before it wrote holds nothing visible; each stops the back-fill like any unsealed run folder. A `run=ID` folder
    without `_SUCCESS` that holds only other visible names (the Snowplow enriched archive's `run=ID/part-…`) is not
    a dedup run folder: its files are read.

    An input that holds `deduplicated/` is a `run` output (`OUT/deduplicated/run=ID/`, `OUT/shredded/run=ID/`): only
    its `deduplicated/` is read, as a dedup output; every file beside it (the shred's) is left out, counted by its
    folder under the input.

    A run folder without `_SUCCESS` whose run is marked in its output as writing to the manifest being back-filled
    (`manifest_uri`) is left out instead: its redo comes next, and its marker stops every other run of its output
    until then (an older copy of the manifest put back while that run was unfinished).

    Raises:
        InvalidArgumentError: the input holds a dedup run folder that has not completed (nothing was written).
    """
    root = input_path.rstrip("/")
    listing = store.list_input(input_path)
    outputs = _output_roots(input_path)
    kept, left_out = [], Counter[str]()
    sealed = {folder: done for output in outputs for folder, done in _unsealed_run_folders(output).items()}
    for file in listing.files:
        if len(outputs) > 1 and not file.path.startswith(f"{outputs[1]}/"):
            top, _, below = file.path[len(root) + 1 :].partition("/")
            left_out[f"{top}/" if below else top] += 1
            continue
        output = DEDUP_RUN_OUTPUT.match(file.path)
        if output is None:
            kept.append(file)
            continue
        run = output["run"]
        if run not in sealed:
            sealed[run] = store.exists(f"{run}/{SUCCESS_MARKER}")
        if sealed[run] and output["folder"] == GOOD:
            kept.append(file)
        elif sealed[run]:
            left_out[output["folder"] if output["folder"] == SUMMARY else f"{output['folder']}/"] += 1
    # A run of this manifest killed while writing is redone after the back-fill: its marker stops every other run
    # of its output until then (`jobs.manifest.registration`), and none of its events is recorded here.
    redone = {run for run, done in sealed.items() if not done and _marked_for(run, manifest_uri)}
    for run in redone:
        left_out[f"{run.rsplit('/', 1)[-1]}/ (not completed: redo it next)"] += 1
    unfinished = sorted(run for run, done in sealed.items() if not done and run not in redone)
    if unfinished:
        raise InvalidArgumentError(
            f"--input: {input_path} holds {len(unfinished)} dedup run folder(s) without {SUCCESS_MARKER}: "
            f"{', '.join(unfinished[:3])}{', …' if len(unfinished) > 3 else ''}; a run that has not completed "
            "delivered none of its events, so they are not recorded as delivered. Allowed: completed run folders "
            "only: complete each (its redo, as its manifest's message prints) or give an --input without it. "
            "Nothing was written"
        )
    return dataclasses.replace(listing, files=tuple(kept)), dict(sorted(left_out.items()))


def _record_back_filled(manifest: Manifest, input_path: str) -> None:
    """The completions the back-filled outputs' `_LAST_COMPLETED.json` name, and at least the count of registered
    runs their summaries recorded (outputs from before completions were kept)."""
    completions = completed_runs(manifest)
    used = ManifestUsed(absolute_uri(manifest.uri), manifest_place(manifest), completions.identity())
    record_back_filled(completions, _output_roots(input_path), used)
    run_register(manifest).advance(highest_recorded_generation(completed_run_folders(input_path), used.uri))


def _output_roots(input_path: str) -> list[str]:
    """The dedup output roots of `input_path`: itself, or its `deduplicated/` (a `run` output) as well."""
    root = input_path.rstrip("/")
    return [root, f"{root}/{DEDUPLICATED}"] if DEDUPLICATED in store.subfolders(root) else [root]


def completed_run_folders(input_path: str) -> list[str]:
    """The completed dedup run folders directly under `input_path` (or its `deduplicated/`, a `run` output)."""
    return [
        f"{output}/{name}"
        for output in _output_roots(input_path)
        for name in store.subfolders(output)
        if re.fullmatch(DEDUP_RUN_FOLDER, name) and store.exists(f"{output}/{name}/{SUCCESS_MARKER}")
    ]


def _unsealed_run_folders(input_path: str) -> dict[str, bool]:
    """{folder: False} for each dedup run folder directly under `input_path` without `_SUCCESS` (found by listing
    folders: one cleared by a stopped redo holds no visible file): it holds `_COMPLETED_BEFORE`, a name a dedup run
    writes, or nothing visible."""
    root = input_path.rstrip("/")
    unsealed = {}
    for name in store.subfolders(root):
        folder = f"{root}/{name}"
        if not re.fullmatch(DEDUP_RUN_FOLDER, name) or store.exists(f"{folder}/{SUCCESS_MARKER}"):
            continue
        inside = store.children(folder)
        visible = {entry for entry in inside if not entry.startswith(store.HIDDEN_PREFIXES)}
        if COMPLETED_BEFORE in inside or not visible or visible & set(DEDUP_RUN_ENTRIES):
            unsealed[folder] = False
    return unsealed


def back_filled_runs(
    input_path: str, files: list[str], run_id: str, config: JobConfig
) -> list[tuple[ManifestRun, list[str]]]:
    """The runs a back-fill records as, each with its files: a completed run folder's `good/` as that run (its
    time, `back_filled_key` of its run key), so a redo of any run finds its own pairs its own, and every other
    run's a delivery earlier or later than it, as they first were; every other file as run `run_id`, under the
    back-filled key of the input root (a rerun of the same back-fill finds them its own). Never keyless: a dedup
    run would take such entries over as its own and deliver their events again."""
    by_folder: dict[str, list[str]] = {}
    for path in files:
        output = DEDUP_RUN_OUTPUT.match(path)
        by_folder.setdefault(output["run"] if output else "", []).append(path)
    ttl_days = config.manifest.ttl_days
    runs = []
    for folder, paths in sorted(by_folder.items()):
        folder_id = folder.rsplit("/run=", 1)[1] if folder else run_id
        key = run_key(folder or input_path, folder_id)
        run = ManifestRun.of(folder_id, run_timestamp(folder_id), ttl_days, "populate-manifest", back_filled_key(key))
        runs.append((run, paths))
    return runs


def _populate_runs(
    spark: SparkSession, config: JobConfig, manifest: Manifest, runs: list[tuple[ManifestRun, list[str]]],
    progress: Progress,
) -> dict[str, Any]:  # fmt: skip
    """`_populate` for each run's files: the manifest and counts parts of the summary, summed."""
    stats, counts = ManifestStats(), Counter[str]()
    delivered = _delivered_ids(spark, runs)
    try:
        for run, paths in runs:
            # `base.later_only`: ids only a later run delivered (not an earlier one, nor this run itself)
            earlier = delivered.where(F.col("run_id") <= run.run_id).select("event_key")
            later = (
                delivered.where(F.col("run_id") > run.run_id)
                .select("event_key")
                .join(earlier, "event_key", "left_anti")
            )
            part = _populate(spark, config, text_lines(spark, paths), manifest, run, progress, later)
            stats = stats.add(part["stats"])
            counts.update(part["counts"])
    finally:
        delivered.unpersist()
    keys = ("input", "bad", "events", "pairs_recorded", "pairs_already_present")
    return {"manifest": {"uri": manifest.uri, **asdict(stats)}, "counts": {key: counts[key] for key in keys}}


def _delivered_ids(spark: SparkSession, runs: list[tuple[ManifestRun, list[str]]]) -> DataFrame:
    """(`event_key`, `run_id`) of every line of the back-filled run folders' `good/`, persisted (read once)."""
    event_id = F.element_at(F.split("value", "\t"), FIELD_INDEX["event_id"] + 1)
    folders = [(run, paths) for run, paths in runs if all(DEDUP_RUN_OUTPUT.match(path) for path in paths)]
    parts = [text_lines(spark, paths).select(event_key(event_id).alias("event_key"), F.lit(run.run_id).alias("run_id"))
             for run, paths in folders]  # fmt: skip
    if not parts:
        return spark.createDataFrame([], "event_key STRING, run_id STRING")
    return functools.reduce(DataFrame.unionByName, parts).persist(StorageLevel.MEMORY_AND_DISK)


def _populate(
    spark: SparkSession, config: JobConfig, lines: DataFrame, manifest: Manifest, run: ManifestRun, progress: Progress,
    later_ids: DataFrame,
) -> dict[str, Any]:  # fmt: skip
    """Check-and-set every distinct valid pair of `lines` as `run`: its manifest figures and counts. A line
    re-identified by its run also records the id it replaced, as its run did, unless only a later run delivered that
    id (`later_ids`): a run done after a later one records no copy of such an id (`base.later_only`)."""
    parsed = parse_events(lines, config.dedup.fingerprint_fields).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        progress(f"reading the files recorded as run {run.run_id}")
        valid = parsed.where(F.size("errors") == 0)
        read = parsed.count()
        events = valid.count()
        progress(f"recording in {manifest.uri}")
        # A re-identified line's run recorded the id it replaced (`synthetic.original_event_key`), not its new one.
        replaced = valid.select(original_event_key(F.col("line")).alias("event_key"), "fingerprint")
        replaced = replaced.where(F.col("event_key").isNotNull()).join(later_ids, "event_key", "left_anti")
        distinct_pairs = valid.select("event_key", "fingerprint").unionByName(replaced).distinct()
        pairs = distinct_pairs.count()
        check = manifest.check_pairs(distinct_pairs, run, detect_synthetic=False)
        try:
            present = check.answers.where(F.col("cross_batch") == SEEN_EARLIER).count()
            check.record()
        finally:
            check.release()
    finally:
        parsed.unpersist()
    return {
        "stats": check.stats(),
        "counts": {
            "input": read,
            "bad": read - events,
            "events": events,
            "pairs_recorded": pairs - present,
            "pairs_already_present": present,
        },
    }


def _load_export(
    spark: SparkSession, manifest: Manifest, export: str, run_id: str, progress: Progress, started_at: datetime,
    started: float,
) -> dict[str, Any]:  # fmt: skip
    from jobs.manifest.lake import LakeManifest
    from jobs.manifest.lake_import import import_dynamodb_export

    if not isinstance(manifest, LakeManifest):
        raise InvalidArgumentError(
            f"--input-format dynamodb-export: given --manifest {manifest.uri}; allowed: a lake:PATH manifest (a "
            "DynamoDB table is moved to the lake, not into another table)"
        )
    with writer_lease(spark, manifest, "populate-manifest", run_id):
        progress(f"loading the DynamoDB export {export} into {manifest.uri}")
        counts = import_dynamodb_export(manifest, spark, export, run_id)
    return {
        "job": "populate-manifest",
        "version": __version__,
        "run_id": run_id,
        "input": export,
        "input_format": "dynamodb-export",
        "manifest": {"uri": manifest.uri},
        "counts": counts,
        "started_at": started_at.isoformat(timespec="seconds"),
        "wall_time_seconds": round(time.monotonic() - started, 3),
    }


def render(summary: dict[str, Any]) -> str:
    counts = summary["counts"]
    if summary.get("input_format") == "dynamodb-export":
        figures = [("items read", counts["items"]), ("entries written", counts["entries"]),
                   ("items skipped", counts["skipped"])]  # fmt: skip
    else:
        figures = [
            ("input lines", counts["input"]),
            ("bad lines (skipped)", counts["bad"]),
            ("events", counts["events"]),
            ("pairs recorded", counts["pairs_recorded"]),
            ("pairs already present", counts["pairs_already_present"]),
            ("manifest requests", summary["manifest"]["requests"]),
        ]
        not_delivered = summary["input_files"].get("not_delivered", {})
        figures += [(f"files left out: {name}", files) for name, files in not_delivered.items()]
    rows = [(name, f"{value:,}") for name, value in figures] + [("wall time", f"{summary['wall_time_seconds']:.1f} s")]
    return table(
        f"Winnow populate-manifest  run {summary['run_id']}", rows, [f"  manifest: {summary['manifest']['uri']}"]
    )
