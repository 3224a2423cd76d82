"""Typed wide-row entity columns (jobs/iglu/parquet/) against upstream's own cases and outputs.

Type cases are schema-ddl 0.27.0's FieldSpec, SuggestionSpec and MigrationSpec and rdb-loader 6.1.5's
ParquetFieldsProviderSpec, with the expected schema-ddl types written as the Spark types they map to. The parity
tests build every entity column of upstream's wide-row Parquet test (`widerow/parquet-output-schema`) from the Iglu
Central schemas, and compare what Spark writes from `typed_value` with that file's Parquet schema text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
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

from jobs.frames import local_frame
from jobs.iglu.names import column_name
from jobs.iglu.parquet.cast import cast_failed
from jobs.iglu.parquet.columns import TypedColumn, family_columns
from jobs.iglu.parquet.normalize import normal_name
from jobs.iglu.parquet.values import typed_value
from tests.pipeline.helpers import IGLU_CENTRAL

DATA = Path(__file__).resolve().parents[1] / "data"
UPSTREAM = DATA / "upstream" / "widerow"
IGLU = IGLU_CENTRAL / "schemas"

STRING, LONG, INT, DOUBLE, BOOL = StringType(), LongType(), IntegerType(), DoubleType(), BooleanType()


def opt(name: str, data_type: DataType) -> StructField:
    return StructField(name, data_type, True)


def req(name: str, data_type: DataType) -> StructField:
    return StructField(name, data_type, False)


def struct(*fields: StructField) -> StructType:
    return StructType(list(fields))


def obj(properties: dict[str, Any], required: tuple[str, ...] = (), **keywords: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required), **keywords}


def columns(
    kind: str, *schemas: dict[str, Any], present: set[str] | None = None, name: str = "example"
) -> list[TypedColumn]:
    """A com.acme family of model 1, its schemas versions 1-0-0, 1-0-1... (all present unless told)."""
    versioned = [(f"1-0-{i}", schema) for i, schema in enumerate(schemas)]
    return family_columns(kind, "com.acme", name, versioned, {v for v, _ in versioned} if present is None else present)


def only(kind: str, *schemas: dict[str, Any], name: str = "example") -> TypedColumn:
    (column,) = columns(kind, *schemas, name=name)
    return column


# ---------------------------------------------------------------------------------------------------------------------
# schema-ddl FieldSpec: Field.build (unstruct), Field.buildRepeated (contexts), Field.normalize.

LEAN_BASE = obj(
    {
        "stringKey": {"type": "string", "maxLength": 500},
        "objectKey": obj(
            {
                "nestedKey1": {"type": "string"},
                "nestedKey2": {"type": ["integer", "null"]},
                "nestedKey3": {"type": "boolean"},
            }
        ),
    }
)
LEAN_BASE_TYPE = struct(
    opt("object_key", struct(opt("nested_key1", STRING), opt("nested_key2", LONG), opt("nested_key3", BOOL))),
    opt("string_key", STRING),
)

FIELD_CASES = {
    "e1 object with string and object": (
        obj(
            {
                "stringKey": {"type": "string", "maxLength": 500},
                "objectKey": obj(
                    {
                        "nestedKey1": {"type": "string"},
                        "nestedKey2": {"type": ["integer", "null"]},
                        "nestedKey3": {"type": "boolean"},
                    },
                    required=("nestedKey3",),
                ),
            }
        ),
        struct(
            opt("object_key", struct(opt("nested_key1", STRING), opt("nested_key2", LONG), req("nested_key3", BOOL))),
            opt("string_key", STRING),
        ),
    ),
    "e2 numeric properties": (
        obj(
            {
                "numeric1": {"type": "number"},
                "numeric2": {"type": "integer"},
                "numeric3": {"type": ["number", "null"]},
                "numeric4": {"type": ["integer", "null", "number"]},
            },
            required=("numeric4", "numeric2"),
        ),
        struct(opt("numeric1", DOUBLE), req("numeric2", LONG), opt("numeric3", DOUBLE), opt("numeric4", DOUBLE)),
    ),
    "e3 array of objects": (
        {"type": "array", "items": obj({"foo": {"type": "string"}, "bar": {"type": "integer"}})},
        ArrayType(struct(opt("bar", LONG), opt("foo", STRING)), False),
    ),
    "e4 array of nullable objects": (
        {
            "type": "array",
            "items": {**obj({"foo": {"type": "string"}, "bar": {"type": "integer"}}), "type": ["object", "null"]},
        },
        ArrayType(struct(opt("bar", LONG), opt("foo", STRING)), True),
    ),
    "e5 union is JSON": (obj({"union": {"type": ["string", "integer"]}}), struct(opt("union", STRING))),
    "e6 empty object allowing additional properties is JSON": (
        {"type": "object", "properties": {}, "additionalProperties": True},
        STRING,
    ),
    "e7 nullable union stays nullable when required": (
        obj({"union": {"type": ["string", "integer", "null"]}}, required=("union",)),
        struct(opt("union", STRING)),
    ),
    "e8 empty items schema": (
        obj({"imp": {"type": "array", "items": {}}}),
        struct(opt("imp", ArrayType(STRING, True))),
    ),
    "e9 nullable array of booleans": (
        obj({"imp": {"type": ["array", "null"], "items": {"type": "boolean"}}}),
        struct(opt("imp", ArrayType(BOOL, False))),
    ),
    "e11 nested empty closed object dropped": (
        obj(
            {
                "objectKey": obj(
                    {
                        "nestedKey1": {"type": "string"},
                        "shouldBeRemoved": {"type": "object", "additionalProperties": False},
                    }
                )
            }
        ),
        struct(opt("object_key", struct(opt("nested_key1", STRING)))),
    ),
    "e16 normalized names sorted": (
        obj({name: {"type": "string"} for name in ("Apple", "cherry", "banana", "Damson")}),
        struct(*(opt(name, STRING) for name in ("apple", "banana", "cherry", "damson"))),
    ),
    "e17 nested normalized names sorted": (
        obj(
            {
                "nested_arr": {
                    "type": "array",
                    "items": {
                        **obj({n: {"type": "string"} for n in ("Apple", "cherry", "banana", "Damson")}),
                        "type": ["object", "null"],
                    },
                },
                "nested_obj": obj({n: {"type": "string"} for n in ("Apple", "cherry", "banana", "Damson")}),
            }
        ),
        struct(
            opt(
                "nested_arr",
                ArrayType(struct(*(opt(n, STRING) for n in ("apple", "banana", "cherry", "damson"))), True),
            ),
            opt("nested_obj", struct(*(opt(n, STRING) for n in ("apple", "banana", "cherry", "damson")))),
        ),
    ),
}


@pytest.mark.parametrize(("schema", "expected"), FIELD_CASES.values(), ids=FIELD_CASES.keys())
def test_field_build(schema: dict[str, Any], expected: DataType) -> None:
    unstruct, contexts = only("unstruct_event", schema), only("contexts", schema)
    assert unstruct.name == "unstruct_event_com_acme_example_1"
    assert unstruct.data_type == expected
    assert contexts.name == "contexts_com_acme_example_1"
    # buildRepeated(enforceItemPresence = true): entities required unless the schema's type allows null.
    assert contexts.data_type == ArrayType(expected, False)
    assert unstruct.matching_versions == contexts.matching_versions == ("1-0-0",)


def test_json_leaves_are_read_as_variants() -> None:
    """Type.Json is a string column, read from a variant so any JSON value comes out as JSON text."""
    union = only("unstruct_event", obj({"union": {"type": ["string", "integer"]}, "text": {"type": "string"}}))
    assert union.parse_type == struct(opt("text", STRING), opt("union", VariantType()))
    assert only("unstruct_event", {"type": "object", "additionalProperties": True}).parse_type == VariantType()


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {}, "additionalProperties": False},  # e10
        obj({"objectKey": obj({"shouldBeRemoved": {"type": "object", "additionalProperties": False}})}),  # e12
    ],
    ids=["e10 empty closed object", "e12 only field an empty closed object"],
)
def test_schema_typing_to_nothing_has_no_column(schema: dict[str, Any]) -> None:
    assert columns("unstruct_event", schema) == columns("contexts", schema) == []


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        ("", ""),
        ("test1", "test1"),
        ("test1Test2Test3", "test1_test2_test3"),
        ("Test1Test2TEST3", "test1_test2_test3"),
        ("test1,test2.test3;test4", "test1_test2_test3_test4"),
        ("1test1,test2.test3;test4", "_1test1_test2_test3_test4"),
        ("_50test1,test2.test3;test4", "_50test1_test2_test3_test4"),
        ("_.test1,test2.test3;test4", "__test1_test2_test3_test4"),
        (",.;:", "____"),
        ("1test1,Test2Test3Test4.test5;test6", "_1test1_test2_test3_test4_test5_test6"),
        ("HTTPHeader", "http_header"),
        ("osIs64Bit", "os_is64_bit"),
    ],
)
def test_normal_name(name: str, normalized: str) -> None:  # e13, and two from upstream's Parquet file
    assert normal_name(name) == normalized


SHARED_ALLOWED = (
    "allowed: property names that differ once snake_cased and characters other than A-Z, a-z, 0-9 and _ made _"
)


def test_properties_that_would_share_a_field_are_refused() -> None:
    """e14, e15: upstream collapses `_ga` and `_Ga` into one field that keeps one of their values; here such a schema
    cannot be typed (issue 29), also inside array items. A breaking version the batch does not hold has no column,
    so it is not refused."""
    ranged = {"type": "integer", "minimum": 0, "maximum": 10}
    with pytest.raises(ValueError) as ga:
        only("unstruct_event", obj({"_ga": ranged, "__b": ranged, "_Ga": ranged}))
    assert str(ga.value) == (
        "schema 1-0-0 has properties that would share a Parquet field of unstruct_event_com_acme_example_1 (one"
        f" value of each would be lost): $._Ga and $._ga as _ga; {SHARED_ALLOWED}"
    )
    items = {"type": "array", "items": obj({"xyz": ranged, "XYZ": {"type": "string"}, "it's": {}, "it_s": {}})}
    with pytest.raises(ValueError) as xyz:
        columns("contexts", obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}, "list": items}))
    assert str(xyz.value) == (
        "schema 1-0-1 has properties that would share a Parquet field of contexts_com_acme_example_1 (one value of"
        r" each would be lost): $.list[*]['it\'s'] and $.list[*].it_s as list[*].it_s; $.list[*].XYZ and"
        f" $.list[*].xyz as list[*].xyz; {SHARED_ALLOWED}"
    )
    unused = obj({"a": ranged, "A": ranged})  # breaks 1-0-0's string `a`
    text = {"type": "string"}
    (column,) = columns(
        "unstruct_event", obj({"a": text}), unused, obj({"a": text, "b": text}), present={"1-0-0", "1-0-2"}
    )
    assert column.data_type == struct(opt("a", STRING), opt("b", STRING))
    assert column.matching_versions == ("1-0-0", "1-0-2")


# ---------------------------------------------------------------------------------------------------------------------
# schema-ddl SuggestionSpec: one property's type; required, so its nullability is the schema's own
# (ExplicitlyNullable -> nullable, NoExplicitNull -> not).

JSON = "json"  # a string column read from a variant
SUGGESTIONS: dict[str, tuple[dict[str, Any], DataType | str, bool]] = {
    "date": ({"type": "string", "format": "date"}, DateType(), False),
    "nullable date": ({"type": ["string", "null"], "format": "date"}, DateType(), True),
    "timestamp": ({"type": "string", "format": "date-time"}, TimestampType(), False),
    "nullable timestamp": ({"type": ["string", "null"], "format": "date-time"}, TimestampType(), True),
    "uuid format is a string": ({"type": "string", "format": "uuid"}, STRING, False),
    "boolean": ({"type": "boolean"}, BOOL, False),
    "nullable boolean": ({"type": ["boolean", "null"]}, BOOL, True),
    "boolean or string is JSON": ({"type": ["boolean", "string"]}, JSON, False),
    "nullable string": ({"type": ["null", "string"]}, STRING, True),
    "integer in int range": ({"type": "integer", "minimum": 0, "maximum": 10}, INT, False),
    "negative integer in int range": ({"type": "integer", "minimum": -10, "maximum": 0}, INT, False),
    "integer with decimal bounds": ({"type": "integer", "minimum": 0.1, "maximum": 10.1}, INT, False),
    "number with integer multipleOf": ({"type": "number", "minimum": 0, "maximum": 10, "multipleOf": 10}, INT, False),
    "nullable integer in int range": ({"type": ["integer", "null"], "minimum": 0, "maximum": 10}, INT, True),
    "nullable number, integer multipleOf": (
        {"type": ["number", "null"], "minimum": 0, "maximum": 10, "multipleOf": 10},
        INT,
        True,
    ),
    "integer without bounds": ({"type": "integer"}, LONG, False),
    "integer with only min (not a keyword)": ({"type": "integer", "min": 5}, LONG, False),
    "integer above int": ({"type": "integer", "minimum": 0, "maximum": 2147483648}, LONG, False),
    "integer below int": ({"type": "integer", "minimum": -2147483649, "maximum": 0}, LONG, False),
    "integer decimal bounds above int": ({"type": "integer", "minimum": 0.5, "maximum": 2147483648.9}, LONG, False),
    "number above int, integer multipleOf": (
        {"type": ["number", "integer"], "minimum": 0, "maximum": 2147483648, "multipleOf": 10},
        LONG,
        False,
    ),
    "nullable integer": ({"type": ["integer", "null"]}, LONG, True),
    "integer above long": (
        {"type": "integer", "minimum": 0, "maximum": 9223372036854775808},
        DecimalType(38, 0),
        False,
    ),
    "integer below long": (
        {"type": "integer", "minimum": -9223372036854775809, "maximum": 0},
        DecimalType(38, 0),
        False,
    ),
    "number in int range, multipleOf 0.01": (
        {"type": "number", "minimum": 0, "maximum": 500, "multipleOf": 0.01},
        DecimalType(9, 2),
        False,
    ),
    "negative number, multipleOf 0.01": (
        {"type": "number", "minimum": -500, "maximum": 0, "multipleOf": 0.01},
        DecimalType(9, 2),
        False,
    ),
    "number above int, multipleOf 0.01": (
        {"type": "number", "minimum": 0, "maximum": 2147483648, "multipleOf": 0.01},
        DecimalType(18, 2),
        False,
    ),
    "number above long, integer multipleOf": (
        {"type": "number", "minimum": 0, "maximum": 9223372036854775808, "multipleOf": 10},
        DecimalType(38, 0),
        False,
    ),
    "number": ({"type": "number"}, DOUBLE, False),
    "number or integer": ({"type": ["number", "integer"]}, DOUBLE, False),
    "nullable number": ({"type": ["number", "null"]}, DOUBLE, True),
    "number or string is JSON": ({"type": ["number", "string"]}, JSON, False),
    "string enum": ({"enum": ["x", "y", "z"]}, STRING, False),
    "string enum with null": ({"enum": ["x", "y", "z", None]}, STRING, True),
    "integer enum": ({"enum": [1, 2, 3]}, INT, False),
    "integer enum with null": ({"enum": [1, 2, None, 3]}, INT, True),
    "decimal enum": ({"enum": [0.1, 222, 3.3]}, DecimalType(9, 1), False),
    "decimal enum with null": ({"enum": [0.1, None, 222, 3.3]}, DecimalType(9, 1), True),
    "mixed enum is JSON": ({"enum": [0.1, "xyz"]}, JSON, False),
    "mixed enum with null is JSON": ({"enum": [0.1, None, "xyz"]}, JSON, True),
}


@pytest.mark.parametrize(("schema", "expected", "nullable"), SUGGESTIONS.values(), ids=SUGGESTIONS.keys())
def test_suggestion(schema: dict[str, Any], expected: DataType | str, nullable: bool) -> None:
    column = only("unstruct_event", obj({"p": schema}, required=("p",)))
    data_type, parse_type = (STRING, VariantType()) if expected == JSON else (expected, expected)
    assert isinstance(data_type, DataType) and isinstance(parse_type, DataType)
    assert column.data_type == struct(StructField("p", data_type, nullable))
    assert column.parse_type == struct(opt("p", parse_type))


# ---------------------------------------------------------------------------------------------------------------------
# schema-ddl MigrationSpec: versions 1-0-0 and 1-0-1 of a family, both in the batch.


def with_object_key(properties: dict[str, Any]) -> dict[str, Any]:
    return obj({"stringKey": {"type": "string", "maxLength": 500}, "objectKey": obj(properties)})


LEAN_NESTED = {
    "nestedKey1": {"type": "string"},
    "nestedKey2": {"type": ["integer", "null"]},
    "nestedKey3": {"type": "boolean"},
}
ARRAY_V1 = obj(
    {
        "arrayKey": {
            "type": "array",
            "items": obj({"nestedKey1": {"type": "string"}, "nestedKey2": {"type": ["integer", "null"]}}),
        }
    }
)
ARRAY_V2 = obj(
    {
        "arrayKey": {
            "type": "array",
            "items": obj(
                {
                    "nestedKey1": {"type": "string"},
                    "nestedKey2": {"type": ["integer", "null"]},
                    "nestedKey3": {"type": "boolean"},
                }
            ),
        }
    }
)
ARRAY_V2_TYPE = struct(
    opt(
        "array_key",
        ArrayType(struct(opt("nested_key1", STRING), opt("nested_key2", LONG), opt("nested_key3", BOOL)), False),
    )
)
ORDERED_ITEMS = {"nestedKey1": {"type": "integer"}, "nestedKey2": {"type": "integer"}}
ORDERED_OBJECT = {**LEAN_NESTED, "string2Key": {"type": "string", "maxLength": 500}}

MERGES = {
    "e1 same schema": (LEAN_BASE, LEAN_BASE, LEAN_BASE_TYPE),
    "e2 nested addition": (
        LEAN_BASE,
        with_object_key({**LEAN_NESTED, "string2Key": {"type": "string", "maxLength": 500}}),
        struct(
            opt(
                "object_key",
                struct(
                    opt("nested_key1", STRING),
                    opt("nested_key2", LONG),
                    opt("nested_key3", BOOL),
                    opt("string2_key", STRING),
                ),
            ),
            opt("string_key", STRING),
        ),
    ),
    "e4 nested removal kept": (
        LEAN_BASE,
        with_object_key({"nestedKey1": {"type": "string"}, "nestedKey2": {"type": ["integer", "null"]}}),
        LEAN_BASE_TYPE,
    ),
    "e5 top-level addition": (
        LEAN_BASE,
        {**LEAN_BASE, "properties": {**LEAN_BASE["properties"], "stringKey2": {"type": "string", "maxLength": 500}}},
        struct(*LEAN_BASE_TYPE.fields, opt("string_key2", STRING)),
    ),
    "e7 top-level removal kept": (LEAN_BASE, obj({"objectKey": obj(LEAN_NESTED)}), LEAN_BASE_TYPE),
    "e9 addition in array items": (ARRAY_V1, ARRAY_V2, ARRAY_V2_TYPE),
    "e10 removal in array items": (ARRAY_V2, ARRAY_V1, ARRAY_V2_TYPE),
    "e12 nullable made required stays nullable": (
        obj(
            {
                "arrayKey": {
                    "type": "array",
                    "items": obj({"nestedKey1": {"type": "integer"}, "nestedKey2": {"type": "integer"}}),
                }
            }
        ),
        obj(
            {
                "arrayKey": {
                    "type": "array",
                    "items": obj(
                        {"nestedKey1": {"type": "integer"}, "nestedKey2": {"type": "integer"}}, required=("nestedKey2",)
                    ),
                }
            }
        ),
        struct(opt("array_key", ArrayType(struct(opt("nested_key1", LONG), opt("nested_key2", LONG)), False))),
    ),
    "e15 removed required field becomes nullable": (
        obj({"k1": {"type": "string"}}, required=("k1",)),
        obj({"k2": {"type": "string"}}),
        struct(opt("k1", STRING), opt("k2", STRING)),
    ),
    "e16 added required field is nullable": (
        obj({"k1": {"type": "string"}}),
        obj({"k2": {"type": "string"}}, required=("k2",)),
        struct(opt("k1", STRING), opt("k2", STRING)),
    ),
    "e17 additions appended, not sorted": (
        obj({key: {"type": "string"} for key in ("vvv", "xxx", "zzz")}),
        obj(
            {key: {"type": "string"} for key in ("vvv", "www", "xxx", "yyy", "zzz")},
            required=("vvv", "www", "xxx", "yyy", "zzz"),
        ),
        struct(*(opt(key, STRING) for key in ("vvv", "xxx", "zzz", "www", "yyy"))),
    ),
    "e18 nested additions appended": (
        obj(
            {
                "arrayKey": {"type": "array", "items": obj(ORDERED_ITEMS, required=("nestedKey2",))},
                "objectKey": obj(ORDERED_OBJECT),
            }
        ),
        obj(
            {
                "arrayKey": {
                    "type": "array",
                    "items": obj({**ORDERED_ITEMS, "nestedKey0": {"type": "integer"}}, required=("nestedKey2",)),
                },
                "objectKey": obj({**ORDERED_OBJECT, "nestedKey0": {"type": "integer"}}),
            }
        ),
        struct(
            opt(
                "array_key",
                ArrayType(struct(opt("nested_key1", LONG), req("nested_key2", LONG), opt("nested_key0", LONG)), False),
            ),
            opt(
                "object_key",
                struct(
                    opt("nested_key1", STRING),
                    opt("nested_key2", LONG),
                    opt("nested_key3", BOOL),
                    opt("string2_key", STRING),
                    opt("nested_key0", LONG),
                ),
            ),
        ),
    ),
}


@pytest.mark.parametrize(("first", "second", "expected"), MERGES.values(), ids=MERGES.keys())
def test_compatible_versions_merge(first: dict[str, Any], second: dict[str, Any], expected: StructType) -> None:
    (column,) = columns("unstruct_event", first, second)
    assert column.data_type == expected
    assert column.matching_versions == ("1-0-0", "1-0-1")


def test_colliding_names_across_versions_read_both_keys() -> None:
    """e14: `collidingKey` (1-0-0) and `colliding_key` (1-0-1) are one field that reads both."""
    (column,) = columns(
        "unstruct_event", obj({"collidingKey": {"type": "string"}}), obj({"colliding_key": {"type": "string"}})
    )
    assert column.data_type == struct(opt("colliding_key", STRING))
    assert column.parse_type == struct(opt("collidingKey", STRING), opt("colliding_key", STRING))


BREAKING = {
    "e3 nested type change": with_object_key({**LEAN_NESTED, "nestedKey1": {"type": "integer"}}),
    "e6 top-level type change": {
        **LEAN_BASE,
        "properties": {**LEAN_BASE["properties"], "stringKey": {"type": "integer"}},
    },
}


@pytest.mark.parametrize("breaking", BREAKING.values(), ids=BREAKING.keys())
def test_breaking_change_recovered_only_when_present(breaking: dict[str, Any]) -> None:
    base, recovered = columns("unstruct_event", LEAN_BASE, breaking)
    assert (base.name, base.data_type, base.matching_versions) == (
        "unstruct_event_com_acme_example_1",
        LEAN_BASE_TYPE,
        ("1-0-0",),
    )
    assert re.fullmatch(r"unstruct_event_com_acme_example_1_recovered_1_0_1_[0-9]+", recovered.name)
    assert recovered.data_type == only("unstruct_event", breaking).data_type
    assert recovered.matching_versions == ("1-0-1",)
    # Only 1-0-0 in the batch: 1-0-1 is newer than the batch's newest, so left out.
    assert columns("unstruct_event", LEAN_BASE, breaking, present={"1-0-0"}) == [base]
    # Only 1-0-1 in the batch: the base column still comes first, as upstream.
    assert columns("unstruct_event", LEAN_BASE, breaking, present={"1-0-1"}) == [base, recovered]


def test_array_element_type_change_is_breaking() -> None:
    """e8: array items from a nullable integer to a string."""
    first = obj({"arrayKey": {"type": "array", "items": {"type": ["integer", "null"]}}})
    second = obj({"arrayKey": {"type": "array", "items": {"type": ["string"]}}})
    base, recovered = columns("contexts", first, second)
    assert base.data_type == ArrayType(struct(opt("array_key", ArrayType(LONG, True))), False)
    assert recovered.data_type == ArrayType(struct(opt("array_key", ArrayType(STRING, False))), False)


# ---------------------------------------------------------------------------------------------------------------------
# rdb-loader ParquetFieldsProviderSpec, with its test resources' schemas (com.snowplowanalytics.snowplow/...).

TEST_SCHEMA_100 = obj(
    {
        "a_field": obj({"b_field": {"type": "string"}, "c_field": obj({"d_field": {"type": "string"}})}),
        "b_field": {"type": "integer"},
        "d_field": {"type": "number"},
        "e_field": {"type": ["integer", "boolean"]},
        "g_field": {"type": ["string", "null"]},
        "h_field": {"type": "string", "format": "date-time"},
        "i_field": {"type": "array", "items": obj({"c_field": {"type": "integer"}, "d_field": {"type": "string"}})},
    },
    required=("a_field", "b_field"),
    additionalProperties=False,
)
TEST_SCHEMA_101 = {
    **TEST_SCHEMA_100,
    "properties": {
        **TEST_SCHEMA_100["properties"],
        "a_field": obj(
            {
                "b_field": {"type": "string"},
                "c_field": obj({"d_field": {"type": "string"}, "e_field": {"type": "string"}}),
            }
        ),
        "c_field": {"type": "boolean"},
    },
}
TEST_SCHEMA_110 = {
    **TEST_SCHEMA_101,
    "properties": {
        **TEST_SCHEMA_101["properties"],
        "a_field": obj(
            {
                "b_field": {"type": "string"},
                "c_field": obj({"d_field": {"type": "string"}, "e_field": {"type": "string"}}),
                "d_field": {"type": "string"},
            }
        ),
        "f_field": {"type": ["integer", "string"]},
    },
    "additionalProperties": True,
}
SCHEMA_110_TYPE = struct(
    req(
        "a_field",
        struct(
            opt("b_field", STRING),
            opt("c_field", struct(opt("d_field", STRING), opt("e_field", STRING))),
            opt("d_field", STRING),
        ),
    ),
    req("b_field", LONG),
    opt("d_field", DOUBLE),
    opt("e_field", STRING),
    opt("g_field", STRING),
    opt("h_field", TimestampType()),
    opt("i_field", ArrayType(struct(opt("c_field", LONG), opt("d_field", STRING)), False)),
    opt("c_field", BOOL),
    opt("f_field", STRING),
)
SNOWPLOW = "com.snowplowanalytics.snowplow"


def test_test_schema_revisions_merge_into_one_column() -> None:
    schemas = [("1-0-0", TEST_SCHEMA_100), ("1-0-1", TEST_SCHEMA_101), ("1-1-0", TEST_SCHEMA_110)]
    for present in ({"1-1-0"}, {"1-0-1", "1-1-0"}, {"1-0-0", "1-0-1", "1-1-0"}, {"1-0-0", "1-1-0"}):
        (context,) = family_columns("contexts", SNOWPLOW, "test_schema", schemas, present)
        assert context.name == "contexts_com_snowplowanalytics_snowplow_test_schema_1"
        assert context.data_type == ArrayType(SCHEMA_110_TYPE, False)
        (unstruct,) = family_columns("unstruct_event", SNOWPLOW, "test_schema", schemas, present)
        assert unstruct.data_type == SCHEMA_110_TYPE
    schema_200 = obj(
        {"a_field": {"type": "string"}, "e_field": {"type": "string"}, "f_field": {"type": "integer"}},
        required=("a_field", "e_field", "f_field"),
    )
    (model_2,) = family_columns("contexts", SNOWPLOW, "test_schema", [("2-0-0", schema_200)], {"2-0-0"})
    assert model_2.name == "contexts_com_snowplowanalytics_snowplow_test_schema_2"
    assert model_2.data_type == ArrayType(
        struct(req("a_field", STRING), req("e_field", STRING), req("f_field", LONG)), False
    )


def test_digit_leading_key_gets_an_underscore() -> None:
    schema = obj({"1field": {"type": "string"}}, required=("1field",))
    (context,) = family_columns("contexts", SNOWPLOW, "digit_schema", [("1-0-0", schema)], {"1-0-0"})
    assert context.data_type == ArrayType(struct(req("_1field", STRING)), False)
    assert context.parse_type == ArrayType(struct(opt("1field", STRING)), True)


BROKEN = [("1-0-0", obj({"b_field": {"type": "integer"}})), ("1-0-1", obj({"b_field": {"type": "string"}}))]
BROKEN += [("1-1-0", obj({"a_field": {"type": "integer"}})), ("1-1-1", obj({"a_field": {"type": "string"}}))]
BROKEN_COLUMN = "contexts_com_snowplowanalytics_snowplow_test_schema_broken_1"


def test_broken_migrations_get_upstreams_recovered_columns() -> None:
    """The recovered columns' names are upstream's, hash included (Scala's hashCode of the version's field)."""
    base, recovered_101, recovered_111 = family_columns(
        "contexts", SNOWPLOW, "test_schema_broken", BROKEN, {"1-0-0", "1-0-1", "1-1-0", "1-1-1"}
    )
    assert (base.name, base.matching_versions) == (BROKEN_COLUMN, ("1-0-0", "1-1-0"))
    assert base.data_type == ArrayType(struct(opt("b_field", LONG), opt("a_field", LONG)), False)
    assert (recovered_101.name, recovered_101.matching_versions) == (
        f"{BROKEN_COLUMN}_recovered_1_0_1_1837344102",
        ("1-0-1",),
    )
    assert recovered_101.data_type == ArrayType(struct(opt("b_field", STRING)), False)
    assert (recovered_111.name, recovered_111.matching_versions) == (
        f"{BROKEN_COLUMN}_recovered_1_1_1_737559706",
        ("1-1-1",),
    )
    assert recovered_111.data_type == ArrayType(struct(opt("a_field", STRING)), False)


def test_broken_migrations_not_in_the_batch_make_no_column() -> None:
    (only_100,) = family_columns("contexts", SNOWPLOW, "test_schema_broken", BROKEN, {"1-0-0"})
    assert (only_100.matching_versions, only_100.data_type) == (
        ("1-0-0",),
        ArrayType(struct(opt("b_field", LONG)), False),
    )
    (only_110,) = family_columns("contexts", SNOWPLOW, "test_schema_broken", BROKEN, {"1-1-0"})
    assert only_110.matching_versions == ("1-0-0", "1-1-0")
    assert only_110.data_type == ArrayType(struct(opt("b_field", LONG), opt("a_field", LONG)), False)


def test_alternatives_fold_into_one_type() -> None:
    """Mutate.forStorage: oneOf alternatives widened into one object (a union of types is JSON, a common
    format is kept, a key required by one alternative only is optional)."""
    schema = {
        "type": "object",
        "properties": {"kind": {"type": "string"}},
        "required": ["kind"],
        "oneOf": [
            {"properties": {"a": {"type": "integer"}, "when": {"type": "string", "format": "date"}}, "required": ["a"]},
            {"properties": {"b": {"type": "string"}, "when": {"type": "string", "format": "date"}}},
        ],
    }
    column = only("unstruct_event", schema)
    assert column.data_type == struct(opt("a", LONG), opt("b", STRING), req("kind", STRING), opt("when", DateType()))


@pytest.mark.parametrize(
    "schema",
    [{"type": "any"}, {"type": "object", "properties": {}, "required": True}, {"type": "object", "properties": []}],
    ids=["unknown type", "draft-03 required", "properties not an object"],
)
def test_invalid_schema_is_an_error(schema: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="JSON Schema"):
        columns("contexts", schema)


# ---------------------------------------------------------------------------------------------------------------------
# Upstream parity: every entity column of upstream's wide-row Parquet test, from the Iglu Central schemas.

_PRIMITIVE = re.compile(
    r"(required|optional) (binary|int32|int64|double|boolean|fixed_len_byte_array\(\d+\)) (\w+)(?: \((\w+)(?:\((\d+),(\d+)\))?\))?;"
)
_GROUP = re.compile(r"(required|optional) group (\w+)( \(LIST\))? \{")


def _parquet_primitive(physical: str, annotation: str | None, precision: str | None, scale: str | None) -> DataType:
    if annotation == "DECIMAL":
        return DecimalType(int(precision or 0), int(scale or 0))
    return {
        ("binary", "UTF8"): STRING, ("int64", None): LONG, ("int32", None): INT, ("double", None): DOUBLE,
        ("boolean", None): BOOL, ("int64", "TIMESTAMP_MICROS"): TimestampType(), ("int32", "DATE"): DateType(),
    }[physical, annotation]  # fmt: skip


def _parquet_fields(lines: Iterator[str]) -> list[StructField]:
    """The fields of a Parquet group, up to its closing brace: `optional` -> nullable; a LIST group
    (`repeated group list { <element> }`) -> an array whose element's repetition is `containsNull`."""
    fields: list[StructField] = []
    for line in map(str.strip, lines):
        if line == "}":
            return fields
        if primitive := _PRIMITIVE.fullmatch(line):
            repetition, physical, name, annotation, precision, scale = primitive.groups()
            fields.append(
                StructField(name, _parquet_primitive(physical, annotation, precision, scale), repetition == "optional")
            )
        elif group := _GROUP.fullmatch(line):
            repetition, name, is_list = group.groups()
            if is_list:
                assert next(lines).strip() == "repeated group list {"
                (element,) = _parquet_fields(lines)
                assert next(lines).strip() == "}"
                data_type: DataType = ArrayType(element.dataType, element.nullable)
            else:
                data_type = StructType(_parquet_fields(lines))
            fields.append(StructField(name, data_type, repetition == "optional"))
        else:
            raise AssertionError(f"unexpected Parquet schema line {line!r}")
    raise AssertionError("unclosed Parquet group")


