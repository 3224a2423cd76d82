"""Parse enriched-event TSV lines into the few columns dedup needs, and say what is wrong with bad lines
(their bad rows: `jobs.enriched.badrows`).

Pure functions on DataFrames; Spark built-ins only (no Python on the per-row path).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.enriched.fields import FIELD_COUNT, FIELD_INDEX

UUID_PATTERN = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\z"
# Enriched timestamps are UTC `yyyy-MM-dd HH:mm:ss[.fraction]` with any precision up to nanoseconds.
# The pattern also bounds month, day, hour, minute and second, so only days 29-31 need a calendar check.
TSTAMP_PATTERN = r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]) ([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,9})?\z"
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

    One backward `substring_index` scan: the text after the 130th tab from the end is everything after the
    first field exactly when there are 130 tabs (with fewer it is the whole line, with more it is shorter).
    Counting tabs by `translate`, `regexp_replace` or `split` copies the line or allocates every field; two
    forward scans (at least 130 tabs, no 131st) read the line twice.
    """
    after_first_field = F.substring_index(line, "\t", 1 - FIELD_COUNT)
    first_field = F.substring_index(line, "\t", 1)
    return F.octet_length(first_field) + 1 + F.octet_length(after_first_field) == F.octet_length(line)


def field(line: Column, name: str) -> Column:
    """The field called `name` of a 131-field TSV line."""
    return field_at(line, FIELD_INDEX[name])


# The fields every check and the dedup decision read; all other fields are left as text in the line.
PARSED_FIELDS = ("event_id", "etl_tstamp", "collector_tstamp", "v_collector", "v_etl", "event_fingerprint")
# The fields `is_valid` checks, in field order (the order a `loader_parsing_error` bad row lists their errors in).
CHECKED_FIELDS = ("etl_tstamp", "collector_tstamp", "event_id", "v_collector", "v_etl")


def line_problems(line: Column) -> list[tuple[Column, Column]]:
    """What can be wrong with a line: (condition, message) pairs; a valid line meets none of the conditions.

    Each condition after the first holds only on well-formed lines, so a malformed line reports its field
    count alone. `is_valid` and `line_errors` are both built from this one list.
    """
    well_formed = has_all_fields(line)
    fields = {name: field(line, name) for name in PARSED_FIELDS}
    event_id, etl, collector = fields["event_id"], fields["etl_tstamp"], fields["collector_tstamp"]
    return [
        (
            ~well_formed,
            F.concat(F.lit(f"expected {FIELD_COUNT} tab-separated fields, found "), F.size(F.split(line, "\t"))),
        ),
        (well_formed & (event_id == ""), F.lit("event_id is empty")),
        (
            well_formed & (event_id != "") & ~event_id.rlike(UUID_PATTERN),
            _quoted("event_id", event_id, "is not a UUID"),
        ),
        (well_formed & (collector == ""), F.lit("collector_tstamp is empty")),
        (
            well_formed & (collector != "") & ~is_timestamp(collector),
            _quoted("collector_tstamp", collector, "is not a timestamp (yyyy-MM-dd HH:mm:ss[.fraction], UTC)"),
        ),
        (
            well_formed & (etl != "") & ~is_timestamp(etl),
            _quoted("etl_tstamp", etl, "is not a timestamp (yyyy-MM-dd HH:mm:ss[.fraction], UTC)"),
        ),
        (well_formed & (fields["v_collector"] == ""), F.lit("v_collector is empty")),
        (well_formed & (fields["v_etl"] == ""), F.lit("v_etl is empty")),
    ]


def event_key(event_id: Column) -> Column:
    """The id dedup groups on: a valid line's event_id lower-cased (a UUID is a UUID, whatever its case)."""
    return lower_hex(event_id)


def lower_hex(text: Column) -> Column:
    """Hexadecimal text, such as a UUID (`UUID_PATTERN`), lower-cased. Its letters are A-F, so translating them is
    what `lower` gives; and unlike `lower` it does not load ICU's case mappings, which the first `lower` of a JVM
    does for seconds."""
    return F.translate(text, "ABCDEF", "abcdef")


