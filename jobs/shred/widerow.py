"""Wide rows: one row per event with its atomic fields by name and one column per entity family.

Column naming follows the Snowplow analytics SDKs:
`contexts_<vendor>_<name>_<model>` (an array of the entities' data, custom contexts then derived
contexts, across all revisions of the model) and `unstruct_event_<vendor>_<name>_<model>` (one data object).
The entity columns of a run are the families its good events hold, in upstream's order (contexts first, then by
vendor, name and model); every row has all of
them (null when the event has none), so a run's files share one schema.

Atomic values are typed as Snowplow's RDB transformer types them (`ATOMIC_TYPES`): timestamps, ints, doubles,
booleans and, in Parquet, the money fields as `decimal(18,2)`. Entity data is JSON text, unless the caller types
the Parquet columns from the schemas (`jobs.shred.typed`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.enriched.fields import BOOLEAN_FIELDS, DOUBLE_FIELDS, FIELD_INDEX, FIELD_NAMES, INSTANT_FIELDS, INT_FIELDS
from jobs.enriched.parse import lower_hex
from jobs.fs.paths import written
from jobs.fs.run_folder import RunFolder
from jobs.iglu.names import column_name
from jobs.shred.entities import ATOMIC_FIELDS

WIDEROW_FOLDER = "widerow"

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
_INSTANT_TEXT = r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,9})?\z"


@dataclass(frozen=True)
class Family:
    """One wide-row entity column and the (vendor, name, model) triples it gathers."""

    column: str
    kind: str
    members: tuple[tuple[str, str, str], ...]


def entity_families(type_rows: Iterable[Any]) -> list[Family]:
    """The entity columns from the run's per-type counts (rows with kind, vendor, name, version), in upstream's
    order (its `WideRow.Type` ordering): contexts first, then by vendor, name and model."""
    members: dict[tuple[str, str], set[tuple[str, str, str]]] = {}
    for row in type_rows:
        kind = "unstruct_event" if row["kind"] == "unstruct_event" else "contexts"
        model = row["version"].split("-")[0]
        column = column_name(kind, row["vendor"], row["name"], model)
        members.setdefault((column, kind), set()).add((row["vendor"], row["name"], model))
    families = [Family(column, kind, tuple(sorted(triples))) for (column, kind), triples in members.items()]

    def order(family: Family) -> tuple[Any, ...]:
        vendor, name, model = min((v, n, int(m)) for v, n, m in family.members)
        return (family.kind != "contexts", vendor, name, model, family.column)

    return sorted(families, key=order)


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
    present = text != ""
    if spark_type == "string":
        return F.when(present, text)
    if spark_type == "timestamp":
        return F.when(text.rlike(_INSTANT_TEXT), F.concat(text, F.lit("Z")).try_cast("timestamp"))
    if spark_type == "boolean":
        return F.when(text == "1", F.lit(True)).when(text == "0", F.lit(False))
    # Cast only present text: `try_cast` of an empty string throws and catches an exception inside Spark, which
    # made the casts of a wide row (most number fields are empty) many times slower.
    number = F.when(present, text.try_cast(spark_type))
    if spark_type == "double":
        return F.when(~F.isnan(number) & (F.abs(number) != F.lit(float("inf"))), number)
    return number


def _field_text(fields: Column, name: str) -> Column:
    return F.element_at(fields, FIELD_INDEX[name] + 1)


def _atomic_value(fields: Column, name: str) -> Column:
    text = _field_text(fields, name)
    if name == "event_id":
        # The SDK's UUID: written back as `UUID.toString`, lower-cased (the parser only lets UUIDs through).
        return lower_hex(F.when(text != "", text))
    return typed_value(text, ATOMIC_TYPES[name])


def typed_atomic_columns(fields: Column) -> list[Column]:
    """The 128 atomic columns from the split line, as `typed_value` reads them (`event_id` lower-cased)."""
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


CONTEXTS_URI = "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-0"
UNSTRUCT_URI = "iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0"


def event_json(fields: Column, entities: Column) -> Column:
    """A good event as the Scala Analytics SDK's `Event` encoder writes it (the payload of upstream's loader bad
    rows): the 131 fields in TSV order, atomic values as in the wide rows (`_json_atomic_columns`), `contexts` and
    `derived_contexts` as `{"schema": contexts 1-0-0, "data": [{schema, data}, …]}` (`{}` when empty),
    `unstruct_event` as `{"schema": unstruct_event 1-0-0, "data": {schema, data}}` (null when empty).

    `fields` is the split line, `entities` the event's `typed_entities`.
    """
    atomic = dict(zip(ATOMIC_FIELDS, _json_atomic_columns(fields), strict=True))

    def self_describing(e: Column) -> Column:
        uri = F.concat_ws("/", e["vendor"], e["name"], e["format"], e["version"])
        return F.concat(F.lit('{"schema":"iglu:'), uri, F.lit('","data":'), e["data"], F.lit("}"))

    def of_kind(kind: str) -> Column:
        return F.transform(F.filter(entities, lambda e: e["kind"] == kind), self_describing)

    def contexts(kind: str) -> Column:
        found = of_kind(kind)
        listed = F.concat(F.lit(f'{{"schema":"{CONTEXTS_URI}","data":['), F.array_join(found, ","), F.lit("]}"))
        return F.when(F.size(found) > 0, listed).otherwise(F.lit("{}"))

    unstruct = of_kind("unstruct_event")
    entity_json = {
        "contexts": contexts("contexts"),
        "derived_contexts": contexts("derived_contexts"),
        "unstruct_event": F.when(
            F.size(unstruct) > 0,
            F.concat(F.lit(f'{{"schema":"{UNSTRUCT_URI}","data":'), F.element_at(unstruct, 1), F.lit("}")),
        ).otherwise(F.lit("null")),
    }
    parts: list[Column] = []
    run: list[str] = []  # consecutive atomic fields, written by one to_json

    def flush() -> None:
        if run:
            text = F.to_json(F.struct(*(atomic[name] for name in run)), {"ignoreNullFields": "false"})
            parts.append(_inner(text))
            run.clear()

    for name in FIELD_NAMES:
        if name in entity_json:
            flush()
            parts.append(F.concat(F.lit(f'"{name}":'), entity_json[name]))
        else:
            run.append(name)
    flush()
    return F.concat(F.lit("{"), F.concat_ws(",", *parts), F.lit("}"))


def _inner(json_object: Column) -> Column:
    """A JSON object's text without its braces, for an object of scalar values (it ends with a scalar, then `}`)."""
    # One reference to the object: in a conditional branch (a bad row's payload) Spark would build a second one.
    return F.btrim(json_object, F.lit("{}"))


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


