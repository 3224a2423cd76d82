"""A family's typed columns (rdb-loader's `NonAtomicFieldsProvider`) and their Spark types."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

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

from jobs.iglu.names import column_name
from jobs.iglu.parquet.ddl_types import _JSON_T, _Array, _build_type, _Decimal, _Field, _Struct, _Type
from jobs.iglu.parquet.for_storage import _for_storage
from jobs.iglu.parquet.json_schema import _read_schema
from jobs.iglu.parquet.migrations import _merge_field
from jobs.iglu.parquet.normalize import _normalize, _refuse_shared_fields
from jobs.iglu.parquet.scala_hash import _scala_hash

KINDS = ("contexts", "unstruct_event")


@dataclass(frozen=True)
class TypedColumn:
    """One typed wide-row entity column of a family: upstream's `TypedField`.

    `data_type`: the column's type, nullability as upstream's Parquet has it (the column itself is nullable).
    `parse_type`: what an entity's JSON is read as (`typed_value_of`): its JSON keys (one field for each key that
    normalizes to an output field), all nullable, JSON leaves as variants. For contexts both are arrays.
    """

    name: str
    kind: str
    data_type: DataType
    parse_type: DataType
    matching_versions: tuple[str, ...]


def _check_kind(column: TypedColumn) -> None:
    if column.kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {column.kind!r}")
    if column.kind == "contexts" and not (
        isinstance(column.data_type, ArrayType) and isinstance(column.parse_type, ArrayType)
    ):
        raise ValueError("a contexts column has array types")


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
    """The type a value of `value` is read as from its JSON: JSON keys, JSON leaves as variants, all nullable."""
    if isinstance(value, _Struct):
        return StructType(
            [StructField(key, _parse_spark_type(f.type), True) for f in value.fields for key in f.accessors]
        )
    if isinstance(value, _Array):
        return ArrayType(_parse_spark_type(value.element), True)
    return VariantType() if value == _JSON_T else _spark_type(value)


_VERSION = re.compile(r"^([0-9]+)-([0-9]+)-([0-9]+)\Z")


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
        schemas: (version `M-R-A`, JSON Schema) of one model, every version from M-0-0 up. Versions newer than the
            newest of `present_versions` (the versions the batch holds) are left out, as upstream.

    Returns:
        The base column first (`column_name(kind, vendor, name, model)`), the versions merged into it in order,
        then `<base>_recovered_<M_R_A>_<hash>` (upstream's hash) for each version the batch holds whose schema
        breaks the merge. A version whose schema types to nothing has no column: its entities are not written.

    Raises:
        ValueError: a schema that cannot be typed (e.g. `_refuse_shared_fields`); shred makes the family's events
            `loader_iglu_error` bad rows.
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
