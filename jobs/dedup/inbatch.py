"""In-batch dedup: natural copies (same event_id and fingerprint), then synthetic ones (same id only).

Pure DataFrame functions. Only events whose id repeats in the batch are shuffled with their lines; the
rest pass through after a join with the (small) set of repeated ids.
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
OUTCOMES = (GOOD, BAD, DUPLICATE, QUARANTINED, DROPPED)
# Reasons, for duplicates, quarantined and dropped events and for the synthetic events kept in good.
IN_BATCH_NATURAL = "in_batch_natural"
IN_BATCH_SYNTHETIC = "in_batch_synthetic"

DECIDED_COLUMNS = ("line", "outcome", "reason", "errors")


def first_copy_order() -> list[Column]:
    """ "First" of DESIGN §4: earliest etl_tstamp (absent last), then collector_tstamp, then smallest line."""
    return [F.col("etl_tstamp").asc_nulls_last(), F.col("collector_tstamp").asc(), F.col("line").asc()]


def last_copy_order() -> list[Column]:
    """ "Last event wins": latest collector_tstamp, then latest etl_tstamp, then largest line."""
    return [F.col("collector_tstamp").desc(), F.col("etl_tstamp").desc_nulls_last(), F.col("line").desc()]


def dedup_in_batch(events: DataFrame, strategy: SyntheticStrategy) -> DataFrame:
    """Decide every valid event of one batch.

    Args:
        events: parsed valid events (`line`, `event_id`, `event_key`, `fingerprint`, `etl_tstamp`,
            `collector_tstamp`).
        strategy: what to do with synthetic duplicates (DESIGN §1 row 4).

    Returns:
        One row per input event with `DECIDED_COLUMNS`: the line to write (rewritten for `reid`), its
        outcome, the reason, and `errors` (non-empty only when the outcome is `bad`).
    """
    repeated_ids = (
        events.groupBy("event_key").count().where(F.col("count") > 1).select("event_key", F.lit(True).alias("repeated"))
    )
    tagged = events.join(repeated_ids, "event_key", "left")
    singles = tagged.where(F.col("repeated").isNull()).select(
        "line", F.lit(GOOD).alias("outcome"), F.lit(None).cast("string").alias("reason"), _no_errors()
    )
    repeats = _decide_repeated(tagged.where(F.col("repeated")), strategy)
    return singles.unionByName(repeats)


def _decide_repeated(events: DataFrame, strategy: SyntheticStrategy) -> DataFrame:
    by_copy = Window.partitionBy("event_key", "fingerprint").orderBy(*first_copy_order())
    by_id = Window.partitionBy("event_key")
    ranked = events.withColumn("natural_rank", F.row_number().over(by_copy))
    survivor = F.col("natural_rank") == 1
    ranked = ranked.withColumn("fingerprints", F.sum(F.when(survivor, 1).otherwise(0)).over(by_id))
    synthetic = survivor & (F.col("fingerprints") > 1)

    keep: Column = F.lit(True)
    if strategy in ("keep-first", "keep-last"):
        order = first_copy_order() if strategy == "keep-first" else last_copy_order()
        # natural_rank first: the survivors (rank 1) sort before the natural copies.
        by_id_ordered = by_id.orderBy(F.col("natural_rank"), *order)
        ranked = ranked.withColumn("synthetic_rank", F.row_number().over(by_id_ordered))
        keep = F.col("synthetic_rank") == 1

    line, no_errors = F.col("line"), F.array().cast("array<string>")
    # What happens to a synthetic survivor, per strategy: the first case whose condition holds.
    if strategy == "reid":
        derived = field(line, "derived_contexts")
        fits = can_take_duplicate_context(derived)
        not_an_envelope = F.concat(
            F.lit('derived_contexts is not a contexts envelope {"schema":…,"data":[…]}, so the duplicate '
                  "context of this synthetic duplicate cannot be added: '"),
            F.substring(derived, 1, 100),
            F.lit("'"),
        )  # fmt: skip
        cases = [
            _Case(fits, GOOD, reidentified_line(line, F.col("event_id"), F.col("event_key"), F.col("fingerprint"))),
            _Case(~fits, BAD, line, F.array(not_an_envelope)),
        ]
    elif strategy in ("keep-first", "keep-last"):
        cases = [_Case(keep, GOOD, line), _Case(~keep, DUPLICATE, line)]
    else:
        outcome = {"quarantine": QUARANTINED, "drop": DROPPED, "off": GOOD}[strategy]
        cases = [_Case(F.lit(True), outcome, line)]

    def decide(of_case: Callable[[_Case], Column], natural_copy: Column, single_copy: Column) -> Column:
        chosen = F.when(~survivor, natural_copy)
        for case in cases:
            chosen = chosen.when(synthetic & case.condition, of_case(case))
        return chosen.otherwise(single_copy)

    return ranked.select(
        decide(lambda c: c.line, line, line).alias("line"),
        decide(lambda c: F.lit(c.outcome), F.lit(DUPLICATE), F.lit(GOOD)).alias("outcome"),
        F.when(~survivor, F.lit(IN_BATCH_NATURAL)).when(synthetic, F.lit(IN_BATCH_SYNTHETIC)).alias("reason"),
        decide(lambda c: c.errors if c.errors is not None else no_errors, no_errors, no_errors).alias("errors"),
    )


class _Case(NamedTuple):
    condition: Column
    outcome: str
    line: Column
    errors: Column | None = None


def _no_errors() -> Column:
    return F.array().cast("array<string>").alias("errors")
