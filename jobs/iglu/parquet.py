"""Typed wide-row entity columns from Iglu JSON Schemas, as Snowplow's RDB transformer types its Parquet.

Upstream writes each entity family of a wide row as a column typed from the family's JSON Schemas: an unstruct
event as a struct, contexts as an array of structs, with every revision and addition of one model merged into one
column, and a breaking revision in a `<column>_recovered_<M_R_A>_<hash>` column of its own. This module ports that
typing to PySpark types, and turns entity JSON text into the typed values with Spark built-ins only (no Python on the
per-row path).

Ported from, and kept close to (function by function, so a reader can check one against the other):
  - schema-ddl 0.27.0, `iglu.schemaddl.parquet`: `Field.build` / `buildRepeated` / `normalize` (snake_cased names,
    colliding names collapsed; refused within one schema here, see Parity), `Suggestion` (types from `type`,
    `format`, `enum`, `minimum`/`maximum`, `multipleOf`; anything else is JSON text), `Migrations.mergeSchemas`
    (additions appended at the end, removals kept as nullable, any type change breaking); and the parts of
    `iglu.schemaddl.jsonschema` those read: how a schema is decoded (circe: numbers, `type` unions),
    `Mutate.forStorage` (oneOf / anyOf and tuple items folded into plain schemas through `Narrowed` and `Widened`).
  - rdb-loader 6.1.5, `NonAtomicFieldsProvider` (one family's columns: the merged base column first, then a
    recovered column for each breaking version present in the batch) and `ParquetTransformer` (which entities go in
    a column: those whose version is one of the column's matching versions).

Parity:
  - Column names and types are upstream's, field order and nullability included, and so is the recovered
    column's hash: `abs(Field.hashCode)`, Scala 2.12's MurmurHash3 of the case class, reproduced in `_scala_hash`
    (checked against the hashes in rdb-loader's tests). Spark writes the typed values as upstream's Parquet schema.
  - Per row, values are upstream's for data that fits the type, except: JSON leaves (`Type.Json`, JSON text) come
    from Spark's variant, so object keys come out sorted and numbers as the variant holds them (`1.50` as `1.5`,
    `1e2` as `100.0`; circe keeps the input's text). Properties of one schema that normalize alike (`fooBar`,
    `foo_bar`) are one field upstream, which keeps one of their values; here the schema is refused
    (`_refuse_shared_fields`). Keys of different versions that do (`aField` in 1-0-0, `a_field` in 1-0-1) still
    share the field, read from the first of them the entity has (upstream: the first whose value casts).
  - Data that does not fit is a bad row upstream; here `cast_failed` tells it (see there for the few cases where
    it decides otherwise, e.g. an integer field holding `1.0`).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import reduce
from typing import Any

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

from jobs.iglu.names import column_name, snake_case

KINDS = ("contexts", "unstruct_event")


@dataclass(frozen=True)
class TypedColumn:
    """One typed wide-row entity column of a family: upstream's `TypedField`.

    `data_type` is the column's Spark type (the column itself is always nullable): field names snake_cased, field
    nullability and array `containsNull` as upstream's Parquet has them (`required` -> not nullable).
    `parse_type` has the same shape with the JSON keys as the entities have them, every field nullable, and
    `VariantType` for JSON leaves (a string in `data_type`): the schema `from_json` reads an entity with. Where
    several keys normalize to one output field (`aField`, `a_field`), `parse_type` has a field for each, in order.
    For contexts both are arrays, of the element (entity) types.
    """

    name: str
    kind: str
    data_type: DataType
    parse_type: DataType
    matching_versions: tuple[str, ...]


# ---------------------------------------------------------------------------------------------------------------------
# JSON Schema, as schema-ddl's `jsonschema.Schema` decodes it (only the keywords its Parquet typing reads).

_NULL, _BOOLEAN, _STRING, _INTEGER, _NUMBER, _ARRAY, _OBJECT = "null", "boolean", "string", "integer", "number", "array", "object"  # fmt: skip
_TYPE_NAMES = frozenset({_NULL, _BOOLEAN, _STRING, _INTEGER, _NUMBER, _ARRAY, _OBJECT})
_NUMERIC = frozenset({_NUMBER, _INTEGER})

# A `type`: one name, or a union (schema-ddl's `Type.Union`, which a list of two or more names decodes to; a union of
# one name is not that name: `["string", "string"]` types as JSON upstream, so it does here).
JsonType = str | frozenset[str]


@dataclass(frozen=True)
class _Number:
    """A `minimum`, `maximum` or `multipleOf`: circe decodes a whole number as an integer (`IntegerMinimum`...) and any
    other as a BigDecimal without trailing zeros, which is what the precision and scale arithmetic below sees."""

    value: Decimal
    integral: bool


@dataclass(frozen=True)
class _Schema:
    type: JsonType | None = None
    properties: Mapping[str, _Schema] | None = None
    required: tuple[str, ...] | None = None
    additional_properties: bool | _Schema | None = None
    items: _Schema | tuple[_Schema, ...] | None = None  # list items, or tuple items
    additional_items: bool | _Schema | None = None
    enum: tuple[object, ...] | None = None
    format: str | None = None
    minimum: _Number | None = None
    maximum: _Number | None = None
    multiple_of: _Number | None = None
    one_of: tuple[_Schema, ...] | None = None
    any_of: tuple[_Schema, ...] | None = None


def _strip_zeros(value: Decimal) -> Decimal:
    """Java's `stripTrailingZeros` (circe's BiggerDecimal keeps numbers that way), without rounding to a context."""
    if value.is_zero():
        return Decimal(0)
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    kept = list(digits)
    while kept[-1] == 0:
        kept.pop()
        exponent += 1
    return Decimal((sign, tuple(kept), exponent))


def _decimal(value: object, keyword: str) -> Decimal:
    """A JSON number as an exact Decimal (a float by its shortest repr, the text it was parsed from)."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise ValueError(f"JSON Schema `{keyword}` must be a number, got {value!r}")
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not number.is_finite():
        raise ValueError(f"JSON Schema `{keyword}` must be finite, got {value!r}")
    return number


