"""A table's parts checked against its commit log (`jobs.tables.parts`), through the command line: a part damaged
stops every command naming the file, the cause and the way out; followed, the table reads whole again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from jobs.fs.store import StoredFile
from jobs.keyed.storage import Storage
from jobs.runtime.cli import main
from jobs.tables.parts import MOVE_OUT, RESTORE, differences
from tests.pipeline.helpers import error_line

ROWS = [("a", "1"), ("b", "2"), ("c", "3")]


def make_table(tmp_path: Path) -> str:
    """A replacing table of two parts: commit 1 holds a,1 and b,2; commit 2 holds c,3."""
    table = str(tmp_path / "t")
    assert main(["table", "create", "--table", table, "--engine", "replacing", "--key", "id"]) == 0
    for name, rows in (("a.csv", "a,1\nb,2\n"), ("b.csv", "c,3\n")):
        (tmp_path / name).write_text(f"id,v\n{rows}", encoding="utf-8")
        assert main(["table", "insert", "--table", table, "--input", str(tmp_path / name), "--format", "csv"]) == 0
    return table


def parts(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "t" / "parts").iterdir())


def data_file(folder: Path) -> Path:
    (file,) = folder.glob("part-*.parquet")
    return file


def selected(spark: SparkSession, tmp_path: Path, table: str) -> list[tuple[Any, ...]]:
    out = tmp_path / "out"
    assert main(["table", "select", "--table", table, "--output", str(out)]) == 0
    return sorted(tuple(row) for row in spark.read.parquet(str(out)).collect())


def every_command_stops(tmp_path: Path, table: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The error line of select, insert and optimize on `table`, each of which must stop with exit 1."""
    (tmp_path / "d.csv").write_text("id,v\nd,4\n", encoding="utf-8")
    commands = [
        ["table", "select", "--table", table, "--output", str(tmp_path / "out")],
        ["table", "insert", "--table", table, "--input", str(tmp_path / "d.csv"), "--format", "csv"],
        ["table", "optimize", "--table", table],
    ]
    capsys.readouterr()
    lines = []
    for command in commands:
        assert main(command) == 1, command
        lines.append(error_line(capsys))
    return lines


def flip_a_byte(file: Path) -> None:
    """The file's content changed, its size kept (a same-size swap)."""
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    file.write_bytes(bytes(data))