def parquet_schema(text: str) -> StructType:
    lines = iter(text.splitlines())
    assert next(lines) == "message spark_schema {"
    return StructType(_parquet_fields(lines))


def test_parquet_schema_parser() -> None:
    parsed = parquet_schema(
        "message spark_schema {\n  required int64 a (TIMESTAMP_MICROS);\n  optional int64 m (DECIMAL(18,2));\n"
        "  optional group l (LIST) {\n    repeated group list {\n      optional group element {\n"
        "        required binary s (UTF8);\n      }\n    }\n  }\n}"
    )
    assert parsed == struct(
        req("a", TimestampType()), opt("m", DecimalType(18, 2)), opt("l", ArrayType(struct(req("s", STRING)), True))
    )


def upstream_entity_types() -> dict[str, StructField]:
    schema = parquet_schema((UPSTREAM / "parquet-output-schema").read_text())
    return {field.name: field for field in schema.fields if field.name.startswith(("contexts_", "unstruct_event_"))}


def iglu_schemas(vendor: str, name: str) -> list[tuple[str, dict[str, Any]]]:
    folder = IGLU / vendor / name / "jsonschema"
    return [(path.name, json.loads(path.read_text())) for path in sorted(folder.iterdir())]


def upstream_families() -> dict[str, tuple[str, str, str, set[str]]]:
    """Expected entity column -> (kind, vendor, name, versions the input holds) for upstream's test input."""
    present: dict[tuple[str, str], set[str]] = {}
    for found in re.finditer(
        r"iglu:([\w.-]+)/([\w.-]+)/jsonschema/([0-9]+-[0-9]+-[0-9]+)", (UPSTREAM / "input-events").read_text()
    ):
        vendor, name, version = found.groups()
        if (vendor, name) != (SNOWPLOW, "contexts") and (vendor, name) != (SNOWPLOW, "unstruct_event"):
            present.setdefault((vendor, name), set()).add(version)
    # Upstream's batch transformer adds a duplicate context to the events it deduplicates in the batch (synthetic
    # duplicates): that family is in its output but not in its input.
    present[SNOWPLOW, "duplicate"] = {"1-0-0"}
    families = {}
    for (vendor, name), versions in present.items():
        for kind in ("contexts", "unstruct_event"):
            families[column_name(kind, vendor, name, "1")] = (kind, vendor, name, versions)
    return families


