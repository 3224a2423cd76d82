"""Field names (schema-ddl's `Field.normalize`), and the refusal of properties of one schema that normalize to one
field."""

from __future__ import annotations

import re
from dataclasses import replace

from jobs.iglu.names import snake_case
from jobs.iglu.parquet.ddl_types import _Array, _Field, _java_order, _Struct, _Type

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
