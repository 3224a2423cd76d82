"""csv records as RFC 4180 lines: each file's header checked by name, every field as text, no line misread.

A record is a line, ended by `\\n` or `\\r\\n`; a bare `\\r` is data. A field holding a quote or a comma is in quotes,
its quotes doubled (`"x""y"` is `x"y`). Lines are read one by one (a file splits across tasks), so a field in quotes
cannot hold a line break: a line whose quotes do not close, that holds a quote in a field not in quotes, or whose
number of fields is not the header's, is kept whole as an error with its reason, never read as a shorter record.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import unquote

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.errors import InvalidInputError
from jobs.frames import local_frame

_QUOTED, _PLAIN = r'"(?:[^"]++|"")*+"', r'[^,"]*+'
RECORD = rf"(?:{_QUOTED}|{_PLAIN})(?:,(?:{_QUOTED}|{_PLAIN}))*+"
"""A line of RFC 4180 fields (possessive: linear on long lines, no backtracking)."""
_FIELD = re.compile(rf"(?:^|,)({_QUOTED}|{_PLAIN})")

OPEN_QUOTE = (
    "a quote does not close, or is inside a field not in quotes (a field in quotes cannot hold a line break; a quote "
    "inside one is doubled)"
)
WRONG_WIDTH = "the row's number of fields differs from the header's"
NOT_TEXT = (
    "holds bytes that are not UTF-8 (read as U+FFFD) or U+FFFF, which the csv parser takes for the end of its input"
)
MAX_FIELDS = 20480
"""The csv parser's most fields a line (Spark's `maxColumns`): a longer line is an error kept whole, unparsed."""
READ_OPTIONS = {"escape": '"', "mode": "PERMISSIVE"}
WRITE_OPTIONS = {
    "header": "true",
    "escape": '"',
    "ignoreLeadingWhiteSpace": "false",
    "ignoreTrailingWhiteSpace": "false",
}
"""Written as read: RFC 4180 quoting, no trimming."""
_BAD = "__w_csv_bad"


def fields(line: str) -> list[str]:
    """The fields of an RFC 4180 line (`RECORD`), unquoted."""
    return [f[1:-1].replace('""', '"') if f.startswith('"') else f for f in _FIELD.findall(line)]


def column_names(header: list[str]) -> list[str]:
    """Spark's names for a csv header: an empty name is `_c<index>`, a name given twice (any case) gets its index."""
    lowered = [name.lower() for name in header]
    return [
        f"_c{index}" if not name else f"{name}{index}" if lowered.count(name.lower()) > 1 else name
        for index, name in enumerate(header)
    ]


def headers(lines: DataFrame, line: str, path: str, block: str, row: str) -> dict[str, tuple[int, str]]:
    """Each file's header: its first line that is not empty, as (row, text), by file (one job over the lines).

    First by the split's start, then by the row id inside it: a file may begin with more blank lines than a split."""
    at = F.struct(F.col(block), F.col(row))
    firsts = lines.groupBy(path).agg(F.min(at).alias("at"), F.min_by(line, at).alias(line)).collect()
    return {first[path]: (first["at"][row], first[line]) for first in firsts}


def input_header(found: dict[str, tuple[int, str]], root: str, names: Sequence[str]) -> list[str]:
    """The input's column names: the header of its first file that has one, the same in every other file.

    Raises:
        InvalidInputError: no file holds a line; a first line is no csv record or holds a bare `\r`; a file's header
            is not the first's.
    """
    if not found:
        raise InvalidInputError(
            f"--input: the {len(names)} csv file(s) under {root} hold no line, so no header: "
            f"{', '.join(names[:5])}{', …' if len(names) > 5 else ''}; allowed: csv files whose first line names "
            "their columns. Nothing was written"
        )
    by_name = sorted((unquote(path), text.removeprefix("\ufeff")) for path, (_, text) in found.items())
    for name, text in by_name:
        if "\r" in text:  # lines ended by a bare `\r` (classic Mac OS): the whole file would be one header
            raise InvalidInputError(
                f"--input: {name}: its first line holds a bare \\r ({text[:120]!r}); allowed: lines ended by \\n or "
                "\\r\\n (convert the file's line ends, e.g. with `tr '\\r' '\\n'`). Nothing was written"
            )
        if "\ufffd" in text or "\uffff" in text or text.count(",") >= MAX_FIELDS:
            raise InvalidInputError(
                f"--input: {name}: its first line is no csv header ({text[:120]!r}: it {NOT_TEXT}, or names more "
                f"than {MAX_FIELDS:,} columns); allowed: a UTF-8 first line naming the columns. Nothing was written"
            )
        if not re.fullmatch(RECORD, text):
            raise InvalidInputError(
                f"--input: {name}: its first line is no csv header ({text[:120]!r}: {OPEN_QUOTE}); allowed: a first "
                "line naming the columns. Nothing was written"
            )
    first_name, first = by_name[0][0], fields(by_name[0][1])
    for name, text in by_name[1:]:
        header = fields(text)
        if [field.lower() for field in header] != [field.lower() for field in first]:
            raise InvalidInputError(
                f"--input: {name}: its csv header is {header}, where {first_name}'s is {first}; allowed: the same "
                "columns in the same order in every csv file of an input. Fix the file or move it to an input of its "
                "own, then run the command again. Nothing was written"
            )
    names = column_names(first)
    lowered = [name.lower() for name in names]
    if len(set(lowered)) < len(lowered):
        clash = next(name for name in names if lowered.count(name.lower()) > 1)
        raise InvalidInputError(
            f"--input: {first_name}: its csv header {first} gives two columns the name {clash!r} (a name given twice "
            "is numbered, an empty one is `_c<position>`); allowed: distinct column names. Nothing was written"
        )
    return names


def parsed(
    spark: SparkSession, lines: DataFrame, found: dict[str, tuple[int, str]], columns: list[str], line: str, path: str,
    row: str, bad_line: str, problem: str,
) -> DataFrame:  # fmt: skip
    """The records of `lines` without the files' headers: `columns` as text, plus `problem` (why a line is no
    record, else NULL) and `bad_line` (the line as read when it is none: nothing lost)."""
    heads = local_frame(spark, [(name, at) for name, (at, _) in found.items()], f"{path} string, {row} long", slices=1)
    records = lines.join(F.broadcast(heads), [path, row], "left_anti")
    schema = ", ".join(f"`{name.replace('`', '``')}` STRING" for name in [*columns, _BAD])
    text = F.col(line)
    not_text = ~F.is_valid_utf8(text) | text.contains("\ufffd") | text.contains("\uffff")
    too_wide = F.length(text) - F.length(F.replace(text, F.lit(","), F.lit(""))) >= MAX_FIELDS
    parsable = F.when(not_text | too_wide, F.lit("")).otherwise(text)  # kept whole, not parsed
    record = F.from_csv(parsable, schema, {**READ_OPTIONS, "columnNameOfCorruptRecord": _BAD})
    why: Column = (
        F.when(not_text, F.lit(NOT_TEXT))
        .when(too_wide, F.lit(WRONG_WIDTH))
        .when(~text.rlike(rf"^{RECORD}\z"), F.lit(OPEN_QUOTE))
        .when(record.getField(_BAD).isNotNull(), F.lit(WRONG_WIDTH))
    )
    return records.select(
        *[record.getField(name).alias(name) for name in columns],
        *[name for name in records.columns if name != line],
        why.alias(problem),
        F.when(why.isNotNull(), F.col(line)).alias(bad_line),
    )