def upstream_columns() -> list[TypedColumn]:
    built = []
    families = upstream_families()
    for column in upstream_entity_types():
        kind, vendor, name, versions = families[column]
        newest = max(versions, key=lambda v: tuple(map(int, v.split("-"))))
        schemas = [
            (v, s)
            for v, s in iglu_schemas(vendor, name)
            if tuple(map(int, v.split("-"))) <= tuple(map(int, newest.split("-")))
        ]
        (typed,) = family_columns(kind, vendor, name, schemas, versions)
        built.append(typed)
    return built


def test_upstream_entity_columns_are_typed_as_upstreams() -> None:
    expected = upstream_entity_types()
    assert len(expected) == 22
    built = upstream_columns()
    assert [column.name for column in built] == list(expected)
    for column in built:
        assert expected[column.name].nullable
        assert column.data_type == expected[column.name].dataType, column.name
    merged = {column.name: column.matching_versions for column in built if len(column.matching_versions) > 1}
    assert merged == {
        "contexts_com_snowplowanalytics_snowplow_client_session_1": ("1-0-0", "1-0-1"),
        "unstruct_event_com_snowplowanalytics_snowplow_link_click_1": ("1-0-0", "1-0-1"),
    }


def test_newer_schemas_than_the_batchs_are_left_out() -> None:
    """client_session 1-0-2 exists, but the batch's newest is 1-0-1: 1-0-2 is not merged (nor its keys added)."""
    schemas = iglu_schemas(SNOWPLOW, "client_session")
    assert [version for version, _ in schemas] == ["1-0-0", "1-0-1", "1-0-2"]
    (up_to_101,) = family_columns("contexts", SNOWPLOW, "client_session", schemas, {"1-0-1"})
    assert up_to_101.matching_versions == ("1-0-0", "1-0-1")
    assert up_to_101.data_type == upstream_entity_types()[up_to_101.name].dataType
    (up_to_102,) = family_columns("contexts", SNOWPLOW, "client_session", schemas, {"1-0-1", "1-0-2"})
    assert up_to_102.matching_versions == ("1-0-0", "1-0-1", "1-0-2")
    assert len(up_to_102.data_type.elementType.fields) > len(up_to_101.data_type.elementType.fields)  # type: ignore[attr-defined]


