"""The merge engines as pure DataFrame functions (window functions per key; no UDF, no global sort).

Every stored row carries `POS`, its merge-order position `struct(part commit, file, split, row)`: parts in
insertion order, then rows in input order inside an insert. `optimize` keeps the positions of the rows it
keeps, so merge order never changes. Role values are stored typed in hidden columns: `VER` (decimal),
`SIGN` (int, 1 or -1), `DELETED` (int, 0 or 1).

replacing: per key the row with the highest version wins, ties (and no version) go to the last row in merge
order. With is_deleted, a winning tombstone is hidden by FINAL, kept by a plain merge (so an older row cannot
come back), and removed by a merge with cleanup.

collapsing, per key, with P rows of sign +1, N of sign -1 and `last` the sign of the last row (ClickHouse's
CollapsingSortedAlgorithm):

    P == N, last = +1   merge keeps the first -1 and the last +1   FINAL: the last +1
    P == N, last = -1   nothing                                     nothing
    P >  N              the last +1                                 the last +1
    N >  P              the first -1                                nothing (FINAL never returns -1 rows)

versioned-collapsing: per (key, version) a +1 and a -1 cancel whatever their order. A row cancels the most
recent uncancelled row of the opposite sign (ClickHouse's LIFO queue, without its bounded queue size, so
the result never depends on block sizes). Unpaired rows of either sign stay, in FINAL and in a merge.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from jobs.tables.log import TableSettings

POS, VER, SIGN, DELETED = "__w_pos", "__w_ver", "__w_sign", "__w_deleted"
HIDDEN = (POS, VER, SIGN, DELETED)


def _key(settings: TableSettings) -> list[Column]:
    return [F.col(f"`{name}`") for name in settings.key]


def replacing_winners(rows: DataFrame, settings: TableSettings) -> DataFrame:
    """Per key, the row with the highest version; ties and the no-version case: the last in merge order."""
    order = [F.col(POS).desc()] if settings.version is None else [F.col(VER).desc(), F.col(POS).desc()]
    rank = F.row_number().over(Window.partitionBy(*_key(settings)).orderBy(*order))
    return rows.withColumn("__w_rank", rank).where(F.col("__w_rank") == 1).drop("__w_rank")


def collapsing_kept(rows: DataFrame, settings: TableSettings) -> DataFrame:
    """The rows a full merge of a collapsing table keeps (see the module's table)."""
    by_key = Window.partitionBy(*_key(settings))
    positive = F.sum(F.when(F.col(SIGN) == 1, 1).otherwise(0)).over(by_key)
    negative = F.sum(F.when(F.col(SIGN) == -1, 1).otherwise(0)).over(by_key)
    last_sign = F.max_by(F.col(SIGN), F.col(POS)).over(by_key)
    first_negative = F.min(F.when(F.col(SIGN) == -1, F.col(POS))).over(by_key)
    last_positive = F.max(F.when(F.col(SIGN) == 1, F.col(POS))).over(by_key)
    counted = rows.select(
        "*",
        positive.alias("__w_p"),
        negative.alias("__w_n"),
        last_sign.alias("__w_last"),
        first_negative.alias("__w_first_neg"),
        last_positive.alias("__w_last_pos"),
    )
    p, n, pos = F.col("__w_p"), F.col("__w_n"), F.col(POS)
    is_first_negative, is_last_positive = pos == F.col("__w_first_neg"), pos == F.col("__w_last_pos")
    keep = (
        ((p == n) & (F.col("__w_last") == 1) & (is_first_negative | is_last_positive))
        | ((p > n) & is_last_positive)
        | ((n > p) & is_first_negative)
    )
    return counted.where(keep).drop("__w_p", "__w_n", "__w_last", "__w_first_neg", "__w_last_pos")


def versioned_survivors(rows: DataFrame, settings: TableSettings) -> DataFrame:
    """The rows of a versioned-collapsing table left after +1/-1 pairs of one (key, version) cancel.

    With s(i) the running sum of signs in merge order inside a (key, version), row i (sign g) is pushed on
    the queue when g*s(i-1) >= 0 (else it cancels a queued row), and is cancelled later iff some later
    g*s(j) < g*s(i). So it survives iff g*s(i-1) >= 0 and g*s(j) >= g*s(i) for every j > i.
    """
    group = Window.partitionBy(*_key(settings), F.col(VER)).orderBy(POS)
    running = F.sum(SIGN).over(group.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    with_sum = rows.withColumn("__w_s", running)
    after = group.rowsBetween(1, Window.unboundedFollowing)
    sigma, s = F.col(SIGN), F.col("__w_s")
    with_later = with_sum.select(
        "*", F.min("__w_s").over(after).alias("__w_later_min"), F.max("__w_s").over(after).alias("__w_later_max")
    )
    later_min, later_max = F.col("__w_later_min"), F.col("__w_later_max")
    pushed = sigma * (s - sigma) >= 0
    stays = F.when(sigma == 1, later_min.isNull() | (later_min >= s)).otherwise(later_max.isNull() | (later_max <= s))
    return with_later.where(pushed & stays).drop("__w_s", "__w_later_min", "__w_later_max")


def final_rows(rows: DataFrame, settings: TableSettings) -> DataFrame:
    """`SELECT … FINAL`: the merged state as a query sees it."""
    if settings.engine == "replacing":
        winners = replacing_winners(rows, settings)
        return winners if settings.is_deleted is None else winners.where(F.col(DELETED) == 0)
    if settings.engine == "collapsing":
        return collapsing_kept(rows, settings).where(F.col(SIGN) == 1)
    return versioned_survivors(rows, settings)


def merged_rows(rows: DataFrame, settings: TableSettings, cleanup: bool) -> DataFrame:
    """`OPTIMIZE … FINAL [CLEANUP]`: the rows a full merge into one part keeps."""
    if settings.engine == "replacing":
        winners = replacing_winners(rows, settings)
        return winners.where(F.col(DELETED) == 0) if cleanup else winners
    if settings.engine == "collapsing":
        return collapsing_kept(rows, settings)
    return versioned_survivors(rows, settings)
