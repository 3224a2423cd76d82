"""schema-ddl's `Migrations.mergeSchemas`: one column for compatible versions."""

from __future__ import annotations

from dataclasses import replace

from jobs.iglu.parquet.ddl_types import _Array, _Field, _Struct, _Type


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
