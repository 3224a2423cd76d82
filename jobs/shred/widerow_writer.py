"""The shred job's wide-row writer (`--format widerow` and `widerow-parquet`): the wide rows and the bad rows."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs import __version__
from jobs.enriched.badrows import bad_row_json
from jobs.iglu.resolver import Resolver
from jobs.shred import rdb, widerow
from jobs.shred.lines import TYPE_COLUMNS, schema_key
from jobs.shred.plan import ShredPlan, iglu_failures
from jobs.shred.target import DECIDED_STORAGE, ShredTarget, Written, loader_type_of
from jobs.shred.typed import (
    TypedFamilies,
    cast_failures,
    type_families,
    typed_columns,
    typed_values,
    with_parsed_entities,
)
from jobs.shred.widerow import WIDEROW_FOLDER, Family, event_json


def write_wide_rows(target: ShredTarget) -> Written:
    """The wide rows and the bad rows (legacy: widerow/ and bad/; rdb: output=good/ and output=bad/). The entity
    types are needed before writing (they are the columns), so the decided lines are persisted and read for the
    counts, the types, the rows and the bad rows.

    With a resolver, the rdb layout's Parquet entity columns are typed from their schemas (`jobs.shred.typed`):
    the events whose schemas fail, or whose data does not fit the type, become `loader_iglu_error` rows, so the
    lines are marked, and persisted again with their typed values, before anything is written (each entity parsed
    once for its check and its value).
    """
    layout, output_format, resolver = target.layout, target.output_format, target.resolver
    rows_folder, bad_folder = (WIDEROW_FOLDER, "bad") if layout == "legacy" else (rdb.GOOD, rdb.BAD)
    # Without the split fields, which the rows never read (they are built from the line): a smaller cache.
    decided = target.decided.drop("fields").persist(DECIDED_STORAGE)
    marked = decided
    try:
        type_rows = _type_rows(decided.where("good"))
        families = widerow.entity_families(type_rows)
        typed = TypedFamilies()
        if output_format == "widerow-parquet" and layout == "rdb" and resolver is not None:
            typed = _typed_families(target, resolver, families, type_rows)
            marked = _with_typed_failures(decided, families, typed)
        else:
            marked = decided.withColumn("iglu_failure", F.lit(None).cast("string"))
        good_lines, bad_lines = marked.where("good"), marked.where("not good")
        figures = _figures(marked)
        if figures["iglu_bad"]:
            type_rows = _type_rows(good_lines)  # the types of the events still good
        types, loader_keys = _types(type_rows)
        target.progress(f"writing {rows_folder}/ ({output_format}, {len(families)} entity families)")
        widerow.write(
            target.folder,
            good_lines,
            families,
            output_format,
            target.compression,
            rows_folder,
            lambda family: typed_columns(family, typed) if family.column in typed.columns else None,
        )
        target.progress(f"writing {bad_folder}/")
        target.folder.write_text(bad_folder, _bad_text(target, bad_lines, figures["iglu_bad"]), target.compression)
    finally:
        if marked is not decided:
            marked.unpersist()
        decided.unpersist()
    return Written(
        figures["good"],
        figures["bad"],
        types,
        [loader_type_of(key, None) for key in sorted(loader_keys)],
        figures["min_tstamp"],
        figures["max_tstamp"],
        figures["iglu_bad"],
        0,
        typed.notes,
    )


def _typed_families(
    target: ShredTarget, resolver: Resolver, families: list[Family], type_rows: list[Any]
) -> TypedFamilies:
    """The families' typed Parquet columns, from their schemas looked up on the driver."""
    target.progress(f"looking up the schemas of {len(families)} entity families, to type their Parquet columns")
    typed = type_families(families, type_rows, resolver, target.run_time)
    for note in typed.notes:
        target.progress(f"iglu: {note}")
    return typed


def _with_typed_failures(decided: DataFrame, families: list[Family], typed: TypedFamilies) -> DataFrame:
    """`decided` with `iglu_failure` (a family's schemas failed, or an entity does not fit its type), `good` false
    for the events that have one, and the typed columns' values (`typed_values`), persisted."""
    failure = F.when(
        F.col("good"),
        F.coalesce(
            iglu_failures(F.transform("entities", schema_key), ShredPlan(failures=typed.failures)),
            cast_failures(families, typed),
        ),
    )
    return (
        with_parsed_entities(decided, families, typed)
        .select(*decided.columns, failure.alias("iglu_failure"), *typed_values(families, typed))
        .withColumn("good", F.col("good") & F.col("iglu_failure").isNull())
        .persist(DECIDED_STORAGE)
    )


def _figures(marked: DataFrame) -> Row:
    """Good, bad and Iglu-failed lines, and the good events' collector_tstamp range."""
    figures = marked.agg(
        F.count_if("good").alias("good"),
        F.count_if(~F.col("good")).alias("bad"),
        F.count_if(F.col("iglu_failure").isNotNull()).alias("iglu_bad"),
        F.min(F.when(F.col("good"), F.col("collector_tstamp"))).alias("min_tstamp"),
        F.max(F.when(F.col("good"), F.col("collector_tstamp"))).alias("max_tstamp"),
    ).first()
    assert figures is not None
    return figures


def _types(type_rows: list[Any]) -> tuple[dict[str, int], set[str]]:
    """Entities per `vendor/name/format/version`, and the loader's type keys (`ENTITY<TAB>iglu:…`)."""
    types: dict[str, int] = {}
    loader_keys: set[str] = set()
    for row in type_rows:
        name = "{vendor}/{name}/{format}/{version}".format(**row.asDict())
        types[name] = types.get(name, 0) + row["count"]
        entity = "SELF_DESCRIBING_EVENT" if row["kind"] == "unstruct_event" else "CONTEXT"
        loader_keys.add(f"{entity}\tiglu:{name}")
    return types, loader_keys


def _bad_text(target: ShredTarget, bad_lines: DataFrame, iglu_bad: int) -> DataFrame:
    """The bad rows' text: legacy bad rows, or rdb `loader_parsing_error` and `loader_iglu_error` rows."""
    if target.layout == "legacy":
        return bad_lines.select(bad_row_json(F.col("line"), F.col("errors"), target.run_time))
    parsing_error = rdb.bad_row(F.col("line"), F.col("failure"), __version__)
    if iglu_bad:
        # The line split in a projection of its own: inside the `when`, every field would split it again.
        bad_lines = bad_lines.withColumn("split_line", F.split("line", "\t"))
        payload = event_json(F.col("split_line"), F.col("entities"))
        iglu_error = rdb.iglu_bad_row(F.col("iglu_failure"), payload, __version__)
        parsing_error = F.when(F.col("iglu_failure").isNotNull(), iglu_error).otherwise(parsing_error)
    return bad_lines.select(parsing_error)


def _type_rows(good: DataFrame) -> list[Any]:
    """The entity types of good events with their counts: rows of kind, vendor, name, format, version, count."""
    return (
        good.select(F.explode("entities").alias("e"))
        .groupBy(*(F.col("e")[name].alias(name) for name in ("kind", *TYPE_COLUMNS)))
        .count()
        .collect()
    )
