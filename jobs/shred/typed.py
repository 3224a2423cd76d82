"""Typed wide-row entity columns: each family's columns from its Iglu schemas (`jobs.iglu.parquet`), looked up once
per run on the driver, and the column expressions that fill them from an event's entities.

A family whose schemas are not found makes the events holding it `loader_iglu_error` bad rows (as TSV shredding
does; a registry outage stops the run instead: `RegistryOutageError`); so does an entity whose data does not fit
its column's type (`cast_failed`: upstream's Parquet transformer rejects such an event too, where Spark's reader
would quietly null or convert the value).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.iglu.parquet.cast import cast_failed_of
from jobs.iglu.parquet.columns import TypedColumn, family_columns
from jobs.iglu.parquet.row_access import parsed_entities
from jobs.iglu.parquet.values import typed_value_of
from jobs.iglu.resolver import InvalidSchema, Resolver, SchemaKey
from jobs.shred.plan import last_attempt_text
from jobs.shred.widerow import Family

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TypedFamilies:
    """Per family column: its typed columns; per Iglu URI of a family that could not be typed: its failure JSON."""

    columns: dict[str, list[TypedColumn]] = field(default_factory=dict)
    formats: dict[str, str] = field(default_factory=dict)
    """Per family column: its schemas' format (`jsonschema`)."""
    failures: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def type_families(
    families: list[Family], type_rows: Iterable[Any], resolver: Resolver, run_time: datetime
) -> TypedFamilies:
    """Look each family's schemas up (every version of the model up to the newest the run holds: upstream's
    `lookupSchemasUntil`) and build its typed columns.

    `type_rows` are the run's entity types (kind, vendor, name, format, version). A family gathering several
    vendor/name pairs under one column name (`com.acme`, `com-acme`) stays JSON text (a note says so).
    """
    present: dict[tuple[str, str, str, str], set[str]] = {}
    formats: dict[tuple[str, str, str, str], str] = {}
    for row in type_rows:
        kind = "unstruct_event" if row["kind"] == "unstruct_event" else "contexts"
        member = (kind, row["vendor"], row["name"], row["version"].split("-")[0])
        present.setdefault(member, set()).add(row["version"])
        formats[member] = row["format"]
    last_attempt = last_attempt_text(run_time)
    columns: dict[str, list[TypedColumn]] = {}
    family_formats: dict[str, str] = {}
    failures: dict[str, str] = {}
    notes: list[str] = []
    for family in families:
        if len(family.members) != 1:
            notes.append(f"{family.column}: {len(family.members)} schema families share the column; kept as JSON text")
            continue
        ((vendor, name, model),) = family.members
        versions = present[(family.kind, vendor, name, model)]
        newest = _newest(versions)
        key = SchemaKey(vendor, name, formats[(family.kind, vendor, name, model)], newest)
        family_formats[family.column] = key.format
        found = resolver.schemas_until(key)
        if isinstance(found, list):
            try:
                columns[family.column] = family_columns(
                    family.kind, vendor, name, [(k.version, schema) for k, schema in found], versions
                )
                continue
            except ValueError as err:
                found = InvalidSchema(key, f"cannot be typed for Parquet: {err}")
        text = json.dumps(found.failure_json(last_attempt), separators=(",", ":"))
        for version in sorted(versions):
            failures[f"iglu:{vendor}/{name}/{key.format}/{version}"] = text
        notes.append(found.describe())
        log.warning("iglu: %s", found.describe())
    return TypedFamilies(columns, family_formats, failures, tuple(notes))


def _newest(versions: Iterable[str]) -> str:
    """The highest SchemaVer `M-R-A` (compared as numbers)."""
    return max(versions, key=lambda version: tuple(int(part) for part in version.split("-")))


def _members_data(entities: Column, family: Family, versions: tuple[str, ...]) -> Column:
    """The data texts of the family's entities whose version is one of `versions`: `array<string>` for contexts
    (custom, then derived), the unstruct event's `string` (null when absent)."""
    ((vendor, name, _),) = family.members

    def matching(kind: str) -> Column:
        return F.filter(
            entities,
            lambda e: (
                (e["kind"] == kind) & (e["vendor"] == vendor) & (e["name"] == name) & e["version"].isin(*versions)
            ),
        )

    if family.kind == "unstruct_event":
        found = matching("unstruct_event")
        return F.when(F.size(found) > 0, F.element_at(found, 1)["data"])
    return F.transform(F.concat(matching("contexts"), matching("derived_contexts")), lambda e: e["data"])


def _data(column: TypedColumn) -> str:
    return f"data of {column.name}"


def _parsed(column: TypedColumn) -> str:
    return f"parsed {column.name}"


def _value(column: TypedColumn) -> str:
    return f"typed {column.name}"


def _typed_columns(families: list[Family], typed: TypedFamilies) -> list[tuple[Family, TypedColumn]]:
    return [(family, column) for family in families for column in typed.columns.get(family.column, [])]


def with_parsed_entities(frame: DataFrame, families: list[Family], typed: TypedFamilies) -> DataFrame:
    """`frame` (with `entities`) and, per typed column, its entities' data texts and those parsed (columns of their
    own: the check and the value read one parse, which Spark would otherwise repeat for each)."""
    columns = _typed_columns(families, typed)
    with_data = frame.select(
        "*",
        *(_members_data(F.col("entities"), family, c.matching_versions).alias(_data(c)) for family, c in columns),
    )
    return with_data.select("*", *(parsed_entities(F.col(_data(c)), c.kind).alias(_parsed(c)) for _, c in columns))


def typed_values(families: list[Family], typed: TypedFamilies) -> list[Column]:
    """Per typed column, its value from `with_parsed_entities`' columns (named for `typed_columns`)."""
    return [typed_value_of(F.col(_parsed(c)), c).alias(_value(c)) for _, c in _typed_columns(families, typed)]


def typed_columns(family: Family, typed: TypedFamilies) -> list[Column]:
    """The family's typed columns (named), from the values `typed_values` made."""
    return [F.col(_value(column)).alias(column.name) for column in typed.columns[family.column]]


def cast_failures(families: list[Family], typed: TypedFamilies) -> Column:
    """The event's `loader_iglu_error` failures for data that does not fit its typed column (JSON array text;
    null when all fits), from `with_parsed_entities`' columns: `{"schemaKey": the column's newest version, "value":
    the column's data, "expected": the column's Spark type}`."""
    failures = []
    for family, column in _typed_columns(families, typed):
        data = F.col(_data(column))
        ((vendor, name, _),) = family.members
        newest = _newest(column.matching_versions)
        key = f"iglu:{vendor}/{name}/{typed.formats[family.column]}/{newest}"
        value = F.concat(F.lit("["), F.array_join(data, ","), F.lit("]")) if family.kind == "contexts" else data
        failure = F.concat(
            F.lit(f'{{"schemaKey":{json.dumps(key)},"value":'),
            value,
            F.lit(f',"expected":{json.dumps(column.data_type.simpleString())}}}'),
        )
        failures.append(F.when(cast_failed_of(F.col(_parsed(column)), column), failure))
    if not failures:
        return F.lit(None).cast("string")
    found = F.array_compact(F.array(*failures))
    return F.when(F.size(found) > 0, F.concat(F.lit("["), F.array_join(found, ","), F.lit("]")))
