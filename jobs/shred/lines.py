"""The shred job's line builders: every parsed line decided (good with its entities, or bad), and the output lines
of the decided events in either layout (atomic events, entity lines as JSON or TSV, bad rows).
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType

from jobs import __version__
from jobs.config import ShredLayout as Layout
from jobs.enriched import badrows
from jobs.enriched.fields import FIELD_COUNT, FIELD_INDEX
from jobs.enriched.parse import lower_hex
from jobs.iglu.tsv import tsv_line, tsv_parses
from jobs.shred import rdb
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
from jobs.shred.plan import ShredPlan, iglu_failures, is_skipped
from jobs.shred.widerow import event_json

TYPE_COLUMNS = ("vendor", "name", "format", "version")
ATOMIC_EVENTS, SHREDDED_TYPES = "atomic-events", "shredded-types"
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
    with_entities = _with_field_entities(parsed, layout)
    built = _decision_columns(layout)
    if built.decoding is not None:
        # In a projection of its own: the failure reads it twice, and Spark would otherwise build it twice.
        with_entities = with_entities.select("*", built.decoding.alias("decoding"))
    checked = with_entities.select(
        "line",
        built.errors.alias("errors"),
        built.failure.alias("failure"),
        built.fields.alias("fields"),
        "event_id",
        "collector_tstamp",
        built.entities.alias("entities"),
    )
    return checked.select("line", *built.decided)


class _DecisionColumns(NamedTuple):
    """`shred_events`' expressions: `decoding` (rdb: its own projection), then those of `checked`, then `decided`
    (the returned columns after `line`)."""

    decoding: Column | None
    errors: Column
    failure: Column
    fields: Column
    entities: Column
    decided: tuple[Column, ...]


@functools.cache  # built once per process (docs/concepts.md "Expressions built once")
def _decision_columns(layout: Layout) -> _DecisionColumns:
    no_errors = F.array().cast("array<string>")
    json_errors = {
        name: F.when(F.col("readable"), field_errors(name, F.col(name), F.col(f"{name}_entities"))).otherwise(no_errors)
        for name in JSON_FIELDS
    }
    decoding = None
    if layout == "legacy":
        errors = F.concat(F.col("errors"), *json_errors.values())
        failure = F.lit(None).cast(badrows.FAILURE_TYPE)
        fields = F.lit(None).cast("array<string>")
    else:
        decoding = F.when(F.col("readable"), rdb.decoding_errors(F.col("all_fields"), json_errors))
        errors = no_errors
        failure = badrows.failure(F.size("all_fields"), F.col("decoding"))
        fields = F.when(F.col("readable"), F.col("all_fields"))
    is_good = (F.size("errors") == 0) & F.col("failure").isNull()
    decided = (
        is_good.alias("good"),
        F.col("errors"),
        F.col("failure"),
        F.when(is_good, F.col("fields")).alias("fields"),
        F.col("event_id"),
        F.when(is_good, F.col("collector_tstamp")).alias("collector_tstamp"),
        F.when(is_good, root_tstamp(F.col("collector_tstamp"))).alias("root_tstamp"),
        F.when(is_good, typed_entities(F.col("entities"))).otherwise(F.array().cast(_TYPED)).alias("entities"),
    )
    entities = F.concat(*(F.col(f"{name}_entities") for name in KIND_ORDER))
    return _DecisionColumns(decoding, errors, failure, fields, entities, decided)


def _with_field_entities(parsed: DataFrame, layout: Layout) -> DataFrame:
    """The parsed lines split on tabs (`all_fields`), `readable`, and per JSON field its text, its parsed envelope
    (`NAME_env`) and its entities (`NAME_entities`)."""
    split_line, readable, raw_fields, json_columns, entity_columns = _entity_columns(layout)
    split = parsed.select("line", "errors", "event_id", "collector_tstamp", split_line.alias("all_fields"))
    with_raw = split.select("line", "errors", "event_id", "collector_tstamp", "all_fields", readable.alias("readable"))
    with_raw = with_raw.select("*", *raw_fields)
    with_json = with_raw.select("*", *json_columns)
    # Each field's entities once, in their own column: the checks and the output read them.
    return with_json.select(
        "line", "errors", "event_id", "collector_tstamp", "all_fields", "readable", *JSON_FIELDS,
        *(f"{name}_env" for name in JSON_FIELDS), *entity_columns,
    )  # fmt: skip


@functools.cache  # built once per process (docs/concepts.md "Expressions built once")
def _entity_columns(
    layout: Layout,
) -> tuple[Column, Column, tuple[Column, ...], tuple[Column, ...], tuple[Column, ...]]:
    """`_with_field_entities`' expressions: the split line, `readable`, the raw JSON fields, their envelopes, their
    entities."""
    line = F.col("line")
    # The line split once: the field count, the JSON fields and (rdb) every value to decode come from it.
    split_line = F.split(line, "\t")
    readable = (F.size("errors") == 0) if layout == "legacy" else (F.size("all_fields") == FIELD_COUNT)
    raw_fields = tuple(
        F.when(F.col("readable"), F.get("all_fields", FIELD_INDEX[name])).alias(name) for name in JSON_FIELDS
    )
    json_columns = tuple(parse_json_fields({name: F.col(name) for name in JSON_FIELDS}))
    entity_columns = tuple(field_entities(name).alias(f"{name}_entities") for name in JSON_FIELDS)
    return split_line, readable, raw_fields, json_columns, entity_columns


def entity_uris(good: DataFrame) -> DataFrame:
    """The Iglu URIs of the good events' entities (column `uri`), one row per entity."""
    return good.select(F.explode(F.transform("entities", schema_key)).alias("uri"))


