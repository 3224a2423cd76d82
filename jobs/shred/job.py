"""The shred job: deduplicated enriched events -> what a warehouse loader reads.

Layout `rdb` (default; Snowplow RDB transformer 6.x, read by RDB Loader; see jobs/shred/rdb.py), `OUT/run=ID/`:
  output=good/vendor=com.snowplowanalytics.snowplow/name=atomic/format=tsv/model=1/revision=0/addition=0/
  output=good/vendor=V/name=N/format=json/model=M/revision=R/addition=A/    one JSON line per entity
  output=bad/vendor=com.snowplowanalytics.snowplow.badrows/name=loader_parsing_error/format=json/model=2/…
  shredding_complete.json (the loader's message, also sent to `output.queue`), summary.json, then _SUCCESS
  With `--format widerow` (`widerow-parquet`): the wide rows directly in output=good/, bad rows in output=bad/.
Layout `legacy` (the R30-era RDB Shredder's):
  atomic-events/, shredded-types/vendor=V/name=N/format=F/version=M-R-A/, bad/ (one JSON line per bad line: the
  line, its errors and the failure time), or widerow/ and bad/; summary.json, then _SUCCESS.

The line builders are in jobs/shred/lines.py, the wide-row writer in jobs/shred/widerow_writer.py.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from jobs import __version__
from jobs.config import SHRED_FORMATS, SHRED_LAYOUTS, JobConfig, ShredFormat
from jobs.config import ShredLayout as Layout
from jobs.contract import SUCCESS_MARKER, SUMMARY, Progress
from jobs.enriched.parse import parse_events
from jobs.errors import InvalidArgumentError
from jobs.fs.hadoop import FileSystem
from jobs.fs.input import Input, count_lines, open_input, read_whole, require_input
from jobs.fs.paths import absolute, check_apart, exact
from jobs.fs.run_folder import RunFolder, summary_job
from jobs.fs.runs import run_timestamp
from jobs.fs.shreds import consumed_attempt, is_sealed_dedup_output, shred_completed
from jobs.runtime.summary import table
from jobs.shred import message, rdb
from jobs.shred.lines import (
    ATOMIC_EVENTS,
    SHREDDED_TYPES,
    TYPE_COLUMNS,
    entity_uris,
    rdb_outputs,
    schema_key,
    shred_events,
    shredded_outputs,
    with_iglu_failures,
)
from jobs.shred.plan import ShredPlan, check_resolver, is_skipped, needs_resolver, plan_types, skip_criteria
from jobs.shred.target import DECIDED_STORAGE, ShredTarget, Written, loader_type_of
from jobs.shred.widerow import WIDEROW_FOLDER
from jobs.shred.widerow_writer import write_wide_rows

SHREDDING_COMPLETE = "shredding_complete.json"
# Everything a shred run writes directly in its folder, in either layout (a rerun may switch layouts).
RUN_ENTRIES = (ATOMIC_EVENTS, SHREDDED_TYPES, WIDEROW_FOLDER, "bad", rdb.GOOD, rdb.BAD, SHREDDING_COMPLETE)


def run(
    spark: SparkSession,
    config: JobConfig,
    input_path: str,
    output_path: str,
    run_id: str,
    progress: Progress = lambda message: None,
    output_format: ShredFormat | None = None,
    layout: Layout | None = None,
) -> dict[str, Any]:
    """Run the shred job and return its summary (also written as `summary.json`).

    Args:
        spark: the session.
        config: job config; `output.compression` applies to the text outputs, `output.queue` is where the
            rdb layout's `shredding_complete` message is sent.
        input_path: a file or folder of enriched TSV (typically a dedup run's `good/`).
        output_path: the output folder; the run writes `OUT/run=ID/`.
        run_id: the run id (`YYYY-MM-DD-HH-MM-SS`).
        progress: called with a short message at each step.
        output_format: `shred` (atomic events + one JSON line per entity), `widerow` (JSON lines) or
            `widerow-parquet`; None: `shred.format` of the config.
        layout: `rdb` (RDB Loader 6.x) or `legacy` (the R30-era RDB Shredder); None: `shred.layout`.

    Returns:
        The summary: `counts.input == counts.good + counts.bad`; `entities` (entity lines in all) and
        `shredded_types` (entity lines per `vendor/name/format/version`).

    Raises:
        InvalidArgumentError: `output_format` or `layout` is not allowed.
        InputNotFoundError: the input path does not exist.
        LoaderMessageError: the message could not be sent (no `_SUCCESS`: a rerun sends it again).
    """
    output_format = output_format or config.shred.format
    layout = layout or config.shred.layout
    _check_options(output_format, layout, config)
    resolver = check_resolver(output_format, config.shred)  # before any work: a bad resolver config fails fast
    started_at, started = datetime.now(UTC), time.monotonic()
    run_time = run_timestamp(run_id)
    input_path, output_path = shred_input(spark, absolute(input_path)), absolute(output_path)
    require_input(spark, input_path)
    check_apart("--output", output_path, {"--input": input_path})
    folder = RunFolder(spark, output_path, run_id, "shred", RUN_ENTRIES)
    with folder.writing():
        attempt = consumed_attempt(input_path)  # before the input: the dedup attempt whose good/ this run reads
        source, parsed = _read(spark, config, input_path, progress)
        folder.clear()
        progress(f"reading and shredding {input_path} ({layout} layout)")
        decided = shred_events(parsed, layout)
        target = ShredTarget(folder, decided, run_time, config, output_format, layout, resolver, progress)
        written = _write(target)
        summary = _summary(target, written, run_id, input_path, source, started_at)
        if attempt is not None:
            summary["dedup_attempt"] = attempt
        if layout == "rdb":
            summary["loader_message"] = _hand_over(target, written, started_at)
        summary["wall_time_seconds"] = round(time.monotonic() - started, 3)
        folder.write_json(SUMMARY, summary)
        folder.seal()
        shred_completed(input_path, folder.path, attempt)  # a dedup run's marker: its events are shredded now
    return summary


def _check_options(output_format: ShredFormat, layout: Layout, config: JobConfig) -> None:
    """Raises InvalidArgumentError: the format or layout is not allowed, or not with each other."""
    if output_format not in SHRED_FORMATS:
        raise InvalidArgumentError(f"--format: given {output_format!r}; allowed: {', '.join(SHRED_FORMATS)}")
    if layout not in SHRED_LAYOUTS:
        raise InvalidArgumentError(f"--layout: given {layout!r}; allowed: {', '.join(SHRED_LAYOUTS)}")
    if layout == "legacy" and needs_resolver(output_format, config.shred):
        raise InvalidArgumentError(
            f"--format {output_format} with shred.tsv: TSV shredding writes the rdb layout; given --layout legacy; "
            "allowed: --layout rdb"
        )


def _read(spark: SparkSession, config: JobConfig, input_path: str, progress: Progress) -> tuple[Input, DataFrame]:
    """The input, read whole once, and its lines parsed (`line`, `errors`, `event_id`, `collector_tstamp`)."""
    progress(f"reading every input file under {input_path} once")
    source = open_input(spark, input_path, empty_allowed=is_sealed_dedup_output(input_path))
    source, _ = read_whole(spark, source, config.input.skip_unreadable, count_lines)
    parsed = parse_events(source.lines(spark), config.dedup.fingerprint_fields).select(
        "line", "errors", "event_id", "collector_tstamp"
    )
    return source, parsed


def _write(target: ShredTarget) -> Written:
    """The run's outputs, as its format and layout say."""
    if target.output_format not in ("shred", "shred-tsv"):
        return write_wide_rows(target)
    if target.layout == "legacy":
        return _write_legacy(target)
    return _write_rdb(target)


def _summary(
    target: ShredTarget, written: Written, run_id: str, input_path: str, source: Input, started_at: datetime
) -> dict[str, Any]:
    """The run's summary, without its loader message and wall time."""
    return {
        "counts": {"input": written.good + written.bad, "good": written.good, "bad": written.bad},
        "entities": sum(written.shredded_types.values()),
        "shredded_types": dict(sorted(written.shredded_types.items())),
        "skipped_entities": written.skipped_entities,
        "bad_rows": _bad_rows(written, target.layout),
        "iglu": {"config": target.config.shred.iglu_config, "failures": list(written.iglu_notes)},
        "job": "shred",
        "version": __version__,
        "run_id": run_id,
        "format": target.output_format,
        "layout": target.layout,
        "input": input_path,
        "input_files": source.summary(),
        "output": target.folder.path,
        "started_at": started_at.isoformat(timespec="seconds"),
    }


def _bad_rows(written: Written, layout: Layout) -> dict[str, int]:
    """Bad rows per kind: every bad input line is one of them."""
    if layout == "legacy":
        return {"bad": written.bad}
    return {"loader_parsing_error": written.bad - written.iglu_bad, "loader_iglu_error": written.iglu_bad}


def _hand_over(target: ShredTarget, written: Written, started_at: datetime) -> dict[str, Any]:
    """Write `shredding_complete.json` and send it to `output.queue` (before `_SUCCESS`: a run whose message was
    not sent is not complete, and its rerun sends it again; the loader's own manifest skips a loaded folder)."""
    folder, output_format, config = target.folder, target.output_format, target.config
    widerow = output_format not in ("shred", "shred-tsv")
    document = message.shredding_complete(
        base=message.base_uri(folder.path),
        transformation="WIDEROW" if widerow else "SHREDDED",
        file_format=("PARQUET" if output_format == "widerow-parquet" else "JSON") if widerow else None,
        types=written.loader_types,
        job_started=started_at,
        job_completed=datetime.now(UTC),
        min_tstamp=written.min_tstamp,
        max_tstamp=written.max_tstamp,
        compression=config.output.compression,
        processor_version=__version__,
        good=written.good,
        bad=written.bad,
    )
    text = message.message_text(document)
    folder.write_text_file(SHREDDING_COMPLETE, text)
    sent: dict[str, Any] = {"file": SHREDDING_COMPLETE, "queue": config.output.queue}
    if config.output.queue:
        target.progress(f"sending shredding_complete to {config.output.queue}")
        sent["message_id"] = message.send(config.output.queue, text)
    return sent


def shred_input(spark: SparkSession, path: str) -> str:
    """What shred reads for `--input`: a dedup run folder means its `good/` (its other outputs are not events).

    Raises:
        InvalidArgumentError: an incomplete dedup run folder (no `_SUCCESS`), or a folder of run folders.
    """
    fs = FileSystem(spark)
    if fs.exists(f"{path}/{SUMMARY}"):
        job = summary_job(fs, path, sealed=fs.exists(f"{path}/{SUCCESS_MARKER}"))  # None: an attempt that died
        if job is not None and job != "dedup":
            raise InvalidArgumentError(f"--input: {path} is a {job} run folder; allowed: enriched TSV or a dedup run")
        if not fs.exists(f"{path}/{SUCCESS_MARKER}"):
            raise InvalidArgumentError(
                f"--input: {path} is a dedup run without {SUCCESS_MARKER} (incomplete or being written); "
                "allowed: a complete dedup run: rerun it first"
            )
        return f"{path}/good"
    runs = [name for name in fs.children(path) if name.startswith("run=")]
    if runs:
        raise InvalidArgumentError(
            f"--input: {path} holds run folders ({', '.join(runs[:3])}{', …' if len(runs) > 3 else ''}), whose "
            "duplicates/ and bad/ are not events; allowed: one run folder, or its good/"
        )
    return path


def _observed_counts(decided: DataFrame, *extra: Column) -> tuple[DataFrame, Observation]:
    """`decided` observed while written: good and bad lines, the good events' collector_tstamp range, and `extra`
    aggregates."""
    observation = Observation("shred counts")
    good = F.col("good")
    return (
        decided.observe(
            observation,
            F.count_if(good).alias("good"),
            F.count_if(~good).alias("bad"),
            F.min(F.when(good, F.col("collector_tstamp"))).alias("min_tstamp"),
            F.max(F.when(good, F.col("collector_tstamp"))).alias("max_tstamp"),
            *extra,
        ),
        observation,
    )


def _write_legacy(target: ShredTarget) -> Written:
    """The legacy layout's atomic-events/, shredded-types/ and bad/ in one pass over the input: each line becomes
    its output lines. Good and bad are counted while written (`observe`), entity lines per type from the files."""
    folder = target.folder
    observed, counts = _observed_counts(target.decided)
    written = shredded_outputs(observed, target.run_time)
    folder.write_text_split(
        written, [ATOMIC_EVENTS, SHREDDED_TYPES, "bad"], target.compression, "folder", target.progress
    )
    target.progress(f"counting the entity lines of each type in {folder.path}/{SHREDDED_TYPES}")
    per_type = _lines_per_type(target.decided.sparkSession, f"{folder.path}/{SHREDDED_TYPES}", TYPE_COLUMNS)
    figures = counts.get
    return Written(
        figures["good"], figures["bad"], per_type, [], figures["min_tstamp"], figures["max_tstamp"]
    )  # no loader message in the legacy layout


def _write_rdb(target: ShredTarget) -> Written:
    """The rdb layout's output=good/ and output=bad/ in one pass over the input: each line becomes its output lines.

    Good and bad are counted while written (`observe`), and so are the entity types (a small set, for the loader's
    message); entity lines per type are counted from the files written (one small aggregation per file). TSV
    shredding needs each type's columns before writing: the decided lines are then persisted, their distinct types
    collected and resolved on the driver (`plan_types`), and written from the persisted copy.
    """
    config, decided = target.config, target.decided
    spark = decided.sparkSession
    plan = ShredPlan(skip=skip_criteria(config.shred))
    persisted = needs_resolver(target.output_format, config.shred)
    if persisted:
        # The line is read again only for a parsing-error row: a good event's stays out of the copy on disk.
        decided = decided.withColumn("line", F.when(~F.col("good"), F.col("line"))).persist(DECIDED_STORAGE)
    try:
        if persisted:
            plan = _resolved_plan(target, decided)
        counts, types = _write_rdb_lines(target, decided, plan)
    finally:
        if persisted:
            decided.unpersist()
    keys = [key for key in types.get["types"].split("\n") if key]
    loader_types = [loader_type_of(key, "TSV" if key.split("\t")[1] in plan.tsv else "JSON") for key in keys]
    target.progress(f"counting the entity lines of each type in {target.folder.path}/{rdb.GOOD}")
    per_type = _rdb_lines_per_type(spark, f"{target.folder.path}/{rdb.GOOD}", loader_types)
    figures = counts.get
    return Written(
        figures["good"],
        figures["bad"],
        per_type,
        loader_types,
        figures["min_tstamp"],
        figures["max_tstamp"],
        figures["iglu_bad"],
        figures["skipped"] or 0,
        plan.notes,
    )


def _resolved_plan(target: ShredTarget, decided: DataFrame) -> ShredPlan:
    """The plan of TSV shredding: the good events' distinct entity types, their schemas looked up on the driver."""
    target.progress("collecting the entity types, to look their schemas up")
    uris = [row["uri"] for row in entity_uris(decided.where("good")).distinct().collect()]
    plan = plan_types(uris, target.output_format, target.config.shred, target.resolver, target.run_time)
    target.progress(f"{len(plan.tsv)} types as TSV, {len(plan.failures)} without a usable schema")
    for note in plan.notes:
        target.progress(f"iglu: {note}")
    return plan


def _write_rdb_lines(target: ShredTarget, decided: DataFrame, plan: ShredPlan) -> tuple[Observation, Observation]:
    """Write the rdb output lines; returns what was observed while written: the counts, and the entity types."""
    marked = with_iglu_failures(decided, plan)
    skipped = (
        F.sum(F.when(F.col("good"), F.size(F.filter("entities", lambda e: is_skipped(schema_key(e), plan.skip)))))
        if plan.skip
        else F.lit(0)  # no array function over every event's entities for nothing
    )
    observed, counts = _observed_counts(
        marked, F.count_if(F.col("iglu_failure").isNotNull()).alias("iglu_bad"), skipped.alias("skipped")
    )
    types = Observation("shred types")
    collected = F.array_join(F.array_sort(F.collect_set("type_key")), "\n")
    lines = rdb_outputs(observed, plan).observe(types, collected.alias("types")).select("folder", "text")
    target.folder.write_text_split(lines, [rdb.GOOD, rdb.BAD], target.compression, "folder", target.progress)
    return counts, types


def _lines_per_type(spark: SparkSession, root: str, columns: tuple[str, ...]) -> dict[str, int]:
    """Lines per file under `root`, summed per the `/`-joined values of the path's `columns` (`name=value`)."""
    files = (
        spark.read.option("recursiveFileLookup", "true")
        .text(exact(root))
        .select(F.col("_metadata.file_path").alias("path"))
    )
    types: dict[str, int] = {}
    for row in files.groupBy("path").count().collect():
        parts = dict(unquote(part).split("=", 1) for part in row["path"].split("/") if part.split("=", 1)[0] in columns)
        if len(parts) == len(columns):
            name = "/".join(parts[column] for column in columns)
            types[name] = types.get(name, 0) + row["count"]
    return types


def _rdb_lines_per_type(spark: SparkSession, good: str, loader_types: list[message.LoaderType]) -> dict[str, int]:
    """Entity lines per `vendor/name/format/version` from the files under `output=good/` (their paths say vendor,
    name and model-revision-addition; the schema's format comes from the types written)."""
    columns = ("vendor", "name", "model", "revision", "addition")
    by_path = _lines_per_type(spark, good, columns)
    keys = {}
    for loader_type in loader_types:
        vendor, name, schema_format, version = loader_type.schema_key.removeprefix("iglu:").split("/")
        keys["/".join([vendor, name, *version.split("-")])] = f"{vendor}/{name}/{schema_format}/{version}"
    return {keys[path]: count for path, count in by_path.items() if path in keys}  # the atomic events are no type


def render(summary: dict[str, Any]) -> str:
    """A plain-text table of a shred summary."""
    return table(f"Winnow shred  run {summary['run_id']}", shred_rows(summary), [f"  output: {summary['output']}"])


def shred_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The labelled figures of a shred summary, values already formatted (shared with `run`'s table)."""
    counts = summary["counts"]
    rows = [
        ("input lines", f"{counts['input']:,}"),
        ("good events", f"{counts['good']:,}"),
        ("bad", f"{counts['bad']:,}"),
        ("entities", f"{summary['entities']:,}"),
    ]
    rows.extend((f"  {name}", f"{count:,}") for name, count in summary["shredded_types"].items())
    sent = summary.get("loader_message")
    if sent:
        rows.append(("loader message", f"sent to {sent['queue']}" if sent.get("queue") else "written, not sent"))
    rows.append(("wall time", f"{summary['wall_time_seconds']:.1f} s"))
    return rows
