"""The shred job: deduplicated enriched events -> what a warehouse loader reads.

Layout `rdb` (default; Snowplow RDB transformer 6.x, read by RDB Loader; see jobs/shred/rdb.py), `OUT/run=ID/`:
  output=good/vendor=com.snowplowanalytics.snowplow/name=atomic/format=tsv/model=1/revision=0/addition=0/
  output=good/vendor=V/name=N/format=json/model=M/revision=R/addition=A/    one JSON line per entity
  output=bad/vendor=com.snowplowanalytics.snowplow.badrows/name=loader_parsing_error/format=json/model=2/…
  shredding_complete.json (the loader's message, also sent to `output.queue`), summary.json, then _SUCCESS
  With `--format widerow` (`widerow-parquet`): the wide rows directly in output=good/, bad rows in output=bad/.
Layout `legacy` (the R30-era RDB Shredder of shared/reference/002):
  atomic-events/, shredded-types/vendor=V/name=N/format=F/version=M-R-A/, bad/ (DESIGN bad rows),
  or widerow/ and bad/; summary.json, then _SUCCESS.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType

from jobs import __version__
from jobs.config import SHRED_FORMATS, SHRED_LAYOUTS, JobConfig, ShredFormat
from jobs.config import ShredLayout as Layout
from jobs.contract import SUCCESS_MARKER, SUMMARY
from jobs.enriched.fields import FIELD_COUNT, FIELD_INDEX
from jobs.enriched.parse import bad_row_json, parse_events
from jobs.errors import InvalidArgumentError
from jobs.fs.hadoop import FileSystem
from jobs.fs.input import count_lines, open_input, read_whole, require_input
from jobs.fs.paths import absolute, check_apart
from jobs.fs.run_folder import RunFolder
from jobs.fs.runs import run_timestamp
from jobs.iglu.resolver import Resolver
from jobs.iglu.tsv import tsv_line
from jobs.runtime.summary import table
from jobs.shred import message, rdb
from jobs.shred.entities import (
    JSON_FIELDS,
    KIND_ORDER,
    atomic_line,
    field_entities,
    field_errors,
    parse_json_fields,
    root_tstamp,
    shredded_line,
    typed_entities,
)  # fmt: skip
from jobs.shred.plan import (
    ShredPlan,
    check_resolver,
    iglu_failures,
    is_skipped,
    needs_resolver,
    plan_types,
    skip_criteria,
)
from jobs.shred.widerow import WIDEROW_FOLDER, event_json

TYPE_COLUMNS = ("vendor", "name", "format", "version")
ATOMIC_EVENTS, SHREDDED_TYPES = "atomic-events", "shredded-types"
SHREDDING_COMPLETE = "shredding_complete.json"
# Everything a shred run writes directly in its folder, in either layout (a rerun may switch layouts).
RUN_ENTRIES = (ATOMIC_EVENTS, SHREDDED_TYPES, WIDEROW_FOLDER, "bad", rdb.GOOD, rdb.BAD, SHREDDING_COMPLETE)

Progress = Callable[[str], None]
# The decided lines, when TSV shredding or the wide rows read them more than once (types, then lines), are kept on
# disk only: a row holds the line, its fields and its entities (~4 KB), and Spark's in-memory cache of such rows ran
# the 4 GB local driver out of heap (1M events: OutOfMemoryError with MEMORY_AND_DISK for shred-tsv and
# widerow-parquet alike).
DECIDED_STORAGE = StorageLevel.DISK_ONLY
# The type of `typed_entities`, for the empty array of bad lines.
_TYPED = "array<struct<kind:string,vendor:string,name:string,format:string,version:string,model:string,data:string>>"


def shred_events(parsed: DataFrame, layout: Layout = "rdb") -> DataFrame:
    """Decide every parsed line (from `parse_events`): good with its entities, or bad with all its errors.

    Returns one row per input line: `line`, `good`, `errors` (legacy: parser errors, then JSON-field errors;
    empty when good; rdb: empty), `failure` (rdb: the `loader_parsing_error` failure, null when good; legacy:
    null), `fields` (rdb: the line split on tabs, for good lines), `event_id`, `collector_tstamp`, `root_tstamp`
    and `entities` (`typed_entities`, empty for bad lines). An event is good only when every one of its JSON
    fields and entities is, so it is written whole or not at all. The rdb layout also decodes every value as
    Snowplow's SDK does (`rdb.decoding_errors`), and reports the JSON fields of any 131-field line.
    """
    line = F.col("line")
    # The line split once: the field count, the JSON fields and (rdb) every value to decode come from it.
    split = parsed.select("line", "errors", "event_id", "collector_tstamp", F.split(line, "\t").alias("all_fields"))
    readable = (F.size("errors") == 0) if layout == "legacy" else (F.size("all_fields") == FIELD_COUNT)
    raw_fields = (F.when(F.col("readable"), F.get("all_fields", FIELD_INDEX[name])).alias(name) for name in JSON_FIELDS)
    with_raw = split.select("line", "errors", "event_id", "collector_tstamp", "all_fields", readable.alias("readable"))
    with_raw = with_raw.select("*", *raw_fields)
    with_json = with_raw.select("*", *parse_json_fields({name: F.col(name) for name in JSON_FIELDS}))
    # Each field's entities once, in their own column: the checks and the output read them.
    with_entities = with_json.select(
        "line", "errors", "event_id", "collector_tstamp", "all_fields", "readable", *JSON_FIELDS,
        *(f"{name}_env" for name in JSON_FIELDS), *(field_entities(name).alias(f"{name}_entities") for name in JSON_FIELDS),
    )  # fmt: skip
    no_errors = F.array().cast("array<string>")
    json_errors = {
        name: F.when(F.col("readable"), field_errors(name, F.col(name), F.col(f"{name}_entities"))).otherwise(no_errors)
        for name in JSON_FIELDS
    }
    if layout == "legacy":
        errors = F.concat(F.col("errors"), *json_errors.values())
        failure = F.lit(None).cast(rdb.FAILURE_TYPE)
        fields = F.lit(None).cast("array<string>")
    else:
        # In a projection of its own: the failure reads it twice, and Spark would otherwise build it twice.
        with_entities = with_entities.select(
            "*", F.when(F.col("readable"), rdb.decoding_errors(F.col("all_fields"), json_errors)).alias("decoding")
        )
        errors = no_errors
        failure = rdb.failure(F.size("all_fields"), F.col("decoding"))
        fields = F.when(F.col("readable"), F.col("all_fields"))
    checked = with_entities.select(
        "line",
        errors.alias("errors"),
        failure.alias("failure"),
        fields.alias("fields"),
        "event_id",
        "collector_tstamp",
        F.concat(*(F.col(f"{name}_entities") for name in KIND_ORDER)).alias("entities"),
    )
    is_good = (F.size("errors") == 0) & F.col("failure").isNull()
    return checked.select(
        "line",
        is_good.alias("good"),
        "errors",
        "failure",
        F.when(is_good, F.col("fields")).alias("fields"),
        "event_id",
        F.when(is_good, F.col("collector_tstamp")).alias("collector_tstamp"),
        F.when(is_good, root_tstamp(F.col("collector_tstamp"))).alias("root_tstamp"),
        F.when(is_good, typed_entities(F.col("entities"))).otherwise(F.array().cast(_TYPED)).alias("entities"),
    )


@dataclass(frozen=True)
class Written:
    """What a shred run wrote, for its summary and the loader's message."""

    good: int
    bad: int
    shredded_types: dict[str, int]
    """Entity lines per `vendor/name/format/version`."""
    loader_types: list[message.LoaderType]
    """Each entity type with the kind of entity it is (context or self-describing event)."""
    min_tstamp: str | None
    max_tstamp: str | None
    """The earliest and latest collector_tstamp of the good events (as written; null without good events)."""
    iglu_bad: int = 0
    """Of `bad`: the events whose entity schemas could not be resolved (`loader_iglu_error` rows)."""
    skipped_entities: int = 0
    """Entities of good events not written: their type is on the `shred.skip` list."""
    iglu_notes: tuple[str, ...] = ()
    """One line per schema that could not be resolved or used."""


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
    if output_format not in SHRED_FORMATS:
        raise InvalidArgumentError(f"--format: given {output_format!r}; allowed: {', '.join(SHRED_FORMATS)}")
    if layout not in SHRED_LAYOUTS:
        raise InvalidArgumentError(f"--layout: given {layout!r}; allowed: {', '.join(SHRED_LAYOUTS)}")
    if layout == "legacy" and needs_resolver(output_format, config.shred):
        raise InvalidArgumentError(
            f"--format {output_format} with shred.tsv: TSV shredding writes the rdb layout; given --layout legacy; "
            "allowed: --layout rdb"
        )
    resolver = check_resolver(output_format, config.shred)  # before any work: a bad resolver config fails fast
    started_at, started = datetime.now(UTC), time.monotonic()
    run_time = run_timestamp(run_id)
    input_path, output_path = shred_input(spark, absolute(input_path)), absolute(output_path)
    require_input(spark, input_path)
    check_apart("--output", output_path, {"--input": input_path})
    folder = RunFolder(spark, output_path, run_id, "shred", RUN_ENTRIES)
    with folder.writing():
        progress(f"reading every input file under {input_path} once")
        source, _ = read_whole(spark, open_input(spark, input_path), config.input.skip_unreadable, count_lines)
        parsed = parse_events(source.lines(spark), config.dedup.fingerprint_fields).select(
            "line", "errors", "event_id", "collector_tstamp"
        )
        folder.clear()
        progress(f"reading and shredding {input_path} ({layout} layout)")
        decided = shred_events(parsed, layout)
        if output_format in ("shred", "shred-tsv"):
            written = _write_shredded(folder, decided, run_time, config, output_format, layout, resolver, progress)
        else:
            written = _write_wide_rows(folder, decided, run_time, config, output_format, layout, resolver, progress)

        summary: dict[str, Any] = {
            "counts": {"input": written.good + written.bad, "good": written.good, "bad": written.bad},
            "entities": sum(written.shredded_types.values()),
            "shredded_types": dict(sorted(written.shredded_types.items())),
            "skipped_entities": written.skipped_entities,
            "bad_rows": _bad_rows(written, layout),
            "iglu": {"config": config.shred.iglu_config, "failures": list(written.iglu_notes)},
            "job": "shred",
            "version": __version__,
            "run_id": run_id,
            "format": output_format,
            "layout": layout,
            "input": input_path,
            "input_files": source.summary(),
            "output": folder.path,
            "started_at": started_at.isoformat(timespec="seconds"),
        }
        if layout == "rdb":
            summary["loader_message"] = _hand_over(folder, written, output_format, config, started_at, progress)
        summary["wall_time_seconds"] = round(time.monotonic() - started, 3)
        folder.write_json(SUMMARY, summary)
        folder.seal()
    return summary


