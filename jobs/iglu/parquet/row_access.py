"""Reaching the JSON keys of a parsed entity: each output field's keys, by name or by position."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, StructField, StructType, VariantType

from jobs.iglu.parquet.normalize import normal_name


def _collides(parse: StructType) -> bool:
    """Keys differing only in case (`XYZ`, `xyz`): Spark resolves struct fields case-insensitively by default, so
    such a struct's fields are reached by position (`_0`, `_1`...) instead, after a cast that renames them."""
    return len({field.name.lower() for field in parse.fields}) < len(parse.fields)


def _any_collides(parse: DataType) -> bool:
    if isinstance(parse, StructType):
        return _collides(parse) or any(_any_collides(field.dataType) for field in parse.fields)
    return isinstance(parse, ArrayType) and _any_collides(parse.elementType)


def _positional(parse: DataType) -> DataType:
    if isinstance(parse, StructType):
        return StructType([StructField(f"_{i}", _positional(f.dataType), True) for i, f in enumerate(parse.fields)])
    if isinstance(parse, ArrayType):
        return ArrayType(_positional(parse.elementType), True)
    return parse


# A JSON key of a struct: the name to reach it by (its own, or its position's), and its parse field.
_Key = tuple[str, StructField]


def _groups(out: StructType, parse: StructType, positional: bool) -> list[tuple[StructField, list[_Key]]]:
    """Each output field with its JSON keys (the keys that normalize to its name, in order)."""
    groups: dict[str, list[_Key]] = {field.name: [] for field in out.fields}
    for index, parse_field in enumerate(parse.fields):
        target = normal_name(parse_field.name)
        if target not in groups:
            raise ValueError(f"parse field {parse_field.name!r} has no output field {target!r}")
        groups[target].append((f"_{index}" if positional else parse_field.name, parse_field))
    if any(not keys for keys in groups.values()):
        raise ValueError("every output field needs a parse field")
    return [(field, groups[field.name]) for field in out.fields]


def _pick(value: Column, keys: list[_Key]) -> Column:
    """The field's value: its only key's, or the first of its keys that holds one (a JSON null is none)."""
    if len(keys) == 1:
        return value[keys[0][0]]
    return F.coalesce(
        *(
            F.when(~F.is_variant_null(value[name]), value[name])
            if isinstance(key.dataType, VariantType)
            else value[name]
            for name, key in keys
        )
    )


def parsed_entities(data: Column, kind: str) -> Column:
    """Entity data texts parsed, for `typed_value_of` and `cast_failed_of`: per entity a struct whose `json` is the
    text as a variant (`try_parse_json`; null when the text is not JSON), the entity null when its text is. For
    contexts, an array of those from an `array<string>`; for an unstruct event, one from a `string`."""

    def parsed(text: Column) -> Column:
        return F.when(text.isNotNull(), F.struct(F.try_parse_json(text).alias("json")))

    return F.transform(data, parsed) if kind == "contexts" else parsed(data)


def _ddl(data_type: DataType) -> str:
    """`data_type` as a type string `try_variant_get` reads, field names quoted (they may hold any character)."""
    if isinstance(data_type, StructType):
        fields = ", ".join(f"`{field.name.replace('`', '``')}`: {_ddl(field.dataType)}" for field in data_type.fields)
        return f"struct<{fields}>"
    if isinstance(data_type, ArrayType):
        return f"array<{_ddl(data_type.elementType)}>"
    return data_type.simpleString()
