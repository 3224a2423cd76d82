"""Bad rows: the lines that are no (usable) enriched event, in Snowplow's badrows schema or in the legacy shape.

- `loader_parsing_error` 2-0-0 (`PARSING_ERROR_SCHEMA`), what Snowplow's RDB transformer writes for a line its
  parser (the Scala Analytics SDK) rejects: `{"schema", "data": {"processor": {"artifact", "version"},
  "failure", "payload": <the line>}}`, the failure being `NotTSV` (no tab), `FieldNumberMismatch` (`fieldCount`:
  another number of fields than 131) or `RowDecodingError` (`errors`: an `InvalidValue` {key, value, message}
  per value that does not decode, in field order). Shred's rdb layout and dedup's (the default) write it, so one
  bad-rows table holds both jobs' rows (`processor.artifact` says which job wrote one).
- The legacy shape, `{"line", "errors": [{"level": "error", "message"}], "failure_tstamp"}` (`bad_row_json`):
  shred's and dedup's `legacy` layout.

Spark built-ins only (no Python on the per-row path).
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column
from pyspark.sql import functions as F

from jobs.enriched.fields import (
    BOOLEAN_FIELDS,
    DOUBLE_FIELDS,
    FIELD_COUNT,
    FIELD_INDEX,
    INSTANT_FIELDS,
    INT_FIELDS,
    REQUIRED_FIELDS,
)  # fmt: skip
from jobs.enriched.parse import CHECKED_FIELDS, UUID_PATTERN, is_timestamp

PARSING_ERROR_SCHEMA = "iglu:com.snowplowanalytics.snowplow.badrows/loader_parsing_error/jsonschema/2-0-0"
_INTEGER = r"^[+-]?[0-9]+\z"  # Java's Integer.parseInt: a sign and digits, nothing else (no spaces, no `.0`)

# One decoding error, as the SDK's `InvalidValue` is written in a bad row.
ERROR_TYPE = "struct<type:string,key:string,value:string,message:string>"
FAILURE_TYPE = f"struct<type:string,fieldCount:int,errors:array<{ERROR_TYPE}>>"


def invalid_value(name: str, value: Column, message: str | Column) -> Column:
    """One `InvalidValue` error: the field's name (`key`), its value as given, and what is wrong with it."""
    text = F.lit(message) if isinstance(message, str) else message
    return F.struct(
        F.lit("InvalidValue").alias("type"), F.lit(name).alias("key"), value.alias("value"), text.alias("message")
    )


def value_checks(name: str, value: Column) -> list[tuple[Column, Column]]:
    """The SDK's checks of one field's value: (condition, `InvalidValue`) pairs, the first that holds wins; none
    for a string field that may be empty."""
    present = value != ""
    if name in INSTANT_FIELDS:
        wrong, kind = ~is_timestamp(value), "datetime"
    elif name == "event_id":
        wrong, kind = ~value.rlike(UUID_PATTERN), "UUID"
    elif name in INT_FIELDS:
        wrong, kind = ~value.rlike(_INTEGER) | value.try_cast("int").isNull(), "integer"
    elif name in DOUBLE_FIELDS:
        wrong, kind = value.try_cast("double").isNull(), "double"
    elif name in BOOLEAN_FIELDS:
        wrong, kind = ~value.isin("0", "1"), "boolean"
    else:
        wrong, kind = None, ""
    checks = []
    if name in REQUIRED_FIELDS:
        checks.append((~present, invalid_value(name, value, f"Field {name} cannot be empty")))
    if wrong is not None:
        checks.append((present & wrong, invalid_value(name, value, f"Cannot parse key {name} into {kind}")))
    return checks


def first_error(checks: list[tuple[Column, Column]]) -> Column:
    """The error of the first check that holds (null when none does)."""
    (condition, error), *rest = checks
    chosen = F.when(condition, error)
    for condition, error in rest:
        chosen = chosen.when(condition, error)
    return chosen


def failure(field_count: Column, errors: Column) -> Column:
    """The `loader_parsing_error` failure of a line (null for a good one) from its number of tab-separated fields
    and its decoding errors (`array<InvalidValue>`): `NotTSV`, `FieldNumberMismatch` (with `fieldCount`) or
    `RowDecodingError` (with `errors`)."""
    no_errors = F.lit(None).cast(f"array<{ERROR_TYPE}>")
    return (
        F.when(field_count == 1, _failure_of("NotTSV", F.lit(None), no_errors))
        .when(field_count != FIELD_COUNT, _failure_of("FieldNumberMismatch", field_count, no_errors))
        .when(F.size(errors) > 0, row_decoding_error(errors))
    )


def row_decoding_error(errors: Column) -> Column:
    """The `RowDecodingError` failure of a 131-field line with these (one or more) `errors`."""
    return _failure_of("RowDecodingError", F.lit(None), errors)


def _failure_of(kind: str, field_count: Column, errors: Column) -> Column:
    """A failure of type `kind`, as `FAILURE_TYPE` (`to_json` leaves out its null members)."""
    return F.struct(F.lit(kind).alias("type"), field_count.cast("int").alias("fieldCount"), errors.alias("errors"))


def line_failure(line: Column) -> Column:
    """The `loader_parsing_error` failure of a line `parse.is_valid` rejects, as the SDK reports it: its field
    count, else an `InvalidValue` for each value of `CHECKED_FIELDS` that does not decode (null for a valid line).

    The same checks as `is_valid`, in the SDK's words: a line is valid exactly when this is null. Only meant
    for the few invalid lines (it splits the line).
    """
    fields = F.split(line, "\t")
    errors = (first_error(value_checks(name, F.element_at(fields, FIELD_INDEX[name] + 1))) for name in CHECKED_FIELDS)
    return failure(F.size(fields), F.array_compact(F.array(*errors)))


def parsing_error_row(payload: Column, failure: Column, artifact: str, version: str) -> Column:
    """The `loader_parsing_error` 2-0-0 bad row: `{"schema", "data": {"processor", "failure", "payload"}}`.

    `processor` is the job that rejected the line (`artifact`, and its `version`, `x.y.z…`). `to_json` leaves out
    the failure's null members, so each failure type has only its own keys.
    """
    processor = F.struct(F.lit(artifact).alias("artifact"), F.lit(version).alias("version"))
    return F.to_json(
        F.struct(
            F.lit(PARSING_ERROR_SCHEMA).alias("schema"),
            F.struct(processor.alias("processor"), failure.alias("failure"), payload.alias("payload")).alias("data"),
        )
    )


def bad_row_json(line: Column, errors: Column, failure_time: datetime) -> Column:
    """The legacy bad row: `{"line":…,"errors":[{"level":"error","message":…}],"failure_tstamp":…}`."""
    return F.to_json(
        F.struct(
            line.alias("line"),
            F.transform(errors, lambda m: F.struct(F.lit("error").alias("level"), m.alias("message"))).alias("errors"),
            F.lit(failure_time.strftime("%Y-%m-%dT%H:%M:%S.000Z")).alias("failure_tstamp"),
        )
    )