def _bad_rows(written: Written, layout: Layout) -> dict[str, int]:
    """Bad rows per kind: every bad input line is one of them."""
    if layout == "legacy":
        return {"bad": written.bad}
    return {"loader_parsing_error": written.bad - written.iglu_bad, "loader_iglu_error": written.iglu_bad}


def _hand_over(
    folder: RunFolder,
    written: Written,
    output_format: ShredFormat,
    config: JobConfig,
    started_at: datetime,
    progress: Progress,
) -> dict[str, Any]:
    """Write `shredding_complete.json` and send it to `output.queue` (before `_SUCCESS`: a run whose message was
    not sent is not complete, and its rerun sends it again; the loader's own manifest skips a loaded folder)."""
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
        progress(f"sending shredding_complete to {config.output.queue}")
        sent["message_id"] = message.send(config.output.queue, text)
    return sent


def shred_input(spark: SparkSession, path: str) -> str:
    """What shred reads for `--input`: a dedup run folder means its `good/` (its other outputs are not events).

    Raises:
        InvalidArgumentError: an incomplete dedup run folder (no `_SUCCESS`), or a folder of run folders.
    """
    fs = FileSystem(spark)
    if fs.exists(f"{path}/{SUMMARY}"):
        job = json.loads(fs.read_text(f"{path}/{SUMMARY}")).get("job")
        if job != "dedup":
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