def _parquet_footer(spark: SparkSession, folder: Path) -> str:
    """The Parquet schema of the file Spark wrote in `folder`, read as upstream's test reads it (parquet-mr)."""
    (path,) = folder.glob("*.parquet")
    jvm: Any = spark.sparkContext._jvm
    hadoop_file = jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(
        jvm.org.apache.hadoop.fs.Path(str(path)), spark.sparkContext._jsc.hadoopConfiguration()
    )
    reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(hadoop_file)
    try:
        return str(reader.getFooter().getFileMetaData().getSchema().toString())
    finally:
        reader.close()


def _groups(text: str) -> dict[str, str]:
    """Top-level groups of a Parquet schema text by name, as their lines."""
    blocks: dict[str, str] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if group := re.fullmatch(r"  (?:required|optional) group (\w+).* \{", line):
            end = lines.index("  }", i)
            blocks[group.group(1)] = "\n".join(lines[i : end + 1])
    return blocks


def test_typed_values_write_upstreams_parquet_schema(spark: SparkSession, tmp_path: Path) -> None:
    """What Spark writes from `typed_value` is upstream's Parquet schema, `required` marks included (parquet-mr now
    prints the UTF8 annotation as STRING)."""
    built = upstream_columns()
    nothing = {"contexts": F.lit(None).cast("array<string>"), "unstruct_event": F.lit(None).cast("string")}
    frame = spark.range(1).select(*(typed_value(nothing[c.kind], c).alias(c.name) for c in built))
    frame.coalesce(1).write.parquet(str(tmp_path / "widerow"))
    written = _groups(_parquet_footer(spark, tmp_path / "widerow").replace("(STRING)", "(UTF8)"))
    expected = _groups((UPSTREAM / "parquet-output-schema").read_text())
    assert list(written) == [c.name for c in built]
    for name, block in written.items():
        assert block == expected[name]


