"""`table create | insert | select | optimize`: the operations on a keyed table.

Insert dedup: `--token T` skips an insert whose token any earlier insert of the table applied (the data is
not compared: a retried batch is skipped even if it changed, as in ClickHouse). Without a token, an insert
whose data equals one of the table's last N inserts (`dedup_window`, 0 = off) is skipped. "Equal" means the
same multiset of rows (row order and file layout ignored): a count plus two order-independent sums of
64-bit row hashes. Token inserts take a slot in the window, but their data hash is not recorded, so a later
token-less insert of the same data is not skipped (ClickHouse test 02124).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType, StructType

from jobs.contract import SUCCESS_MARKER, Progress
from jobs.errors import InvalidArgumentError, WinnowError
from jobs.fs.input import listing_summary
from jobs.fs.paths import absolute, check_apart, exact, written
from jobs.keyed import csv_lines
from jobs.keyed.records import (
    CSV_LINE,
    CSV_PROBLEM,
    POS_BLOCK,
    POS_FILE,
    POS_ROW,
    Format,
    check_format,
    check_ranked,
    list_records,
    ranked_files,
    read_records,
    unranked,
    user_columns,
)
from jobs.keyed.storage import Storage
from jobs.tables.engines import DELETED, HIDDEN, POS, SIGN, VER, final_rows, merged_rows
from jobs.tables.log import LOG_FORMAT, TableExistsError, TableLog, TableSettings, validate_settings
from jobs.tables.parts import CheckedParts, check_parts, recorded_files

VERSION_TYPE = DecimalType(38, 6)


class InvalidInsertError(WinnowError):
    """An insert's data breaks the table's rules (missing columns, bad sign/version/is_deleted, null key)."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def create(spark: SparkSession, table: str, settings: TableSettings) -> dict[str, Any]:
    """Create an empty table (commit 0).

    Raises:
        InvalidArgumentError: bad settings. TableExistsError: the folder already holds a table.
    """
    validate_settings(settings)
    log = TableLog(spark, absolute(table))
    if log.exists():
        raise TableExistsError(f"--table: {log.path} already holds a table; choose another folder")
    document = {"format": LOG_FORMAT, "commit": 0, "operation": "create", "settings": settings.to_json(),
                "schema": None, "parts": [], "tokens": [], "recent_inserts": [], "committed_at": _now()}  # fmt: skip
    log.write(document)
    return {"operation": "create", "table": log.path, "commit": 0, "settings": settings.to_json()}


def _stored_schema(head: dict[str, Any]) -> StructType | None:
    return None if head["schema"] is None else StructType.fromJson(head["schema"])


def _conform(frame: DataFrame, schema: StructType | None, settings: TableSettings) -> StructType:
    """The table's schema after this insert (the first insert defines it); checks the insert's columns.

    Raises:
        InvalidArgumentError: a key or role column is missing. InvalidInsertError: the columns differ from
            the table's.
    """
    columns = user_columns(frame)
    needed = [*settings.key, *settings.role_columns()]
    missing = [name for name in needed if name not in columns]
    if missing:
        raise InvalidArgumentError(f"--input: the table's key/role columns {missing} are not in the input; "
                                   f"the input has: {', '.join(columns)}")  # fmt: skip
    if schema is None:
        return StructType([frame.schema[name] for name in columns])
    if sorted(columns) != sorted(schema.fieldNames()):
        raise InvalidInsertError(
            f"--input: columns {sorted(columns)} differ from the table's {sorted(schema.fieldNames())}"
        )
    return schema