def widerow_table(
    good: DataFrame, families: list[Family], typed: Callable[[Family], list[Column] | None] | None = None
) -> DataFrame:
    """The wide rows as columns (for Parquet): the typed atomic columns, then the entity columns.

    Atomic columns as `typed_atomic_columns` (timestamps keep microseconds: nanoseconds are cut). A family's
    columns are what `typed(family)` gives (columns of `good` typed from its schemas: `jobs.shred.typed`); without
    it, or when it gives None, entity data as JSON text: contexts `array<string>`, unstruct events `string`.
    """
    split = good.withColumn("fields", F.split("line", "\t"))
    entity_columns: list[Column] = []
    for family in families:
        columns = typed(family) if typed else None
        entity_columns += (
            columns if columns is not None else [family_data(F.col("entities"), family).alias(family.column)]
        )
    return split.select(*typed_atomic_columns(F.col("fields")), *entity_columns)


def write(
    folder: RunFolder,
    good: DataFrame,
    families: list[Family],
    output_format: str,
    compression: str,
    name: str = WIDEROW_FOLDER,
    typed: Callable[[Family], list[Column] | None] | None = None,
) -> str:
    """Write the wide rows into `name/` of the run folder as JSON lines (`widerow`) or Parquet (`widerow-parquet`,
    entity columns from `typed`: see `widerow_table`)."""
    if output_format == "widerow":
        return folder.write_text(name, widerow_json(good, families), compression)
    target = f"{folder.path}/{name}"
    codec = "gzip" if compression == "gzip" else "snappy"
    widerow_table(good, families, typed).write.mode("overwrite").option("compression", codec).parquet(written(target))
    return target
