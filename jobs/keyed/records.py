"""Reading keyed records (csv / jsonl / parquet) with their input position, and writing them back.

Input order is file order (file paths sorted as strings), then line order inside a file. Every record gets
three position columns that give exactly that order whatever the partitioning:

- `POS_FILE`: the rank of the record's file among the input files (from the file listing);
- `POS_BLOCK`: the start offset of the file split the record was read from (`_metadata.file_block_start`);
- `POS_ROW`: `monotonically_increasing_id()` taken right at the scan. A split is always read whole by one
  task, in order, so inside one (file, block) the ids increase with the line; their absolute values depend on
  the partitioning, but they are only ever compared within one (file, block).

JSON lines are kept as raw text (`RAW_LINE`) and written back unchanged; fields are read with
`get_json_object`. CSV is read with a header, every column as a string; parquet keeps its types.
"""

from __future__ import annotations

import re
from typing import Literal, get_args
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.errors import InvalidArgumentError, InvalidInputError
from jobs.frames import local_frame
from jobs.fs import store
from jobs.fs.input import read_listed, require_input, without_crlf_cr
from jobs.fs.paths import written
from jobs.keyed import csv_lines

Format = Literal["csv", "jsonl", "parquet"]
FORMATS: tuple[str, ...] = get_args(Format)

POS_FILE, POS_BLOCK, POS_ROW = "__w_file", "__w_block", "__w_row"
POSITION = (POS_FILE, POS_BLOCK, POS_ROW)
RAW_LINE = "__w_line"
CSV_PROBLEM, CSV_LINE = "__w_csv_problem", "__w_csv_line"
"""csv: why a line is no record of the header's fields, and the line as read (both NULL when it is one, and for
other formats)."""
CSV_COLUMNS = (CSV_PROBLEM, CSV_LINE)
_PATH = "__w_path"
INTERNAL_PREFIX = "__w_"


def check_format(fmt: str) -> Format:
    """Raises: InvalidArgumentError: `fmt` is not one of csv, jsonl, parquet."""
    if fmt not in FORMATS:
        raise InvalidArgumentError(f"--format: given {fmt!r}; allowed: {', '.join(FORMATS)}")
    return fmt  # type: ignore[return-value]


def list_records(spark: SparkSession, path: str) -> store.Listing:
    """The record files under `path`: the one listing of every job (`store.list_input`: hidden names and uploads in
    progress left out, a name Hadoop cannot read refused), which `read_records` reads by exact name.

    Raises:
        InputNotFoundError: `path` does not exist or holds no record file.
        InvalidArgumentError: a file's name cannot be read.
    """
    require_input(spark, path)
    listing = store.list_input(path)
    if not listing.files:
        raise listing.nothing_to_read("--input", path)
    return listing


def read_records(
    spark: SparkSession, path: str, listing: store.Listing, fmt: Format, json_as_text: bool = True
) -> DataFrame:
    """The records of the files `listing` names (`list_records(path)`) plus the three position columns.

    jsonl is read as raw lines (`RAW_LINE`), or with `json_as_text=False` as typed columns (schema inferred); csv as
    RFC 4180 lines (`jobs.keyed.csv_lines`), every column as text, plus `CSV_PROBLEM` and `CSV_LINE`.

    Raises:
        InputListingError: Spark lists other files than the listing's.
        InvalidInputError: a csv input of no line, or of other headers; jsonl lines that are no records.
    """
    names = listing.paths
    if fmt == "csv" or (fmt == "jsonl" and json_as_text):
        # A line ends at `\n` (`\r\n` too): a bare `\r` is JSON whitespace, or data in a field.
        frame = read_listed(spark, path, names, "text", lineSep="\n").select(
            without_crlf_cr(F.col("value")).alias(RAW_LINE)
        )
    elif fmt == "jsonl":
        text = read_listed(spark, path, names, "text", lineSep="\n")
        check_json_lines(text.withColumn("value", without_crlf_cr(F.col("value"))))  # see docstring
        frame = read_listed(spark, path, names, "json", lineSep="\n")
    else:
        frame = _parquet_records(spark, path, names)
    # Local paths are `file:///x` in the file listing and `file:/x` in `_metadata`: compare them without the scheme.
    positioned = frame.select(
        "*",
        F.regexp_replace(F.col("_metadata.file_path"), "^file:/+", "/").alias(_PATH),
        F.col("_metadata.file_block_start").alias(POS_BLOCK),
        F.monotonically_increasing_id().alias(POS_ROW),
    )
    if fmt == "csv":
        positioned = _csv_records(spark, positioned, path, names)
    _check_reserved([name for name in positioned.columns if name not in (RAW_LINE, _PATH, *POSITION, *CSV_COLUMNS)])
    for name in CSV_COLUMNS:
        if name not in positioned.columns:
            positioned = positioned.withColumn(name, F.lit(None).cast("string"))
    # The file ranks come from the file listing (one row per input file, no data scan), in the order of the names
    # (Spark lists and `_metadata` gives them %-encoded: `a%20b.csv` would sort after `a!b.csv`).
    paths = ranked_files(frame)
    files = local_frame(
        spark, list(zip(paths, range(1, len(paths) + 1), strict=True)), f"{_PATH} string, {POS_FILE} int", slices=1
    )  # broadcast whole: one partition
    # A left join: a record whose file is not in the listing is never dropped; `unranked` counts it.
    return positioned.join(F.broadcast(files), _PATH, "left").drop(_PATH)