DAMAGES = ["its file deleted", "its folder deleted", "its file cut", "its file replaced, same size", "a stray file"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_part_stops_every_command_naming_the_file_and_the_way_out(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """FAULTS 4. Before (attack 9b, 09/10): a part's files deleted made select return the other parts' rows, exit 0
    (and an insert committed the partial table); its folder deleted ended on Spark's PATH_NOT_FOUND; a stray file in
    a part folder was read as the table's. Now select, insert and optimize each stop, exit 1, changing nothing, with
    one line naming the file, the cause and the way out; followed (the part restored), select gives every row."""
    table = make_table(tmp_path)
    first, second = parts(tmp_path)
    shutil.copytree(first, tmp_path / "backup")
    file = data_file(first)
    size = file.stat().st_size
    restore = "; nothing was changed. Restore it from a copy of the table (on S3: its earlier version, in a versioned bucket), then run again"  # fmt: skip
    stray = first / "part-99999-stray.snappy.parquet"
    if damage in ("its file deleted", "its folder deleted"):
        file.unlink() if damage == "its file deleted" else shutil.rmtree(first)
        expected = (f"error: --table: part folder {first} is missing or holds none of its files (commit 2 records 1 "
                    f"file(s): {file.name}; 2 rows in it){restore}")  # fmt: skip
    elif damage == "its file cut":
        file.write_bytes(file.read_bytes()[: size // 2])
        expected = f"error: --table: part file {file} holds {size // 2} bytes, commit 2 records {size} (cut or replaced){restore}"  # fmt: skip
    elif damage == "its file replaced, same size":
        flip_a_byte(file)
        expected = f"error: --table: part file {file} has checksum crc32:"
    else:
        shutil.copy(data_file(second), stray)
        expected = (f"error: --table: {stray} is in part {first.name}, and commit 2 records no such file; nothing was "
                    "changed. Move it out of the part's folder (no commit names it), then run again")  # fmt: skip
    for line in every_command_stops(tmp_path, table, capsys):
        assert line.startswith(expected) if damage == "its file replaced, same size" else line == expected, line
        assert damage != "its file replaced, same size" or line.endswith(f"(replaced or damaged){restore}"), line
    assert len(list((tmp_path / "t" / "_log").glob("*.json"))) == 3  # nothing committed
    stray.unlink(missing_ok=True)  # the way out: the stray moved out, or the part restored from a copy
    shutil.rmtree(first, ignore_errors=True)
    shutil.copytree(tmp_path / "backup", first)
    assert selected(spark, tmp_path, table) == ROWS


def test_a_table_whose_commits_record_no_files_is_checked_by_row_count_then_recorded(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table written before part files were recorded (parts: id, rows, commit) keeps working; a part whose files
    hold another row count stops every command (before: a stray file's rows were read as the table's, exit 0); the
    next change records the old parts' files, so a same-size swap is found from then on."""
    table = make_table(tmp_path)
    for commit in (tmp_path / "t" / "_log").glob("*.json"):  # as a commit written before files were recorded
        document = json.loads(commit.read_text())
        document["parts"] = [{key: part[key] for key in ("id", "rows", "commit")} for part in document["parts"]]
        commit.write_text(json.dumps(document))
    assert selected(spark, tmp_path, table) == ROWS
    first, second = parts(tmp_path)
    stray = first / "part-99999-stray.snappy.parquet"
    shutil.copy(data_file(second), stray)
    expected = (
        f"error: --table: part {first} holds 3 rows, commit 2 records 2 (a file lost, cut or added; a commit of a "
        "table written before part files were recorded names no file); nothing was changed. Restore it from a copy "
    )
    assert all(line.startswith(expected) for line in every_command_stops(tmp_path, table, capsys))
    stray.unlink()  # the way out
    assert main(["table", "insert", "--table", table, "--input", str(tmp_path / "d.csv"), "--format", "csv"]) == 0
    head = json.loads(sorted((tmp_path / "t" / "_log").glob("*.json"))[-1].read_text())
    assert [sorted(part["files"]) for part in head["parts"][:2]] == [[data_file(first).name], [data_file(second).name]]
    whole = data_file(first).read_bytes()
    flip_a_byte(data_file(first))
    assert all(
        "(replaced or damaged); nothing was changed" in line for line in every_command_stops(tmp_path, table, capsys)
    )
    data_file(first).write_bytes(whole)
    assert selected(spark, tmp_path, table) == [*ROWS, ("d", "4")]


def test_select_reads_only_the_files_its_commit_records(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file put in a part folder after the check (between the check and Spark's read) is not read: Spark is given
    the recorded files by name, not the part folders (before: a folder glob, which read it: 4 rows)."""
    table = make_table(tmp_path)
    first, second = parts(tmp_path)
    listed = Storage.children

    def a_file_arrives_before_the_read(self: Storage, path: str) -> list[str]:
        if path == str(tmp_path / "out"):  # select's output check: after the parts' check, before Spark reads
            shutil.copy(data_file(second), first / "part-99999-late.snappy.parquet")
        return listed(self, path)

    monkeypatch.setattr(Storage, "children", a_file_arrives_before_the_read)
    assert selected(spark, tmp_path, table) == ROWS


def test_differences_names_each_file_missing_cut_replaced_or_stray() -> None:
    """The comparison itself, without Spark or files: each difference with its way out."""
    entry: dict[str, Any] = {"id": "p1", "rows": 3, "files": {"a": {"size": 5, "checksum": "crc32:1"}, "b": {"size": 7,
             "checksum": "crc32:2"}, "c": {"size": 9, "checksum": "crc32:3"}}}  # fmt: skip
    found = {name: StoredFile(f"T/p1/{name}", size, 0) for name, size in (("b", 6), ("c", 9), ("d", 1))}
    assert differences(entry, "T/p1", found, 4, checksum=lambda file: "crc32:0") == [
        ("part file T/p1/a is missing (commit 4 records it, 5 bytes)", RESTORE),
        ("part file T/p1/b holds 6 bytes, commit 4 records 7 (cut or replaced)", RESTORE),
        ("part file T/p1/c has checksum crc32:0, commit 4 records crc32:3 (replaced or damaged)", RESTORE),
        ("T/p1/d is in part p1, and commit 4 records no such file", MOVE_OUT),
    ]
    s3 = {name: StoredFile(f"T/p1/{name}", record["size"], 0, '"e"') for name, record in entry["files"].items()}
    assert differences(entry, "T/p1", s3, 4, checksum=lambda file: "etag:e") == []  # a local record, an S3 copy