# ---------------------------------------------------------------------------------------------------------------------
# Per row: typed_value and cast_failed on Spark.

CLIENT_SESSION = [
    '{"userId":"82e13103-ba2c-402d-91cd-0b0d824b68a2","sessionId":"ee980f7c-ac20-4105-b04d-e039fcd19984",'
    '"sessionIndex":1435691817,"previousSessionId":"7e08dbe5-8844-4ca1-8e90-1b66f2164d62","storageMechanism":"COOKIE_1"}',
    '{"userId":"u2","sessionId":"s2","sessionIndex":2,"previousSessionId":null,"storageMechanism":"SQLITE","firstEventId":"f2"}',
]
LINK_CLICK = '{"targetUrl":"https://ygiygfk.co.uk/p"}'
LINK_CLICK_FULL = '{"targetUrl":"http://x.com/","elementClasses":["a","b"],"elementContent":"Go","elementId":"l1"}'
CHANGE_FORM = (
    '{"formId":"f1","elementId":"e1","nodeName":"INPUT","type":"text","value":null,"elementClasses":["c1","c2"]}'
)


def snowplow_column(kind: str, name: str, present: set[str]) -> TypedColumn:
    (column,) = family_columns(kind, SNOWPLOW, name, iglu_schemas(SNOWPLOW, name), present)
    return column


