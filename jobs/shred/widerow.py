"""Wide rows: one row per event with its atomic fields by name and one column per entity family.

Column naming follows the Snowplow analytics SDKs (shared/reference/notes/snowplow-semantics.md §9):
`contexts_<vendor>_<name>_<model>` (an array of the entities' data, custom contexts then derived
contexts, across all revisions of the model) and `unstruct_event_<vendor>_<name>_<model>` (one data object).
The entity columns of a run are the families its good events hold, sorted by name; every row has all of
them (null when the event has none), so a run's files share one schema.

Atomic values are typed as Snowplow's RDB transformer types them (`ATOMIC_TYPES`): timestamps, ints, doubles,
booleans and, in Parquet, the money fields as `decimal(18,2)`. Entity data stays JSON text (typing it needs
the Iglu schemas).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.enriched.fields import BOOLEAN_FIELDS, DOUBLE_FIELDS, FIELD_INDEX, INSTANT_FIELDS, INT_FIELDS
from jobs.lake import RunFolder
from jobs.shred.entities import ATOMIC_FIELDS

WIDEROW_FOLDER = "widerow"
_CAMEL = re.compile(r"([^A-Z_])([A-Z])")

# The atomic fields' Spark types, as upstream's wide-row Parquet has them (rdb-loader AtomicFieldsProvider,
# test resource widerow/parquet/parquet-output-schema): the Scala Analytics SDK's type (Instant -> timestamp,
# Int -> int, Double -> double, Boolean -> boolean, UUID and String -> string), except the money fields,
# which upstream writes as decimal(18,2) (the SDK's Double, so the JSON wide rows keep them as doubles).
_MONEY_FIELDS = (
    "tr_total", "tr_tax", "tr_shipping", "ti_price", "tr_total_base", "tr_tax_base", "tr_shipping_base",
    "ti_price_base",
)  # fmt: skip
MONEY_TYPE = "decimal(18,2)"
_TYPE_OF = {
    **dict.fromkeys(INSTANT_FIELDS, "timestamp"),
    **dict.fromkeys(INT_FIELDS, "int"),
    **dict.fromkeys(DOUBLE_FIELDS, "double"),
    **dict.fromkeys(_MONEY_FIELDS, MONEY_TYPE),  # doubles to the SDK
    **dict.fromkeys(BOOLEAN_FIELDS, "boolean"),
}
# Field name -> Spark SQL type of the 128 atomic columns, in TSV order.
ATOMIC_TYPES: dict[str, str] = {name: _TYPE_OF.get(name, "string") for name in ATOMIC_FIELDS}

# The timestamps the SDK reads (`Instant.parse` of the text with the space made a `T`, plus `Z`): seconds
# required, up to 9 fraction digits. Ranges and the calendar are left to the cast.
_INSTANT_TEXT = r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,9})?$"


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


def typed_value(text: Column, spark_type: str) -> Column:
    """One atomic value from its TSV text, as `spark_type` (a value of `ATOMIC_TYPES`).

    Empty text, and text that is not a value of the type, give null (never an error, ANSI mode or not):
      - `timestamp`: `yyyy-MM-dd HH:mm:ss[.fraction]` (or with a `T`), read as UTC. Spark keeps microseconds:
        digits beyond the sixth are cut (upstream's Parquet cuts them too; its JSON keeps them).
      - `boolean`: `1` or `0`, as the SDK reads them.
      - `double`: NaN and infinities are null, as upstream writes them (circe encodes them as null).
      - `int`, `decimal(18,2)`: Spark's `try_cast` (a money value with more than 2 decimals is rounded half
        up; upstream's Parquet makes such an event a bad row instead).
      - `string`: the text as given.
    """
    if spark_type == "string":
        return F.when(text != "", text)
    if spark_type == "timestamp":
        return F.when(text.rlike(_INSTANT_TEXT), F.concat(text, F.lit("Z")).try_cast("timestamp"))
    if spark_type == "boolean":
        return F.when(text == "1", F.lit(True)).when(text == "0", F.lit(False))
    if spark_type == "double":
        number = text.try_cast("double")
        return F.when(~F.isnan(number) & (F.abs(number) != F.lit(float("inf"))), number)
    return text.try_cast(spark_type)


def _field_text(fields: Column, name: str) -> Column:
    return F.element_at(fields, FIELD_INDEX[name] + 1)


def _atomic_value(fields: Column, name: str) -> Column:
    text = _field_text(fields, name)
    if name == "event_id":
        # The SDK's UUID: written back as `UUID.toString`, lower-cased (the parser only lets UUIDs through).
        return F.lower(F.when(text != "", text))
    return typed_value(text, ATOMIC_TYPES[name])


def typed_atomic_columns(fields: Column) -> list[Column]:
    """The 128 atomic columns, named and typed as `ATOMIC_TYPES` says, from the split line (`array<string>`).

    Timestamps are Spark `timestamp`s (UTC instants, microseconds: nanoseconds are cut); `event_id` is
    lower-cased, as upstream writes a UUID; empty text and values that do not read as their type are null.
    """
    return [_atomic_value(fields, name).alias(name) for name in ATOMIC_FIELDS]


def iso_instant(text: Column) -> Column:
    """A timestamp's text as Java's `Instant.toString` writes it, e.g. `2021-10-15T09:06:24.026Z`.

    Full precision, as upstream's wide-row JSON: the fraction in groups of 3 digits (3, 6 or 9), none when it
    is zero. Null when the text is not a timestamp (see `typed_value`).
    """
    nanos = F.rpad(F.substring(text, 21, 9), 9, "0")
    fraction = (
        F.when(nanos == "000000000", F.lit(""))
        .when(F.substring(nanos, 4, 6) == "000000", F.concat(F.lit("."), F.substring(nanos, 1, 3)))
        .when(F.substring(nanos, 7, 3) == "000", F.concat(F.lit("."), F.substring(nanos, 1, 6)))
        .otherwise(F.concat(F.lit("."), nanos))
    )
    iso = F.concat(F.substring(text, 1, 10), F.lit("T"), F.substring(text, 12, 8), fraction, F.lit("Z"))
    return F.when(typed_value(text, "timestamp").isNotNull(), iso)


def _json_atomic_columns(fields: Column) -> list[Column]:
    """The atomic columns as the SDK's `Event` has them: timestamps as ISO text, money fields as doubles."""
    columns = []
    for name in ATOMIC_FIELDS:
        spark_type = ATOMIC_TYPES[name]
        if spark_type == "timestamp":
            value = iso_instant(_field_text(fields, name))
        elif spark_type == MONEY_TYPE:
            value = typed_value(_field_text(fields, name), "double")
        else:
            value = _atomic_value(fields, name)
        columns.append(value.alias(name))
    return columns


def _geo_location(fields: Column) -> Column:
    """`,"geo_location":"lat,lon"` (each as Java's `Double.toString`) when both are present, else empty."""
    latitude, longitude = (
        typed_value(_field_text(fields, name), "double") for name in ("geo_latitude", "geo_longitude")
    )
    location = F.concat(latitude.cast("string"), F.lit(","), longitude.cast("string"))
    return F.coalesce(F.concat(F.lit(',"geo_location":"'), location, F.lit('"')), F.lit(""))


def widerow_json(good: DataFrame, families: list[Family]) -> DataFrame:
    """One JSON line per good event (column `text`), as upstream's `Event.toJson(lossy = true)`.

    Keys: the 128 atomic fields in TSV order (absent -> null), then the entity columns by name, then
    `geo_location` when the event has both coordinates (the SDK adds it last). Timestamps are ISO instants
    with full precision (`iso_instant`), ints and doubles JSON numbers (doubles as Java writes them, money
    fields included), booleans `true`/`false`. The atomic part is `to_json` (which escapes the strings);
    entity data is spliced in as JSON text.
    """
    split = good.select(F.split("line", "\t").alias("fields"), "entities")
    atomic = F.to_json(F.struct(*_json_atomic_columns(F.col("fields"))), {"ignoreNullFields": "false"})
    parts: list[Column] = [F.expr("substring(atomic, 1, length(atomic) - 1)")]
    for family in families:
        data = family_data(F.col("entities"), family)
        text = F.concat(F.lit("["), F.array_join(data, ","), F.lit("]")) if family.kind == "contexts" else data
        parts += [F.lit(f',"{family.column}":'), F.coalesce(text, F.lit("null"))]
    parts += [F.col("geo_location"), F.lit("}")]
    return split.select(
        atomic.alias("atomic"), _geo_location(F.col("fields")).alias("geo_location"), "entities"
    ).select(F.concat(*parts).alias("text"))


def widerow_table(good: DataFrame, families: list[Family]) -> DataFrame:
    """The wide rows as columns (for Parquet): the typed atomic columns, then entity data as JSON text.

    Atomic columns as `typed_atomic_columns` (timestamps keep microseconds: nanoseconds are cut). Contexts
    columns are `array<string>`, unstruct columns `string`: typing the data needs the Iglu schemas.
    """
    split = good.select(F.split("line", "\t").alias("fields"), "entities")
    return split.select(
        *typed_atomic_columns(F.col("fields")),
        *(family_data(F.col("entities"), family).alias(family.column) for family in families),
    )


def write(
    folder: RunFolder,
    good: DataFrame,
    families: list[Family],
    output_format: str,
    compression: str,
    name: str = WIDEROW_FOLDER,
) -> str:
    """Write the wide rows into `name/` of the run folder as JSON lines (`widerow`) or Parquet (`widerow-parquet`)."""
    if output_format == "widerow":
        return folder.write_text(name, widerow_json(good, families), compression)
    target = f"{folder.path}/{name}"
    codec = "gzip" if compression == "gzip" else "snappy"
    widerow_table(good, families).write.mode("overwrite").option("compression", codec).parquet(target)
    return target