def _write_shredded(
    folder: RunFolder,
    decided: DataFrame,
    run_time: datetime,
    config: JobConfig,
    output_format: ShredFormat,
    layout: Layout,
    resolver: Resolver | None,
    progress: Progress,
) -> Written:
    """The atomic events, the entity lines and the bad rows in one pass over the input: each line becomes its
    output lines.

    Good and bad are counted while written (`observe`), and so are the rdb layout's entity types (a small set,
    for the loader's message); entity lines per type are counted from the files written (one small aggregation
    per file). TSV shredding needs each type's columns before writing: the decided lines are then persisted,
    their distinct types collected and resolved on the driver (`plan_types`), and written from the persisted copy.
    """
    compression = config.output.compression
    spark = decided.sparkSession
    if layout == "legacy":
        observed, counts = _observed_counts(decided)
        written = shredded_outputs(observed, run_time)
        folder.write_text_split(written, [ATOMIC_EVENTS, SHREDDED_TYPES, "bad"], compression, "folder")
        per_type = _lines_per_type(spark, f"{folder.path}/{SHREDDED_TYPES}", TYPE_COLUMNS)
        figures = counts.get
        return Written(
            figures["good"], figures["bad"], per_type, [], figures["min_tstamp"], figures["max_tstamp"]
        )  # no loader message in the legacy layout
    plan = ShredPlan(skip=skip_criteria(config.shred))
    persisted = needs_resolver(output_format, config.shred)
    if persisted:
        decided = decided.persist(DECIDED_STORAGE)
    try:
        if persisted:
            progress("collecting the entity types, to look their schemas up")
            uris = [row["uri"] for row in _entity_uris(decided.where("good")).distinct().collect()]
            plan = plan_types(uris, output_format, config.shred, resolver, run_time)
            progress(f"{len(plan.tsv)} types as TSV, {len(plan.failures)} without a usable schema")
            for note in plan.notes:
                progress(f"iglu: {note}")
        marked = with_iglu_failures(decided, plan)
        skipped = F.sum(
            F.when(F.col("good"), F.size(F.filter("entities", lambda e: is_skipped(_schema_key(e), plan.skip))))
        )
        observed, counts = _observed_counts(
            marked, F.count_if(F.col("iglu_failure").isNotNull()).alias("iglu_bad"), skipped.alias("skipped")
        )
        types = Observation("shred types")
        collected = F.array_join(F.array_sort(F.collect_set("type_key")), "\n")
        lines = rdb_outputs(observed, plan).observe(types, collected.alias("types")).select("folder", "text")
        folder.write_text_split(lines, [rdb.GOOD, rdb.BAD], compression, "folder")
    finally:
        if persisted:
            decided.unpersist()
    keys = [key for key in types.get["types"].split("\n") if key]
    loader_types = [_loader_type(key, "TSV" if key.split("\t")[1] in plan.tsv else "JSON") for key in keys]
    per_type = _rdb_lines_per_type(spark, f"{folder.path}/{rdb.GOOD}", loader_types)
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


