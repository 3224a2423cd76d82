"""schema-ddl's `Mutate.forStorage`: schemas without tuple items, additional properties and alternatives."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import reduce
from typing import Any

from jobs.iglu.parquet.json_schema import (
    _ARRAY,
    _NUMERIC,
    _OBJECT,
    _STRING,
    _as_union,
    _json_key,
    _Number,
    _Schema,
    _union_or_single,
)


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


def _widened_items(a: _Schema | tuple[_Schema, ...], b: _Schema | tuple[_Schema, ...]) -> _Schema | tuple[_Schema, ...]:
    return _widened(a, b) if isinstance(a, _Schema) and isinstance(b, _Schema) else _Schema()


def _widened_additional(a: bool | _Schema, b: bool | _Schema) -> bool | _Schema:
    if a is True or b is True:
        return True
    if a is False:
        return b
    if b is False:
        return a
    assert isinstance(a, _Schema) and isinstance(b, _Schema)
    return _widened(a, b)


def _only_in_one(value: _Schema, others_additional: bool | _Schema | None) -> _Schema:
    if isinstance(others_additional, _Schema):
        return _widened(others_additional, value)
    return value if others_additional is False else _Schema()


def _widened_properties(first: _Schema, second: _Schema) -> Mapping[str, _Schema] | None:
    first_permits, second_permits = _permits(first, frozenset({_OBJECT})), _permits(second, frozenset({_OBJECT}))
    if not (first_permits and second_permits):
        return first.properties if first_permits else second.properties if second_permits else None
    a, b = first.properties or {}, second.properties or {}
    merged = {
        key: _widened(a[key], b[key])
        if key in a and key in b
        else _only_in_one(a[key], second.additional_properties)
        if key in a
        else _only_in_one(b[key], first.additional_properties)
        for key in [*a, *(k for k in b if k not in a)]
    }
    return merged or None


def _widened_alternatives(first: _Schema, second: _Schema) -> tuple[_Schema, ...] | None:
    ones = [*(first.one_of or ()), *(first.any_of or ())]
    others = [*(second.one_of or ()), *(second.any_of or ())]
    if not (ones and others):
        return None
    distinct: list[_Schema] = []
    for schema in ones + others:
        if schema not in distinct:
            distinct.append(schema)
    return tuple(distinct)


def _widened_enum(a: tuple[object, ...], b: tuple[object, ...]) -> tuple[object, ...]:
    distinct: dict[object, object] = {}
    for value in a + b:
        distinct.setdefault(_json_key(value), value)
    return tuple(distinct.values())


def _same(a: str, b: str) -> str | None:
    return a if a == b else None


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

    object_, array, string = frozenset({_OBJECT}), frozenset({_ARRAY}), frozenset({_STRING})
    return _Schema(
        type=None
        if first.type is None or second.type is None
        else _union_or_single(_as_union(first.type) | _as_union(second.type)),
        properties=_widened_properties(first, second),
        required=typed(object_, lambda s: s.required, lambda a, b: tuple(key for key in a if key in b)),
        additional_properties=typed(object_, lambda s: s.additional_properties, _widened_additional),
        items=typed(array, lambda s: s.items, _widened_items),
        additional_items=typed(array, lambda s: s.additional_items, _widened_additional),
        enum=None if first.enum is None or second.enum is None else _widened_enum(first.enum, second.enum),
        format=typed(string, lambda s: s.format, _same),
        minimum=typed(_NUMERIC, lambda s: s.minimum, lambda a, b: a if a.value < b.value else b),
        maximum=typed(_NUMERIC, lambda s: s.maximum, lambda a, b: a if a.value > b.value else b),
        multiple_of=typed(_NUMERIC, lambda s: s.multiple_of, lambda a, b: a if a.value == b.value else None),
        one_of=None,
        any_of=_widened_alternatives(first, second),
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
