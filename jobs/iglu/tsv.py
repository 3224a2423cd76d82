"""TSV shredding: an entity's columns from its JSON Schema, and its TSV line as a Spark column expression.

The columns are those of schema-ddl 0.27.0's `FlatSchema.extractProperties` (what RDB transformer 6.x uses for
`format=tsv` and RDB Loader for the table's columns; source: snowplow/schema-ddl
`redshift/internal/FlatSchema.scala`, `redshift/ShredModelEntry.scala`):

- nested objects (`"type": "object"` with `properties`) are unfolded into their properties, recursively; anything
  else (strings, numbers, arrays, objects without properties, unions of several types, schemas without a `type`)
  is one column;
- a column is nullable unless it and all its parents are `required` and its type does not admit null;
- columns are sorted: non-nullable first, then by name; the name is the property path, each key snake-cased
  (`StringUtils.snakeCase`), joined with `.`;
- values are written as `ShredModelEntry.stringFactory` writes them: null or absent `\\N`, booleans `1`/`0`,
  numbers as their JSON text, strings verbatim, arrays and objects as compact JSON; tabs and newlines become
  spaces, and a string that is exactly `\\N` is written `\\\\N`.

The TSV content of a version depends on its own schema only: upstream maps each key to its own model, merged
revisions only change the table's migrations (`foldMapRedshiftSchemas`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DataType, StringType, StructField, StructType

from jobs.iglu.names import snake_case

NULL = "\\N"
Path = tuple[str, ...]
BooleanKind = Literal["no", "only", "mixed"]


class UnusableSchemaError(ValueError):
    """The JSON Schema cannot be flattened (not an object, or keywords of the wrong JSON type)."""


@dataclass(frozen=True)
class TsvColumn:
    """One TSV column of an entity: where its value is in the data, and how it is written."""

    name: str
    """The column name: the path's keys snake-cased, joined with `.` (e.g. `page.date_published`)."""
    path: Path
    """The JSON keys from the entity's data to the value (empty: the whole data)."""
    nullable: bool
    boolean: BooleanKind
    """Whether the value can be a JSON boolean (written 1/0): never, always (when not null), or among other types."""


def _types(schema: dict[str, Any]) -> set[str] | None:
    """The schema's `type` as a set (None when absent)."""
    value = schema.get("type")
    if value is None:
        return None
    if isinstance(value, str):
        return {value}
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return set(value)
    raise UnusableSchemaError(f"type: given {value!r}; allowed: a type name or a list of them")


def _is_union(types: set[str] | None) -> bool:
    """schema-ddl's `Type.isUnion`: at least two non-null types, number with integer counting as one."""
    if types is None or len(types) < 2:
        return False
    others = types - {"null"}
    return others != {"number", "integer"} and len(others) > 1


def _can_be_null(schema: dict[str, Any], types: set[str] | None) -> bool:
    enum = schema.get("enum")
    return (isinstance(enum, list) and None in enum) or (types is not None and "null" in types)


def _is_heterogeneous_union(schema: dict[str, Any], types: set[str] | None) -> bool:
    one_of = schema.get("oneOf")
    if isinstance(one_of, list):
        kinds: set[str] = set()
        for option in one_of:
            if isinstance(option, dict):
                kinds |= _types(option) or set()
        if len(kinds - {"null"}) > 1:
            return True
    # upstream: `schema.type.forall(_.isUnion)`: no type at all counts as a union too
    return types is None or _is_union(types)


def _is_leaf(schema: dict[str, Any], types: set[str] | None) -> bool:
    nested = types is not None and "object" in types and isinstance(schema.get("properties"), dict)
    return _is_heterogeneous_union(schema, types) or not nested


def _boolean_kind(schema: dict[str, Any], types: set[str] | None) -> BooleanKind:
    enum = schema.get("enum")
    if types is None:
        if isinstance(enum, list):
            booleans = [value for value in enum if isinstance(value, bool)]
            others = [value for value in enum if value is not None and not isinstance(value, bool)]
            return "no" if not booleans else ("only" if not others else "mixed")
        return "mixed"
    if "boolean" not in types:
        return "no"
    return "only" if types <= {"boolean", "null"} else "mixed"


