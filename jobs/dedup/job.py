"""The dedup job: read enriched TSV, parse, dedup in batch and across batches, write the run folder."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from jobs import __version__, contract
from jobs.config import JobConfig, SyntheticStrategy
from jobs.contract import Progress
from jobs.dedup.bookkeeping import RunBook
from jobs.dedup.inbatch import (
    BAD,
    DROPPED,
    DUPLICATE,
    GOOD,
    QUARANTINED,
    SYNTHETIC_REASONS,
    apply_decisions,
    decision_rows,
    delivered_pairs,
    with_row_ids,
)  # fmt: skip
from jobs.dedup.redo import refuse_a_shrunk_redo, refuse_an_overtaken_redo, refuse_another_manifest
from jobs.enriched.parse import narrow_events
from jobs.fs.hadoop import FileSystem
from jobs.fs.input import Input, UnreadableFile, open_input, read_whole, require_input
from jobs.fs.paths import absolute, check_apart, qualified
from jobs.fs.run_folder import RunFolder
from jobs.fs.runs import run_timestamp
from jobs.fs.shreds import PendingShred
from jobs.incremental.ledger import Plan, plan_run, record_read
from jobs.incremental.window import Window
from jobs.manifest import Manifest, ManifestCheck, ManifestRun, ManifestStats, open_manifest
from jobs.manifest.base import ManifestError, RegisteredRun, run_key
from jobs.manifest.completions import completed_runs
from jobs.manifest.writer_lease import writer_lease
from jobs.prog import local_prog
from jobs.runtime.invocation import absolute_uri, command

# Where each outcome is written in the run folder; dropped copies go to duplicates/ with their reason.
OUTPUT_FOLDERS = {GOOD: contract.GOOD, DUPLICATE: contract.DUPLICATES, DROPPED: contract.DUPLICATES,
                  QUARANTINED: contract.QUARANTINE, BAD: contract.BAD}  # fmt: skip
SUMMARY_COUNT_NAMES = {
    GOOD: "good",
    BAD: "bad",
    DUPLICATE: "duplicates",
    QUARANTINED: "quarantined",
    DROPPED: "dropped",
}


def output_folder() -> Column:
    """The run-folder path each decided line goes to: good/, quarantine/, bad/ or duplicates/reason=…/."""
    duplicates = F.concat(F.lit(OUTPUT_FOLDERS[DUPLICATE] + "/reason="), F.col("reason"))
    folder = F.when(F.col("outcome").isin(DUPLICATE, DROPPED), duplicates)
    for outcome in (GOOD, QUARANTINED, BAD):
        folder = folder.when(F.col("outcome") == outcome, F.lit(OUTPUT_FOLDERS[outcome]))
    return folder


def counted(lines: DataFrame) -> tuple[DataFrame, Observation]:
    """The lines, counted while they are written (no extra pass over them): the observation's value `lines`."""
    observation = Observation("dedup lines")
    return lines.observe(observation, F.count(F.lit(1)).alias("lines")), observation


def outcome_counts(decisions: DataFrame, lines: int) -> dict[tuple[str, str | None], int]:
    """Lines per (outcome, reason): the decision table's rows counted, and every line it does not name good."""
    counts: dict[tuple[str, str | None], int] = {}
    for row in decisions.groupBy("outcome", "reason").count().collect():
        counts[(row["outcome"], row["reason"])] = row["count"]
    plainly_good = lines - sum(counts.values())
    if plainly_good:
        counts[(GOOD, None)] = counts.get((GOOD, None), 0) + plainly_good
    return counts


def manifest_for(config: JobConfig, create: bool = False) -> Manifest | None:
    """The configured manifest, checked (or created first, with `create`); None when there is none."""
    settings = config.manifest
    if settings.uri is None:
        return None
    manifest = open_manifest(
        settings.uri, settings.concurrency, settings.max_attempts, settings.throttle_patience_seconds, settings.buckets
    )
    if create:
        manifest.create()
    manifest.check()
    return manifest


