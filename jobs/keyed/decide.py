"""The keyed dedup decisions, as pure DataFrame functions (built-in Spark functions only).

The decisions are those of reading the records one by one in input order (see `records`), with:

- `latest(i)` = the largest expiry value of the valid records up to and including record i (and of the
  state's latest point from earlier runs);
- record i is **expired** when `expiry(i) <= latest(i) - period`: exactly one period older than the latest
  is expired. Expiry is decided before the duplicate lookup;
- record i is a **duplicate** when an earlier valid, non-expired record with the same key (in this run, or
  in the state from earlier runs) is still live: its expiry value is `> latest(i) - period`. Without an
  expiry key every earlier record is live;
- otherwise it is **unique**. Records with a missing, null or unparseable key or expiry field are **error**.

No step sorts the whole input in one partition: the running maximum is computed per file split (a window
partitioned by file and split) plus the maxima of the earlier splits (a window over one row per split);
the duplicate lookup is a window partitioned by key.
"""

from __future__ import annotations

from decimal import Decimal

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, DecimalType, NumericType, StringType, TimestampNTZType, TimestampType

from jobs.keyed.period import Kind
from jobs.keyed.records import (
    CSV_PROBLEM,
    POS_BLOCK,
    POS_FILE,
    POS_ROW,
    POSITION,
    RAW_LINE,
    Format,
    field,
    json_line_problem,
)

UNIQUE, DUPLICATE, EXPIRED, ERROR = "unique", "duplicate", "expired", "error"
OUTCOMES = (UNIQUE, DUPLICATE, EXPIRED, ERROR)

KEY, EXPIRY, REASON, OUTCOME, LATEST = "__w_key", "__w_expiry", "__w_reason", "__w_outcome", "__w_latest"
STATE_EXPIRY, STATE_SEEN = "__w_state_expiry", "__w_state_seen"
EXPIRY_TYPE = DecimalType(38, 6)
# A plain decimal number (optionally signed, with a fraction or an exponent).
NUMBER_PATTERN = r"^\s*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\s*\z"


def expiry_literal(value: Decimal | None) -> Column:
    return F.lit(None if value is None else str(value)).cast(EXPIRY_TYPE)


def _parse_expiry(frame: DataFrame, fmt: Format, name: str, kind: Kind) -> tuple[Column, Column]:
    """(raw value, parsed decimal value or NULL) of the expiry field."""
    raw = field(frame, fmt, name)
    dtype = StringType() if fmt == "jsonl" else frame.schema[name].dataType
    if kind == "number":
        parsed = raw.try_cast(EXPIRY_TYPE) if isinstance(dtype, NumericType | StringType) else F.lit(None)
        return raw, parsed.cast(EXPIRY_TYPE)
    if isinstance(dtype, TimestampType | TimestampNTZType | DateType):
        timestamp = raw.cast("timestamp")
    elif isinstance(dtype, StringType):
        timestamp = raw.try_cast("timestamp")
    else:
        timestamp = F.lit(None).cast("timestamp")
    seconds = (F.unix_micros(timestamp).cast(DecimalType(38, 0)) / F.lit(1_000_000)).cast(EXPIRY_TYPE)
    return raw, seconds


def extract(
    frame: DataFrame, fmt: Format, key_fields: list[str], expiry_field: str | None, kind: Kind | None
) -> DataFrame:
    """Add `KEY` (a JSON array of the key values as strings), `EXPIRY` (decimal) and `REASON` (NULL if valid)."""
    checks = [
        F.when(field(frame, fmt, name).isNull(), F.lit(f"key field '{name}' is missing or null")) for name in key_fields
    ]
    expiry: Column = F.lit(None).cast(EXPIRY_TYPE)
    if expiry_field is not None and kind is not None:
        raw, expiry = _parse_expiry(frame, fmt, expiry_field, kind)
        checks.append(F.when(raw.isNull(), F.lit(f"expiry field '{expiry_field}' is missing or null")))
        if kind == "number":  # a number too large for the exact decimal says so, rather than "not a number"
            checks.append(
                F.when(expiry.isNull() & raw.cast("string").rlike(NUMBER_PATTERN), F.lit(
                    f"expiry field '{expiry_field}' is out of range; allowed: at most {EXPIRY_TYPE.precision - EXPIRY_TYPE.scale} "
                    f"digits before the decimal point"))
            )  # fmt: skip
        checks.append(F.when(expiry.isNull(), F.lit(f"expiry field '{expiry_field}' is not a {kind}")))
    # The record as a whole first: a line that is no JSON object (or repeats a key, which would make a field
    # mean one of two values) or a csv line that is no record of the header's fields says so.
    whole = json_line_problem(F.col(RAW_LINE)) if fmt == "jsonl" else F.lit(None).cast("string")
    reason = F.coalesce(whole, F.col(CSV_PROBLEM), *checks)
    key = F.to_json(F.array(*[field(frame, fmt, name).cast("string") for name in key_fields]))
    return frame.select("*", key.alias(KEY), expiry.alias(EXPIRY), reason.alias(REASON))