def _entity_uris(good: DataFrame) -> DataFrame:
    """The Iglu URIs of the good events' entities (column `uri`), one row per entity."""
    return good.select(F.explode(F.transform("entities", _schema_key)).alias("uri"))


def with_iglu_failures(decided: DataFrame, plan: ShredPlan) -> DataFrame:
    """`decided` with `iglu_failure` (the `loader_iglu_error` failure JSON, null unless an entity's type failed)
    and `good` false for the events that have one: such an event is written whole as that bad row."""
    failure = F.when(F.col("good"), iglu_failures(F.transform("entities", _schema_key), plan))
    return decided.withColumn("iglu_failure", failure).withColumn(
        "good", F.col("good") & F.col("iglu_failure").isNull()
    )


def shredded_outputs(decided: DataFrame, run_time: datetime) -> DataFrame:
    """The legacy output lines of the decided events (`shred_events`): `folder` (under the run folder) and `text`.

    A good event gives its atomic-events line and one shredded-types line per entity; a bad one its bad row.
    """
    entity_lines = F.transform(
        F.col("entities"),
        lambda e: F.struct(
            F.concat(
                F.lit(f"{SHREDDED_TYPES}/"),
                *(F.concat(F.lit(f"{'/' if i else ''}{name}="), e[name]) for i, name in enumerate(TYPE_COLUMNS)),
            ).alias("folder"),
            shredded_line(e, F.col("event_id"), F.col("root_tstamp")).alias("text"),
        ),
    )
    atomic = F.array(F.struct(F.lit(ATOMIC_EVENTS).alias("folder"), atomic_line(F.col("line")).alias("text")))
    bad = F.array(
        F.struct(F.lit("bad").alias("folder"), bad_row_json(F.col("line"), F.col("errors"), run_time).alias("text"))
    )
    outputs = F.when(F.col("good"), F.concat(atomic, entity_lines)).otherwise(bad)
    return decided.select(F.explode(outputs).alias("out")).select("out.folder", "out.text")


