"""Parse enriched-event TSV lines into the few columns dedup needs, and say what is wrong with bad lines.

Pure functions on DataFrames; Spark built-ins only (no Python on the per-row path).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.enriched.fields import FIELD_COUNT, FIELD_INDEX

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
# Enriched timestamps are UTC `yyyy-MM-dd HH:mm:ss[.fraction]` with any precision up to nanoseconds.
TSTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,9})?$"
FINGERPRINT_SEPARATOR = "\u001f"
# Values quoted in error messages are cut to this length, so one huge field cannot bloat a bad row.
QUOTED_VALUE_LIMIT = 100


def field_at(line: Column, index: int) -> Column:
    """Field `index` (0-based) of a 131-field TSV line.

    `substring_index` from the nearer end finds one field without allocating all 131 strings, as `split`
    would. Only meaningful on lines with exactly 131 fields.
    """
    if index < FIELD_COUNT // 2:
        return F.substring_index(F.substring_index(line, "\t", index + 1), "\t", -1)
    return F.substring_index(F.substring_index(line, "\t", index - FIELD_COUNT), "\t", 1)


def has_all_fields(line: Column) -> Column:
    """True when the line has exactly 131 fields (130 tabs).

    Two `substring_index` scans: at least 130 tabs, and no 131st. Much cheaper than counting tabs by
    `translate` or `regexp_replace`, which copy the whole line.
    """
    at_least = F.length(F.substring_index(line, "\t", FIELD_COUNT - 1)) < F.length(line)
    at_most = F.length(F.substring_index(line, "\t", FIELD_COUNT)) == F.length(line)
    return at_least & at_most


def field(line: Column, name: str) -> Column:
    """The field called `name` of a 131-field TSV line."""
    return field_at(line, FIELD_INDEX[name])


def parse_events(lines: DataFrame, fingerprint_fields: Sequence[str]) -> DataFrame:
    """Turn a DataFrame of raw lines (column `value`) into parsed events.

    Returns one row per input line with these columns:
      - `line`: the raw line;
      - `errors`: array of messages, empty when the line is a valid event;
      - `event_id` as written, `event_key` (the id lower-cased, what dedup groups on);
      - `fingerprint`: `event_fingerprint`, or a hash of `fingerprint_fields` when it is empty;
      - `etl_tstamp` (null when absent) and `collector_tstamp`, as text: the validated
        `yyyy-MM-dd HH:mm:ss[.fraction]` form orders correctly as text and keeps nanoseconds.
    """
    line = F.col("value")
    fields = {
        name: field(line, name)
        for name in ("event_id", "etl_tstamp", "collector_tstamp", "v_collector", "v_etl", "event_fingerprint")
    }
    split = lines.select(
        line.alias("line"),
        has_all_fields(line).alias("well_formed"),
        *(value.alias(name) for name, value in fields.items()),
    )
    well_formed = F.col("well_formed")
    event_id, etl, collector = F.col("event_id"), F.col("etl_tstamp"), F.col("collector_tstamp")
    checks = [
        F.when(
            ~well_formed,
            F.concat(
                F.lit(f"expected {FIELD_COUNT} tab-separated fields, found "), F.size(F.split(F.col("line"), "\t"))
            ),
        ),
        F.when(well_formed & (event_id == ""), F.lit("event_id is empty")),
        F.when(
            well_formed & (event_id != "") & ~event_id.rlike(UUID_PATTERN),
            _quoted("event_id", event_id, "is not a UUID"),
        ),
        F.when(well_formed & (collector == ""), F.lit("collector_tstamp is empty")),
        F.when(
            well_formed & (collector != "") & ~_is_timestamp(collector),
            _quoted("collector_tstamp", collector, "is not a timestamp (yyyy-MM-dd HH:mm:ss[.fraction], UTC)"),
        ),
        F.when(
            well_formed & (etl != "") & ~_is_timestamp(etl),
            _quoted("etl_tstamp", etl, "is not a timestamp (yyyy-MM-dd HH:mm:ss[.fraction], UTC)"),
        ),
        F.when(well_formed & (F.col("v_collector") == ""), F.lit("v_collector is empty")),
        F.when(well_formed & (F.col("v_etl") == ""), F.lit("v_etl is empty")),
    ]
    checked = split.select(
        "line",
        F.array_compact(F.array(*checks)).alias("errors"),
        "event_id",
        F.lower(event_id).alias("event_key"),
        "event_fingerprint",
        F.when(etl != "", etl).alias("etl_tstamp"),
        "collector_tstamp",
        # Split only the lines that need a computed fingerprint; the next projection reads the array
        # many times, and Spark keeps a non-trivial expression used more than once in its own projection.
        F.when(well_formed & (F.col("event_fingerprint") == ""), F.split(F.col("line"), "\t")).alias("all_fields"),
    )
    return checked.select(
        "line",
        "errors",
        "event_id",
        "event_key",
        F.when(F.col("event_fingerprint") != "", F.col("event_fingerprint"))
        .otherwise(computed_fingerprint(F.col("all_fields"), fingerprint_fields))
        .alias("fingerprint"),
        "etl_tstamp",
        "collector_tstamp",
    )


def computed_fingerprint(all_fields: Column, fingerprint_fields: Sequence[str]) -> Column:
    """MD5 (lower-case hex) of `name␟value␟` for each non-empty field, in name order.

    The same construction as Snowplow's event fingerprint enrichment, applied to enriched fields instead of
    raw tracker parameters: deterministic, and independent of the order the fields are configured in.
    """
    parts = []
    for name in sorted(set(fingerprint_fields)):
        value = F.element_at(all_fields, FIELD_INDEX[name] + 1)
        parts.append(
            F.when(value != "", F.concat(F.lit(name + FINGERPRINT_SEPARATOR), value, F.lit(FINGERPRINT_SEPARATOR)))
        )
    return F.md5(F.concat_ws("", *parts))


def bad_row_json(line: Column, errors: Column, failure_time: datetime) -> Column:
    """The bad-row line of DESIGN §3: `{"line":…,"errors":[{"level":"error","message":…}],"failure_tstamp":…}`."""
    return F.to_json(
        F.struct(
            line.alias("line"),
            F.transform(errors, lambda m: F.struct(F.lit("error").alias("level"), m.alias("message"))).alias("errors"),
            F.lit(failure_time.strftime("%Y-%m-%dT%H:%M:%S.000Z")).alias("failure_tstamp"),
        )
    )


def _is_timestamp(value: Column) -> Column:
    # The pattern checks the shape; the parse of the first 19 characters rejects impossible dates (month 13).
    calendar_valid = F.try_to_timestamp(F.substring(value, 1, 19), F.lit("yyyy-MM-dd HH:mm:ss")).isNotNull()
    return value.rlike(TSTAMP_PATTERN) & calendar_valid


def _quoted(name: str, value: Column, problem: str) -> Column:
    return F.concat(F.lit(f"{name} '"), F.substring(value, 1, QUOTED_VALUE_LIMIT), F.lit(f"' {problem}"))