def is_valid(line: Column) -> Column:
    """True when the line is a valid enriched event, i.e. `line_problems` finds nothing.

    Written out rather than derived from `line_problems`: each field is taken once and the checks stop at the
    first failure (Spark does not eliminate common subexpressions in filters, and this is the per-row path).
    """
    return _valid_event(has_all_fields(line), lambda name: field(line, name))


def _valid_event(well_formed: Column, field_of: Callable[[str], Column]) -> Column:
    """The checks of `is_valid`, first the field count (`well_formed`), then each field from `field_of`, once."""
    etl = field_of("etl_tstamp")
    return (
        well_formed
        & field_of("event_id").rlike(UUID_PATTERN)
        & is_timestamp(field_of("collector_tstamp"))
        & ((etl == "") | is_timestamp(etl))
        & (field_of("v_collector") != "")
        & (field_of("v_etl") != "")
    )


def line_errors(line: Column) -> Column:
    """Every problem of the line, as messages (empty array for a valid line)."""
    return F.array_compact(F.array(*(F.when(condition, message) for condition, message in line_problems(line))))


def parse_events(lines: DataFrame, fingerprint_fields: Sequence[str]) -> DataFrame:
    """Turn a DataFrame of raw lines (column `value`) into parsed events.

    Returns one row per input line with these columns (and any other column of `lines`, such as `row_id`):
      - `line`: the raw line;
      - `errors`: array of messages, empty when the line is a valid event;
      - `event_id` as written, `event_key` (the id lower-cased, what dedup groups on);
      - `fingerprint`: `event_fingerprint`, or a hash of `fingerprint_fields` when it is empty;
      - `etl_tstamp` (null when absent) and `collector_tstamp`, as text: the validated
        `yyyy-MM-dd HH:mm:ss[.fraction]` form orders correctly as text and keeps nanoseconds.
    """
    others = [name for name in lines.columns if name != "value"]
    checked_columns, prepared_columns, parsed_columns = _parse_columns(tuple(fingerprint_fields))
    checked = lines.select(*others, *checked_columns)
    prepared = checked.select(*others, *prepared_columns)
    return prepared.select(*others, *parsed_columns)


# Built once per process for the same arguments, as the other builders of the jobs' larger expressions: docs/concepts.md
# "Expressions built once".
@functools.cache
def _parse_columns(fingerprint_fields: tuple[str, ...]) -> tuple[tuple[Column, ...], ...]:
    """The three projections of `parse_events` after the columns it keeps."""
    line = F.col("value")
    checked = (
        line.alias("line"),
        # Messages only for the few invalid lines: building the array for every line cost more than the check.
        F.when(is_valid(line), F.array().cast("array<string>")).otherwise(line_errors(line)).alias("errors"),
        *(
            field(line, name).alias(name)
            for name in ("event_id", "etl_tstamp", "collector_tstamp", "event_fingerprint")
        ),
    )
    etl = F.col("etl_tstamp")
    prepared = (
        *map(F.col, ("line", "errors", "event_id")),
        # A line with errors may have any event_id: lower-cased as any text.
        F.when(F.size("errors") == 0, event_key(F.col("event_id"))).otherwise(F.lower("event_id")).alias("event_key"),
        F.col("event_fingerprint"),
        F.when(etl != "", etl).alias("etl_tstamp"),
        F.col("collector_tstamp"),
        # Split only the lines that need a computed fingerprint; the next projection reads the array
        # many times, and Spark keeps a non-trivial expression used more than once in its own projection.
        F.when((F.size("errors") == 0) & (F.col("event_fingerprint") == ""), F.split(F.col("line"), "\t")).alias(
            "all_fields"
        ),
    )
    parsed = (
        *map(F.col, ("line", "errors", "event_id", "event_key")),
        F.when(F.col("event_fingerprint") != "", F.col("event_fingerprint"))
        .otherwise(computed_fingerprint(F.col("all_fields"), fingerprint_fields))
        .alias("fingerprint"),
        F.col("etl_tstamp"),
        F.col("collector_tstamp"),
    )
    return checked, prepared, parsed


