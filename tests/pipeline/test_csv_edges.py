"""csv at its edges for `keyed` and `table insert` (found by an attack on the RFC 4180 reading, 7e1b7d6), and input
names.

Each test runs the command line (`jobs.runtime.cli.main`) and asserts the exact records or the exact refusal; its
docstring says what was given, what happened and what should happen.
"""

from __future__ import annotations

import csv
import io
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.keyed.csv_lines import NOT_TEXT, WRONG_WIDTH
from jobs.runtime.cli import main
from tests.pipeline.helpers import spark_conf

RUN1 = "2026-11-01-00-00-00"


def split_bytes(spark: SparkSession, size: str) -> AbstractContextManager[None]:
    """Spark splits the input files in pieces of `size` bytes (a large file read by several tasks)."""
    return spark_conf(spark, **{"spark.sql.files.maxPartitionBytes": size, "spark.sql.files.openCostInBytes": "0"})


def run_job(tmp_path: Path, job: str, source: Path) -> int:
    """`keyed` (key `id`, run RUN1) or `table insert` into a new replacing table (key `id`) of the csv `source`."""
    if job == "keyed":
        return main(["keyed", "--input", str(source), "--format", "csv", "--key", "id", "--output",
                     str(tmp_path / "out"), "--state", str(tmp_path / "state"), "--run-id", RUN1])  # fmt: skip
    table = str(tmp_path / "table")
    assert main(["table", "create", "--table", table, "--engine", "replacing", "--key", "id"]) == 0
    return main(["table", "insert", "--table", table, "--input", str(source), "--format", "csv"])


def csv_rows(folder: Path) -> list[list[str]]:
    """The rows of a csv output folder as Python's csv module (an RFC 4180 reader) reads them, headers dropped."""
    return sorted(
        row
        for path in folder.glob("part-*")
        for row in list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8"), newline="")))[1:]
    )


def stored_rows(tmp_path: Path, job: str, outcome: str = "unique") -> list[list[str]]:
    """keyed: the rows of RUN1's `outcome` folder; table: the table's rows (`table select --format csv`)."""
    if job == "keyed":
        return csv_rows(tmp_path / "out" / f"run={RUN1}" / outcome)
    selected = tmp_path / "selected"
    assert main(["table", "select", "--table", str(tmp_path / "table"), "--output", str(selected), "--format",
                 "csv"]) == 0  # fmt: skip
    return csv_rows(selected)


def last_error(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize(("job", "header"), [("keyed", "id,v"), ("keyed", "v,id"), ("table insert", "v,id")])
def test_a_header_after_a_first_split_of_blank_lines_is_found_and_checked(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], job: str, header: str
) -> None:
    """b.csv begins with 3,000 blank lines, then its header and one record; Spark splits files at 1 KiB here (as it
    does at `spark.sql.files.maxPartitionBytes`, or at the input's size per core, 4 MiB at least, by default).
    A file's header is looked for in its first split only (`csv_lines.headers`: block 0), which holds only blank
    lines: b's header was not found, not checked and not dropped. Header `id,v`: the record (id, v) was written as
    a unique record beside a and b (input 3 for 2 records, exit 0; as at 9fa708e). Header `v,id`: b's record was read
    by position as id=2, v=b and its header as the record (v, id), exit 0, where 9fa708e refused it naming the
    file. Expected: the records (a, 1) and (b, 2), or the run refused naming b.csv."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_bytes(b"id,v\na,1\n")
    record = b"b,2" if header == "id,v" else b"2,b"
    (tmp_path / "in" / "b.csv").write_bytes(b"\n" * 3000 + header.encode() + b"\n" + record + b"\n")
    with split_bytes(spark, "1024"):
        code = run_job(tmp_path, job, tmp_path / "in")
    if header == "v,id":  # found, checked: refused naming b.csv
        assert code == 2
        assert last_error(capsys).startswith(
            f"error: --input: {tmp_path / 'in' / 'b.csv'}: its csv header is ['v', 'id']"
        )
        return
    assert code == 0
    assert stored_rows(tmp_path, job) == [["a", "1"], ["b", "2"]]


def test_a_file_whose_header_is_after_its_first_split_is_no_file_of_no_line(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The only file begins with 3,000 blank lines, then `id,v` and `b,2`, split at 1 KiB: refused with exit 2 as
    "the 1 csv file(s) under IN hold no line, so no header" (they hold two; the header is in the second split).
    Expected: the record (b, 2)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "b.csv").write_bytes(b"\n" * 3000 + b"id,v\nb,2\n")
    with split_bytes(spark, "1024"):
        code = run_job(tmp_path, "keyed", tmp_path / "in")
    assert code == 0, last_error(capsys)
    assert stored_rows(tmp_path, "keyed") == [["b", "2"]]


def test_a_field_holding_u_ffff_is_an_error_kept_whole_and_the_next_line_its_record(
    spark: SparkSession, tmp_path: Path
) -> None:
    """`a,x\\uFFFFy` (U+FFFF is valid UTF-8, EF BF BF) then `b,2`. `from_csv` (Univocity, whose end of input is
    U+FFFF) ended a's record at U+FFFF: a was written as (a, x), exit 0, its `y` carried into the next line's parse:
    b's valid line became an error whose id is `y`, and table insert rejected the whole insert for that row. Now a's
    line is an error kept whole (not parsed), b a record."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_bytes("id,v\na,x\uffffy\nb,2\n".encode())
    assert run_job(tmp_path, "keyed", tmp_path / "in") == 0
    assert stored_rows(tmp_path, "keyed") == [["b", "2"]]
    assert stored_rows(tmp_path, "keyed", "error") == [["", "", NOT_TEXT, "a,x\uffffy"]]