def run(
    spark: SparkSession,
    config: JobConfig,
    input_path: str,
    output_path: str,
    run_id: str,
    progress: Progress = lambda message: None,
    create_manifest: bool = False,
    incremental: Window | None = None,
    redo: str | None = None,
    shred: PendingShred | None = None,
) -> dict[str, Any]:
    """Run the dedup job and return its summary (also written as `summary.json`).

    Its bad rows are in the layout of `config.shred.layout` (`inbatch.bad_rows`), so they match shred's.

    With `incremental`, the run reads only the input files its ledger entry lists (`jobs.incremental.ledger`: its own
    entry on a retry, else the new files in the window, recorded first). With a manifest, the run enters the
    manifest's register of unfinished runs before its first manifest write and leaves it after `_SUCCESS`
    (`jobs.manifest.unfinished`); `redo` is the command a later run prints if this one does not complete (default: this
    dedup command). `shred`: the shred that follows this run (`run`, `dedup --shredded`), whose marker is written
    before `_SUCCESS` (`jobs.fs.shreds`: later runs stop until that shred has sealed).

    Raises:
        NothingToDo: `incremental` and no new input file (nothing is written).
    """
    started_at, started = datetime.now(UTC), time.monotonic()
    run_time = run_timestamp(run_id)
    input_path, output_path = absolute(input_path), absolute(output_path)
    require_input(spark, input_path)
    check_apart("--output", output_path, {"--input": input_path})
    folder = RunFolder(spark, output_path, run_id, "dedup", sorted(set(OUTPUT_FOLDERS.values())))
    completed = refuse_another_manifest(folder, config.manifest.uri, lambda: _identity_of(config))
    try:  # a completed run's redo never makes its manifest: it must find the entries it completed with
        manifest = manifest_for(config, create_manifest and not completed)  # a wrong table stops the run here
    except ManifestError as err:
        if not completed:
            raise
        raise ManifestError(
            f"{err}; --create makes none for a redo of completed run {run_id}: give the manifest it completed with "
            "(its events are there)"
        ) from None
    pacing = None
    if manifest is not None:
        manifest, pacing = manifest.paced(tasks_at_once(spark))
    # The manifest's lease before planning: an earlier run that left events in the manifest unfinished stops this
    # one before its ledger entry is written (a later entry would stop the earlier run's redo).
    manifest_lease = writer_lease(spark, manifest, "dedup", run_id) if manifest else contextlib.nullcontext()
    with manifest_lease:
        # The run's identity is its folder: another pipeline's run of the same id on this manifest is another run.
        key = run_key(folder.path, run_id)
        book = RunBook.of(manifest, key) if manifest else None
        replaces = False  # an earlier attempt may have recorded pairs its batch no longer has: removed at the end
        if book is not None:
            entry = book.check(output_path, int(run_time.timestamp()), FileSystem(spark).exists)
            replaces = entry is not None or FileSystem(spark).exists(folder.path)
            completed = completed or (entry is not None and entry.completed_before)  # its folder's marker removed
            if completed and config.manifest.cross_batch_synthetic:  # else no run records another's copies
                refuse_an_overtaken_redo(book.completions, key, folder, book.used.uri)
        registered = RegisteredRun(
            run_id, int(run_time.timestamp()), ManifestRun.of(run_id, run_time, config.manifest.ttl_days).ttl,
            folder.path, redo or _redo_command(input_path, output_path, run_id, incremental is not None, config),
            completed,
        )  # fmt: skip
        manifest_run = ManifestRun.of(
            run_id, run_time, config.manifest.ttl_days, run_key=key, replaces=replaces, register_entry=registered
        )  # the lake keeps the register entry in its commit

        def register_run() -> None:  # before the run's first manifest write, and before a completed output goes
            if book is not None:  # a run that stops before this wrote nothing to either
                book.register.begin(registered)
                book.mark(output_path, registered)  # second: a marker is never left without its entry

        plan = None
        if incremental is not None:
            progress(f"finding the input files under {input_path} no earlier run into {output_path} read")
            plan = plan_run(input_path, output_path, run_id, incremental, completed_before=completed)
            progress(
                f"{'reading again' if plan.reused else 'reading'} the {len(plan.files):,} file(s) of ledger entry "
                f"{plan.entry}"
                + (f"; {plan.backlog_files:,} newer file(s) left for later runs" if plan.backlog_files else "")
            )
        with folder.writing():
            summary = _run_in_folder(spark, config, input_path, folder, run_time, manifest, plan, progress,
                                     register_run, manifest_run, completed)  # fmt: skip
            if summary["manifest"] is not None and pacing is not None:
                summary["manifest"]["pacing"] = pacing
            if summary["manifest"] is not None and book is not None:
                summary["manifest"].update(book.summary(folder.path))  # after this run's writes
            summary["started_at"] = started_at.isoformat(timespec="seconds")
            summary["wall_time_seconds"] = round(time.monotonic() - started, 3)
            progress(f"sealing {folder.path}: summary.json, then _SUCCESS")
            folder.write_json(contract.SUMMARY, summary)
            if shred is not None:
                shred.write()
            if book is not None:
                book.record(output_path, registered)
            folder.seal()
            if book is not None:
                book.complete(output_path, registered)
    return summary


