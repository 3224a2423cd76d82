"""JSON Schema, as schema-ddl's `jsonschema.Schema` decodes it (only the keywords its Parquet typing reads)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

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
