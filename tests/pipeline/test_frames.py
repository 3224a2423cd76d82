"""`local_frame`: the rows, types and partitions `spark.createDataFrame` gives, built in the JVM."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from jobs.frames import local_frame

CASES: list[tuple[list[tuple[Any, ...]], str]] = [
    ([('a\tb"c\\d\n\u00e9\u2028\U0001f600',), ("",), (None,)], "value string"),
    ([(1, 2**40, "a"), (2, -3, None)], "id int, seq long, v string"),
    ([(i, f"t{i}") for i in range(21)], "i int, e string"),
    ([("a\tb", ["first", 'second "quoted"', None]), ("x", [])], "line string, errors array<string>"),
    ([(1.5, True), (-0.1, False), (1e300, None)], "d double, b boolean"),
    ([], "value string"),
]


def rows_by_partition(frame: DataFrame) -> list[list[tuple[Any, ...]]]:
    return [[tuple(row) for row in part] for part in frame.rdd.glom().collect()]


@pytest.mark.parametrize(("rows", "ddl"), CASES)
def test_a_local_frame_is_what_create_data_frame_gives(
    spark: SparkSession, rows: list[tuple[Any, ...]], ddl: str
) -> None:
    built, created = local_frame(spark, rows, ddl), spark.createDataFrame(rows, ddl)
    assert built.schema == created.schema
    assert rows_by_partition(built) == rows_by_partition(created)


def test_a_row_of_another_width_is_refused(spark: SparkSession) -> None:
    with pytest.raises(
        ValueError, match=r"^local_frame: 1 row\(s\) not of 2 values \(a int, b string\), e\.g\. \(1,\)$"
    ):
        local_frame(spark, [(1, "x"), (1,)], "a int, b string")