def rdb_outputs(decided: DataFrame, plan: ShredPlan | None = None) -> DataFrame:
    """The rdb output lines of the decided events (`with_iglu_failures`): `folder`, `text` and `type_key`
    (`ENTITY<TAB>iglu:…` of an entity line, null for the others).

    A good event gives its atomic line and a line per entity not skipped: TSV (`format=tsv`) for the types the
    plan has columns for, JSON otherwise; an event with an Iglu failure its `loader_iglu_error` row; any other
    bad line its `loader_parsing_error` row.

    The events are exploded first, one row per output line (the event's own line has no entity), and each line
    is built after: built inside an array function, every entity line was evaluated without generated code
    (Spark's higher-order functions are interpreted, and with them everything inside them).
    """
    plan = plan or ShredPlan()
    good = F.col("good")
    entities = decided.schema["entities"].dataType
    assert isinstance(entities, ArrayType)
    no_entity = F.array(F.lit(None).cast(entities.elementType))
    exploded = decided.select(
        "good", "line", "fields", "failure", "event_id", "root_tstamp",
        *(["iglu_failure", "entities"] if plan.failures else []),
        F.explode(F.when(good, F.concat(no_entity, F.col("entities"))).otherwise(no_entity)).alias("entity"),
    )  # fmt: skip
    e = F.col("entity")
    uri = _schema_key(e)
    if plan.skip:
        exploded = exploded.where(e.isNull() | ~is_skipped(uri, plan.skip))
    root_id = F.lower(F.col("event_id"))  # upstream's rootId is the event's UUID, which prints lower-case
    entity_text = shredded_line(e, root_id, F.col("root_tstamp"))
    shredded_format = F.lit("json")
    for key, columns in sorted(plan.tsv.items()):
        vendor, name, schema_format, version = key.removeprefix("iglu:").split("/")
        line = tsv_line(vendor, name, schema_format, version, root_id, F.col("root_tstamp"), e["data"], columns)
        entity_text = F.when(uri == key, line).otherwise(entity_text)
        shredded_format = F.when(uri == key, F.lit("tsv")).otherwise(shredded_format)
    folder = F.when(e.isNotNull(), rdb.entity_folder(e, shredded_format)).when(
        good, F.lit(f"{rdb.GOOD}/{rdb.ATOMIC_PATH}")
    )
    text = F.when(e.isNotNull(), entity_text).when(good, rdb.atomic_line(F.col("fields")))
    if plan.failures:  # the payload's expression is large: only there when a schema failed
        iglu_failed = F.col("iglu_failure").isNotNull()
        folder = folder.when(iglu_failed, F.lit(f"{rdb.BAD}/{rdb.IGLU_ERROR_PATH}"))
        payload = event_json(F.col("fields"), F.col("entities"))  # a failed event is good: it has its fields
        text = text.when(iglu_failed, rdb.iglu_bad_row(F.col("iglu_failure"), payload, __version__))
    folder = folder.otherwise(F.lit(f"{rdb.BAD}/{rdb.PARSING_ERROR_PATH}"))
    text = text.otherwise(rdb.bad_row(F.col("line"), F.col("failure"), __version__))
    type_key = F.when(e.isNotNull(), F.concat(_entity_kind(e["kind"]), F.lit("\t"), uri))
    return exploded.select(folder.alias("folder"), text.alias("text"), type_key.alias("type_key"))


def _entity_kind(kind: Column) -> Column:
    return F.when(kind == "unstruct_event", F.lit("SELF_DESCRIBING_EVENT")).otherwise(F.lit("CONTEXT"))


def _schema_key(entity: Column) -> Column:
    return F.concat(
        F.lit("iglu:"), F.concat_ws("/", *(entity[name] for name in TYPE_COLUMNS))
    )  # fmt: skip


def _loader_type(type_key: str, shredded_format: str | None) -> message.LoaderType:
    entity, schema_key = type_key.split("\t")
    return message.LoaderType(schema_key=schema_key, entity=entity, format=shredded_format)  # type: ignore[arg-type]