def insert(
    spark: SparkSession,
    table: str,
    input_path: str,
    fmt_text: str,
    token: str | None,
    progress: Progress = lambda message: None,
) -> dict[str, Any]:
    """Insert a batch as one new part, unless its token (or, without one, its data) was already applied.

    Raises:
        InvalidInsertError: rows that break the table's rules (the insert is rejected whole, nothing written).
        InvalidArgumentError: the input holds uploads in progress (an insert takes its whole batch).
        DamagedPartError: a part of the table is not what its commit records (`parts.check_parts`).
    """
    fmt: Format = check_format(fmt_text)
    if token is not None and not token.strip():
        raise InvalidArgumentError("--token: given an empty token; allowed: a non-empty string")
    log = TableLog(spark, absolute(table))
    head = log.head()
    checked = check_parts(spark, log.path, head)  # a damaged table is never carried into a new commit
    settings = TableSettings.from_json(head["settings"])
    number = head["commit"] + 1
    result: dict[str, Any] = {"operation": "insert", "table": log.path, "input": absolute(input_path), "token": token}
    if token is not None and token in head["tokens"]:
        return {**result, "skipped": f"token {token!r} was already applied to the table", "commit": head["commit"]}

    listing = list_records(spark, absolute(input_path))
    if listing.in_progress:  # an insert is one batch, named once by its token or its data: never a part of one
        raise InvalidArgumentError(
            f"--input: {absolute(input_path)} holds {len(listing.in_progress)} upload(s) in progress: "
            f"{', '.join(file.path for file in listing.in_progress[:5])}; an insert takes its whole batch (its token, "
            "or its data, names it once). Wait until they are renamed (._COPYING_, .tmp, .filepart dropped), then "
            "insert; nothing was written"
        )
    records = read_records(spark, absolute(input_path), listing, fmt, json_as_text=False)
    result["input_files"] = listing_summary(listing)
    stored = _stored_schema(head)
    schema = _conform(records, stored, settings)
    conformed = records
    if stored is not None:  # later inserts are converted to the table's types; the inputs are kept to report failures
        conformed = records.select(
            *[F.col(f"`{f.name}`").try_cast(f.dataType).alias(f.name) for f in schema.fields],
            *[F.col(f"`{f.name}`").alias(f"__w_in_{f.name}") for f in schema.fields],
            POS_FILE, POS_BLOCK, POS_ROW, CSV_PROBLEM, CSV_LINE,
        )  # fmt: skip
    typed = conformed.select(
        "*",
        F.struct(
            F.lit(number).cast("long").alias("part"),
            F.col(POS_FILE).alias("file"),
            F.col(POS_BLOCK).alias("block"),
            F.col(POS_ROW).alias("row"),
        ).alias(POS),
        (
            F.col(f"`{settings.version}`").try_cast(VERSION_TYPE)
            if settings.version
            else F.lit(None).cast(VERSION_TYPE)
        ).alias(VER),
        (F.col(f"`{settings.sign}`").try_cast("int") if settings.sign else F.lit(None).cast("int")).alias(SIGN),
        (F.col(f"`{settings.is_deleted}`").try_cast("int") if settings.is_deleted else F.lit(0)).alias(DELETED),
    )
    checks = _checks(settings, schema, stored is not None)
    # A row's problem is the first check it fails: a row is counted once (a csv line that is no record has no key).
    problem = F.coalesce(*[F.when(condition, F.lit(i)) for i, (_, condition) in enumerate(checks)])
    row_hash = F.struct(*[F.col(f"`{f.name}`") for f in schema.fields])
    aggregates = [
        F.count(F.lit(1)).alias("rows"),
        unranked().alias("unranked"),
        F.sum(F.xxhash64(row_hash).cast("decimal(38,0)")).alias("h1"),
        F.sum(F.hash(row_hash).cast("decimal(38,0)")).alias("h2"),
        *[F.sum(F.when(problem == i, 1).otherwise(0)).alias(f"c{i}") for i in range(len(checks))],
    ]
    progress(f"checking {result['input']}")
    stats = typed.agg(*aggregates).collect()[0]
    check_ranked(stats["unranked"], result["input"])
    if any(stats[f"c{i}"] for i in range(len(checks))):
        progress(f"finding the first row of each problem in {result['input']}")
        firsts = _first_rows(typed, problem, " after its header" if fmt == "csv" else "")
        problems = [
            f"{stats[f'c{i}']:,} row(s): {message}, first at {firsts[i]}"
            for i, (message, _) in enumerate(checks)
            if stats[f"c{i}"]
        ]
        raise InvalidInsertError(
            f"insert into {log.path} rejected: {'; '.join(problems)}. Fix or remove those rows, then insert again; "
            "nothing was inserted"
        )
    data_id = f"hash:{stats['rows']}:{stats['h1'] or 0}:{stats['h2'] or 0}"
    window = settings.dedup_window
    if token is None and window > 0 and data_id in head["recent_inserts"][-window:]:
        return {**result, "skipped": f"the same data was inserted within the last {window} inserts",
                "commit": head["commit"]}  # fmt: skip

    part = TableLog.new_part(number)
    parts = list(checked.entries)
    if stats["rows"]:
        progress(f"writing part {part}")
        columns = [F.col(f"`{f.name}`") for f in schema.fields]
        typed.select(*columns, *HIDDEN).sortWithinPartitions(POS).write.mode("errorifexists").parquet(
            written(log.part_path(part))
        )
        parts.append(
            {"id": part, "rows": stats["rows"], "commit": number, "files": recorded_files(log.part_path(part))}
        )
    recent = [*head["recent_inserts"], f"token:{token}" if token is not None else data_id][-window:] if window else []
    document = {**head, "commit": number, "operation": "insert", "schema": head["schema"] or schema.jsonValue(),
                "parts": parts, "tokens": head["tokens"] + ([token] if token is not None else []),
                "recent_inserts": recent, "committed_at": _now()}  # fmt: skip
    log.write(document, part if stats["rows"] else None)
    return {**result, "skipped": None, "commit": number, "part": part if stats["rows"] else None, "rows": stats["rows"]}