def typed_rows(spark: SparkSession, rows: list[tuple[Any, ...]], ddl: str, typed: dict[str, TypedColumn]) -> DataFrame:
    """`rows` of entity data (columns named as `typed`'s keys) with each one's typed value and cast_failed."""
    frame = local_frame(spark, rows, ddl)
    return frame.select(
        *(typed_value(F.col(source), column).alias(column.name) for source, column in typed.items()),
        *(cast_failed(F.col(source), column).alias(f"{source}_failed") for source, column in typed.items()),
    )


def test_upstream_entities_round_trip(spark: SparkSession) -> None:
    typed = {
        "session": snowplow_column("contexts", "client_session", {"1-0-1"}),
        "click": snowplow_column("unstruct_event", "link_click", {"1-0-1"}),
        "form": snowplow_column("contexts", "change_form", {"1-0-0"}),
    }
    frame = typed_rows(
        spark,
        [(CLIENT_SESSION, LINK_CLICK, [CHANGE_FORM]), ([CLIENT_SESSION[1]], LINK_CLICK_FULL, None), (None, None, [])],
        "session array<string>, click string, form array<string>",
        typed,
    )
    assert [(f.name, f.dataType) for f in frame.schema.fields[:3]] == [(c.name, c.data_type) for c in typed.values()]
    rows = frame.selectExpr(
        "contexts_com_snowplowanalytics_snowplow_client_session_1[0].session_id",
        "contexts_com_snowplowanalytics_snowplow_client_session_1[0].session_index",
        "contexts_com_snowplowanalytics_snowplow_client_session_1[0].previous_session_id",
        # try_element_at: ANSI mode makes an out-of-bounds subscript an error.
        "try_element_at(contexts_com_snowplowanalytics_snowplow_client_session_1, 2).user_id",
        "try_element_at(contexts_com_snowplowanalytics_snowplow_client_session_1, 2).previous_session_id",
        "try_element_at(contexts_com_snowplowanalytics_snowplow_client_session_1, 2).first_event_id",
        "size(contexts_com_snowplowanalytics_snowplow_client_session_1)",
        "unstruct_event_com_snowplowanalytics_snowplow_link_click_1.target_url",
        "unstruct_event_com_snowplowanalytics_snowplow_link_click_1.element_classes",
        "unstruct_event_com_snowplowanalytics_snowplow_link_click_1.element_content",
        "unstruct_event_com_snowplowanalytics_snowplow_link_click_1.element_id",
        "contexts_com_snowplowanalytics_snowplow_change_form_1[0].element_classes",
        "contexts_com_snowplowanalytics_snowplow_change_form_1[0].node_name",
        "contexts_com_snowplowanalytics_snowplow_change_form_1[0].value",
        "contexts_com_snowplowanalytics_snowplow_change_form_1 IS NULL",
        "session_failed",
        "click_failed",
        "form_failed",
    ).collect()
    assert [tuple(row) for row in rows] == [
        (
            "ee980f7c-ac20-4105-b04d-e039fcd19984", 1435691817, "7e08dbe5-8844-4ca1-8e90-1b66f2164d62", "u2", None, "f2", 2,
            "https://ygiygfk.co.uk/p", None, None, None, ["c1", "c2"], "INPUT", None, False, False, False, False,
        ),
        ("s2", 2, None, None, None, None, 1, "http://x.com/", ["a", "b"], "Go", "l1", None, None, None, True, False, False, False),
        # No data, and no context (an empty array), are null as upstream writes them.
        (None, None, None, None, None, None, None, None, None, None, None, None, None, None, True, False, False, False),
    ]  # fmt: skip