def _lines_per_type(spark: SparkSession, root: str, columns: tuple[str, ...]) -> dict[str, int]:
    """Lines per file under `root`, summed per the `/`-joined values of the path's `columns` (`name=value`)."""
    files = (
        spark.read.option("recursiveFileLookup", "true").text(root).select(F.col("_metadata.file_path").alias("path"))
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


def _write_wide_rows(
    folder: RunFolder,
    decided: DataFrame,
    run_time: datetime,
    config: JobConfig,
    output_format: ShredFormat,
    layout: Layout,
    resolver: Resolver | None,
    progress: Progress,
) -> Written:
    """The wide rows and the bad rows (legacy: widerow/ and bad/; rdb: output=good/ and output=bad/). The entity
    types are needed before writing (they are the columns), so the decided lines are persisted and read for the
    counts, the types, the rows and the bad rows.

    With a resolver, the rdb layout's Parquet entity columns are typed from their schemas (`jobs.shred.typed`):
    the events whose schemas fail, or whose data does not fit the type, become `loader_iglu_error` rows, so the
    lines are marked and persisted again (the check parses each entity once more) before anything is written.
    """
    from jobs.shred import widerow
    from jobs.shred.typed import TypedFamilies, cast_failures, type_families, typed_columns

    rows_folder, bad_folder = (WIDEROW_FOLDER, "bad") if layout == "legacy" else (rdb.GOOD, rdb.BAD)
    # Without the split fields, which the rows never read (built from the line): building the cache of 1M, 86 -> 58 s.
    decided = decided.drop("fields").persist(DECIDED_STORAGE)
    marked = decided
    try:
        type_rows = _type_rows(decided.where("good"))
        families = widerow.entity_families(type_rows)
        typed = TypedFamilies()
        if output_format == "widerow-parquet" and layout == "rdb" and resolver is not None:
            progress(f"looking up the schemas of {len(families)} entity families, to type their Parquet columns")
            typed = type_families(families, type_rows, resolver, run_time)
            for note in typed.notes:
                progress(f"iglu: {note}")
            entities = F.col("entities")
            failure = F.when(
                F.col("good"),
                F.coalesce(
                    iglu_failures(F.transform("entities", _schema_key), ShredPlan(failures=typed.failures)),
                    cast_failures(entities, families, typed),
                ),
            )
            marked = (
                decided.withColumn("iglu_failure", failure)
                .withColumn("good", F.col("good") & F.col("iglu_failure").isNull())
                .persist(DECIDED_STORAGE)
            )
        else:
            marked = decided.withColumn("iglu_failure", F.lit(None).cast("string"))
        good_lines, bad_lines = marked.where("good"), marked.where("not good")
        figures = marked.agg(
            F.count_if("good").alias("good"),
            F.count_if(~F.col("good")).alias("bad"),
            F.count_if(F.col("iglu_failure").isNotNull()).alias("iglu_bad"),
            F.min(F.when(F.col("good"), F.col("collector_tstamp"))).alias("min_tstamp"),
            F.max(F.when(F.col("good"), F.col("collector_tstamp"))).alias("max_tstamp"),
        ).first()
        assert figures is not None
        if figures["iglu_bad"]:
            type_rows = _type_rows(good_lines)  # the types of the events still good
        types: dict[str, int] = {}
        loader_keys: set[str] = set()
        for row in type_rows:
            name = "{vendor}/{name}/{format}/{version}".format(**row.asDict())
            types[name] = types.get(name, 0) + row["count"]
            entity = "SELF_DESCRIBING_EVENT" if row["kind"] == "unstruct_event" else "CONTEXT"
            loader_keys.add(f"{entity}\tiglu:{name}")
        progress(f"writing {rows_folder}/ ({output_format}, {len(families)} entity families)")
        widerow.write(
            folder,
            good_lines,
            families,
            output_format,
            config.output.compression,
            rows_folder,
            lambda entities, family: typed_columns(entities, family, typed) if family.column in typed.columns else None,
        )
        progress(f"writing {bad_folder}/")
        if layout == "legacy":
            bad_text = bad_lines.select(bad_row_json(F.col("line"), F.col("errors"), run_time))
        else:
            parsing_error = rdb.bad_row(F.col("line"), F.col("failure"), __version__)
            if figures["iglu_bad"]:
                # The line split in a projection of its own: inside the `when`, every field would split it again.
                bad_lines = bad_lines.withColumn("split_line", F.split("line", "\t"))
                payload = event_json(F.col("split_line"), F.col("entities"))
                iglu_error = rdb.iglu_bad_row(F.col("iglu_failure"), payload, __version__)
                parsing_error = F.when(F.col("iglu_failure").isNotNull(), iglu_error).otherwise(parsing_error)
            bad_text = bad_lines.select(parsing_error)
        folder.write_text(bad_folder, bad_text, config.output.compression)
    finally:
        if marked is not decided:
            marked.unpersist()
        decided.unpersist()
    return Written(
        figures["good"],
        figures["bad"],
        types,
        [_loader_type(key, None) for key in sorted(loader_keys)],
        figures["min_tstamp"],
        figures["max_tstamp"],
        figures["iglu_bad"],
        0,
        typed.notes,
    )


def _type_rows(good: DataFrame) -> list[Any]:
    """The entity types of good events with their counts: rows of kind, vendor, name, format, version, count."""
    return (
        good.select(F.explode("entities").alias("e"))
        .groupBy(*(F.col("e")[name].alias(name) for name in ("kind", *TYPE_COLUMNS)))
        .count()
        .collect()
    )


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