def _first_rows(typed: DataFrame, problem: Column, counted: str) -> dict[int, str]:
    """Each problem's first row in input order, as `FILE row N{counted}` (N: the row's number in its file, from 1;
    a csv header and empty lines are no rows), with the line as read when it is no csv record. Read only when an
    insert is rejected: it numbers every row of the input."""
    in_file = Window.partitionBy(POS_FILE).orderBy(POS_BLOCK, POS_ROW)
    numbered = typed.select(
        problem.alias("problem"), F.struct(POS_FILE, F.row_number().over(in_file).alias("row"), CSV_LINE).alias("at")
    )
    files = ranked_files(typed)
    firsts = {}
    for found in numbered.where(F.col("problem").isNotNull()).groupBy("problem").agg(F.min("at").alias("at")).collect():
        rank, row, line = found["at"]
        text = f": {line[:120]!r}" if line is not None else ""
        firsts[found["problem"]] = f"{unquote(files[rank - 1])} row {row}{counted}{text}"
    return firsts


def _checks(settings: TableSettings, schema: StructType, casted: bool) -> list[tuple[str, Any]]:
    checks: list[tuple[str, Any]] = [
        (f"{problem} (csv)", F.col(CSV_PROBLEM) == problem)
        for problem in (csv_lines.NOT_TEXT, csv_lines.OPEN_QUOTE, csv_lines.WRONG_WIDTH)
    ]
    for name in settings.key:
        checks.append((f"key column '{name}' is null", F.col(f"`{name}`").isNull()))
    if settings.version is not None:
        checks.append((f"version column '{settings.version}' is null or not a number", F.col(VER).isNull()))
    if settings.sign is not None:
        checks.append(
            (f"sign column '{settings.sign}' is not 1 or -1", ~F.coalesce(F.col(SIGN).isin(1, -1), F.lit(False)))
        )
    if settings.is_deleted is not None:
        checks.append((f"is_deleted column '{settings.is_deleted}' is not 0 or 1",
                       ~F.coalesce(F.col(DELETED).isin(0, 1), F.lit(False))))  # fmt: skip
    if casted:
        for f in schema.fields:
            failed = F.col(f"`__w_in_{f.name}`").isNotNull() & F.col(f"`{f.name}`").isNull()
            checks.append((f"column '{f.name}' does not convert to the table's {f.dataType.simpleString()}", failed))
    return checks


def _stored_rows(spark: SparkSession, checked: CheckedParts) -> DataFrame | None:
    """The rows of the checked parts: exactly their recorded files, by name (a file put beside them is not read)."""
    if not checked.paths:
        return None
    return spark.read.parquet(*(exact(path) for path in checked.paths))