def _identity_of(config: JobConfig) -> str | None:
    """The identity of the configured manifest (a copy restored under another name keeps it), or None."""
    try:
        manifest = manifest_for(config)
    except ManifestError:
        return None
    return None if manifest is None else completed_runs(manifest).identity(make=False)  # a look: writes nothing


def _redo_command(input_path: str, output_path: str, run_id: str, incremental: bool, config: JobConfig) -> str:
    """The command that redoes a dedup run started without a command line (`run` called directly): what the job
    was given, as options (a command line's run is given `redo`: `jobs.runtime.invocation`)."""
    options = ["--input", input_path, "--output", output_path, "--run-id", run_id, "--synthetic", config.dedup.synthetic,
               "--layout", config.shred.layout, *(["--incremental"] if incremental else [])]  # fmt: skip
    if config.manifest.uri is not None:
        options += ["--manifest", absolute_uri(config.manifest.uri)]
    return command(local_prog(), ["dedup", *options])


def _run_in_folder(
    spark: SparkSession,
    config: JobConfig,
    input_path: str,
    folder: RunFolder,
    run_time: datetime,
    manifest: Manifest | None,
    plan: Plan | None,
    progress: Progress,
    before_manifest_write: Callable[[], None],
    manifest_run: ManifestRun,
    completed_before: bool,
) -> dict[str, Any]:
    """Read, decide and write the run's lines into its folder (held); the summary without its times.
    `completed_before`: the run completed before this attempt (its folder's `COMPLETED_BEFORE`, or its register
    entry, says so)."""
    skipped = [UnreadableFile(qualified(s.file.path), s.file.size, s.error) for s in plan.skipped] if plan else []
    # A redo whose every file is gone reads none (`_reuse`): it completes with no line, its files listed as skipped.
    source = open_input(
        spark, input_path, plan.listing if plan else None, skipped, empty_allowed=bool(plan and plan.reused)
    )
    summary, source = _deduplicate(
        spark,
        config,
        source,
        folder,
        run_time,
        manifest,
        progress,
        before_manifest_write,
        manifest_run,
        completed_before,
    )
    if plan is not None:  # before _SUCCESS: the entry says what the run read (a changed file stops it here)
        plan = record_read(plan, source.skipped_of(plan.paths))
    summary.update(
        job="dedup",
        version=__version__,
        run_id=folder.run_id,
        layout=config.shred.layout,
        input=input_path,
        input_files={**source.summary(), **({"incremental": plan.summary()} if plan else {})},
        output=folder.path,
    )
    return summary


def tasks_at_once(spark: SparkSession) -> int:
    """How many tasks can run at once: with dynamic allocation, its maximum executors times task slots per executor
    (executors are still starting when the job begins); else Spark's default parallelism (local: the cores)."""
    conf = spark.sparkContext.getConf()
    executors = conf.get("spark.dynamicAllocation.maxExecutors")
    if conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true" and executors:
        slots = int(conf.get("spark.executor.cores", "1")) // int(conf.get("spark.task.cpus", "1"))
        return max(int(executors) * max(slots, 1), 1)
    return max(spark.sparkContext.defaultParallelism, 1)