def decide(
    records: DataFrame, period: Decimal | None, latest_before: Decimal | None, state: DataFrame | None
) -> DataFrame:
    """Give every record its `OUTCOME` (and `LATEST` point); one output row per input row.

    Args:
        records: the output of `extract`, with the position columns.
        period: the expiry period (decimal; seconds for timestamps), or None without expiry.
        latest_before: the state's latest point (None when there is no state or no expiry).
        state: the live keys of earlier runs: `KEY`, `STATE_EXPIRY` (NULL without expiry), `STATE_SEEN`.
    """
    errors = records.where(F.col(REASON).isNotNull()).withColumn(OUTCOME, F.lit(ERROR))
    valid = records.where(F.col(REASON).isNull())
    order = [F.col(name) for name in POSITION]
    by_key = Window.partitionBy(KEY).orderBy(*order).rowsBetween(Window.unboundedPreceding, -1)
    if period is None:
        valid = valid.withColumn(LATEST, F.lit(None).cast(EXPIRY_TYPE))
        valid = _with_state(valid, state)
        earlier = F.count(F.lit(1)).over(by_key)
        duplicate = (earlier > 0) | F.col(STATE_SEEN).isNotNull()
        decided = valid.withColumn(OUTCOME, F.when(duplicate, F.lit(DUPLICATE)).otherwise(F.lit(UNIQUE)))
        return decided.unionByName(errors, allowMissingColumns=True)

    segment = [POS_FILE, POS_BLOCK]
    split_max = valid.groupBy(*segment).agg(F.max(EXPIRY).alias("__w_split_max"))
    prefix = split_max.select(
        *segment,
        F.max("__w_split_max")
        # One row per file split: a tiny frame, so one window partition is fine.
        .over(Window.partitionBy(F.lit(0)).orderBy(*segment).rowsBetween(Window.unboundedPreceding, -1))
        .alias("__w_prefix"),
    )
    with_prefix = valid.join(F.broadcast(prefix), segment, "left")
    # latest(i): the state's latest point, the maxima of the earlier splits, the running max in this split.
    running = F.max(EXPIRY).over(
        Window.partitionBy(*segment).orderBy(POS_ROW).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    latest = F.greatest(expiry_literal(latest_before), F.col("__w_prefix"), running)
    with_latest = with_prefix.withColumn(LATEST, latest).drop("__w_prefix")
    horizon = F.col(LATEST) - expiry_literal(period)
    expired = F.col(EXPIRY) <= horizon
    with_expired = with_latest.withColumn("__w_expired", expired)
    with_state = _with_state(with_expired, state)
    earlier_live = F.max(F.when(~F.col("__w_expired"), F.col(EXPIRY))).over(by_key)
    duplicate = F.greatest(earlier_live, F.col(STATE_EXPIRY)) > horizon
    outcome = F.when(F.col("__w_expired"), F.lit(EXPIRED)).when(duplicate, F.lit(DUPLICATE)).otherwise(F.lit(UNIQUE))
    decided = with_state.withColumn(OUTCOME, outcome).drop("__w_expired")
    return decided.unionByName(errors, allowMissingColumns=True)


def _with_state(valid: DataFrame, state: DataFrame | None) -> DataFrame:
    if state is None:
        return valid.withColumn(STATE_EXPIRY, F.lit(None).cast(EXPIRY_TYPE)).withColumn(
            STATE_SEEN, F.lit(None).cast("boolean")
        )
    return valid.join(state.select(KEY, STATE_EXPIRY, STATE_SEEN), KEY, "left")