def _csv_records(spark: SparkSession, lines: DataFrame, path: str, names: list[str]) -> DataFrame:
    """The csv records of `lines` (positioned raw lines): each file's header checked and dropped, the others parsed.

    Raises:
        InvalidInputError: no file holds a line; a file's header is no csv record, or not the first file's.
    """
    lines = lines.where(F.col(RAW_LINE) != "")  # an empty line is no record (Spark's csv reader skips it too)
    found = csv_lines.headers(lines, RAW_LINE, _PATH, POS_BLOCK, POS_ROW)
    columns = csv_lines.input_header(found, path, names)
    return csv_lines.parsed(spark, lines, found, columns, RAW_LINE, _PATH, POS_ROW, CSV_LINE, CSV_PROBLEM)


def _parquet_records(spark: SparkSession, path: str, names: list[str]) -> DataFrame:
    """The parquet files `names` (under `path`) with every file's columns, not the first file's alone.

    Raises:
        InvalidInputError: a column's type differs between two files (named, with both types).
    """
    try:
        return read_listed(spark, path, names, "parquet", mergeSchema="true")
    except Exception as err:
        if "CANNOT_MERGE" not in str(err):
            raise
        first = {field.name.lower(): field for field in read_listed(spark, path, names[:1], "parquet").schema}
        for name in names[1:]:
            for field in read_listed(spark, path, [name], "parquet").schema:
                known = first.get(field.name.lower())
                if known is not None and known.dataType != field.dataType:
                    raise InvalidInputError(
                        f"--input: {name}: column {field.name} is {field.dataType.simpleString()}, where {names[0]} "
                        f"has {known.dataType.simpleString()}; allowed: one type per column in every parquet file of "
                        "an input. Nothing was written"
                    ) from None
        raise


def _check_reserved(columns: list[str]) -> None:
    """Raises: InvalidArgumentError: an input column uses Winnow's reserved prefix."""
    bad = [name for name in columns if name.startswith(INTERNAL_PREFIX)]
    if bad:
        raise InvalidArgumentError(f"--input: columns {bad} use the reserved prefix {INTERNAL_PREFIX!r}")


def json_line_problem(line: Column) -> Column:
    """Why a JSON line is no record (NULL when it is one): not a JSON object, or a key given twice.

    Top-level keys are compared without case, as Spark's column names are (`{"id":1,"ID":2}` would be one column
    twice); Spark's VARIANT parser then rejects invalid JSON and inner objects that repeat a key.
    """
    keys = F.json_object_keys(line)
    distinct = F.array_distinct(F.transform(keys, F.lower))
    return (
        F.when(keys.isNull(), F.lit("not a JSON object"))
        .when(F.size(distinct) != F.size(keys), F.lit("a key appears more than once"))
        .when(F.try_parse_json(line).isNull(), F.lit("not valid JSON, or an inner object repeats a key"))
    )