KITCHEN = obj(
    {
        "when": {"type": "string", "format": "date-time"},
        "day": {"type": ["string", "null"], "format": "date"},
        "price": {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 10000},
        "count": {"type": "integer", "minimum": 0, "maximum": 100},
        "big": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "anything": {"type": ["string", "integer"]},
        "free": {"type": "object"},
        "tags": {"type": "array", "items": {}},
        "pairs": {
            "type": "array",
            "items": obj({"k": {"type": "string"}, "v": {"type": ["integer", "null"]}}, required=("k",)),
        },
        "xyz": {"type": "string"},
    },
    required=("when", "count"),
)
KITCHEN_TYPE = struct(
    opt("anything", STRING),
    opt("big", LONG),
    req("count", INT),
    opt("day", DateType()),
    opt("flag", BOOL),
    opt("free", STRING),
    opt("pairs", ArrayType(struct(req("k", STRING), opt("v", LONG)), False)),
    opt("price", DecimalType(9, 2)),
    opt("ratio", DOUBLE),
    opt("tags", ArrayType(STRING, True)),
    req("when", TimestampType()),
    opt("xyz", STRING),
)
KITCHEN_FULL = (
    '{"when":"2021-03-04T05:06:07.123456+01:00","day":"2021-03-04","price":12.3,"count":7,"big":9007199254740993,'
    '"ratio":0.5,"flag":true,"anything":"abc","free":{"b":1,"a":[true,null]},"tags":["x",1,null,{"k":2}],'
    '"pairs":[{"k":"a","v":1},{"k":"b"}],"xyz":"upper"}'
)
KITCHEN_SHORT = '{"when":"2021-03-04T05:06:07Z","count":0,"anything":42,"day":null,"xyz":"lower","extra":[1]}'


def test_types_and_json_leaves_round_trip(spark: SparkSession) -> None:
    """Timestamps with an offset to UTC micros, dates, decimals at the scale, longs past doubles' precision, JSON
    leaves as compact JSON text (object keys sorted by the variant; JSON null in a nullable array is null)."""
    column = only("unstruct_event", KITCHEN)
    assert column.data_type == KITCHEN_TYPE
    frame = typed_rows(
        spark,
        [(KITCHEN_FULL,), (KITCHEN_SHORT,), ('{"when":"2021-03-04T05:06:07Z"}',), (None,)],
        "e string",
        {"e": column},
    )
    assert frame.schema[column.name].dataType == KITCHEN_TYPE
    rows = frame.selectExpr(
        *(
            f"CAST(unstruct_event_com_acme_example_1.{field} AS STRING)"
            for field in ("when", "day", "price", "count", "big", "ratio", "flag")
        ),
        *(f"unstruct_event_com_acme_example_1.{field}" for field in ("anything", "free", "tags", "pairs", "xyz")),
        "e_failed",
    ).collect()
    assert [tuple(row) for row in rows] == [
        (
            "2021-03-04 04:06:07.123456", "2021-03-04", "12.30", "7", "9007199254740993", "0.5", "true",
            '"abc"', '{"a":[true,null],"b":1}', ['"x"', "1", None, '{"k":2}'], [("a", 1), ("b", None)], "upper", False,
        ),
        ("2021-03-04 05:06:07", None, None, "0", None, None, None, "42", None, None, None, "lower", False),
        # A required field missing: upstream's bad row; here the whole value is null, and cast_failed true.
        (None, None, None, None, None, None, None, None, None, None, None, None, True),
        (None, None, None, None, None, None, None, None, None, None, None, None, False),
    ]  # fmt: skip