def with_iglu_failures(decided: DataFrame, plan: ShredPlan) -> DataFrame:
    """`decided` with `iglu_failure` (the `loader_iglu_error` failure JSON, null unless an entity's type failed)
    and `good` false for the events that have one: such an event is written whole as that bad row."""
    failure = F.when(F.col("good"), iglu_failures(F.transform("entities", schema_key), plan))
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
        F.struct(
            F.lit("bad").alias("folder"), badrows.bad_row_json(F.col("line"), F.col("errors"), run_time).alias("text")
        )
    )
    outputs = F.when(F.col("good"), F.concat(atomic, entity_lines)).otherwise(bad)
    return decided.select(F.explode(outputs).alias("out")).select("out.folder", "out.text")


def rdb_outputs(decided: DataFrame, plan: ShredPlan | None = None) -> DataFrame:
    """The rdb output lines of the decided events (`with_iglu_failures`): `folder`, `text` and `type_key`
    (`ENTITY<TAB>iglu:…` of an entity line, null for the others).

    A good event gives its atomic line and a line per entity not skipped: TSV (`format=tsv`) for the types the
    plan has columns for, JSON otherwise; an event with an Iglu failure its `loader_iglu_error` row; any other
    bad line its `loader_parsing_error` row.

    Each event's own line (atomic, or its bad row) is built first, in a projection of its own; then the event is
    exploded into a null entity (the row of its own line) and its entities, and each entity line is built after.
    The generator holds no array function and no own line: either would run the whole generator without generated
    code (Spark's higher-order functions are interpreted, and with them everything inside them); the own line is a
    column beside the exploded rows, which only the null entity's row reads.
    """
    plan = plan or ShredPlan()
    good = F.col("good")
    entities = decided.schema["entities"].dataType
    assert isinstance(entities, ArrayType)
    # An event with an Iglu failure is not good: its bad row alone, none of its entities.
    written_entities = F.when(good, F.col("entities")).otherwise(F.array().cast(entities))
    own = decided.select(
        "event_id",
        "root_tstamp",
        _own_folder(plan).alias("own_folder"),
        _own_text(plan).alias("own_text"),
        F.concat(F.array(F.lit(None).cast(entities.elementType)), written_entities).alias("rows"),
    )
    # `explode_outer`, the same rows here (never empty): for `explode` of a column, Spark infers a filter on the
    # array's size and pushes it below the projections, where it would decide every line a second time.
    exploded = own.select("event_id", "root_tstamp", "own_folder", "own_text", F.explode_outer("rows").alias("entity"))
    e = F.col("entity")
    uri = schema_key(e)
    if plan.skip:
        exploded = exploded.where(e.isNull() | ~is_skipped(uri, plan.skip))
    # Each TSV type's parses of its entities' data, once per entity (a column each: see `tsv_parses`).
    parses = {key: tsv_parses(e["data"], columns) for key, columns in sorted(plan.tsv.items())}
    parse_columns = {key: [f"tsv_parse_{i}_{j}" for j in range(len(p))] for i, (key, p) in enumerate(parses.items())}
    exploded = exploded.select(
        "*",
        *(
            F.when(uri == key, p).alias(c)
            for key in parses
            for p, c in zip(parses[key], parse_columns[key], strict=True)
        ),
    )
    root_id = lower_hex(F.col("event_id"))  # upstream's rootId is the event's UUID, which prints lower-case
    entity_text = shredded_line(e, root_id, F.col("root_tstamp"))
    shredded_format = F.lit("json")
    for key, columns in sorted(plan.tsv.items()):
        vendor, name, schema_format, version = key.removeprefix("iglu:").split("/")
        parsed = [F.col(column) for column in parse_columns[key]]
        line = tsv_line(vendor, name, schema_format, version, root_id, F.col("root_tstamp"), e["data"], parsed, columns)
        entity_text = F.when(uri == key, line).otherwise(entity_text)
        shredded_format = F.when(uri == key, F.lit("tsv")).otherwise(shredded_format)
    is_entity = e.isNotNull()
    folder = F.when(is_entity, rdb.entity_folder(e, shredded_format)).otherwise(F.col("own_folder"))
    text = F.when(is_entity, entity_text).otherwise(F.col("own_text"))
    type_key = F.when(is_entity, F.concat(_entity_kind(e["kind"]), F.lit("\t"), uri))
    return exploded.select(folder.alias("folder"), text.alias("text"), type_key.alias("type_key"))


