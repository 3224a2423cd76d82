"""schema-ddl's Parquet AST (`parquet.Type`, `parquet.Field`), built from a JSON Schema (`Field.buildType`,
`Suggestion`)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from jobs.iglu.parquet.json_schema import (
    _ARRAY,
    _BOOLEAN,
    _INTEGER,
    _NULL,
    _NUMERIC,
    _OBJECT,
    _STRING,
    _as_union,
    _decimal,
    _explicitly_nullable,
    _possibly_with_null,
    _precision,
    _scale,
    _Schema,
    _strip_zeros,
)


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
