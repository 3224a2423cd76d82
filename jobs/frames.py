"""Small DataFrames of rows the driver holds, built in the JVM: reading them starts no Python worker.

`spark.createDataFrame(rows)` hands its rows to Spark as a Python RDD, so every query that reads the frame starts
Python workers to unpickle them. Here the rows reach the JVM as JSON text literals, one per partition, which
`from_json` parses and `inline` turns into rows.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, StructType


def local_frame(spark: SparkSession, rows: Sequence[Sequence[Any]], ddl: str, slices: int | None = None) -> DataFrame:
    """`rows` (tuples in the order of `ddl`'s columns, e.g. "id long, v string") as a DataFrame of `slices`
    partitions (default: the session's parallelism, as `createDataFrame` splits them), each a contiguous run of rows.

    Values are those JSON can carry: strings, integers, floats, booleans, None, and lists or dicts of them.

    Raises:
        ValueError: a row's width is not the number of `ddl`'s columns.
    """
    schema = DataType.fromDDL(ddl)
    assert isinstance(schema, StructType)
    names = schema.fieldNames()
    wrong = [row for row in rows if len(row) != len(names)]
    if wrong:
        raise ValueError(f"local_frame: {len(wrong)} row(s) not of {len(names)} values ({ddl}), e.g. {wrong[0]!r}")
    count = slices or spark.sparkContext.defaultParallelism
    bounds = [index * len(rows) // count for index in range(count + 1)]
    texts = [
        json.dumps([dict(zip(names, row, strict=True)) for row in rows[a:b]]) for a, b in itertools.pairwise(bounds)
    ]
    # A one-partition frame per slice, so that each task carries its own rows only.
    parts = [spark.range(0, 1, 1, 1).select(F.inline(F.from_json(F.lit(t), ArrayType(schema)))) for t in texts]
    return functools.reduce(DataFrame.union, parts)