def select(spark: SparkSession, table: str, output: str, final: bool, fmt_text: str = "parquet") -> dict[str, Any]:
    """Write the table's rows to `output` (replaced): as stored, or with `final` the merged state.

    Raises:
        DamagedPartError: a part of the table is not what its commit records (`parts.check_parts`).
    """
    fmt: Format = check_format(fmt_text)
    log = TableLog(spark, absolute(table))
    head = log.head()
    checked = check_parts(spark, log.path, head)
    settings = TableSettings.from_json(head["settings"])
    target = absolute(output)
    check_apart("--output", target, {"--table": log.path})
    storage = Storage(spark)
    _check_replaceable(storage, target)
    rows = _stored_rows(spark, checked)
    schema = _stored_schema(head)
    storage.delete(f"{target}/{SUCCESS_MARKER}")  # first: a reader never takes a half-replaced output as whole
    if rows is None or schema is None:  # no rows yet (an empty table writes an empty folder)
        storage.delete(target)
        storage.mkdirs(target)
    else:
        rows = (final_rows(rows, settings) if final else rows).sortWithinPartitions(POS)
        frame = rows.select(*[F.col(f"`{name}`") for name in schema.fieldNames()])
        writer = frame.write.mode("overwrite")
        if fmt == "csv":  # the rows written are the rows stored: no trimming, RFC 4180 quoting
            writer.options(**csv_lines.WRITE_OPTIONS).csv(written(target))
        elif fmt == "jsonl":
            writer.json(written(target))
        else:
            writer.parquet(written(target))
    storage.write_bytes(f"{target}/{SUCCESS_MARKER}", b"")
    return {"operation": "select", "table": log.path, "commit": head["commit"], "final": final, "output": target,
            "format": fmt}  # fmt: skip


def _check_replaceable(storage: Storage, target: str) -> None:
    """`select` replaces its output folder only if it is empty or an earlier select's output: Spark's `part-*`
    files and `_SUCCESS` (a keyed run's `unique/` holds part files too, but no `_SUCCESS`).

    Raises:
        InvalidArgumentError: the folder holds anything else.
    """
    names = [name for name in storage.children(target) if not name.startswith(".")]
    foreign = [name for name in names if not name.startswith(("part-", SUCCESS_MARKER))]
    if names and SUCCESS_MARKER not in names:
        foreign = foreign or ["files without a _SUCCESS"]
    if foreign:
        raise InvalidArgumentError(
            f"--output: {target} holds {', '.join(foreign[:5])}, which a select does not write; it is not replaced. "
            "Allowed: a new folder, or an earlier select's output"
        )


def optimize(
    spark: SparkSession, table: str, cleanup: bool, progress: Progress = lambda message: None
) -> dict[str, Any]:
    """Merge all parts into one (`OPTIMIZE … FINAL [CLEANUP]`), then delete the old parts' files.

    Raises:
        InvalidArgumentError: `cleanup` on a table without is_deleted.
        DamagedPartError: a part of the table is not what its commit records (`parts.check_parts`).
    """
    log = TableLog(spark, absolute(table))
    head = log.head()
    settings = TableSettings.from_json(head["settings"])
    if cleanup and settings.is_deleted is None:
        raise InvalidArgumentError("--cleanup: only for replacing tables created with --is-deleted")
    number = head["commit"] + 1
    rows = _stored_rows(spark, check_parts(spark, log.path, head))
    result: dict[str, Any] = {"operation": "optimize", "table": log.path, "cleanup": cleanup,
                              "parts_before": len(head["parts"])}  # fmt: skip
    if rows is None:
        return {**result, "commit": head["commit"], "parts_after": 0, "rows": 0}
    part = TableLog.new_part(number)
    progress(f"merging {len(head['parts'])} part(s) into {part}")
    merged = merged_rows(rows, settings, cleanup).sortWithinPartitions(POS)
    merged.write.mode("errorifexists").parquet(written(log.part_path(part)))
    count = spark.read.parquet(exact(log.part_path(part))).count()
    parts = (
        [{"id": part, "rows": count, "commit": number, "files": recorded_files(log.part_path(part))}] if count else []
    )
    log.write({**head, "commit": number, "operation": "optimize-cleanup" if cleanup else "optimize", "parts": parts,
               "committed_at": _now()}, part)  # fmt: skip
    # The merged parts, and parts no commit up to this one names (a change killed before its commit, or one
    # that lost its commit race): nothing can read or commit them any more.
    for orphan in log.orphan_parts(number, {p["id"] for p in parts}):
        log.fs.delete(log.part_path(orphan))
    return {**result, "commit": number, "parts_after": len(parts), "rows": count}