def test_entities_of_other_json_types(spark: SparkSession) -> None:
    """Entities that are not objects: read through a wrapping object. A JSON null in a required array of JSON is
    the text `null`, as upstream writes it."""
    numbers = only("unstruct_event", {"type": "array", "items": {"type": "integer"}}, name="numbers")
    text = only("unstruct_event", {"type": "string"}, name="text")
    anything = only("contexts", {"type": ["string", "object"]}, name="anything")
    assert (numbers.data_type, text.data_type, anything.data_type) == (
        ArrayType(LONG, False),
        STRING,
        ArrayType(STRING, False),
    )
    frame = typed_rows(
        spark,
        [("[1,2]", '"abc"', ['{"b":1,"a":"x"}', '"s"', "null"]), ('[1,"x"]', "5", None)],
        "n string, t string, a array<string>",
        {"n": numbers, "t": text, "a": anything},
    )
    rows = frame.select(numbers.name, text.name, anything.name, "n_failed", "t_failed", "a_failed").collect()
    assert [tuple(row) for row in rows] == [
        ([1, 2], "abc", ['{"a":"x","b":1}', '"s"', "null"], False, False, False),
        (None, "5", None, True, True, False),  # Spark reads the number 5 as the string "5": cast_failed tells
    ]


def test_colliding_keys_are_read_from_either(spark: SparkSession) -> None:
    (column,) = columns(
        "contexts", obj({"collidingKey": {"type": "string"}}), obj({"colliding_key": {"type": "string"}})
    )
    frame = typed_rows(
        spark, [(['{"collidingKey":"a"}', '{"colliding_key":"b"}', "{}"],)], "c array<string>", {"c": column}
    )
    assert frame.select(f"{column.name}.colliding_key", "c_failed").collect()[0] == (["a", "b", None], False)


def test_keys_differing_in_case_across_versions_are_read_from_either(spark: SparkSession) -> None:
    """`XYZ` (1-0-0) and `xyz` (1-0-1): one field, reached by position (Spark matches struct fields ignoring case)."""
    column = only("unstruct_event", obj({"XYZ": {"type": "string"}}), obj({"xyz": {"type": "string"}}))
    assert column.parse_type == struct(opt("XYZ", STRING), opt("xyz", STRING))
    rows = [('{"XYZ":"upper"}',), ('{"xyz":"lower"}',), ('{"XYZ":5}',), ("{}",)]
    frame = typed_rows(spark, rows, "e string", {"e": column})
    assert [tuple(row) for row in frame.select(f"{column.name}.xyz", "e_failed").collect()] == [
        ("upper", False),
        ("lower", False),
        ("5", True),  # Spark reads the number 5 as the string "5": cast_failed tells
        (None, False),
    ]


def kitchen(**changes: Any) -> str:
    document = json.loads(KITCHEN_FULL)
    document.update(changes)
    return json.dumps(document)


def without(key: str) -> str:
    document = json.loads(KITCHEN_FULL)
    del document[key]
    return json.dumps(document)


CAST_CASES = {
    "fits": (KITCHEN_FULL, False),
    "fits, optional keys missing, unknown key": (KITCHEN_SHORT, False),
    "JSON null data (the unstruct event is nullable)": ("null", False),
    "null in a nullable array of JSON": (kitchen(tags=[None]), False),
    "JSON leaf of any type": (kitchen(free="text", anything=None), False),
    "timestamp without offset": (kitchen(when="2021-03-04T05:06:07"), True),
    "timestamp with a space": (kitchen(when="2021-03-04 05:06:07Z"), True),
    "timestamp a number": (kitchen(when=1614834367), True),
    "date not ISO": (kitchen(day="2021-3-4"), True),
    "date not in the calendar": (kitchen(day="2021-02-30"), True),
    "decimal beyond the scale": (kitchen(price=1.234), True),
    "decimal as a string": (kitchen(price="1.23"), True),
    "int out of range": (kitchen(count=2147483648), True),
    "int as a string": (kitchen(count="7"), True),
    "int written 1.0 (upstream reads it; refused here)": (
        '{"when":"2021-03-04T05:06:07Z","count":1.0}',
        True,
    ),
    "long out of range": (kitchen(big=9223372036854775808), True),
    "double as the string NaN": (kitchen(ratio="NaN"), True),
    "boolean as a string": (kitchen(flag="true"), True),
    "string as a number": (kitchen(xyz=5), True),
    "required field missing": (without("count"), True),
    "required field null": (kitchen(when=None), True),
    "required field in array items missing": (kitchen(pairs=[{"v": 1}]), True),
    "null in a required array of objects": (kitchen(pairs=[None]), True),
    "object expected": (kitchen(pairs=[["k"]]), True),
    "array expected": (kitchen(pairs={"k": "a"}), True),
    "not JSON": ('{"when":', True),
    "not an object": ("[1]", True),
}


def test_cast_failed(spark: SparkSession) -> None:
    column = only("unstruct_event", KITCHEN)
    texts = [text for text, _ in CAST_CASES.values()]
    frame = local_frame(spark, [(i, text) for i, text in enumerate(texts)], "i int, e string")
    failed: dict[int, bool] = dict(frame.select("i", cast_failed(F.col("e"), column)).collect())
    assert {case: failed[i] for i, case in enumerate(CAST_CASES)} == {
        case: bad for case, (_, bad) in CAST_CASES.items()
    }


def test_cast_failed_on_contexts(spark: SparkSession) -> None:
    """Any entity that does not fit makes the column's value fail; no data does not."""
    column = only("contexts", KITCHEN)
    data = [[KITCHEN_FULL, KITCHEN_SHORT], [KITCHEN_FULL, without("count")], ["[1]"], [], None]
    frame = local_frame(spark, [(i, value) for i, value in enumerate(data)], "i int, c array<string>")
    rows = frame.select("i", cast_failed(F.col("c"), column), F.size(typed_value(F.col("c"), column)))
    assert [tuple(row) for row in rows.orderBy("i").collect()] == [
        (0, False, 2),
        (1, True, None),
        (2, True, None),
        (3, False, None),
        (4, False, None),
    ]