def _own_folder(plan: ShredPlan) -> Column:
    """Where an event's own line goes: atomic events when good, else the bad rows of its failure."""
    folder = F.when(F.col("good"), F.lit(f"{rdb.GOOD}/{rdb.ATOMIC_PATH}"))
    if plan.failures:
        folder = folder.when(F.col("iglu_failure").isNotNull(), F.lit(f"{rdb.BAD}/{rdb.IGLU_ERROR_PATH}"))
    return folder.otherwise(F.lit(f"{rdb.BAD}/{rdb.PARSING_ERROR_PATH}"))


def _own_text(plan: ShredPlan) -> Column:
    """An event's own line: its atomic line when good, else its `loader_iglu_error` or `loader_parsing_error` row."""
    return _own_text_of(bool(plan.failures))


@functools.cache  # built once per process (docs/concepts.md "Expressions built once")
def _own_text_of(failures: bool) -> Column:
    text = F.when(F.col("good"), rdb.atomic_line(F.col("fields")))
    if failures:  # the payload's expression is large: only there when a schema failed
        payload = event_json(F.col("fields"), F.col("entities"))  # a failed event is good: it has its fields
        text = text.when(
            F.col("iglu_failure").isNotNull(), rdb.iglu_bad_row(F.col("iglu_failure"), payload, __version__)
        )
    return text.otherwise(rdb.bad_row(F.col("line"), F.col("failure"), __version__))


def _entity_kind(kind: Column) -> Column:
    return F.when(kind == "unstruct_event", F.lit("SELF_DESCRIBING_EVENT")).otherwise(F.lit("CONTEXT"))


def schema_key(entity: Column) -> Column:
    """An entity's Iglu URI, `iglu:vendor/name/format/version`."""
    return F.concat(
        F.lit("iglu:"), F.concat_ws("/", *(entity[name] for name in TYPE_COLUMNS))
    )  # fmt: skip