def test_a_line_of_more_fields_than_the_csv_parser_holds_is_an_error_kept_whole(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A line of 21,001 fields under the header `id,v` (more than Univocity's 20,480 columns), then `b,2`. The run
    stopped with exit 1 after some 50 s on "SparkRuntimeException: [MALFORMED_CSV_RECORD] Malformed CSV record: a,1,1,…"
    (the whole 42 KB line printed) or, in a session already running, on "Py4JJavaError: An error occurred while
    calling oNNNN.collectToPython.": no file named, no way out (9fa708e named a.csv). Expected: the line is an error
    kept whole (`_line`, a row of another width than the header's) and (b, 2) is unique; or a refusal naming a.csv
    in a line of reasonable length."""
    (tmp_path / "in").mkdir()
    wide = b"a" + b",1" * 21000
    (tmp_path / "in" / "a.csv").write_bytes(b"id,v\n" + wide + b"\nb,2\n")
    assert run_job(tmp_path, "keyed", tmp_path / "in") == 0
    assert stored_rows(tmp_path, "keyed") == [["b", "2"]]
    errors = stored_rows(tmp_path, "keyed", "error")
    assert [(row[2], row[3]) for row in errors] == [(WRONG_WIDTH, wide.decode())]


@pytest.mark.parametrize("header", ["id,a,a,a1", "id,,_c1"])
def test_csv_header_names_that_collide_once_renamed_are_refused_naming_the_file(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], header: str
) -> None:
    """A header naming a column twice (`a`, renamed a1 and a2) beside a column named `a1`, or an empty name
    (renamed `_c1`) beside `_c1`: two columns get one name. The run stopped with exit 1 on "AnalysisException:
    [AMBIGUOUS_REFERENCE_TO_FIELDS] Ambiguous reference to the field `a1`" (no file, no way out; 9fa708e the same
    with COLUMN_ALREADY_EXISTS). Expected: the record read whole, or a refusal (exit 2) naming a.csv and its
    header."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_bytes(header.encode() + b"\nk," + b",".join([b"1"] * header.count(",")) + b"\n")
    assert run_job(tmp_path, "keyed", tmp_path / "in") == 2
    clash = "a1" if header == "id,a,a,a1" else "_c1"
    assert last_error(capsys) == (
        f"error: --input: {tmp_path / 'in' / 'a.csv'}: its csv header {header.split(',')} gives two columns the name "
        f"{clash!r} (a name given twice is numbered, an empty one is `_c<position>`); allowed: distinct column "
        "names. Nothing was written"
    )


def test_csv_bytes_that_are_not_utf8_are_not_replaced_without_a_word(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`a,\\xff\\xfe` (not UTF-8) then `b,2`: a was written as (a, \\uFFFD\\uFFFD), exit 0, its bytes changed without a
    word (the text reader decodes every line as UTF-8, replacing what is not; as at 9fa708e). Expected: a's line an
    error (not a record of changed values) and (b, 2) unique, or the run refused naming a.csv."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_bytes(b"id,v\na,\xff\xfe\nb,2\n")
    assert run_job(tmp_path, "keyed", tmp_path / "in") == 0
    assert stored_rows(tmp_path, "keyed") == [["b", "2"]]
    assert stored_rows(tmp_path, "keyed", "error") == [["", "", NOT_TEXT, "a,\ufffd\ufffd"]]


@pytest.mark.parametrize("option", ["--input", "--output", "--state"])
def test_a_relative_path_whose_first_name_holds_a_colon_is_read_or_refused_before_spark(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    option: str,
) -> None:  # fmt: skip
    """`--input in:x` (or `--output o:x`, `--state s:x`), relative to the working folder: the run stopped with exit 1
    on "IllegalArgumentException: java.net.URISyntaxException: Relative path in absolute URI: in:x" (Hadoop reads
    `in:` as a URI scheme), after Spark started, leaving empty `_leases` folders, with no way out named (as at
    9fa708e; `./in:x` is read). Expected: the path read as the folder it names (`./in:x`), or refused with exit 2
    before anything is written, naming the option."""
    monkeypatch.chdir(tmp_path)
    paths = {"--input": "in", "--output": "out", "--state": "state"}
    paths[option] = {"--input": "in:x", "--output": "o:x", "--state": "s:x"}[option]
    (tmp_path / paths["--input"]).mkdir()
    (tmp_path / paths["--input"] / "a.csv").write_bytes(b"id,v\na,1\n")
    code = main(["keyed", "--input", paths["--input"], "--format", "csv", "--key", "id", "--output", paths["--output"],
                 "--state", paths["--state"], "--run-id", RUN1])  # fmt: skip
    assert code == 2
    given = paths[option]
    assert last_error(capsys) == (
        f"error: {option}: given {given}: the name before its first ':' reads as a URI scheme ({given.split(':')[0]}:); "
        f"allowed: ./{given} or an absolute path. Nothing was written"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == [paths["--input"]]