def tsv_columns(schema: dict[str, Any]) -> list[TsvColumn]:
    """The TSV columns of a JSON Schema, in upstream's order (see the module docstring).

    Raises:
        UnusableSchemaError: the schema is not an object, or a keyword has the wrong JSON type.
    """
    if not isinstance(schema, dict):
        raise UnusableSchemaError(f"the schema is {type(schema).__name__}; allowed: a JSON object")
    required: set[Path] = set()
    leaves: dict[Path, tuple[dict[str, Any], bool, set[str] | None]] = {}

    def nested_required(path: Path) -> bool:
        parent = path[:-1]
        return not parent or (parent in required and nested_required(parent))

    def visit(node: dict[str, Any], path: Path) -> None:
        types = _types(node)
        # a property under a union-typed leaf is part of that leaf's value (`checkUnionSubSchema`)
        if any(path[: len(leaf)] == leaf and _is_union(leaf_types) for leaf, (_, _, leaf_types) in leaves.items()):
            return
        wanted = node.get("required")
        if wanted is not None and not (isinstance(wanted, list) and all(isinstance(key, str) for key in wanted)):
            raise UnusableSchemaError(
                f"{'/'.join(path) or 'the root'}: required: given {wanted!r}; allowed: a list of names"
            )
        required.update(child for child in ((*path, key) for key in wanted or ()) if nested_required(child))
        if _is_leaf(node, types):
            nullable = (bool(path) and path not in required) or _can_be_null(node, types)
            leaf_types = types if not nullable else ({"null"} if types is None else types | {"null"})
            leaves[path] = (node, nullable, leaf_types)
        properties = node.get("properties")
        if properties is None:
            return
        if not isinstance(properties, dict):
            raise UnusableSchemaError(
                f"{'/'.join(path) or 'the root'}: properties: given {properties!r}; allowed: an object"
            )
        for key, child in properties.items():
            if not isinstance(child, dict):
                raise UnusableSchemaError(f"{'/'.join((*path, key))}: given {child!r}; allowed: a JSON Schema object")
            visit(child, (*path, key))

    visit(schema, ())
    if list(leaves) == [()] and not schema.get("properties"):
        return []  # an object without properties has no columns
    columns = [
        TsvColumn(".".join(snake_case(key) for key in path), path, nullable, _boolean_kind(node, _types(node)))
        for path, (node, nullable, _) in leaves.items()
    ]
    return sorted(columns, key=lambda column: (column.nullable, column.name))


def _parse_groups(paths: list[Path]) -> list[list[Path]]:
    """Paths split so that no path in a group is a prefix of another (one `from_json` per group): a value that is
    both a column and the parent of columns (a leaf without a type that has properties) needs its own parse."""
    groups: list[list[Path]] = []
    for path in sorted(set(paths), key=len, reverse=True):
        for group in groups:
            if not any(other[: len(path)] == path or path[: len(other)] == other for other in group):
                group.append(path)
                break
        else:
            groups.append([path])
    return groups


def _struct(paths: list[Path], leaf: DataType, positional: bool) -> StructType:
    """The struct that holds `paths`: keys as in the data, or renamed `f0`, `f1`, … (read back by position, so keys
    that differ only in case, or hold dots, cannot be confused by Spark's name resolution)."""
    children: dict[str, list[Path]] = {}
    for path in paths:
        children.setdefault(path[0], []).append(path[1:])
    fields = []
    for i, (key, rests) in enumerate(children.items()):
        name = f"f{i}" if positional else key
        data_type = leaf if rests == [()] else _struct([rest for rest in rests if rest], leaf, positional)
        fields.append(StructField(name, data_type))
    return StructType(fields)