def check_json_lines(text: DataFrame, shown: int = 3) -> None:
    """Check JSON lines (`text`: the files read as text) before Spark's JSON reader infers columns from them (it
    fails on a repeated key and turns a malformed line into a `_corrupt_record` column). Blank lines are skipped,
    as that reader does.

    Raises:
        InvalidInputError: lines that are not JSON objects or repeat a key (the first few named, in file order),
            or keys that differ only in case across lines (one column for Spark).
    """
    lines = text.where(F.trim("value") != "")
    file = F.regexp_replace(F.col("_metadata.file_path"), "^file:/+", "/")
    bad = lines.select(
        file.alias("file"), F.monotonically_increasing_id().alias("at"), "value",
        json_line_problem(F.col("value")).alias("problem"),
    ).where(F.col("problem").isNotNull())  # fmt: skip
    count = bad.count()
    if count:
        examples = "; ".join(
            f"{row['file']}: {row['problem']}: {row['value'][:120]!r}"
            for row in bad.orderBy("file", "at").limit(shown).collect()
        )
        raise InvalidInputError(f"--input: {count:,} JSON line(s) are no records, nothing written: {examples}")
    keys = lines.select(F.explode(F.json_object_keys("value")).alias("key")).distinct()
    clashes = sorted(
        sorted(row["spellings"])
        for row in keys.groupBy(F.lower("key")).agg(F.collect_list("key").alias("spellings")).collect()
        if len(row["spellings"]) > 1
    )
    if clashes:
        raise InvalidInputError(
            f"--input: keys {', '.join('/'.join(spelling) for spelling in clashes[:shown])} differ only in case "
            "across lines, and would be one column; allowed: one spelling per key, nothing written"
        )


def ranked_files(records: DataFrame) -> list[str]:
    """The files `records` reads, in their `POS_FILE` order (rank 1 first), as `_metadata` names them: local paths
    without `file:`, names %-encoded (`unquote` gives the path)."""
    return sorted({re.sub("^file:/+", "/", name) for name in records.inputFiles()}, key=unquote)


def unranked() -> Column:
    """The number of records whose file got no rank (should be 0; a job fails loudly otherwise)."""
    return F.sum(F.when(F.col(POS_FILE).isNull(), 1).otherwise(0))


def check_ranked(count: int | None, path: str) -> None:
    """Raises: RuntimeError: some records could not be placed in input order (a listing/path mismatch)."""
    if count:
        raise RuntimeError(f"{count} record(s) under {path} come from files missing in the file listing")


def user_columns(frame: DataFrame) -> list[str]:
    """The record's own columns (without Winnow's `__w_` columns)."""
    return [name for name in frame.columns if not name.startswith(INTERNAL_PREFIX)]


def field(frame: DataFrame, fmt: Format, name: str) -> Column:
    """A record field as a column: a JSON path lookup for jsonl (a string, NULL when missing or JSON null)."""
    if fmt == "jsonl":
        return F.get_json_object(F.col(RAW_LINE), "$['" + name.replace("'", "\\'") + "']")
    return F.col(f"`{name}`")


def check_fields(frame: DataFrame, fmt: Format, option: str, names: list[str]) -> None:
    """For csv and parquet, every field must be a column of the input (jsonl is checked per record).

    Raises:
        InvalidArgumentError: a field is not a column of the input.
    """
    if fmt == "jsonl":
        return
    columns = user_columns(frame)
    missing = [name for name in names if name not in columns]
    if missing:
        raise InvalidArgumentError(
            f"{option}: field(s) {missing} are not in the input; the input's fields are: {', '.join(columns)}"
        )


def _writer_frame(frame: DataFrame, fmt: Format, error_column: str | None, extra: list[str]) -> DataFrame:
    if fmt == "jsonl":
        text = F.col(RAW_LINE)
        if error_column:
            text = F.to_json(F.struct(F.col(RAW_LINE).alias("line"), F.col(error_column).alias("error")))
        return frame.select(text.alias("value"), *extra)
    columns = [F.col(f"`{name}`") for name in user_columns(frame)]
    if error_column:
        columns.append(F.col(error_column).alias("_error"))
        if fmt == "csv":  # the line as read when it is no record of the header's fields (else empty): nothing lost
            columns.append(F.col(CSV_LINE).alias("_line"))
    return frame.select(*columns, *extra)


def write_records(
    frame: DataFrame, target: str, fmt: Format, error_column: str | None = None, partition_by: str | None = None
) -> None:
    """Write records in `fmt`, each file in input order; `error_column` adds the error reason.

    csv: the input's columns (plus `_error`, and `_line`: the line as read when it is no record of the header's
    fields), with a header, quoted as RFC 4180 says. jsonl: the raw lines, or for errors
    `{"line": raw line, "error": reason}`. parquet: the input's columns (plus `_error`).
    `partition_by` writes one `partition_by=value/` folder per value (the column is not in the files).
    """
    extra = [partition_by] if partition_by else []
    ordered = frame.sortWithinPartitions(*extra, *POSITION)
    writer = _writer_frame(ordered, fmt, error_column, extra).write.mode("overwrite")
    if partition_by:
        writer = writer.partitionBy(partition_by)
    if fmt == "jsonl":
        writer.text(written(target))
    elif fmt == "csv":
        writer.options(**csv_lines.WRITE_OPTIONS).csv(written(target))
    else:
        writer.parquet(written(target))