def narrow_events(lines: DataFrame, fingerprint_fields: Sequence[str], computed_fingerprints: bool = True) -> DataFrame:
    """What dedup needs to know of every line, from one split of it (the line itself is left out).

    Returns one row per line with `valid` (the same verdict as `is_valid`), and for valid lines `event_key`,
    `fingerprint` (as `parse_events` gives it), `etl_tstamp` (null when absent) and `collector_tstamp`; any other
    column of `lines` (such as `row_id`) is kept. With `computed_fingerprints` False, `fingerprint` is null
    where the line has no event_fingerprint (the caller computes the few it needs: computing them all is a large
    share of the pass).

    One `split` counts the fields and hands over every field at once: it costs less than `is_valid` plus a
    `substring_index` pair per field (Spark's byte-by-byte search in `substring_index` is slower than Java's
    `String.split`, even with its allocations), and a missing fingerprint is computed from the same array.
    """
    others = [name for name in lines.columns if name != "value"]
    split = lines.select(*others, F.split(F.col("value"), "\t").alias("all_fields"))
    valid, narrowed = _narrow_columns(tuple(fingerprint_fields), computed_fingerprints)
    # Validity in a projection of its own: the next one reads it four times.
    checked = split.select(*others, valid.alias("valid"), "all_fields")
    return checked.select(*others, F.col("valid"), *narrowed)


@functools.cache  # built once per process (docs/concepts.md "Expressions built once")
def _narrow_columns(
    fingerprint_fields: tuple[str, ...], computed_fingerprints: bool
) -> tuple[Column, tuple[Column, ...]]:
    """`narrow_events`' verdict over `all_fields`, and its columns after `valid`."""

    def at(name: str) -> Column:
        return F.get(F.col("all_fields"), FIELD_INDEX[name])

    valid = _valid_event(F.size("all_fields") == FIELD_COUNT, at)
    etl = at("etl_tstamp")
    given = at("event_fingerprint")
    fingerprint = F.when(given != "", given)
    if computed_fingerprints:
        fingerprint = fingerprint.otherwise(computed_fingerprint(F.col("all_fields"), fingerprint_fields))
    return valid, (
        F.when(F.col("valid"), event_key(at("event_id"))).alias("event_key"),
        F.when(F.col("valid"), fingerprint).alias("fingerprint"),
        F.when(F.col("valid") & (etl != ""), etl).alias("etl_tstamp"),
        F.when(F.col("valid"), at("collector_tstamp")).alias("collector_tstamp"),
    )


def computed_fingerprint(all_fields: Column, fingerprint_fields: Sequence[str]) -> Column:
    """MD5 (lower-case hex) of `name␟value␟` for each non-empty field, in name order.

    The same construction as Snowplow's event fingerprint enrichment, applied to enriched fields instead of
    raw tracker parameters: deterministic, and independent of the order the fields are configured in.

    Written with array functions over constant arrays of names and positions, not one expression per field:
    sixty `when`s inlined into the job's generated code made its method too large for the JVM to compile
    (HotSpot interprets methods over 8,000 bytes), and every line of the stage paid for it.
    """
    names = sorted(set(fingerprint_fields))
    positions = F.array(*(F.lit(FIELD_INDEX[name] + 1) for name in names))
    values = F.transform(positions, lambda position: F.element_at(all_fields, position))
    parts = F.zip_with(
        F.array(*(F.lit(name + FINGERPRINT_SEPARATOR) for name in names)),
        values,
        lambda label, value: F.when(value != "", F.concat(label, value, F.lit(FINGERPRINT_SEPARATOR))),
    )
    return F.md5(F.concat_ws("", parts))


def is_timestamp(value: Column) -> Column:
    """True for a UTC `yyyy-MM-dd HH:mm:ss[.fraction]` that names a real calendar day."""
    # The pattern checks shape and ranges; parsing the first 19 characters rejects what only a calendar knows
    # (Feb 30, Apr 31), and is needed for days 29-31 alone, so only those pay for the parse.
    needs_calendar = F.substring(value, 9, 2) >= "29"
    calendar_valid = F.try_to_timestamp(F.substring(value, 1, 19), F.lit("yyyy-MM-dd HH:mm:ss")).isNotNull()
    return value.rlike(TSTAMP_PATTERN) & (~needs_calendar | calendar_valid)


def _quoted(name: str, value: Column, problem: str) -> Column:
    return F.concat(F.lit(f"{name} '"), F.substring(value, 1, QUOTED_VALUE_LIMIT), F.lit(f"' {problem}"))