def _groups(columns: list[TsvColumn]) -> list[tuple[list[Path], DataType]]:
    """The parses `columns` are read from: one per group of paths read as text, then one per group of the paths
    whose value may be a JSON boolean among other types (read again as booleans)."""
    paths = [column.path for column in columns if column.path]
    mixed = [column.path for column in columns if column.path and column.boolean == "mixed"]
    return [(group, StringType()) for group in _parse_groups(paths)] + [
        (group, BooleanType()) for group in _parse_groups(mixed)
    ]


def tsv_parses(data: Column, columns: list[TsvColumn]) -> list[Column]:
    """The JSON parses of an entity's data (a JSON object's text) its TSV values are read from, in the order
    `tsv_fields` takes them. Give them columns of their own before the line is built: inside a CASE branch (one
    per type) Spark does not share a repeated `from_json`, and each value reads its parse three times."""
    return [
        F.from_json(data, _struct(group, leaf, positional=False)).cast(_struct(group, leaf, positional=True))
        for group, leaf in _groups(columns)
    ]


def _values(data: Column, parses: list[Column], columns: list[TsvColumn], leaf: DataType) -> dict[Path, Column]:
    """Each path's value read as `leaf` from the parses (StringType: the JSON text of numbers, arrays and objects,
    a string's content; BooleanType: null unless a JSON boolean); the whole data for the empty path."""
    found: dict[Path, Column] = {}
    for (group, kind), parsed in zip(_groups(columns), parses, strict=True):
        if kind == leaf:
            for path in group:
                found[path] = _field(parsed, path, group)
    found[()] = data if leaf == StringType() else F.lit(None).cast(leaf)
    return found


def _field(parsed: Column, path: Path, group: list[Path]) -> Column:
    """The column of `path` in a positional struct built by `_struct(group, …)`."""
    value, level = parsed, group
    for depth, key in enumerate(path):
        keys = list(dict.fromkeys(other[depth] for other in level if other[:depth] == path[:depth]))
        value = value.getField(f"f{keys.index(key)}")
        level = [other for other in level if len(other) > depth and other[: depth + 1] == path[: depth + 1]]
    return value


def _escaped(text: Column) -> Column:
    return (
        F.when(text.isNull(), F.lit(NULL)).when(text == NULL, F.lit("\\\\N")).otherwise(F.translate(text, "\t\n", "  "))
    )


def tsv_fields(data: Column, parses: list[Column], columns: list[TsvColumn]) -> list[Column]:
    """The rendered values of `columns` for an entity's data (JSON object text), as `stringFactory` writes them,
    read from its `tsv_parses` (columns of their own)."""
    texts = _values(data, parses, columns, StringType())
    booleans = _values(data, parses, columns, BooleanType())
    rendered = []
    for column in columns:
        text = texts[column.path]
        if column.boolean == "only":
            value = F.when(text == "true", F.lit("1")).when(text == "false", F.lit("0")).otherwise(_escaped(text))
        elif column.boolean == "mixed":
            flag = booleans[column.path]
            value = F.when(flag, F.lit("1")).when(~flag, F.lit("0")).otherwise(_escaped(text))
        else:
            value = _escaped(text)
        rendered.append(value)
    return rendered


def tsv_line(
    vendor: str, name: str, schema_format: str, version: str, root_id: Column, root_tstamp: Column, data: Column,
    parses: list[Column], columns: list[TsvColumn],
) -> Column:  # fmt: skip
    """An entity's TSV line: upstream's metadata columns (`EventUtils.buildMetadata`: vendor, name, format, version,
    root_id, root_tstamp, ref_root `events`, ref_tree `["events","<name>"]`, ref_parent `events`), then its values
    (read from its `tsv_parses`)."""
    metadata = [F.lit(vendor), F.lit(name), F.lit(schema_format), F.lit(version), root_id, root_tstamp]
    metadata += [F.lit("events"), F.lit(f'["events","{name}"]'), F.lit("events")]
    return F.concat_ws("\t", *metadata, *tsv_fields(data, parses, columns))
