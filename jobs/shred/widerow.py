"""Wide rows: one row per event with its atomic fields by name and one column per entity family.

Column naming follows the Snowplow analytics SDKs (shared/reference/notes/snowplow-semantics.md §9):
`contexts_<vendor>_<name>_<model>` (an array of the entities' data, custom contexts then derived
contexts, across all revisions of the model) and `unstruct_event_<vendor>_<name>_<model>` (one data object).
The entity columns of a run are the families its good events hold, sorted by name; every row has all of
them (null when the event has none), so a run's files share one schema.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.enriched.fields import FIELD_INDEX
from jobs.lake import RunFolder
from jobs.shred.entities import ATOMIC_FIELDS

WIDEROW_FOLDER = "widerow"
_CAMEL = re.compile(r"([^A-Z_])([A-Z])")


def column_name(kind: str, vendor: str, name: str, model: str) -> str:
    """The wide-row column of an entity family.

    Args:
        kind: `contexts` (custom and derived contexts) or `unstruct_event`.
        vendor: the schema's vendor, e.g. `org.w3`.
        name: the schema's name, e.g. `PerformanceTiming`.
        model: the schema's model (the M of M-R-A), e.g. `1`.

    Returns:
        E.g. `contexts_org_w3_performance_timing_1`: vendor `.`/`-` to `_`; name `.`/`-` to `_`, then
        `_` before each capital that follows a non-capital, non-underscore; both lower-cased.
    """
    vendor_part = re.sub(r"[.-]", "_", vendor).lower()
    name_part = _CAMEL.sub(r"\1_\2", re.sub(r"[.-]", "_", name)).lower()
    return f"{kind}_{vendor_part}_{name_part}_{model}"


@dataclass(frozen=True)
class Family:
    """One wide-row entity column and the (vendor, name, model) triples it gathers."""

    column: str
    kind: str
    members: tuple[tuple[str, str, str], ...]


def entity_families(type_rows: Iterable[Any]) -> list[Family]:
    """The entity columns from the run's per-type counts (rows with kind, vendor, name, version), sorted."""
    members: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
    for row in type_rows:
        kind = "unstruct_event" if row["kind"] == "unstruct_event" else "contexts"
        model = row["version"].split("-")[0]
        column = column_name(kind, row["vendor"], row["name"], model)
        members.setdefault((column, kind), set()).add((row["vendor"], row["name"], model))
    return [Family(column, kind, tuple(sorted(triples))) for (column, kind), triples in sorted(members.items())]


def _matching(entities: Column, family: Family, kinds: tuple[str, ...]) -> Column:
    def matches(e: Column) -> Column:
        member = F.lit(False)
        for vendor, name, model in family.members:
            member = member | ((e["vendor"] == vendor) & (e["name"] == name) & (e["model"] == model))
        return e["kind"].isin(*kinds) & member

    return F.filter(entities, matches)


def family_data(entities: Column, family: Family) -> Column:
    """The family's entity data texts: `array<string>` for contexts (custom first), `string` for unstruct."""
    if family.kind == "unstruct_event":
        found = _matching(entities, family, ("unstruct_event",))
        return F.when(F.size(found) > 0, F.element_at(found, 1)["data"])
    found = F.concat(_matching(entities, family, ("contexts",)), _matching(entities, family, ("derived_contexts",)))
    return F.when(F.size(found) > 0, F.transform(found, lambda e: e["data"]))


def atomic_columns(fields: Column) -> list[Column]:
    """The 128 atomic fields by name from the split line, as given; empty becomes null."""
    return [
        F.when(F.element_at(fields, FIELD_INDEX[name] + 1) != "", F.element_at(fields, FIELD_INDEX[name] + 1)).alias(
            name
        )
        for name in ATOMIC_FIELDS
    ]


def widerow_json(good: DataFrame, families: list[Family]) -> DataFrame:
    """One JSON line per good event (column `text`): atomic fields (absent -> null), then the entity columns.

    The atomic part is `to_json` (which escapes the strings); entity data is spliced in as JSON text.
    """
    split = good.select(F.split("line", "\t").alias("fields"), "entities")
    atomic = F.to_json(F.struct(*atomic_columns(F.col("fields"))), {"ignoreNullFields": "false"})
    parts: list[Column] = [F.expr("substring(atomic, 1, length(atomic) - 1)")]
    for family in families:
        data = family_data(F.col("entities"), family)
        text = F.concat(F.lit("["), F.array_join(data, ","), F.lit("]")) if family.kind == "contexts" else data
        parts += [F.lit(f',"{family.column}":'), F.coalesce(text, F.lit("null"))]
    parts.append(F.lit("}"))
    return split.select(atomic.alias("atomic"), "entities").select(F.concat(*parts).alias("text"))


def widerow_table(good: DataFrame, families: list[Family]) -> DataFrame:
    """The wide rows as columns (for Parquet): atomic strings, then entity data as JSON text.

    Contexts columns are `array<string>`, unstruct columns `string`: typing the data needs the Iglu schemas.
    """
    split = good.select(F.split("line", "\t").alias("fields"), "entities")
    return split.select(
        *atomic_columns(F.col("fields")),
        *(family_data(F.col("entities"), family).alias(family.column) for family in families),
    )


def write(folder: RunFolder, good: DataFrame, families: list[Family], output_format: str, compression: str) -> str:
    """Write `widerow/` as JSON lines (`widerow`) or Parquet (`widerow-parquet`)."""
    if output_format == "widerow":
        return folder.write_text(WIDEROW_FOLDER, widerow_json(good, families), compression)
    target = f"{folder.path}/{WIDEROW_FOLDER}"
    codec = "gzip" if compression == "gzip" else "snappy"
    widerow_table(good, families).write.mode("overwrite").option("compression", codec).parquet(target)
    return target
