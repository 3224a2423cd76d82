"""Deciding each event: natural copies, synthetic copies, within the batch and against earlier runs.

Pure DataFrame functions, planned so that full lines are never shuffled, cached or parsed twice (which copy is
"first" and what the strategies do are unchanged). The input is read three times, each time as cheaply as it can be:
1. `narrow_events`: every line split once: validity, `event_key`, fingerprint, the two timestamps (about 100 bytes
   a line, no text); the ids on more than one line are found by a window count over these narrow rows;
2. `with_lines`: the lines to decide (invalid, an id that repeats, or one an earlier run delivered: a few percent)
   are read again by `row_id` alone, for the tie-break on the line and the synthetic strategies; the decision
   table ranks them and gives each its outcome and reason;
3. `apply_decisions`: every line is joined with the broadcast decision table on its `row_id` and written where its
   outcome says; a line the table does not name is good as it is (no per-line check is left for this pass).
The manifest's answers (cross-batch) come in as a DataFrame the job got from the manifest for
`delivered_pairs`, so this module does no I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from jobs import __version__
from jobs.config import Layout, SyntheticStrategy
from jobs.dedup.synthetic import can_take_duplicate_context, reidentified_line
from jobs.enriched.badrows import (
    ERROR_TYPE,
    bad_row_json,
    invalid_value,
    line_failure,
    parsing_error_row,
    row_decoding_error,
)
from jobs.enriched.parse import computed_fingerprint, field, line_errors, narrow_events
from jobs.manifest.base import ID_SEEN_EARLIER, SEEN_EARLIER

# Outcomes: each input line ends in exactly one.
GOOD, BAD, DUPLICATE, QUARANTINED, DROPPED = "good", "bad", "duplicate", "quarantined", "dropped"
OUTCOMES = (GOOD, BAD, DUPLICATE, QUARANTINED, DROPPED)
# Reasons, for duplicates, quarantined and dropped events and for the synthetic events kept in good.
IN_BATCH_NATURAL = "in_batch_natural"
IN_BATCH_SYNTHETIC = "in_batch_synthetic"
CROSS_BATCH_NATURAL = "cross_batch_natural"
CROSS_BATCH_SYNTHETIC = "cross_batch_synthetic"
SYNTHETIC_REASONS = (IN_BATCH_SYNTHETIC, CROSS_BATCH_SYNTHETIC)
# `processor.artifact` of dedup's `loader_parsing_error` bad rows (shred's: `winnow`).
PROCESSOR_ARTIFACT = "winnow-dedup"
NOT_AN_ENVELOPE = (
    'derived_contexts is neither empty nor a contexts envelope {"schema":…,"data":[…]}, so the duplicate context of '
    "this synthetic duplicate cannot be added (dedup.synthetic reid)"
)


def first_copy_order() -> list[Column]:
    """ "First": earliest etl_tstamp (absent last), then collector_tstamp, then smallest line."""
    return [F.col("etl_tstamp").asc_nulls_last(), F.col("collector_tstamp").asc(), F.col("line").asc()]


def last_copy_order() -> list[Column]:
    """ "Last event wins": latest collector_tstamp, then latest etl_tstamp, then largest line."""
    return [F.col("collector_tstamp").desc(), F.col("etl_tstamp").desc_nulls_last(), F.col("line").desc()]


def with_row_ids(lines: DataFrame) -> DataFrame:
    """`row_id` and `value` for every line: the key that joins a line to its decision.

    Taken right at the scan, so every scan of the same files gives a line the same id (partition index and
    position in the split); it only has to tell lines apart within one run, never across runs.
    """
    return lines.select(F.monotonically_increasing_id().alias("row_id"), "value")


def delivered_pairs(events: DataFrame) -> DataFrame:
    """The (`event_key`, `fingerprint`) of every valid event of the batch (repeated as often as the lines), from
    its `narrow_events`: what the manifest is asked about, and what it records of this run."""
    return events.where("valid").select("event_key", "fingerprint")


def to_decide(events: DataFrame, answered: DataFrame | None = None) -> DataFrame:
    """The events whose line the decision table must see: invalid ones, those of an id on more than one line,
    and (with `answered`, the manifest's non-null answers) those of an id an earlier run delivered.

    A window count over the narrow rows (one shuffle of ~100 bytes a line) rather than a count per id joined
    back, which would compute the narrow rows twice.
    """
    needed = ~F.col("valid") | (F.col("copies") > 1)
    if answered is not None:
        keys = answered.select("event_key").distinct().withColumn("answered", F.lit(True))
        events = events.join(F.broadcast(keys), "event_key", "left")
        needed = needed | F.col("answered").isNotNull()
    # Invalid lines have no key: each is counted alone, so a file of bad lines does not all meet in one task.
    by_id = Window.partitionBy(F.coalesce(F.col("event_key"), F.col("row_id").cast("string")))
    counted = events.withColumn("copies", F.count(F.lit(1)).over(by_id))
    return counted.where(needed).drop("copies", "answered")


def with_lines(lines: DataFrame, events: DataFrame, fingerprint_fields: Sequence[str]) -> DataFrame:
    """`events` (few) with their `line`, `event_id` as written, and the fingerprints `narrow_events` left out:
    their lines read again, looked up by `row_id` in the broadcast `events` (used once in the plan, so the
    narrow pass that found them runs once)."""
    fetched = lines.join(F.broadcast(events), "row_id").withColumnRenamed("value", "line")
    return fetched.select(
        *(name for name in fetched.columns if name != "fingerprint"), *_line_columns(tuple(fingerprint_fields))
    )


@functools.cache  # built once per process (docs/concepts.md "Expressions built once")
def _line_columns(fingerprint_fields: tuple[str, ...]) -> tuple[Column, Column]:
    """`with_lines`' `event_id` and `fingerprint` (computed where the narrow pass left it out) from `line`."""
    line, fingerprint = F.col("line"), F.col("fingerprint")
    computed = computed_fingerprint(F.split(line, "\t"), fingerprint_fields)
    return (
        field(line, "event_id").alias("event_id"),
        F.when(F.col("valid"), F.coalesce(fingerprint, computed)).alias("fingerprint"),
    )


def decision_rows(
    lines: DataFrame,
    strategy: SyntheticStrategy,
    fingerprint_fields: Sequence[str],
    answers: DataFrame | None = None,
    events: DataFrame | None = None,
) -> DataFrame:
    """The decision table with each decided line's `outcome` and `reason`: one row per line that is not plainly
    good; every line it does not name is good as it is (`apply_decisions` then gives every line its text).

    Args:
        lines: `row_id` and `value` (from `with_row_ids`).
        strategy: what to do with synthetic duplicates (the same event id, another fingerprint).
        fingerprint_fields: the fields hashed when a line has no event_fingerprint.
        answers: the manifest's answers for `delivered_pairs(events)`: (`event_key`, `fingerprint`, `cross_batch`
            = SEEN_EARLIER | ID_SEEN_EARLIER) for the pairs an earlier run delivered. None: in-batch only.
        events: `narrow_events(lines)` when the caller already has it (persisted for the manifest check);
            its missing fingerprints may be left out (`computed_fingerprints=False`).
    """
    answered = answers.where(F.col("cross_batch").isNotNull()) if answers is not None else None
    if events is None:
        events = narrow_events(lines, fingerprint_fields, computed_fingerprints=False)
    ranked = decision_table(with_lines(lines, to_decide(events, answered), fingerprint_fields), answered)
    chosen = _decide("line", strategy)
    valid = F.col("valid")
    return ranked.select(
        "*",
        F.when(valid, chosen.outcome).otherwise(F.lit(BAD)).alias("outcome"),
        F.when(valid, chosen.reason).alias("reason"),
    ).drop("line")


def decision_table(events: DataFrame, answered: DataFrame | None = None) -> DataFrame:
    """The ranks that decide the events whose id repeats in the batch or that an earlier run delivered.

    Args:
        events: `row_id`, `line`, `valid`, `event_id`, `event_key`, `fingerprint`, `etl_tstamp`,
            `collector_tstamp`: every line of each id to decide, and every invalid line (ranked apart from the
            valid ones; the final pass makes them bad rows).
        answered: the manifest's non-null answers (`event_key`, `fingerprint`, `cross_batch`), or None.

    Returns:
        `row_id`, `line`, `valid`, `event_id`, `event_key`, `fingerprint`, `natural_rank` (1 = the copy natural
        dedup keeps), `cross_batch`, `live_fingerprints` (fingerprints of the id still to deliver), `first_rank`,
        `last_rank` (among the live copies of the id, which come first).
    """
    by_copy = Window.partitionBy("event_key", "valid", "fingerprint").orderBy(*first_copy_order())
    ranked = events.withColumn("natural_rank", F.row_number().over(by_copy))
    if answered is None:
        ranked = ranked.withColumn("cross_batch", F.lit(None).cast("string"))
    else:
        ranked = ranked.join(answered, ["event_key", "fingerprint"], "left")
    live = (F.col("natural_rank") == 1) & ~F.col("cross_batch").eqNullSafe(SEEN_EARLIER)
    dead_last = F.when(live, 0).otherwise(1)
    by_id = Window.partitionBy("event_key", "valid")
    # Ranks among the live copies of an id (survivors not already delivered by an earlier run) come first.
    return ranked.select(
        "row_id",
        "line",
        "valid",
        "event_id",
        "event_key",
        "fingerprint",
        "natural_rank",
        "cross_batch",
        F.sum(F.when(live, 1).otherwise(0)).over(by_id).alias("live_fingerprints"),
        F.row_number().over(by_id.orderBy(dead_last, *first_copy_order())).alias("first_rank"),
        F.row_number().over(by_id.orderBy(dead_last, *last_copy_order())).alias("last_rank"),
    )


def apply_decisions(
    lines: DataFrame, decisions: DataFrame, strategy: SyntheticStrategy, run_time: datetime, layout: Layout = "rdb"
) -> DataFrame:
    """`outcome`, `reason`, `text` for every line: the lines `decisions` (from `decision_rows`) names as it says,
    the rest good as they are; a bad line's text is its bad row in the `layout`'s shape (`_legacy_bad_rows`,
    `_rdb_bad_rows`).

    The decision table is broadcast, so each line is looked up by `row_id` where it is read: the per-row work
    for a line nobody has to decide is the lookup alone; the texts of decided lines are built here, so the
    table carries no text.
    """
    joined = lines.join(F.broadcast(decisions), "row_id", "left")
    line, decided = F.col("value"), F.col("outcome").isNotNull()
    chosen = _decide("value", strategy, layout)
    if layout == "legacy":  # its rows say the run's time
        of_invalid, of_decided = _legacy_bad_rows(line, chosen.errors, run_time)
    else:
        of_invalid, of_decided = _rdb_bad_rows(strategy)
    text = (
        F.when(~decided, line)
        .when(~F.col("valid"), of_invalid)
        .when(F.col("outcome") == BAD, of_decided)
        .otherwise(chosen.line)
    )
    return joined.select(
        F.when(decided, F.col("outcome")).otherwise(F.lit(GOOD)).alias("outcome"), "reason", text.alias("text")
    )


def _legacy_bad_rows(line: Column, errors: Column, run_time: datetime) -> tuple[Column, Column]:
    """The legacy bad row (`{"line", "errors", "failure_tstamp"}`, dedup's messages) of an invalid line, and of a
    valid line decided bad (its `errors`, from `_decide`: a synthetic copy `reid` cannot re-identify)."""
    return bad_row_json(line, line_errors(line), run_time), bad_row_json(line, errors, run_time)


@functools.cache  # built once per process (docs/concepts.md "Expressions built once")
def _rdb_bad_rows(strategy: SyntheticStrategy) -> tuple[Column, Column]:
    """`loader_parsing_error` 2-0-0 bad rows, as shred's rdb layout writes them (processor `winnow-dedup`), of the
    line in `value`: for an invalid line, `NotTSV`, `FieldNumberMismatch` or a `RowDecodingError` listing the
    values dedup checks that do not decode (`badrows.line_failure`); for a valid line decided bad (a synthetic
    copy `reid` cannot re-identify), a `RowDecodingError` with an `InvalidValue` for its derived_contexts."""
    line = F.col("value")

    def row(problem: Column) -> Column:
        return parsing_error_row(line, problem, PROCESSOR_ARTIFACT, __version__)

    return row(line_failure(line)), row(row_decoding_error(_decide("value", strategy, "rdb").errors))


def _not_an_envelope(derived: Column, layout: Layout) -> Column:
    """The error of a synthetic copy whose `derived` contexts cannot take the duplicate context, in `layout`'s
    shape: a message (legacy) or an `InvalidValue` (rdb)."""
    if layout == "legacy":
        return F.concat(
            F.lit('derived_contexts is not a contexts envelope {"schema":…,"data":[…]}, so the duplicate '
                  "context of this synthetic duplicate cannot be added: '"),
            F.substring(derived, 1, 100),
            F.lit("'"),
        )  # fmt: skip
    return invalid_value("derived_contexts", derived, NOT_AN_ENVELOPE)


class _Decision(NamedTuple):
    outcome: Column
    reason: Column
    line: Column
    errors: Column


class _Case(NamedTuple):
    condition: Column
    outcome: str
    line: Column
    errors: Column | None = None


@functools.cache  # built once per process (docs/concepts.md "Expressions built once")
def _decide(line_column: str, strategy: SyntheticStrategy, layout: Layout = "rdb") -> _Decision:
    """Outcome, reason, line and errors (in `layout`'s shape) of a decided row (its line in `line_column`), from
    the decision table's ranks."""
    line = F.col(line_column)
    no_errors = F.array().cast("array<string>" if layout == "legacy" else f"array<{ERROR_TYPE}>")
    natural_copy = F.col("natural_rank") > 1
    cross_natural = F.col("cross_batch") == SEEN_EARLIER
    cross_synthetic = F.col("cross_batch") == ID_SEEN_EARLIER
    in_batch_synthetic = F.col("live_fingerprints") > 1

    if strategy == "reid":  # built once: both kinds of synthetic copy get the same new line
        derived = field(line, "derived_contexts")
        fits = can_take_duplicate_context(derived)
        new_line = reidentified_line(line, F.col("event_id"), F.col("event_key"), F.col("fingerprint"))

    def synthetic_cases(keep_first: Column, keep_last: Column) -> list[_Case]:
        """What happens to a live synthetic copy under the strategy."""
        if strategy == "reid":
            return [_Case(fits, GOOD, new_line), _Case(~fits, BAD, line, F.array(_not_an_envelope(derived, layout)))]
        if strategy == "keep-first":
            return [_Case(keep_first, GOOD, line), _Case(~keep_first, DUPLICATE, line)]
        if strategy == "keep-last":
            return [_Case(keep_last, GOOD, line), _Case(~keep_last, DUPLICATE, line)]
        outcome = {"quarantine": QUARANTINED, "drop": DROPPED, "off": GOOD}[strategy]
        return [_Case(F.lit(True), outcome, line)]

    # An earlier run's copy came first: keep-first keeps none of this batch's; keep-last keeps this batch's last.
    cross_cases = synthetic_cases(keep_first=F.lit(False), keep_last=F.col("last_rank") == 1)
    in_batch_cases = synthetic_cases(keep_first=F.col("first_rank") == 1, keep_last=F.col("last_rank") == 1)

    def decide(of_case: Callable[[_Case], Column], removed: Column, single: Column) -> Column:
        chosen = F.when(natural_copy | cross_natural, removed)
        for case in cross_cases:
            chosen = chosen.when(cross_synthetic & case.condition, of_case(case))
        for case in in_batch_cases:
            chosen = chosen.when(in_batch_synthetic & case.condition, of_case(case))
        return chosen.otherwise(single)

    reason = (
        F.when(natural_copy, F.lit(IN_BATCH_NATURAL))
        .when(cross_natural, F.lit(CROSS_BATCH_NATURAL))
        .when(cross_synthetic, F.lit(CROSS_BATCH_SYNTHETIC))
        .when(in_batch_synthetic, F.lit(IN_BATCH_SYNTHETIC))
    )
    return _Decision(
        outcome=decide(lambda c: F.lit(c.outcome), F.lit(DUPLICATE), F.lit(GOOD)),
        reason=reason,
        line=decide(lambda c: c.line, line, line),
        errors=decide(lambda c: c.errors if c.errors is not None else no_errors, no_errors, no_errors),
    )
