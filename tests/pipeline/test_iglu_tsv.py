"""TSV columns from JSON Schemas, against schema-ddl's own tests (0.27.0: redshift/ShredModelSpec,
redshift/internal/FlatSchemaSpec), and their values rendered by Spark as `ShredModelEntry.stringFactory` does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.frames import local_frame
from jobs.iglu.names import snake_case
from jobs.iglu.tsv import TsvColumn, UnusableSchemaError, tsv_columns, tsv_fields, tsv_parses

# ShredModelSpec's `dummyModel`.
DUMMY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "foo": {"type": "string", "maxLength": 20},
        "bar": {"type": "integer", "maximum": 4000},
        "a_field": {
            "type": "object",
            "properties": {
                "b_field": {"type": "string"},
                "c_field": {
                    "type": "object",
                    "properties": {"d_field": {"type": "string"}, "e_field": {"type": "string"}},
                },
                "d_field": {"type": "string"},
            },
            "required": ["d_field"],
        },
        "b_field": {"type": "integer"},
        "c_field": {"type": "integer"},
        "d_field": {"type": "object", "properties": {"e_field": {"type": "string"}, "f_field": {"type": "string"}}},
        "e_field": {
            "type": "object",
            "properties": {"f_field": {"type": "string"}, "g_field": {"type": "string"}},
            "required": ["g_field"],
        },
        "f_field": {"type": "string"},
        "g_field": {"type": "string"},
    },
    "required": ["a_field", "e_field"],
}


def names(schema: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(column.name, column.nullable) for column in tsv_columns(schema)]


def test_columns_in_schema_ddl_order_required_first_then_by_name() -> None:
    assert names(DUMMY) == [
        ("a_field.d_field", False),
        ("e_field.g_field", False),
        ("a_field.b_field", True),
        ("a_field.c_field.d_field", True),
        ("a_field.c_field.e_field", True),
        ("b_field", True),
        ("bar", True),
        ("c_field", True),
        ("d_field.e_field", True),
        ("d_field.f_field", True),
        ("e_field.f_field", True),
        ("f_field", True),
        ("foo", True),
        ("g_field", True),
    ]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "object"}, []),  # no properties: no columns
        ({"description": "anything", "self": {"vendor": "v", "name": "n", "format": "jsonschema"}}, []),
        (  # an object without properties is one column
            {"type": "object", "properties": {"nested": {"type": "object", "properties": {"o": {"type": "object"}}}}},
            [("nested.o", True)],
        ),
        ({"type": "object", "properties": {"foo": {"type": "array", "items": {"type": "string"}}}}, [("foo", True)]),
        (  # a union with object is one column, its properties are not unfolded
            {
                "type": "object",
                "properties": {
                    "foo": {"type": ["string", "object"], "properties": {"one": {"type": "string"}}},
                    "a_field": {"type": ["string", "integer"]},
                    "c_field": {"type": ["integer", "number"]},
                    "d_field": {
                        "type": "object",
                        "properties": {
                            "one": {"type": ["integer", "object"], "properties": {"two": {"type": "string"}}}
                        },
                    },
                },
            },
            [("a_field", True), ("c_field", True), ("d_field.one", True), ("foo", True)],
        ),
        (  # oneOf of an object and a string: one column
            {
                "type": "object",
                "properties": {"union": {"oneOf": [{"type": "object", "properties": {}}, {"type": "string"}]}},
            },
            [("union", True)],
        ),
        (  # a required property that admits null is nullable; required under an optional parent is not required
            {
                "type": "object",
                "properties": {
                    "camelCase": {"type": ["string", "null"]},
                    "parent": {"type": "object", "properties": {"child": {"type": "string"}}, "required": ["child"]},
                    "HTTPStatus": {"type": "integer"},
                },
                "required": ["camelCase", "HTTPStatus"],
            },
            [("http_status", False), ("camel_case", True), ("parent.child", True)],
        ),
    ],
)
def test_flattening_cases_of_schema_ddl(schema: dict[str, Any], expected: list[tuple[str, bool]]) -> None:
    assert names(schema) == expected


def test_snake_case_as_schema_ddl() -> None:
    assert [snake_case(key) for key in ("fooBar", "HTTPServer", "a-b", "iOS7Version", "already_snake")] == [
        "foo_bar", "http_server", "a_b", "i_os7_version", "already_snake"
    ]  # fmt: skip


def test_a_schema_that_is_not_an_object_is_unusable() -> None:
    with pytest.raises(UnusableSchemaError, match="allowed: a JSON object"):
        tsv_columns([])  # type: ignore[arg-type]
    with pytest.raises(UnusableSchemaError, match="a: required: given 'x'; allowed: a list of names"):
        tsv_columns({"type": "object", "properties": {"a": {"type": "object", "properties": {}, "required": "x"}}})


def render(spark: SparkSession, schema: dict[str, Any], data: list[str]) -> list[list[str]]:
    columns = tsv_columns(schema)
    frame = local_frame(spark, [(text,) for text in data], "data string")
    return [
        list(row)
        for row in frame.select(*tsv_fields(F.col("data"), tsv_parses(F.col("data"), columns), columns)).collect()
    ]


def test_values_as_string_factory_renders_them(spark: SparkSession) -> None:
    # ShredModelSpec's "transform events" cases
    events = [
        {"a_field": {"d_field": "zzzz", "g_field": "gggg"}, "e_field": {"g_field": "xxxx"}, "bar": "ssss"},
        {"a_field": {"d_field": "z\tzzz", "g_field": "gggg"}, "e_field": {"g_field": "xxxx"}, "bar": "ssss"},
    ]
    null = "\\N"
    rest = [null] * 4 + ["ssss"] + [null] * 7
    assert render(spark, DUMMY, [json.dumps(e) for e in events]) == [["zzzz", "xxxx", *rest], ["z zzz", "xxxx", *rest]]


def test_booleans_numbers_arrays_objects_and_nulls(spark: SparkSession) -> None:
    schema = {
        "type": "object",
        "properties": {
            "flag": {"type": ["boolean", "null"]},
            "either": {"type": ["boolean", "string"]},
            "untyped": {},
            "n": {"type": "number"},
            "list": {"type": "array"},
            "obj": {"type": "object"},
            "text": {"type": "string"},
        },
    }
    data = [
        '{"flag": true, "either": "true", "untyped": false, "n": 12345678901234567890, "list": [1, "a\\tb", null],'
        ' "obj": {"k": {"x": null}}, "text": "line\\nbreak"}',
        '{"flag": false, "either": false, "untyped": {"a": 1}, "n": -0.5, "list": [], "obj": {}, "text": "\\\\N"}',
        "{}",
    ]
    # column order: either, flag, list, n, obj, text, untyped
    assert render(spark, schema, data) == [
        ["true", "1", '[1,"a\\tb",null]', "12345678901234567890", '{"k":{"x":null}}', "line break", "0"],
        ["0", "0", "[]", "-0.5", "{}", "\\\\N", '{"a":1}'],
        ["\\N"] * 7,
    ]


def test_keys_that_differ_only_in_case_or_hold_dots_are_kept_apart(spark: SparkSession) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "A": {"type": "string"}, "x.y": {"type": "string"}},
    }
    assert [column.name for column in tsv_columns(schema)] == ["a", "a", "x.y"]
    assert render(spark, schema, ['{"a": "lower", "A": "upper", "x.y": "dotted"}']) == [["lower", "upper", "dotted"]]


def test_column_fields_are_what_flattening_says() -> None:
    (column,) = tsv_columns({"type": "object", "properties": {"isOn": {"type": "boolean"}}, "required": ["isOn"]})
    assert column == TsvColumn("is_on", ("isOn",), nullable=False, boolean="only")
