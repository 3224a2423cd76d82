"""Per row: whether an entity's data fits its column's type (`cast_failed`), as upstream's Caster decides."""

from __future__ import annotations

from collections.abc import Callable
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
    StructField,
    StructType,
    TimestampType,
    VariantType,
)

from jobs.iglu.parquet.columns import TypedColumn, _check_kind
from jobs.iglu.parquet.row_access import _collides, _groups, _pick, parsed_entities


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """`body` of `value`, evaluated once (Spark does not share repeated subexpressions in lambdas); `body` must not
    return null."""
    return F.exists(F.array(value), body)


_DATE_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\z"
# java.time's ISO_DATE_TIME with an offset, as upstream's `Instant.from` needs (a zone region suffix is not read).
_TIMESTAMP_TEXT = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}:[0-9]{2}(:[0-9]{2})?)\z"
)


def _variant_struct(parse: StructType) -> str:
    """The DDL of a struct of `parse`'s keys as variants, for `try_variant_get` (which matches keys by name)."""
    fields = ", ".join(f"`{field.name.replace('`', '``')}`: variant" for field in parse.fields)
    return f"struct<{fields}>"


def _wrong(value: Column, out: DataType, parse: DataType) -> Column:
    """True where the non-null JSON `value` (a variant) is not a value of `out`, as upstream's Caster decides."""
    if isinstance(parse, VariantType):
        return F.lit(False)
    if isinstance(out, StructType):
        assert isinstance(parse, StructType)
        positional = _collides(parse)
        groups = _groups(out, parse, positional)

        def fields(obj: Column) -> Column:  # obj: the object's keys as variants, null if not an object
            checks = [_bad(_pick(obj, keys), f.dataType, keys[0][1].dataType, f.nullable, False) for f, keys in groups]
            return reduce(Column.__or__, checks, obj.isNull())

        obj = F.try_variant_get(value, "$", _variant_struct(parse))
        if positional:
            obj = obj.cast(StructType([StructField(f"_{i}", VariantType(), True) for i in range(len(parse.fields))]))
        return _let(obj, fields)
    if isinstance(out, ArrayType):
        assert isinstance(parse, ArrayType)

        def items(array: Column) -> Column:
            return array.isNull() | F.exists(
                array, lambda item: _bad(item, out.elementType, parse.elementType, out.containsNull, True)
            )

        return _let(F.try_variant_get(value, "$", "array<variant>"), items)
    tag = F.schema_of_variant(value)
    if isinstance(out, StringType):
        return tag != "STRING"
    if isinstance(out, BooleanType):
        return tag != "BOOLEAN"
    if isinstance(out, LongType):
        return tag != "BIGINT"  # integers beyond a long are DECIMAL(n,0) variants
    if isinstance(out, IntegerType):
        return (tag != "BIGINT") | F.try_variant_get(value, "$", "int").isNull()
    if isinstance(out, DoubleType):
        return ~tag.rlike("^(BIGINT|DECIMAL|DOUBLE)")
    if isinstance(out, DecimalType):
        # Upstream sets the scale with RoundingMode.UNNECESSARY: a value with more decimals is wrong, not rounded.
        typed = F.try_variant_get(value, "$", f"decimal({out.precision},{out.scale})")
        exact_scale = 38 - out.precision + out.scale  # room for every value of the type, and more decimals
        exact = F.try_variant_get(value, "$", f"decimal(38,{exact_scale})")
        rounded = F.coalesce(exact != typed, F.lit(False))
        if exact_scale == out.scale:  # decimal(38, s): no room to see decimals beyond s exactly; doubles will do
            rounded = rounded | F.coalesce(
                F.try_variant_get(value, "$", "double") != typed.cast("double"), F.lit(False)
            )
        return ~tag.rlike("^(BIGINT|DECIMAL|DOUBLE)") | typed.isNull() | rounded
    if isinstance(out, DateType | TimestampType):
        pattern, spark_type = (_DATE_TEXT, "date") if isinstance(out, DateType) else (_TIMESTAMP_TEXT, "timestamp")
        return _let(
            F.try_variant_get(value, "$", "string"),
            lambda text: ~F.coalesce(text.rlike(pattern), F.lit(False)) | text.try_cast(spark_type).isNull(),
        )
    raise ValueError(f"unexpected column type {out.simpleString()}")


def _bad(value: Column, out: DataType, parse: DataType, nullable: bool, in_array: bool) -> Column:
    """True where `value` (a variant, SQL null when the key is missing) does not fit a position of `out`."""
    if nullable:
        null_bad = F.lit(False)
    elif in_array and isinstance(parse, VariantType):
        null_bad = value.isNull()  # a JSON null in a required array of JSON is the text `null` upstream
    else:
        null_bad = F.lit(True)
    return F.when(value.isNull() | F.is_variant_null(value), null_bad).otherwise(_wrong(value, out, parse))


def cast_failed(data: Column, column: TypedColumn) -> Column:
    """`cast_failed_of` the entities' data texts (`parsed_entities` of `data`, as `typed_value` takes it)."""
    return cast_failed_of(parsed_entities(data, column.kind), column)


def cast_failed_of(parsed: Column, column: TypedColumn) -> Column:
    """True where some entity's data does not fit the column's type: where upstream's Parquet transformer makes the
    event a `loader_iglu_error` bad row (schema-ddl's Caster); false for no data. `parsed`: the entities as
    `parsed_entities` gives them (each parsed once, shared with `typed_value_of`).

    Checked on the JSON itself (the variant), not on a typed reading of it, which is lenient where upstream is not:
    a number read as a string's text, a numeric string read as a number or a timestamp, a decimal rounded to the
    scale. Wrong: text that is not JSON (or has duplicate keys, which Spark's variant refuses), a value of another
    JSON type, an integer out of range or written with a fraction or exponent (`1.0`: upstream reads it, it is a
    bad row here), a decimal with more decimals than the scale, a timestamp without an offset, a date or timestamp
    not in ISO 8601, and a missing or null value where the type requires one.
    """
    _check_kind(column)
    out, parse = column.data_type, column.parse_type

    def entity_bad(entity: Column, out: DataType, parse: DataType, nullable: bool, in_array: bool) -> Column:
        value = entity["json"]
        return (entity.isNotNull() & value.isNull()) | _bad(value, out, parse, nullable, in_array)

    if column.kind == "contexts":
        assert isinstance(out, ArrayType) and isinstance(parse, ArrayType)
        return F.coalesce(
            F.exists(
                parsed, lambda entity: entity_bad(entity, out.elementType, parse.elementType, out.containsNull, True)
            ),
            F.lit(False),
        )
    return F.coalesce(_let(parsed, lambda entity: entity_bad(entity, out, parse, True, False)), F.lit(False))