def _number(value: object, keyword: str) -> _Number:
    number = _decimal(value, keyword)
    if number == number.to_integral_value():
        return _Number(Decimal(int(number)), True)
    return _Number(_strip_zeros(number), False)


def _precision(value: Decimal) -> int:
    """Java's BigDecimal.precision: significant digits of the unscaled value (1 for zero)."""
    return len(value.as_tuple().digits)


def _scale(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    return -exponent


def _read_type(value: object) -> JsonType:
    if isinstance(value, str) and value in _TYPE_NAMES:
        return value
    if isinstance(value, list) and all(isinstance(name, str) and name in _TYPE_NAMES for name in value):
        return str(value[0]) if len(value) == 1 else frozenset(value)
    raise ValueError(f"JSON Schema `type` must be a type name or a list of them, got {value!r}")


def _read_schemas(value: object, keyword: str) -> tuple[_Schema, ...]:
    if not isinstance(value, list):
        raise ValueError(f"JSON Schema `{keyword}` must be a list of schemas")
    return tuple(_read_schema(item) for item in value)


def _schema_or_bool(value: object, keyword: str) -> bool | _Schema:
    if isinstance(value, bool):
        return value
    if isinstance(value, Mapping):
        return _read_schema(value)
    raise ValueError(f"JSON Schema `{keyword}` must be a schema or a boolean")


def _read_schema(document: object) -> _Schema:
    """Decode a JSON Schema as schema-ddl's circe decoder does: unknown keys ignored, a keyword set to null absent,
    and a keyword of the wrong shape an invalid schema (upstream cannot load such a schema either)."""
    if not isinstance(document, Mapping):
        raise ValueError(f"a JSON Schema must be an object, got {document!r}")
    get = document.get
    properties = get("properties")
    if properties is not None and not isinstance(properties, Mapping):
        raise ValueError("JSON Schema `properties` must be an object of schemas")
    required = get("required")
    if required is not None and not (isinstance(required, list) and all(isinstance(key, str) for key in required)):
        raise ValueError("JSON Schema `required` must be a list of keys")
    items = get("items")
    enum = get("enum")
    if enum is not None and not isinstance(enum, list):
        raise ValueError("JSON Schema `enum` must be a list")
    format_ = get("format")
    if format_ is not None and not isinstance(format_, str):
        raise ValueError("JSON Schema `format` must be a string")
    number = {key: None if get(key) is None else _number(get(key), key) for key in ("minimum", "maximum", "multipleOf")}
    return _Schema(
        type=None if get("type") is None else _read_type(get("type")),
        properties=None if properties is None else {key: _read_schema(value) for key, value in properties.items()},
        required=None if required is None else tuple(required),
        additional_properties=None
        if get("additionalProperties") is None
        else _schema_or_bool(get("additionalProperties"), "additionalProperties"),
        items=None
        if items is None
        else _read_schemas(items, "items")
        if isinstance(items, list)
        else _read_schema(items),
        additional_items=None
        if get("additionalItems") is None
        else _schema_or_bool(get("additionalItems"), "additionalItems"),
        enum=None if enum is None else tuple(enum),
        format=format_,
        minimum=number["minimum"],
        maximum=number["maximum"],
        multiple_of=number["multipleOf"],
        one_of=None if get("oneOf") is None else _read_schemas(get("oneOf"), "oneOf"),
        any_of=None if get("anyOf") is None else _read_schemas(get("anyOf"), "anyOf"),
    )


def _as_union(json_type: JsonType) -> frozenset[str]:
    return frozenset({json_type}) if isinstance(json_type, str) else json_type


def _union_or_single(names: Iterable[str]) -> JsonType:
    found = frozenset(names)
    return next(iter(found)) if len(found) == 1 else found


def _possibly_with_null(json_type: JsonType, name: str) -> bool:
    """schema-ddl's `possiblyWithNull`: exactly `name`, or exactly `[name, "null"]`."""
    return json_type == name or json_type == frozenset({name, _NULL})


def _explicitly_nullable(json_type: JsonType) -> bool:
    return json_type == _NULL or (isinstance(json_type, frozenset) and _NULL in json_type)


def _json_key(value: object) -> object:
    """JSON equality (circe's) as a hashable key: `1` and `1.0` equal, `true` and `1` not."""
    if value is None or isinstance(value, bool | str):
        return (type(value).__name__, value)
    if isinstance(value, int | float | Decimal):
        return ("number", _strip_zeros(_decimal(value, "enum")))
    if isinstance(value, list):
        return ("array", tuple(_json_key(item) for item in value))
    if isinstance(value, Mapping):
        return ("object", tuple(sorted((str(key), _json_key(item)) for key, item in value.items())))
    raise ValueError(f"not a JSON value: {value!r}")


# ---------------------------------------------------------------------------------------------------------------------
# Mutate.forStorage: schemas without tuple items, additional properties and alternatives.


def _both(first: Any, second: Any, combine: Callable[[Any, Any], Any]) -> Any:
    """cats' Option semigroup: combine when both are there, else whichever is. (Any: mypy cannot solve a type
    variable against the keywords' union types.)"""
    if first is not None and second is not None:
        return combine(first, second)
    return first if first is not None else second


def _map_schemas(
    schemas: tuple[_Schema, ...] | None, mutate: Callable[[_Schema], _Schema]
) -> tuple[_Schema, ...] | None:
    return None if schemas is None else tuple(mutate(schema) for schema in schemas)


def _map_properties(
    properties: Mapping[str, _Schema] | None, mutate: Callable[[_Schema], _Schema]
) -> Mapping[str, _Schema] | None:
    return None if properties is None else {key: mutate(value) for key, value in properties.items()}


def _narrowed(first: _Schema, second: _Schema) -> _Schema:
    """`Narrowed`: a schema that data valid against both `first` and `second` is valid against (for one alternative
    of a oneOf/anyOf under its parent)."""

    def multiple_of(a: _Number, b: _Number) -> _Number:
        if not a.integral:
            return _Number(min(a.value, b.value), False)
        if not b.integral:
            return _Number(min(b.value, a.value), False)
        return _Number(min(a.value, b.value), True)

    def items(a: _Schema | tuple[_Schema, ...], b: _Schema | tuple[_Schema, ...]) -> _Schema | tuple[_Schema, ...]:
        return _narrowed(a, b) if isinstance(a, _Schema) and isinstance(b, _Schema) else _Schema()

    def additional(a: bool | _Schema, b: bool | _Schema) -> bool | _Schema:
        if a is False or b is False:
            return False
        if a is True:
            return b
        if b is True:
            return a
        assert isinstance(a, _Schema) and isinstance(b, _Schema)
        return _narrowed(a, b)

    def properties(a: Mapping[str, _Schema], b: Mapping[str, _Schema]) -> Mapping[str, _Schema]:
        return {
            key: _both(a.get(key), b.get(key), _narrowed) or _Schema() for key in [*a, *(k for k in b if k not in a)]
        }

    def enum(a: tuple[object, ...], b: tuple[object, ...]) -> tuple[object, ...]:
        keys = {_json_key(value) for value in b}
        return tuple(value for value in a if _json_key(value) in keys)

    return _Schema(
        type=_both(first.type, second.type, lambda a, b: _union_or_single(_as_union(a) & _as_union(b))),
        properties=_both(first.properties, second.properties, properties),
        required=_both(first.required, second.required, lambda a, b: (*a, *(key for key in b if key not in a))),
        additional_properties=_both(first.additional_properties, second.additional_properties, additional),
        items=_both(first.items, second.items, items),
        additional_items=_both(first.additional_items, second.additional_items, additional),
        enum=_both(first.enum, second.enum, enum),
        format=first.format if first.format is not None else second.format,
        minimum=_both(first.minimum, second.minimum, lambda a, b: a if a.value > b.value else b),
        maximum=_both(first.maximum, second.maximum, lambda a, b: a if a.value < b.value else b),
        multiple_of=_both(first.multiple_of, second.multiple_of, multiple_of),
        # Alternatives are gone by the time anything is narrowed (`_no_alternatives` narrows alternative-free schemas).
        one_of=None,
        any_of=None,
    )


def _permits(schema: _Schema, names: frozenset[str]) -> bool:
    return schema.type is None or bool(_as_union(schema.type) & names)


def _widened(first: _Schema, second: _Schema) -> _Schema:
    """`Widened`: a schema that data valid against `first` or `second` is valid against (for the alternatives of a
    oneOf/anyOf, and for tuple items)."""

    def typed(names: frozenset[str], get: Callable[[_Schema], Any], combine: Callable[[Any, Any], Any]) -> Any:
        # A keyword of a type one schema does not permit is the other's; of a type both permit, combined or dropped.
        first_permits, second_permits = _permits(first, names), _permits(second, names)
        a, b = get(first), get(second)
        if first_permits and second_permits:
            return combine(a, b) if a is not None and b is not None else None
        return a if first_permits else b if second_permits else None

    def items(a: _Schema | tuple[_Schema, ...], b: _Schema | tuple[_Schema, ...]) -> _Schema | tuple[_Schema, ...]:
        return _widened(a, b) if isinstance(a, _Schema) and isinstance(b, _Schema) else _Schema()

    def additional(a: bool | _Schema, b: bool | _Schema) -> bool | _Schema:
        if a is True or b is True:
            return True
        if a is False:
            return b
        if b is False:
            return a
        assert isinstance(a, _Schema) and isinstance(b, _Schema)
        return _widened(a, b)

    def only_in_one(value: _Schema, others_additional: bool | _Schema | None) -> _Schema:
        if isinstance(others_additional, _Schema):
            return _widened(others_additional, value)
        return value if others_additional is False else _Schema()

    def properties() -> Mapping[str, _Schema] | None:
        first_permits, second_permits = _permits(first, frozenset({_OBJECT})), _permits(second, frozenset({_OBJECT}))
        if not (first_permits and second_permits):
            return first.properties if first_permits else second.properties if second_permits else None
        a, b = first.properties or {}, second.properties or {}
        merged = {
            key: _widened(a[key], b[key])
            if key in a and key in b
            else only_in_one(a[key], second.additional_properties)
            if key in a
            else only_in_one(b[key], first.additional_properties)
            for key in [*a, *(k for k in b if k not in a)]
        }
        return merged or None

    def alternatives() -> tuple[_Schema, ...] | None:
        ones = [*(first.one_of or ()), *(first.any_of or ())]
        others = [*(second.one_of or ()), *(second.any_of or ())]
        if not (ones and others):
            return None
        distinct: list[_Schema] = []
        for schema in ones + others:
            if schema not in distinct:
                distinct.append(schema)
        return tuple(distinct)

    def enum(a: tuple[object, ...], b: tuple[object, ...]) -> tuple[object, ...]:
        distinct: dict[object, object] = {}
        for value in a + b:
            distinct.setdefault(_json_key(value), value)
        return tuple(distinct.values())

    def same(a: str, b: str) -> str | None:
        return a if a == b else None

    object_, array, string = frozenset({_OBJECT}), frozenset({_ARRAY}), frozenset({_STRING})
    return _Schema(
        type=None
        if first.type is None or second.type is None
        else _union_or_single(_as_union(first.type) | _as_union(second.type)),
        properties=properties(),
        required=typed(object_, lambda s: s.required, lambda a, b: tuple(key for key in a if key in b)),
        additional_properties=typed(object_, lambda s: s.additional_properties, additional),
        items=typed(array, lambda s: s.items, items),
        additional_items=typed(array, lambda s: s.additional_items, additional),
        enum=None if first.enum is None or second.enum is None else enum(first.enum, second.enum),
        format=typed(string, lambda s: s.format, same),
        minimum=typed(_NUMERIC, lambda s: s.minimum, lambda a, b: a if a.value < b.value else b),
        maximum=typed(_NUMERIC, lambda s: s.maximum, lambda a, b: a if a.value > b.value else b),
        multiple_of=typed(_NUMERIC, lambda s: s.multiple_of, lambda a, b: a if a.value == b.value else None),
        one_of=None,
        any_of=alternatives(),
    )


def _no_tuple_items(schema: _Schema) -> _Schema:
    items = schema.items
    if isinstance(items, _Schema):
        items = _no_tuple_items(items)
    elif isinstance(items, tuple):
        tuple_items = [_no_tuple_items(item) for item in items]
        if isinstance(schema.additional_items, _Schema):
            items = reduce(_widened, tuple_items, schema.additional_items)
        else:
            items = reduce(_widened, tuple_items) if tuple_items else None
    additional = schema.additional_properties
    return replace(
        schema,
        items=items,
        properties=_map_properties(schema.properties, _no_tuple_items),
        additional_properties=_no_tuple_items(additional) if isinstance(additional, _Schema) else additional,
        additional_items=None,
        one_of=_map_schemas(schema.one_of, _no_tuple_items),
        any_of=_map_schemas(schema.any_of, _no_tuple_items),
    )


def _has_defined_properties(schema: _Schema) -> bool:
    return bool(schema.properties) or any(
        _has_defined_properties(alternative) for alternative in (*(schema.one_of or ()), *(schema.any_of or ()))
    )


def _no_additional_properties(schema: _Schema) -> _Schema:
    items = schema.items
    if isinstance(items, _Schema):
        items = _no_additional_properties(items)
    elif isinstance(items, tuple):
        items = tuple(_no_additional_properties(item) for item in items)
    additional_items = schema.additional_items
    additional = schema.additional_properties
    if schema.type is not None and _OBJECT in _as_union(schema.type) and _has_defined_properties(schema):
        additional = False
    return replace(
        schema,
        items=items,
        additional_items=_no_additional_properties(additional_items)
        if isinstance(additional_items, _Schema)
        else additional_items,
        properties=_map_properties(schema.properties, _no_additional_properties),
        additional_properties=additional,
        one_of=_map_schemas(schema.one_of, _no_additional_properties),
        any_of=_map_schemas(schema.any_of, _no_additional_properties),
    )


def _no_alternatives(schema: _Schema) -> _Schema:
    items = schema.items
    if isinstance(items, _Schema):
        items = _no_alternatives(items)
    elif isinstance(items, tuple):
        items = tuple(_no_alternatives(item) for item in items)
    additional = schema.additional_properties
    additional_items = schema.additional_items
    without = replace(
        schema,
        items=items,
        properties=_map_properties(schema.properties, _no_alternatives),
        additional_properties=_no_alternatives(additional) if isinstance(additional, _Schema) else additional,
        additional_items=_no_alternatives(additional_items)
        if isinstance(additional_items, _Schema)
        else additional_items,
        one_of=None,
        any_of=None,
    )
    alternatives = [*(schema.one_of or ()), *(schema.any_of or ())]
    if not alternatives:
        return without
    return reduce(_widened, [_narrowed(without, _no_alternatives(alternative)) for alternative in alternatives])


def _for_storage(schema: _Schema) -> _Schema:
    return _no_alternatives(_no_additional_properties(_no_tuple_items(schema)))


# ---------------------------------------------------------------------------------------------------------------------
# schema-ddl's Parquet AST (`parquet.Type`, `parquet.Field`).


@dataclass(frozen=True)
class _Primitive:
    name: str  # the case object's name: String, Boolean, Integer, Long, Double, Date, Timestamp, Json


@dataclass(frozen=True)
class _Decimal:
    precision: int  # 9, 18 or 38 (`DecimalPrecision`)
    scale: int


@dataclass(frozen=True)
class _Struct:
    fields: tuple[_Field, ...]


@dataclass(frozen=True)
class _Array:
    element: _Type
    nullable: bool


@dataclass(frozen=True)
class _Field:
    name: str
    type: _Type
    nullable: bool
    accessors: tuple[str, ...]  # the JSON keys read for this field (a Set upstream; kept in first-seen order)


_Type = _Primitive | _Decimal | _Struct | _Array
_STRING_T, _BOOLEAN_T, _INTEGER_T, _LONG_T, _DOUBLE_T = (_Primitive(n) for n in ("String", "Boolean", "Integer", "Long", "Double"))  # fmt: skip
_DATE_T, _TIMESTAMP_T, _JSON_T = (_Primitive(n) for n in ("Date", "Timestamp", "Json"))
_INT_MIN, _INT_MAX, _LONG_MIN, _LONG_MAX = -(2**31), 2**31 - 1, -(2**63), 2**63 - 1

# A built type and whether the schema's `type` allows null (upstream's interim `JsonNullability`).
_Built = tuple[_Type, bool]


def _decimal_precision(digits: int) -> int | None:
    return next((bucket for bucket in (9, 18, 38) if digits <= bucket), None)


def _integer_type(schema: _Schema) -> _Type:
    if schema.minimum is None or schema.maximum is None:
        return _LONG_T
    low, high = schema.minimum.value, schema.maximum.value
    if high <= _INT_MAX and low >= _INT_MIN:
        return _INTEGER_T
    if high <= _LONG_MAX and low >= _LONG_MIN:
        return _LONG_T
    precision = _decimal_precision(max(_precision(high) - _scale(high), _precision(low) - _scale(low)))
    return _DOUBLE_T if precision is None else _Decimal(precision, 0)


def _numeric_with_multiple(schema: _Schema, multiple: Decimal) -> _Type:
    if schema.minimum is None or schema.maximum is None:
        return _DOUBLE_T
    scale = _scale(multiple)
    digits = max(_precision(bound.value) - _scale(bound.value) + scale for bound in (schema.maximum, schema.minimum))
    precision = _decimal_precision(digits)
    return _DOUBLE_T if precision is None else _Decimal(precision, scale)


def _numeric_suggestion(schema: _Schema) -> _Built | None:
    json_type = schema.type
    if json_type is None:
        return None
    nullable = _explicitly_nullable(json_type)
    if _possibly_with_null(json_type, _INTEGER):
        return _integer_type(schema), nullable
    non_null = _as_union(json_type) - {_NULL}
    if not (non_null and non_null <= _NUMERIC):
        return None
    multiple = schema.multiple_of
    if multiple is None:
        return _DOUBLE_T, nullable
    if multiple.integral:
        return _integer_type(schema), nullable
    return _numeric_with_multiple(schema, multiple.value), nullable


def _enum_suggestion(schema: _Schema) -> _Built | None:
    if schema.enum is None:
        return None
    values = schema.enum
    nullable = any(value is None for value in values)
    present = [value for value in values if value is not None]
    if all(isinstance(value, int | float | Decimal) and not isinstance(value, bool) for value in present):
        numbers = [
            Decimal(value) if isinstance(value, int) else _strip_zeros(_decimal(value, "enum")) for value in present
        ]
        scale, largest = 0, Decimal(0)
        for number in numbers:
            scale = max(scale, _scale(number))
            largest = abs(number) if abs(number) >= largest else largest
        if scale == 0 and largest <= _INT_MAX:
            return _INTEGER_T, nullable
        if scale == 0 and largest <= _LONG_MAX:
            return _LONG_T, nullable
        precision = _decimal_precision(_precision(largest) - _scale(largest) + scale)
        return (_DOUBLE_T if precision is None else _Decimal(precision, scale)), nullable
    if all(isinstance(value, str) for value in present):
        return _STRING_T, nullable
    return _JSON_T, nullable


def _suggestion(schema: _Schema) -> _Built | None:
    """`Suggestion.allSuggestions`, first match: timestamp/date, boolean, string, numeric, enum."""
    json_type = schema.type
    if json_type is not None and _possibly_with_null(json_type, _STRING):
        nullable = _explicitly_nullable(json_type)
        if schema.format == "date":
            return _DATE_T, nullable
        if schema.format == "date-time":
            return _TIMESTAMP_T, nullable
    if json_type is not None and _possibly_with_null(json_type, _BOOLEAN):
        return _BOOLEAN_T, _explicitly_nullable(json_type)
    if json_type is not None and _possibly_with_null(json_type, _STRING):
        return _STRING_T, _explicitly_nullable(json_type)
    return _numeric_suggestion(schema) or _enum_suggestion(schema)


def _java_order(text: str) -> bytes:
    """Java's String ordering (UTF-16 code units), which Scala's `sortBy(_.name)` and `min` use."""
    return text.encode("utf-16-be")


def _build_type(schema: _Schema) -> _Built | None:
    """`Field.buildType`: None for an object that can hold nothing (no properties, additionalProperties false)."""
    json_type = schema.type
    if json_type is not None and _possibly_with_null(json_type, _OBJECT):
        struct = _build_object(schema)
        return None if struct is None else (struct, _explicitly_nullable(json_type))
    if json_type is not None and _possibly_with_null(json_type, _ARRAY):
        array = _build_array(schema)
        return None if array is None else (array, _explicitly_nullable(json_type))
    suggested = _suggestion(schema)
    if suggested is not None:
        return suggested
    return _JSON_T, json_type is None or _explicitly_nullable(json_type)


def _build_object(schema: _Schema) -> _Type | None:
    required = set(schema.required or ())
    fields = []
    for key, sub_schema in (schema.properties or {}).items():
        built = _build_type(sub_schema)
        if built is not None:
            field_type, explicitly_nullable = built
            fields.append(_Field(key, field_type, explicitly_nullable or key not in required, (key,)))
    if fields:
        return _Struct(tuple(sorted(fields, key=lambda field: _java_order(field.name))))
    return None if schema.additional_properties is False else _JSON_T


def _build_array(schema: _Schema) -> _Type | None:
    if not isinstance(schema.items, _Schema):
        return _Array(_JSON_T, True)
    built = _build_type(schema.items)
    return None if built is None else _Array(built[0], built[1])


_DISALLOWED = re.compile(r"[^A-Za-z0-9_]")


def normal_name(name: str) -> str:
    """`Field.normalizeName`: snake_case (`StringUtils.snakeCase`), characters other than `[A-Za-z0-9_]` to `_`, and
    `_` before a leading digit. The name of a column's field for a JSON key (`firstEventId` -> `first_event_id`)."""
    normalized = _DISALLOWED.sub("_", snake_case(name))
    return f"_{normalized}" if normalized[:1].isdigit() else normalized


def _normalize(field: _Field) -> _Field:
    return replace(field, name=normal_name(field.name), type=_normalize_type(field.type))


def _normalize_type(value: _Type) -> _Type:
    if isinstance(value, _Struct):
        return _Struct(
            tuple(sorted(_collapse([_normalize(f) for f in value.fields]), key=lambda f: _java_order(f.name)))
        )
    if isinstance(value, _Array):
        return _Array(_normalize_type(value.element), value.nullable)
    return value


def _collapse(fields: list[_Field]) -> list[_Field]:
    """Fields whose names normalize alike become one, typed as the one with the lowest key (Java order), that reads
    all their keys (`collapseDuplicateFields`)."""
    groups: dict[str, list[_Field]] = {}
    for field in fields:
        groups.setdefault(field.name, []).append(field)
    collapsed = []
    for group in groups.values():
        lowest = min(group, key=lambda f: min(_java_order(a) for a in f.accessors))
        accessors = tuple(dict.fromkeys(a for f in group for a in f.accessors))
        collapsed.append(replace(lowest, accessors=accessors))
    return collapsed


# ---------------------------------------------------------------------------------------------------------------------
# Migrations.mergeSchemas: one column for compatible versions.


def _merge_field(source: _Field, target: _Field | None) -> _Field | None:
    if target is None:  # removed in the later version: kept, nullable
        return replace(source, nullable=True)
    if source == target:
        return source
    merged = _merge_type(source.type, target.type)
    if merged is None:
        return None
    accessors = tuple(dict.fromkeys((*source.accessors, *target.accessors)))
    return _Field(source.name, merged, source.nullable or target.nullable, accessors)


def _merge_type(source: _Type, target: _Type) -> _Type | None:
    """The merged type, None if the change is breaking (any type change but struct additions and removals)."""
    if isinstance(source, _Struct):
        if not isinstance(target, _Struct):
            return None
        by_name = {field.name: field for field in reversed(source.fields)}
        target_by_name = {field.name: field for field in reversed(target.fields)}
        forward = [_merge_field(field, target_by_name.get(field.name)) for field in source.fields]
        reverse = [_merge_field(field, by_name.get(field.name)) for field in target.fields]
        if None in forward or None in reverse:
            return None
        target_names = {field.name for field in target.fields}
        kept = [field if field.name in target_names else replace(field, nullable=True) for field in forward if field]
        added = [field for field in reverse if field and field.name not in by_name]  # appended, nullable
        return _Struct(tuple(kept + added))
    if isinstance(source, _Array):
        if not isinstance(target, _Array):
            return None
        element = _merge_type(source.element, target.element)
        return None if element is None else _Array(element, source.nullable or target.nullable)
    return target if target == source else None


# ---------------------------------------------------------------------------------------------------------------------
# Scala 2.12's hashCode of a schema-ddl Field (MurmurHash3), for the recovered columns' names.

_M32 = 0xFFFFFFFF


def _rotl(value: int, shift: int) -> int:
    return ((value << shift) | (value >> (32 - shift))) & _M32


def _mix_last(hash_: int, data: int) -> int:
    k = _rotl((data * 0xCC9E2D51) & _M32, 15)
    return (hash_ ^ ((k * 0x1B873593) & _M32)) & _M32


def _mix(hash_: int, data: int) -> int:
    return (_rotl(_mix_last(hash_, data), 13) * 5 + 0xE6546B64) & _M32


def _finalize(hash_: int, length: int) -> int:
    h = (hash_ ^ length) & _M32
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & _M32
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & _M32
    return h ^ (h >> 16)


def _java_string_hash(text: str) -> int:
    encoded = text.encode("utf-16-be")
    return reduce(
        lambda h, i: (31 * h + int.from_bytes(encoded[i : i + 2], "big")) & _M32, range(0, len(encoded), 2), 0
    )


def _product_hash(elements: Sequence[int]) -> int:
    return _finalize(reduce(_mix, elements, 0xCAFEBABE), len(elements))


_SEQ_SEED, _SET_SEED = _java_string_hash("Seq"), _java_string_hash("Set")


def _set_hash(elements: Sequence[int]) -> int:
    total, xor, product = 0, 0, 1
    for element in elements:
        total, xor = (total + element) & _M32, xor ^ element
        product = (product * element) & _M32 if element else product
    return _finalize(_mix_last(_mix(_mix(_SET_SEED, total), xor), product), len(elements))


def _nullability_hash(nullable: bool) -> int:
    return _java_string_hash("Nullable" if nullable else "Required")


def _type_hash(value: _Type) -> int:
    if isinstance(value, _Primitive):  # a case object: the hash of its name
        return _java_string_hash(value.name)
    if isinstance(value, _Decimal):
        return _product_hash([_java_string_hash(f"Digits{value.precision}"), value.scale])
    if isinstance(value, _Struct):  # NonEmptyVector is a value class: its Vector's seqHash
        fields = [_field_hash(field) for field in value.fields]
        return _product_hash([_finalize(reduce(_mix, fields, _SEQ_SEED), len(fields))])
    return _product_hash([_type_hash(value.element), _nullability_hash(value.nullable)])


def _field_hash(field: _Field) -> int:
    accessors = _set_hash([_java_string_hash(accessor) for accessor in dict.fromkeys(field.accessors)])
    return _product_hash(
        [_java_string_hash(field.name), _type_hash(field.type), _nullability_hash(field.nullable), accessors]
    )


def _scala_hash(field: _Field) -> int:
    """`scala.math.abs(field.hashCode)`: as a signed 32-bit int, Int.MinValue staying negative."""
    unsigned = _field_hash(field)
    signed = unsigned - (1 << 32) if unsigned & 0x80000000 else unsigned
    return signed if signed == -(2**31) else abs(signed)


# ---------------------------------------------------------------------------------------------------------------------
# Spark types.


def _spark_type(value: _Type) -> DataType:
    if isinstance(value, _Struct):
        return StructType([StructField(f.name, _spark_type(f.type), f.nullable) for f in value.fields])
    if isinstance(value, _Array):
        return ArrayType(_spark_type(value.element), value.nullable)
    if isinstance(value, _Decimal):
        return DecimalType(value.precision, value.scale)
    return {
        "String": StringType(), "Json": StringType(), "Boolean": BooleanType(), "Integer": IntegerType(),
        "Long": LongType(), "Double": DoubleType(), "Date": DateType(), "Timestamp": TimestampType(),
    }[value.name]  # fmt: skip


def _parse_spark_type(value: _Type) -> DataType:
    """The type `from_json` reads a value of `value` with: JSON keys, JSON leaves as variants, all nullable."""
    if isinstance(value, _Struct):
        return StructType(
            [StructField(key, _parse_spark_type(f.type), True) for f in value.fields for key in f.accessors]
        )
    if isinstance(value, _Array):
        return ArrayType(_parse_spark_type(value.element), True)
    return VariantType() if value == _JSON_T else _spark_type(value)


# ---------------------------------------------------------------------------------------------------------------------
# A family's columns (NonAtomicFieldsProvider).

_VERSION = re.compile(r"^([0-9]+)-([0-9]+)-([0-9]+)$")


def _version(text: str) -> tuple[int, int, int]:
    found = _VERSION.match(text)
    if not found:
        raise ValueError(f"not a SchemaVer M-R-A: {text!r}")
    model, revision, addition = found.groups()
    return int(model), int(revision), int(addition)


def _column_field(kind: str, column: str, schema: Mapping[str, Any]) -> _Field | None:
    """`fieldFromSchema`: an unstruct event is `Field.build(enforceValuePresence = false)`, contexts
    `Field.buildRepeated(enforceItemPresence = true, Nullable)`; then `Field.normalize`."""
    built = _build_type(_for_storage(_read_schema(schema)))
    if built is None:
        return None
    value_type, explicitly_nullable = built
    column_type = value_type if kind == "unstruct_event" else _Array(value_type, explicitly_nullable)
    return _normalize(_Field(column, column_type, True, (column,)))


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _json_path(parent: str, key: str) -> str:
    """A JSONPath to `key` of the object at `parent`: `$.fooBar`, `$['a.b']`."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{parent}.{key}"
    quoted = key.replace("\\", "\\\\").replace("'", "\\'")
    return f"{parent}['{quoted}']"


def _shared_fields(value: _Type, json_path: str = "$", field_path: str = "") -> list[str]:
    """Each struct field (nested ones too) that several properties of one schema normalize to, as
    `$.fooBar and $.foo_bar as foo_bar` (in one version's field, several accessors mean exactly that)."""
    if isinstance(value, _Array):
        return _shared_fields(value.element, f"{json_path}[*]", f"{field_path}[*]")
    if not isinstance(value, _Struct):
        return []
    found = []
    for field in value.fields:
        path = f"{field_path}.{field.name}" if field_path else field.name
        keys = [_json_path(json_path, key) for key in field.accessors]
        if len(keys) > 1:
            found.append(f"{', '.join(keys[:-1])} and {keys[-1]} as {path}")
        found += _shared_fields(field.type, keys[0], path)
    return found


def _refuse_shared_fields(kind: str, field: _Field, version: str) -> None:
    """Upstream collapses properties that normalize alike into one field, which keeps one of their values and drops
    the others quietly; here such a schema cannot be typed (README: typed Parquet)."""
    entity = field.type.element if kind == "contexts" and isinstance(field.type, _Array) else field.type
    shared = _shared_fields(entity)
    if shared:
        raise ValueError(
            f"schema {version} has properties that would share a Parquet field of {field.name} (one value of each "
            f"would be lost): {'; '.join(shared)}; allowed: property names that differ once snake_cased and "
            "characters other than A-Z, a-z, 0-9 and _ made _"
        )


def family_columns(
    kind: str,
    vendor: str,
    name: str,
    schemas: Sequence[tuple[str, Mapping[str, Any]]],
    present_versions: Collection[str],
) -> list[TypedColumn]:
    """The typed columns of one entity family, as upstream's `extractEndSchemas`.

    Args:
        kind: `contexts` or `unstruct_event`.
        vendor: the schemas' vendor, e.g. `com.snowplowanalytics.snowplow`.
        name: the schemas' name, e.g. `client_session`.
        schemas: (version `M-R-A`, JSON Schema) of one model: every version from M-0-0 up to the batch's newest.
            Versions newer than the newest of `present_versions` are left out (upstream drops them too).
        present_versions: the versions of this family the batch holds.

    Returns:
        The base column first (`column_name(kind, vendor, name, model)`), the versions merged into it in order,
        then a recovered column for each version whose schema breaks the merge and that the batch holds:
        `<base>_recovered_<M_R_A>_<hash>`, the hash upstream's (Scala's hashCode of the version's field). A
        version whose schema types to nothing (an object without properties that forbids additional ones) has no
        column, so its entities are not written, as upstream.

    Raises:
        ValueError: a schema that cannot be typed, e.g. one whose properties would share a field
            (`_refuse_shared_fields`); shred makes the family's events `loader_iglu_error` bad rows.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    ordered = sorted(((_version(version), version, schema) for version, schema in schemas), key=lambda s: s[0])
    if not ordered:
        return []
    models = {parsed[0] for parsed, _, _ in ordered}
    if len(models) != 1:
        raise ValueError(f"schemas of one model expected, got models {sorted(models)}")
    model = models.pop()
    newest = max((_version(v) for v in present_versions if _version(v)[0] == model), default=None)
    present = {_version(v) for v in present_versions}
    column = column_name(kind, vendor, name, str(model))

    columns: list[tuple[_Field, list[str]]] = []  # (field, versions), the base column first
    for parsed, version, schema in ordered:
        if newest is not None and parsed > newest:
            continue
        field = _column_field(kind, column, schema)
        if field is None:
            continue
        merged = _merge_field(columns[0][0], field) if columns else None
        if columns and merged is None and parsed not in present:
            continue  # a breaking version the batch does not hold: no column to type
        _refuse_shared_fields(kind, field, version)
        if not columns:
            columns.append((field, [version]))
        elif merged is not None:
            columns[0] = (merged, [*columns[0][1], version])
        else:
            recovered = f"{field.name}_recovered_{'_'.join(map(str, parsed))}_{_scala_hash(field)}"
            columns.append((replace(field, name=recovered), [version]))
    return [
        TypedColumn(field.name, kind, _spark_type(field.type), _parse_spark_type(field.type), tuple(versions))
        for field, versions in columns
    ]


# ---------------------------------------------------------------------------------------------------------------------
# Per row: entity JSON text to the typed value (typed_value), and whether it fits (cast_failed).


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


def _check_kind(column: TypedColumn) -> None:
    if column.kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {column.kind!r}")
    if column.kind == "contexts" and not (
        isinstance(column.data_type, ArrayType) and isinstance(column.parse_type, ArrayType)
    ):
        raise ValueError("a contexts column has array types")


def _from_json(text: Column, parse: DataType) -> Column:
    if isinstance(parse, StructType):
        return F.from_json(text, parse)
    # from_json reads objects (and arrays, maps): an entity of another type is read wrapped in one.
    wrapped = F.concat(F.lit('{"value":'), text, F.lit("}"))
    return F.from_json(wrapped, StructType([StructField("value", parse, True)]))["value"]


def typed_value(data: Column, column: TypedColumn) -> Column:
    """The column's typed value (of `column.data_type`, nullability included) from its entities' data JSON text.

    Args:
        data: for contexts, an `array<string>` of the matching entities' data texts (custom contexts first, then
            derived contexts); for an unstruct event, its data text. Null (or no context) gives null.
        column: from `family_columns`.

    Each entity is parsed once (`from_json` with `column.parse_type`, Spark's PERMISSIVE mode) and reshaped inside
    one lambda: Spark does not share a repeated `from_json` between expressions (30 field references took 10x one
    parse). Values are read as Spark reads JSON, which matches upstream for data that fits the type:
    timestamps ISO 8601 with an offset (to microseconds), dates `yyyy-MM-dd`, decimals at the column's scale, JSON
    leaves as compact JSON text (from variants: object keys sorted). Data that does not fit is where the two differ
    (Spark reads a number in a string field as its text, rounds a decimal to the scale, nulls what it cannot read;
    upstream rejects the event): use `cast_failed` to send those events to bad rows as upstream does. Where a
    required position (not null in `data_type`) is null, the whole value is null, so the type can stay exact.
    """
    _check_kind(column)
    positional = _any_collides(column.parse_type)

    def read(text: Column, parse: DataType) -> Column:
        parsed = _from_json(text, parse)
        return parsed.cast(_positional(parse)) if positional else parsed

    if column.kind == "contexts":
        assert isinstance(column.parse_type, ArrayType)
        element = column.parse_type.elementType
        parsed = F.transform(data, lambda text: read(text, element))
    else:
        parsed = read(data, column.parse_type)

    def shape(value: Column) -> Column:
        typed = _convert(value, column.data_type, column.parse_type, True, positional)
        if _can_miss(column.data_type, True):
            typed = F.when(~_missing(value, column.data_type, column.parse_type, True, False, positional), typed)
        # No matching context is null upstream, not an empty array.
        return F.when(F.size(value) > 0, typed) if column.kind == "contexts" else typed

    return F.transform(F.array(parsed), shape)[0]


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """`body` of `value`, evaluated once (Spark does not share repeated subexpressions in lambdas); `body` must not
    return null."""
    return F.exists(F.array(value), body)


_DATE_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
# java.time's ISO_DATE_TIME with an offset, as upstream's `Instant.from` needs (a zone region suffix is not read).
_TIMESTAMP_TEXT = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?(Z|[+-][0-9]{2}:[0-9]{2}(:[0-9]{2})?)$"
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
    """True where some entity's data does not fit the column's type: where upstream's Parquet transformer makes the
    event a `loader_iglu_error` bad row (schema-ddl's Caster); false for null data.

    Checked on the JSON itself (`try_parse_json`, then the variant's type at each position), not on what
    `from_json` made of it, because Spark's reader is lenient where upstream is not: a number read as a string's
    text, a numeric string read as a number or a timestamp, a decimal rounded to the scale. Wrong: text that is not
    JSON (or has duplicate keys, which Spark's variant refuses), a value of another JSON type, an integer out of
    range or written with a fraction or exponent (`1.0`: upstream reads it, Spark's `from_json` does not, so it is
    a bad row here), a decimal with more decimals than the scale, a timestamp without an offset, a date or
    timestamp not in ISO 8601, and a missing or null value where the type requires one. Costs one more parse of
    each entity.
    """
    _check_kind(column)
    out, parse = column.data_type, column.parse_type

    def entity_bad(text: Column, out: DataType, parse: DataType, nullable: bool, in_array: bool) -> Column:
        return _let(
            F.try_parse_json(text),
            lambda value: (text.isNotNull() & value.isNull()) | _bad(value, out, parse, nullable, in_array),
        )

    if column.kind == "contexts":
        assert isinstance(out, ArrayType) and isinstance(parse, ArrayType)
        return F.coalesce(
            F.exists(data, lambda text: entity_bad(text, out.elementType, parse.elementType, out.containsNull, True)),
            F.lit(False),
        )
    return F.coalesce(_let(data, lambda text: entity_bad(text, out, parse, True, False)), F.lit(False))
