"""Per row: entity JSON text to the typed value (`typed_value`)."""

from __future__ import annotations

import datetime
from decimal import Decimal
from functools import reduce

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
    VariantType,
)

from jobs.iglu.parquet.columns import TypedColumn, _check_kind
from jobs.iglu.parquet.row_access import _any_collides, _ddl, _groups, _pick, _positional, parsed_entities


def _placeholder(out: DataType, nullable: bool) -> Column:
    """A value of exactly `out` (nullability included), never shown: where `_convert` needs a non-null value for a
    required position whose data is missing, the whole column value is null (`_missing`)."""
    if nullable:
        return F.lit(None).cast(out)
    if isinstance(out, StructType):
        return F.struct(*(_placeholder(f.dataType, f.nullable).alias(f.name) for f in out.fields))
    if isinstance(out, ArrayType):
        return F.filter(F.array(_placeholder(out.elementType, out.containsNull)), lambda _: F.lit(False))
    if isinstance(out, DecimalType | LongType):
        return F.lit(Decimal(0)).cast(out)  # decimal(1,0) casts without overflow: not null
    literals: dict[type[DataType], object] = {
        StringType: "", BooleanType: False, IntegerType: 0, DoubleType: 0.0, DateType: datetime.date(1970, 1, 1),
        TimestampType: datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC),
    }  # fmt: skip
    return F.lit(literals[type(out)])


def _convert(value: Column, out: DataType, parse: DataType, nullable: bool, positional: bool) -> Column:
    """The parsed `value` (of `parse`) as `out`: renamed fields, JSON leaves as JSON text, exact nullability."""
    if isinstance(out, StructType):
        assert isinstance(parse, StructType)
        struct = F.struct(
            *(
                _convert(_pick(value, keys), field.dataType, keys[0][1].dataType, field.nullable, positional).alias(
                    field.name
                )
                for field, keys in _groups(out, parse, positional)
            )
        )
        return F.when(value.isNotNull(), struct) if nullable else struct
    if isinstance(out, ArrayType):
        assert isinstance(parse, ArrayType)
        items = F.transform(
            value, lambda item: _convert(item, out.elementType, parse.elementType, out.containsNull, positional)
        )
        return items if nullable else F.coalesce(items, _placeholder(out, False))
    if isinstance(parse, VariantType):
        # Upstream writes a JSON null as null where the position is nullable, as the text `null` where it is not.
        text = F.to_json(value)
        return F.when(~F.is_variant_null(value), text) if nullable else F.coalesce(text, F.lit("null"))
    return value if nullable else F.coalesce(value, _placeholder(out, False))


def _can_miss(out: DataType, nullable: bool) -> bool:
    if not nullable:
        return True
    if isinstance(out, StructType):
        return any(_can_miss(field.dataType, field.nullable) for field in out.fields)
    if isinstance(out, ArrayType):
        return _can_miss(out.elementType, out.containsNull)
    return False


def _missing(value: Column, out: DataType, parse: DataType, nullable: bool, in_array: bool, positional: bool) -> Column:
    """True where a required position of the parsed `value` is null (upstream: a cast error, the event a bad row).
    Only called where `_can_miss`; never null."""
    parts = []
    if not nullable:
        here = value.isNull()
        # A JSON null is missing in a required struct field, but a value in a required array of JSON (`null`).
        parts.append(here | F.is_variant_null(value) if isinstance(parse, VariantType) and not in_array else here)
    inner: list[Column] = []
    if isinstance(out, StructType):
        assert isinstance(parse, StructType)
        inner = [
            _missing(_pick(value, keys), field.dataType, keys[0][1].dataType, field.nullable, False, positional)
            for field, keys in _groups(out, parse, positional)
            if _can_miss(field.dataType, field.nullable)
        ]
    elif isinstance(out, ArrayType) and _can_miss(out.elementType, out.containsNull):
        assert isinstance(parse, ArrayType)
        inner = [
            F.exists(
                value,
                lambda item: _missing(item, out.elementType, parse.elementType, out.containsNull, True, positional),
            )
        ]
    if inner:
        parts.append(value.isNotNull() & reduce(Column.__or__, inner))
    return reduce(Column.__or__, parts)


def typed_value(data: Column, column: TypedColumn) -> Column:
    """The column's typed value from its entities' data JSON text: `typed_value_of` their `parsed_entities`.

    Args:
        data: for contexts, an `array<string>` of the matching entities' data texts (custom contexts first, then
            derived contexts); for an unstruct event, its data text. Null (or no context) gives null.
        column: from `family_columns`.
    """
    return typed_value_of(parsed_entities(data, column.kind), column)


def typed_value_of(parsed: Column, column: TypedColumn) -> Column:
    """The column's typed value (of `column.data_type`, nullability included) from its entities as
    `parsed_entities` gives them (each entity parsed once, shared with `cast_failed_of`).

    Each entity's variant is read as `column.parse_type` (`try_variant_get`: keys matched by name, each value cast
    to its position's type) and reshaped inside one lambda. For data that fits the type (`cast_failed_of` false),
    this is upstream's value: timestamps ISO 8601 with an offset (to microseconds), dates `yyyy-MM-dd`, decimals
    at the column's scale, JSON leaves as compact JSON text (object keys sorted). Data that does not fit is a bad
    row (`cast_failed_of`); its value here is whatever the cast makes of it, never written. Where a required
    position (not null in `data_type`) is null, the whole value is null, so the type can stay exact.
    """
    _check_kind(column)
    positional = _any_collides(column.parse_type)

    def read(entity: Column, parse: DataType) -> Column:
        value = F.try_variant_get(entity["json"], "$", _ddl(parse))
        return value.cast(_positional(parse)) if positional else value

    if column.kind == "contexts":
        assert isinstance(column.parse_type, ArrayType)
        element = column.parse_type.elementType
        value = F.transform(parsed, lambda entity: read(entity, element))
    else:
        value = read(parsed, column.parse_type)

    def shape(value: Column) -> Column:
        typed = _convert(value, column.data_type, column.parse_type, True, positional)
        if _can_miss(column.data_type, True):
            typed = F.when(~_missing(value, column.data_type, column.parse_type, True, False, positional), typed)
        # No matching context is null upstream, not an empty array.
        return F.when(F.size(value) > 0, typed) if column.kind == "contexts" else typed

    return F.transform(F.array(value), shape)[0]
