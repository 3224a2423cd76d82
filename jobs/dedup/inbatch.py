"""Deciding each event: natural copies, synthetic copies, within the batch and against earlier runs.

Pure DataFrame functions. Only events whose id repeats in the batch are shuffled with their lines (window
functions over the few repeated ids); the rest pass through after a join with the small set of repeated ids.
The manifest's answers (cross-batch) come in as a DataFrame, so this module does no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from jobs.config import SyntheticStrategy
from jobs.dedup.synthetic import can_take_duplicate_context, reidentified_line
from jobs.enriched.parse import field

# Outcomes: each input line ends in exactly one.
GOOD, BAD, DUPLICATE, QUARANTINED, DROPPED = "good", "bad", "duplicate", "quarantined", "dropped"
# Reasons, for duplicates, quarantined and dropped events and for the synthetic events kept in good.
IN_BATCH_NATURAL = "in_batch_natural"
IN_BATCH_SYNTHETIC = "in_batch_synthetic"
CROSS_BATCH_NATURAL = "cross_batch_natural"
CROSS_BATCH_SYNTHETIC = "cross_batch_synthetic"
SYNTHETIC_REASONS = (IN_BATCH_SYNTHETIC, CROSS_BATCH_SYNTHETIC)

# The manifest's answer for an (event_key, fingerprint), in the `cross_batch` column of a CrossBatchCheck:
SEEN_EARLIER = "natural"  # an earlier run delivered this (event_id, fingerprint)
ID_SEEN_EARLIER = "synthetic"  # an earlier run delivered this event_id with another fingerprint
CrossBatchCheck = Callable[[DataFrame], DataFrame]


def first_copy_order() -> list[Column]:
    """ "First" of DESIGN §4: earliest etl_tstamp (absent last), then collector_tstamp, then smallest line."""
    return [F.col("etl_tstamp").asc_nulls_last(), F.col("collector_tstamp").asc(), F.col("line").asc()]


def last_copy_order() -> list[Column]:
    """ "Last event wins": latest collector_tstamp, then latest etl_tstamp, then largest line."""
    return [F.col("collector_tstamp").desc(), F.col("etl_tstamp").desc_nulls_last(), F.col("line").desc()]


def dedup_events(
    events: DataFrame, strategy: SyntheticStrategy, cross_batch: CrossBatchCheck | None = None
) -> DataFrame:
    """Decide every valid event of one batch.

    Args:
        events: parsed valid events (`line`, `event_id`, `event_key`, `fingerprint`, `etl_tstamp`,
            `collector_tstamp`).
        strategy: what to do with synthetic duplicates (DESIGN §1 row 4).
        cross_batch: given the distinct (`event_key`, `fingerprint`) that survive in-batch natural dedup,
            returns them with `cross_batch` = SEEN_EARLIER | ID_SEEN_EARLIER | null (the manifest's answer).
            None: in-batch dedup only.

    Returns:
        One row per input event with `line`, `outcome`, `reason`, `errors`: the line to write (rewritten for `reid`), its
        outcome, the reason, and `errors` (non-empty only when the outcome is `bad`).
    """
    repeated_ids = (
        events.groupBy("event_key").count().where(F.col("count") > 1).select("event_key", F.lit(True).alias("repeated"))
    )
    tagged = events.join(repeated_ids, "event_key", "left")
    singles = tagged.where(F.col("repeated").isNull()).withColumn("natural_rank", F.lit(1))
    by_copy = Window.partitionBy("event_key", "fingerprint").orderBy(*first_copy_order())
    repeats = tagged.where(F.col("repeated")).withColumn("natural_rank", F.row_number().over(by_copy))

    if cross_batch is None:
        singles, repeats = (df.withColumn("cross_batch", F.lit(None).cast("string")) for df in (singles, repeats))
    else:
        survivors = singles.select("event_key", "fingerprint").unionByName(
            repeats.where(F.col("natural_rank") == 1).select("event_key", "fingerprint")
        )
        answers = cross_batch(survivors)
        singles, repeats = (df.join(answers, ["event_key", "fingerprint"], "left") for df in (singles, repeats))

    live = (F.col("natural_rank") == 1) & ~F.col("cross_batch").eqNullSafe(SEEN_EARLIER)
    dead_last = F.when(live, 0).otherwise(1)
    singles = singles.select(
        "*",
        F.when(live, 1).otherwise(0).alias("live_fingerprints"),
        F.lit(1).alias("first_rank"),
        F.lit(1).alias("last_rank"),
    )
    by_id = Window.partitionBy("event_key")
    # Ranks among the live copies of an id (survivors not already delivered by an earlier run) come first.
    repeats = repeats.select(
        "*",
        F.sum(F.when(live, 1).otherwise(0)).over(by_id).alias("live_fingerprints"),
        F.row_number().over(by_id.orderBy(dead_last, *first_copy_order())).alias("first_rank"),
        F.row_number().over(by_id.orderBy(dead_last, *last_copy_order())).alias("last_rank"),
    )
    return _decide(singles, strategy).unionByName(_decide(repeats, strategy))


class _Case(NamedTuple):
    condition: Column
    outcome: str
    line: Column
    errors: Column | None = None


def _decide(ranked: DataFrame, strategy: SyntheticStrategy) -> DataFrame:
    """Outcome and reason per row, from `natural_rank`, `cross_batch`, `live_fingerprints` and the ranks."""
    line, no_errors = F.col("line"), F.array().cast("array<string>")
    natural_copy = F.col("natural_rank") > 1
    cross_natural = F.col("cross_batch") == SEEN_EARLIER
    cross_synthetic = F.col("cross_batch") == ID_SEEN_EARLIER
    in_batch_synthetic = F.col("live_fingerprints") > 1

    def synthetic_cases(keep_first: Column, keep_last: Column) -> list[_Case]:
        """What happens to a live synthetic copy under the strategy."""
        if strategy == "reid":
            derived = field(line, "derived_contexts")
            fits = can_take_duplicate_context(derived)
            not_an_envelope = F.concat(
                F.lit('derived_contexts is not a contexts envelope {"schema":…,"data":[…]}, so the duplicate '
                      "context of this synthetic duplicate cannot be added: '"),
                F.substring(derived, 1, 100),
                F.lit("'"),
            )  # fmt: skip
            new_line = reidentified_line(line, F.col("event_id"), F.col("event_key"), F.col("fingerprint"))
            return [_Case(fits, GOOD, new_line), _Case(~fits, BAD, line, F.array(not_an_envelope))]
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
    return ranked.select(
        decide(lambda c: c.line, line, line).alias("line"),
        decide(lambda c: F.lit(c.outcome), F.lit(DUPLICATE), F.lit(GOOD)).alias("outcome"),
        reason.alias("reason"),
        decide(lambda c: c.errors if c.errors is not None else no_errors, no_errors, no_errors).alias("errors"),
    )