def _deduplicate(
    spark: SparkSession,
    config: JobConfig,
    source: Input,
    folder: RunFolder,
    run_time: datetime,
    manifest: Manifest | None,
    progress: Progress,
    before_manifest_write: Callable[[], None],
    manifest_run: ManifestRun,
    completed_before: bool,
) -> tuple[dict[str, Any], Input]:
    """Decide and write every line into the run folder; the counts and manifest parts of the summary, and the input
    as read (less any file skipped as unreadable).

    The first pass reads every file whole before anything is asked or written (`read_whole`): with a manifest, the
    narrow rows persisted (the manifest is asked about their pairs, and the decisions are taken from the same rows);
    without one, the decision table itself. With a manifest, the lines are decided and written after the check,
    and only then are the run's pairs recorded where the backend records them at the end (the lake's commit).
    """
    strategy, fingerprint_fields, layout = config.dedup.synthetic, config.dedup.fingerprint_fields, config.shred.layout

    def first_pass(source_lines: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame | None]:
        lines = with_row_ids(source_lines)
        # Every fingerprint only when the manifest is asked about them; else just those of the lines to decide.
        events = narrow_events(lines, fingerprint_fields, computed_fingerprints=manifest is not None)
        if manifest is not None:
            return lines, persisted(events), None
        return lines, events, persisted(decision_rows(lines, strategy, fingerprint_fields, None, events))

    progress(f"reading and parsing every line of {source.path}; deciding the bad lines and repeated ids")
    source, (lines, events, decisions) = read_whole(spark, source, config.input.skip_unreadable, first_pass)
    check: ManifestCheck | None = None
    try:
        if manifest is not None:
            progress(f"checking the manifest {manifest.uri}")
            if manifest_run.replaces and completed_before:
                refuse_a_shrunk_redo(manifest, delivered_pairs(events), manifest_run, folder)
            if manifest.records_when_checked:  # registered before the first pair is written
                before_manifest_write()
            check = manifest.check_pairs(
                delivered_pairs(events),
                manifest_run,
                config.manifest.cross_batch_synthetic,
            )
            progress("deciding the bad lines, the repeated ids and the ids the manifest had seen")
            decisions = persisted(decision_rows(lines, strategy, fingerprint_fields, check.answers, events))
        assert decisions is not None  # taken in the first pass, or just above
        if manifest is not None and completed_before and not manifest.records_when_checked:
            before_manifest_write()  # registered before a completed output goes: a later run then waits for it
        folder.clear()
        progress(f"writing every line of {source.path} where its decision says")
        observed, observation = counted(apply_decisions(lines, decisions, strategy, run_time, layout))
        written = observed.select(output_folder().alias("folder"), "text")
        folder.write_text_split(
            written, sorted(set(OUTPUT_FOLDERS.values())), config.output.compression, "folder", progress
        )
        counts = outcome_counts(decisions, observation.get["lines"])
        if check is not None and manifest is not None:
            progress(f"recording this run's events in {manifest.uri}")
            if not manifest.records_when_checked:
                before_manifest_write()
            check.record()
    finally:
        if check is not None:
            check.release()
        if decisions is not None:
            decisions.unpersist()
        events.unpersist()

    summary = build_summary(counts, strategy)
    summary["manifest"] = _manifest_summary(manifest, check.stats() if check else None, summary["counts"]["input"])
    return summary, source


def persisted(frame: DataFrame) -> DataFrame:
    """`frame` persisted and computed once now (it is read more than once, and is small next to the lines); on a
    failure its blocks are freed."""
    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        frame.count()
    except Exception:
        frame.unpersist()
        raise
    return frame


def _manifest_summary(
    manifest: Manifest | None, stats: ManifestStats | None, input_lines: int
) -> dict[str, Any] | None:
    if manifest is None:
        return None
    figures: dict[str, Any] = asdict(stats or ManifestStats())
    figures["consumed_capacity"] = round(figures["consumed_capacity"], 3)
    figures["requests_per_input_line"] = round(figures["requests"] / input_lines, 4) if input_lines else 0.0
    return {"uri": absolute_uri(manifest.uri), **figures}  # as a redo from any folder names it


def build_summary(counts: dict[tuple[str, str | None], int], strategy: SyntheticStrategy) -> dict[str, Any]:
    """The counts part of `summary.json` from the number of lines per (outcome, reason).

    `counts.input` equals the sum of the other counts: every input line is in exactly one outcome.
    """
    totals = dict.fromkeys(SUMMARY_COUNT_NAMES.values(), 0)
    by_reason: dict[str, dict[str, int]] = {"duplicates": {}, "quarantined": {}, "dropped": {}}
    synthetic = dict.fromkeys(SUMMARY_COUNT_NAMES.values(), 0)
    synthetic_by_reason = dict.fromkeys(SYNTHETIC_REASONS, 0)
    for (outcome, reason), count in sorted(counts.items(), key=lambda item: (item[0][0], item[0][1] or "")):
        name = SUMMARY_COUNT_NAMES[outcome]
        totals[name] += count
        if name in by_reason and reason:
            by_reason[name][reason] = by_reason[name].get(reason, 0) + count
        if reason in SYNTHETIC_REASONS:
            synthetic[name] += count
            synthetic_by_reason[reason] += count
    return {
        "counts": {"input": sum(totals.values()), **totals},
        "by_reason": by_reason,
        "synthetic": {
            "strategy": strategy,
            "events": sum(synthetic.values()),
            **synthetic,
            "by_reason": synthetic_by_reason,
        },
    }
