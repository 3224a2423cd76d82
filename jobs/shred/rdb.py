"""The `rdb` layout: what Snowplow's RDB transformer 6.x writes and RDB Loader reads, as column expressions.

Source: snowplow/snowplow-rdb-loader (transformer-batch, common/transformation) and the Scala Analytics SDK's
parser (decode/ValueDecoder.scala, Parser.scala), which decides what a "good" event is upstream:

- a line is parsed as the SDK parses it: one field (no tab) is `NotTSV`, another number than 131 is
  `FieldNumberMismatch`, and a 131-field line with values that do not decode as their SDK type (timestamps,
  the event id UUID, integers, doubles, booleans, the required fields, the three JSON fields) is a
  `RowDecodingError` listing every such value in field order; each becomes one `loader_parsing_error` bad row
  (built by `jobs.enriched.badrows`, which dedup's bad rows share);
- the atomic line is the 128 non-JSON fields rendered as the transformer renders the SDK's event: timestamps
  `yyyy-MM-dd HH:mm:ss.SSS`, the event id as a lower-case UUID, integers and doubles re-printed (`007` -> `7`,
  `1` -> `1.0`, NaN -> empty, as circe prints a Double), booleans `1`/`0`, strings verbatim;
- shredded JSON lines as the legacy layout, `rootId` being the lower-case UUID.

Spark built-ins only. Where the SDK's grammar is wider than ours (an ISO time without seconds, a UUID with
short groups, hexadecimal doubles), such a value is an error here: see README "Shred".
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from jobs.enriched.badrows import ERROR_TYPE, first_error, invalid_value, parsing_error_row, value_checks
from jobs.enriched.fields import DOUBLE_FIELDS, FIELD_INDEX, FIELD_NAMES, INSTANT_FIELDS, INT_FIELDS
from jobs.enriched.parse import lower_hex
from jobs.shred.entities import ATOMIC_FIELDS, JSON_FIELDS, root_tstamp

GOOD, BAD = "output=good", "output=bad"
ATOMIC_PATH = "vendor=com.snowplowanalytics.snowplow/name=atomic/format=tsv/model=1/revision=0/addition=0"
PARSING_ERROR_PATH = (
    "vendor=com.snowplowanalytics.snowplow.badrows/name=loader_parsing_error/format=json/model=2/revision=0/addition=0"
)
IGLU_ERROR_SCHEMA = "iglu:com.snowplowanalytics.snowplow.badrows/loader_iglu_error/jsonschema/2-0-0"
IGLU_ERROR_PATH = (
    "vendor=com.snowplowanalytics.snowplow.badrows/name=loader_iglu_error/format=json/model=2/revision=0/addition=0"
)
PROCESSOR_ARTIFACT = "winnow"


def decoding_errors(fields: Column, json_errors: dict[str, Column]) -> Column:
    """Every value of a 131-field line that the SDK would not decode, in field order (`array<InvalidValue>`).

    The list is built only for a line that has such a value: `array_compact` is a higher-order function, which
    Spark evaluates row by row without generated code, and with it everything inside it; the plain test of every
    value first runs in generated code, so the row-by-row list costs only the lines that need it.

    Args:
        fields: the line split on tabs (131 strings).
        json_errors: for each of `JSON_FIELDS`, its messages (`array<string>`, from `entities.field_errors`,
            each starting `<field>: `, which the bad row's `key` already says).
    """
    parts: list[Column] = []
    wrong: list[Column] = []
    for name in FIELD_NAMES:
        value = F.element_at(fields, FIELD_INDEX[name] + 1)
        if name in JSON_FIELDS:
            parts.append(F.transform(json_errors[name], _json_error(name, value)))
            wrong.append(F.size(json_errors[name]) > 0)
        elif checks := value_checks(name, value):
            parts.append(F.array(first_error(checks)))
            wrong.extend(condition for condition, _ in checks)
    any_wrong = functools.reduce(lambda left, right: left | right, wrong)
    return F.when(any_wrong, F.array_compact(F.concat(*parts))).otherwise(F.array().cast(f"array<{ERROR_TYPE}>"))


def _json_error(name: str, value: Column) -> Callable[[Column], Column]:
    """An `InvalidValue` from one JSON-field message (`<name>: …`: the bad row's `key` says the name)."""
    after_prefix = len(name) + 3  # 1-based position after `<name>: `
    return lambda message: invalid_value(name, value, F.substring(message, after_prefix, 1 << 20))


def bad_row(line: Column, failure: Column, version: str) -> Column:
    """The `loader_parsing_error` 2-0-0 bad row of a line shred rejects (`badrows.parsing_error_row`, processor
    `winnow`); `failure` is `badrows.failure` of its field count and `decoding_errors`."""
    return parsing_error_row(line, failure, PROCESSOR_ARTIFACT, version)


def iglu_bad_row(failures: Column, payload: Column, version: str) -> Column:
    """The `loader_iglu_error` 2-0-0 bad row: `failures` is the failure array's JSON text, `payload` the event's
    JSON (`widerow.event_json`)."""
    processor = json.dumps({"artifact": PROCESSOR_ARTIFACT, "version": version}, separators=(",", ":"))
    head = f'{{"schema":"{IGLU_ERROR_SCHEMA}","data":{{"processor":{processor},"failure":'
    return F.concat(F.lit(head), failures, F.lit(',"payload":'), payload, F.lit("}}"))


def atomic_line(fields: Column) -> Column:
    """The 128-column atomic TSV line of a good event (its split `fields`), rendered as upstream renders it."""
    return F.concat_ws("\t", *(_rendered(name, F.element_at(fields, FIELD_INDEX[name] + 1)) for name in ATOMIC_FIELDS))


def _rendered(name: str, value: Column) -> Column:
    present = value != ""
    if name in INSTANT_FIELDS:
        return F.when(present, root_tstamp(value)).otherwise("")
    if name == "event_id":
        return lower_hex(value)  # a good event's: a UUID
    if name in INT_FIELDS:
        return F.when(present, value.try_cast("int").cast("string")).otherwise("")
    if name in DOUBLE_FIELDS:
        number = value.try_cast("double")
        # circe writes a NaN or infinite Double as null, which the transformer writes as an empty field.
        finite = ~F.isnan(number) & (F.abs(number) != float("inf"))
        return F.when(present & finite, number.cast("string")).otherwise("")
    return value


def entity_folder(entity: Column, shredded_format: Column | None = None) -> Column:
    """`output=good/vendor=V/name=N/format=F/model=M/revision=R/addition=A` of a typed entity (F: `json`, or the
    `shredded_format` column's `json`/`tsv`)."""
    version = entity["version"]
    return F.concat(
        F.lit(f"{GOOD}/vendor="),
        entity["vendor"],
        F.lit("/name="),
        entity["name"],
        F.lit("/format="),
        F.lit("json") if shredded_format is None else shredded_format,
        F.lit("/model="),
        F.substring_index(version, "-", 1),
        F.lit("/revision="),
        F.substring_index(F.substring_index(version, "-", 2), "-", -1),
        F.lit("/addition="),
        F.substring_index(version, "-", -1),
    )
