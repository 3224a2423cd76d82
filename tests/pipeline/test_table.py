"""Keyed tables with merge engines (`python -m jobs table …`): exact rows for every engine rule."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from jobs.errors import InvalidArgumentError
from jobs.keyed import csv_lines
from jobs.runtime.cli import main
from jobs.tables import job
from jobs.tables.job import InvalidInsertError
from jobs.tables.log import TableExistsError, TableLog, TableNotFoundError, TableSettings
from tests.pipeline.helpers import error_line


class Table:
    """A table in a temporary folder, with helpers that insert inline CSV rows and read results back."""

    def __init__(self, spark: SparkSession, root: Path, header: str, **settings: Any) -> None:
        self.spark, self.root, self.header = spark, root, header
        self.path = str(root / "table")
        self.inserts = 0
        job.create(spark, self.path, TableSettings(**settings))

    def insert(self, rows: list[str], token: str | None = None) -> dict[str, Any]:
        self.inserts += 1
        source = self.root / f"in{self.inserts}.csv"
        source.write_text("\n".join([self.header, *rows]) + "\n", encoding="utf-8")
        return job.insert(self.spark, self.path, str(source), "csv", token)

    def select(self, final: bool = False) -> list[tuple[Any, ...]]:
        out = self.root / ("final" if final else "stored")
        job.select(self.spark, self.path, str(out), final)
        return sorted(tuple(row) for row in self.spark.read.parquet(str(out)).collect())

    def commits(self) -> int:
        return len(list((self.root / "table" / "_log").glob("*.json")))


def test_replacing_without_version_last_inserted_wins(spark: SparkSession, tmp_path: Path) -> None:
    table = Table(spark, tmp_path, "id,v", engine="replacing", key=("id",))
    table.insert(["k1,a", "k2,b", "k1,c"])
    table.insert(["k2,d"])
    table.insert(["k2,d"])  # without a dedup window an identical insert is applied again
    assert table.select() == [("k1", "a"), ("k1", "c"), ("k2", "b"), ("k2", "d"), ("k2", "d")]  # as stored
    assert table.select(final=True) == [("k1", "c"), ("k2", "d")]
    job.optimize(spark, table.path, cleanup=False)
    assert table.select() == [("k1", "c"), ("k2", "d")]
    assert len(list((tmp_path / "table" / "parts").iterdir())) == 1


def test_replacing_max_version_ties_go_to_the_last_insert(spark: SparkSession, tmp_path: Path) -> None:
    table = Table(spark, tmp_path, "id,ver,v", engine="replacing", key=("id",), version="ver")
    table.insert(["k1,2,x", "k2,10,p"])
    table.insert(["k1,2,y", "k2,3,q", "k3,1,r", "k3,1,s"])
    assert table.select(final=True) == [("k1", "2", "y"), ("k2", "10", "p"), ("k3", "1", "s")]


def test_replacing_is_deleted_final_optimize_and_cleanup(spark: SparkSession, tmp_path: Path) -> None:
    table = Table(spark, tmp_path, "id,ver,del,v", engine="replacing", key=("id",), version="ver", is_deleted="del")
    table.insert(["k1,1,0,a", "k2,1,0,b"])
    table.insert(["k1,2,1,gone"])
    assert table.select(final=True) == [("k2", "1", "0", "b")]
    job.optimize(spark, table.path, cleanup=False)  # a plain merge keeps the winning tombstone ...
    assert table.select() == [("k1", "2", "1", "gone"), ("k2", "1", "0", "b")]
    table.insert(["k1,1,0,late"])  # ... so a late lower version cannot bring k1 back
    assert table.select(final=True) == [("k2", "1", "0", "b")]
    job.optimize(spark, table.path, cleanup=True)
    assert table.select() == [("k2", "1", "0", "b")]
    table.insert(["k1,1,0,later"])  # after cleanup a late row resurrects the key, as in ClickHouse
    assert table.select(final=True) == [("k1", "1", "0", "later"), ("k2", "1", "0", "b")]


def test_collapsing_pairs_unpaired_rows_and_order(spark: SparkSession, tmp_path: Path) -> None:
    table = Table(spark, tmp_path, "id,sign,v", engine="collapsing", key=("id",), sign="sign")
    table.insert(["A,1,a1", "B,-1,b1", "C,1,c1", "D,-1,d1", "E,1,e1", "E,-1,e2", "F,-1,f1"])
    table.insert(["A,-1,a2", "B,1,b2", "E,1,e3", "F,-1,f2", "F,1,f3"])
    # A: +1,-1 cancel. B: a cancel row before its state row. C: unpaired +1. D: unpaired -1. E: P > N.
    # F: N > P.
    assert table.select(final=True) == [("B", "1", "b2"), ("C", "1", "c1"), ("E", "1", "e3")]
    job.optimize(spark, table.path, cleanup=False)
    assert table.select() == [
        ("B", "-1", "b1"), ("B", "1", "b2"),  # P == N, last +1: the first -1 and the last +1 both stay
        ("C", "1", "c1"),
        ("D", "-1", "d1"),  # N > P: the first -1 stays in the merged part (FINAL hides it)
        ("E", "1", "e3"),
        ("F", "-1", "f1"),
    ]  # fmt: skip
    assert table.select(final=True) == [("B", "1", "b2"), ("C", "1", "c1"), ("E", "1", "e3")]


def test_versioned_collapsing_cancels_in_any_order(spark: SparkSession, tmp_path: Path) -> None:
    table = Table(spark, tmp_path, "id,ver,sign,v", engine="versioned-collapsing", key=("id",), version="ver",
                  sign="sign")  # fmt: skip
    table.insert(["k1,1,-1,cancel", "k2,1,1,x1", "k2,1,1,x2", "k3,1,-1,lonely"])
    table.insert(["k1,1,1,state", "k1,2,1,new", "k2,1,-1,x3"])
    expected = [("k1", "2", "1", "new"), ("k2", "1", "1", "x1"), ("k3", "1", "-1", "lonely")]
    assert table.select(final=True) == expected  # the -1 of k2 cancels the most recent +1 (x2)
    assert len(table.select()) == 7
    job.optimize(spark, table.path, cleanup=False)
    assert table.select() == expected


def test_insert_token_and_dedup_window(spark: SparkSession, tmp_path: Path) -> None:
    table = Table(spark, tmp_path, "id,v", engine="replacing", key=("id",), dedup_window=2)
    assert table.insert(["a,1"], token="batch-1")["skipped"] is None
    skipped = table.insert(["a,1", "b,2"], token="batch-1")  # a retried batch, even with changed data
    assert skipped["skipped"] == "token 'batch-1' was already applied to the table"
    assert table.insert(["a,1"], token="batch-2")["skipped"] is None  # a new token lets the same data in
    assert table.insert(["a,1"])["skipped"] is None  # token inserts record no data hash
    assert table.insert(["a,1"])["skipped"] == "the same data was inserted within the last 2 inserts"
    assert table.insert(["c,3"])["skipped"] is None
    assert table.insert(["d,4"])["skipped"] is None
    assert table.insert(["a,1"])["skipped"] is None  # out of the window of 2 inserts now
    assert table.select() == [("a", "1")] * 4 + [("c", "3"), ("d", "4")]


def test_bad_inserts_are_rejected_whole_and_leave_the_table_as_it_was(spark: SparkSession, tmp_path: Path) -> None:
    table = Table(spark, tmp_path, "id,sign,n", engine="collapsing", key=("id",), sign="sign")
    table.insert(["a,1,1"])
    with pytest.raises(InvalidInsertError, match=r"1 row\(s\): sign column 'sign' is not 1 or -1"):
        table.insert(["b,1,1", "c,2,1"])
    with pytest.raises(InvalidInsertError, match=r"1 row\(s\): key column 'id' is null"):
        table.insert(["b,1,1", ",1,1"])
    table.header = "id,sign"
    with pytest.raises(InvalidInsertError, match="differ from the table's"):
        table.insert(["b,1"])
    table.header = "id,n"
    with pytest.raises(InvalidArgumentError, match=r"key/role columns \['sign'\] are not in the input"):
        table.insert(["b,1"])
    assert table.commits() == 2
    assert table.select() == [("a", "1", "1")]


def test_later_inserts_convert_to_the_table_types(spark: SparkSession, tmp_path: Path) -> None:
    table_path = str(tmp_path / "t")
    job.create(spark, table_path, TableSettings(engine="replacing", key=("id",), version="ver"))
    first = tmp_path / "first.jsonl"
    first.write_text('{"id": "a", "ver": 1}\n', encoding="utf-8")
    job.insert(spark, table_path, str(first), "jsonl", None)
    second = tmp_path / "second.csv"
    second.write_text("id,ver\na,2\n", encoding="utf-8")
    job.insert(spark, table_path, str(second), "csv", None)
    bad = tmp_path / "bad.csv"
    bad.write_text("id,ver\na,two\n", encoding="utf-8")
    with pytest.raises(InvalidInsertError, match="version column 'ver' is null or not a number"):
        job.insert(spark, table_path, str(bad), "csv", None)
    job.select(spark, table_path, str(tmp_path / "out"), True)
    assert [tuple(r) for r in spark.read.parquet(str(tmp_path / "out")).collect()] == [("a", 2)]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"engine": "summing"}, "--engine: given 'summing'; allowed: replacing, collapsing, versioned-collapsing"),
        ({"engine": "replacing", "sign": "s"}, "--sign: only for the collapsing"),
        ({"engine": "collapsing"}, "--sign: required by the collapsing engine"),
        ({"engine": "versioned-collapsing", "sign": "s"}, "--version: required"),
        ({"engine": "replacing", "is_deleted": "d"}, "--is-deleted: only for the replacing engine, together with"),
        ({"engine": "replacing", "dedup_window": -1}, "--dedup-window: given -1"),
        ({"engine": "replacing", "version": "id"}, "used twice"),
    ],
)
def test_bad_create_arguments(spark: SparkSession, tmp_path: Path, settings: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        job.create(spark, str(tmp_path / "t"), TableSettings(key=("id",), **settings))


def test_table_errors(spark: SparkSession, tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError, match="is not a table"):
        job.select(spark, str(tmp_path / "none"), str(tmp_path / "out"), False)
    job.create(spark, str(tmp_path / "t"), TableSettings(engine="replacing", key=("id",)))
    with pytest.raises(TableExistsError):
        job.create(spark, str(tmp_path / "t"), TableSettings(engine="replacing", key=("id",)))
    with pytest.raises(InvalidArgumentError, match="--cleanup: only for replacing tables created with --is-deleted"):
        job.optimize(spark, str(tmp_path / "t"), cleanup=True)
    assert job.optimize(spark, str(tmp_path / "t"), cleanup=False)["parts_after"] == 0
    job.select(spark, str(tmp_path / "t"), str(tmp_path / "out"), True)  # an empty table: an empty folder
    assert [p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith(".")] == ["_SUCCESS"]


def test_command_line(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(tmp_path / "t")
    data = tmp_path / "in.csv"
    data.write_text("id,v\na,1\n", encoding="utf-8")
    assert main(["table", "create", "--table", table, "--engine", "replacing", "--key", "id"]) == 0
    insert = ["table", "insert", "--table", table, "--input", str(data), "--format", "csv", "--token", "t1"]
    assert main(insert) == 0
    assert main(insert) == 0
    assert "SKIPPED: token 't1' was already applied" in capsys.readouterr().out
    assert (
        main(["table", "select", "--table", table, "--output", str(tmp_path / "o"), "--final", "--format", "csv"]) == 0
    )
    assert (tmp_path / "o" / "_SUCCESS").exists()
    assert main(["table", "create", "--table", table, "--engine", "merge", "--key", "id"]) == 2
    assert "--engine: given 'merge'" in capsys.readouterr().err
    newest = sorted((tmp_path / "t" / "_log").glob("*.json"))[-1]
    assert json.loads(newest.read_text())["tokens"] == ["t1"]
    newest.write_text(newest.read_text()[:20])  # a commit cut (as a writer that wrote it in place could leave it)
    assert main(["table", "select", "--table", table, "--output", str(tmp_path / "o2")]) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"error: --table: commit {newest} is damaged (not JSON: ") and "commit 0" in line


def test_the_loser_of_two_concurrent_inserts_leaves_nothing_and_can_retry(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    table = Table(spark, tmp_path, "id,v", engine="replacing", key=("id",))
    (tmp_path / "loser.csv").write_text("id,v\nx,1\ny,2\n", encoding="utf-8")
    commit = TableLog.write
    raced: list[dict[str, Any]] = []

    def another_insert_commits_first(self: TableLog, document: dict[str, Any], part: str | None = None) -> None:
        if not raced:  # the loser has written its part; the winner commits in between
            monkeypatch.setattr(TableLog, "write", commit)
            raced.append(table.insert(["w,9"]))
        commit(self, document, part)

    monkeypatch.setattr(TableLog, "write", another_insert_commits_first)
    insert = ["table", "insert", "--table", table.path, "--input", str(tmp_path / "loser.csv"), "--format", "csv"]
    assert main(insert) == 1
    assert (
        capsys.readouterr()
        .err.strip()
        .splitlines()[-1]
        .startswith(f"error: insert on {table.path} not committed: commit 1 was taken first by insert (committed at ")
    )
    assert raced[0]["commit"] == 1
    assert table.select() == [("w", "9")]  # exactly the winner's rows
    assert [path.name for path in (tmp_path / "table" / "parts").iterdir()] == [raced[0]["part"]]
    assert main(insert) == 0  # the retry adds the loser's rows once
    assert table.select() == [("w", "9"), ("x", "1"), ("y", "2")]


def test_optimize_removes_parts_no_commit_names(spark: SparkSession, tmp_path: Path) -> None:
    table = Table(spark, tmp_path, "id,v", engine="replacing", key=("id",))
    table.insert(["a,1"])
    parts = tmp_path / "table" / "parts"
    orphan = parts / "p00000000000000000002-0123456789abcdef"  # a writer killed before its commit 2
    orphan.mkdir()
    (orphan / "part-0.parquet").write_bytes(b"not read")
    later = parts / "p00000000000000000009-0123456789abcdef"  # a writer that may still commit later
    later.mkdir()
    assert table.select() == [("a", "1")]  # uncommitted parts are invisible
    result = job.optimize(spark, table.path, cleanup=False)
    assert sorted(path.name for path in parts.iterdir()) == sorted([f"{result_part(tmp_path)}", later.name])
    assert result["commit"] == 2 and table.select() == [("a", "1")]


def result_part(root: Path) -> str:
    head = json.loads(sorted((root / "table" / "_log").glob("*.json"))[-1].read_text())
    (part,) = head["parts"]
    return str(part["id"])


@pytest.fixture(scope="module")
def one_row_table(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Table:
    """A replacing table holding one row ("a", "1"), shared by the select tests (a select leaves it as it is)."""
    table = Table(spark, tmp_path_factory.mktemp("one_row"), "id,v", engine="replacing", key=("id",))
    table.insert(["a,1"])
    return table


def test_select_never_writes_over_its_table(one_row_table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    table = one_row_table
    for where in ("table", ".", "table/inside"):  # the table's folder, a folder holding it, one inside it
        output = (table.root / where).resolve()
        assert main(["table", "select", "--table", table.path, "--output", str(output)]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].startswith(f"error: --output: given {output}, which is")
    assert table.select() == [("a", "1")]


def test_select_replaces_only_an_earlier_select(
    one_row_table: Table, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = one_row_table
    precious = tmp_path / "warehouse" / "events.tsv"
    precious.parent.mkdir()
    precious.write_text("keep me")
    select = ["table", "select", "--table", table.path, "--output"]
    assert main([*select, str(precious.parent)]) == 2
    assert "holds events.tsv, which a select does not write; it is not replaced" in capsys.readouterr().err
    assert precious.read_text() == "keep me"
    unique = tmp_path / "keyed" / "unique"  # part files, but no _SUCCESS: another job's output
    unique.mkdir(parents=True)
    (unique / "part-00000-x.csv").write_text("id\na\n")
    assert main([*select, str(unique)]) == 2
    assert "holds files without a _SUCCESS, which a select does not write" in capsys.readouterr().err
    assert (unique / "part-00000-x.csv").exists()
    assert main([*select, str(tmp_path / "export")]) == 0
    assert main([*select, str(tmp_path / "export")]) == 0  # an earlier select is replaced


def test_json_lines_that_are_no_records_reject_the_insert_naming_them(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = str(tmp_path / "t")
    assert main(["table", "create", "--table", table, "--engine", "replacing", "--key", "id"]) == 0
    insert = ["table", "insert", "--table", table, "--format", "jsonl", "--input"]
    data = tmp_path / "in.jsonl"
    # Keys that differ only in case across lines would be one column.
    data.write_text('{"id":"a","v":1}\n\n{"id":"b","V":2}\n', encoding="utf-8")  # a blank line is skipped
    assert main([*insert, str(data)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --input: keys V/v differ only in case across lines, and would be one column; allowed: one spelling "
        "per key, nothing written"
    )
    data.write_text('{"id":"a","v":1}\n\n{"id":"b","v":2}\n', encoding="utf-8")
    assert main([*insert, str(data)]) == 0
    for lines, problem in [(['{"id":"b","v":1}', '{"id":"c","id":"d","v":2}'], "a key appears more than once"),
                           (['{"id":"b","v":1}', '{"id":"c",'], "not a JSON object")]:  # fmt: skip
        data.write_text("\n".join(lines) + "\n", encoding="utf-8")
        capsys.readouterr()
        assert main([*insert, str(data)]) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"error: --input: 1 JSON line(s) are no records, nothing written: {data}: {problem}: {lines[1]!r}"
        )
        assert len(list((tmp_path / "t" / "_log").glob("*.json"))) == 2  # nothing committed after the good insert


def test_csv_rows_of_another_width_reject_the_insert(spark: SparkSession, tmp_path: Path) -> None:
    table = Table(spark, tmp_path, "id,v", engine="replacing", key=("id",))
    with pytest.raises(InvalidInsertError, match="2 row\\(s\\): the row's number of fields differs from the header's"):
        table.insert(["a,1", "b", "c,3,4"])
    assert table.commits() == 1
    table.insert([" a ,1", "a,2"])
    out = tmp_path / "csv"
    job.select(spark, table.path, str(out), False, "csv")
    assert sorted(line for p in out.glob("part-*") for line in p.read_text().splitlines()[1:]) == [" a ,1", "a,2"]


def test_a_rejected_csv_insert_names_each_problems_first_row_and_counts_a_row_once(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before (attack 7): "1 row(s): holds bytes that are not UTF-8 …; 1 row(s): key column 'id' is null" for one
    bad row, naming no file, no row and no way out. Now each problem names its first row (file, row after its
    header, the line as read when it is no csv record), a row is counted under its first problem only, and the
    line says the way out."""
    table, data = str(tmp_path / "t"), tmp_path / "in"
    data.mkdir()
    (data / "a.csv").write_bytes(b"id,val\na1,one\n,no key\n")
    (data / "b.csv").write_bytes(b'id,val\nb1,ok\n\nb3,caf\xe9\nb4,"open\nb5,caf\xe9\n')
    assert main(["table", "create", "--table", table, "--engine", "replacing", "--key", "id"]) == 0
    capsys.readouterr()
    assert main(["table", "insert", "--table", table, "--input", str(data), "--format", "csv"]) == 2
    assert error_line(capsys) == (
        f"error: insert into {table} rejected: 2 row(s): {csv_lines.NOT_TEXT} (csv), first at {data}/b.csv row 2 "
        f"after its header: 'b3,caf\ufffd'; 1 row(s): {csv_lines.OPEN_QUOTE} (csv), first at {data}/b.csv row 3 "
        "after its header: 'b4,\"open'; 1 row(s): key column 'id' is null, first at "
        f"{data}/a.csv row 2 after its header. Fix or remove those rows, then insert again; nothing was inserted"
    )
    assert len(list((tmp_path / "t" / "_log").glob("*.json"))) == 1


def test_a_failed_insert_names_the_file_and_a_way_out_a_table_has(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """FAULTS 7 (a truncated `.gz`). Before (attack 9): "table run ID failed, no _SUCCESS written: … then rerun with
    the same run id": `table` has no run id and writes no _SUCCESS. Now the line says what a table change does, and
    the way out, followed, inserts the rows."""
    table, data = str(tmp_path / "t"), tmp_path / "in"
    data.mkdir()
    whole = gzip.compress(("id,val\n" + "".join(f"k{i},{i * 7}\n" for i in range(20000))).encode())
    (data / "a.csv.gz").write_bytes(whole[:5000])
    assert main(["table", "create", "--table", table, "--engine", "replacing", "--key", "id"]) == 0
    insert = ["table", "insert", "--table", table, "--input", str(data), "--format", "csv"]
    capsys.readouterr()
    assert main(insert) == 1
    line = error_line(capsys)
    assert line.startswith(f"error: table insert failed, nothing committed: {data / 'a.csv.gz'} cannot be read ("), line
    assert line.endswith(
        "Restore or replace it, then run the same command again (a table change that fails commits nothing) (run "
        "with --debug for the traceback)"
    ), line
    (data / "a.csv.gz").write_bytes(whole)  # the way out, as printed
    assert main(insert) == 0
    out = tmp_path / "rows"
    assert main(["table", "select", "--table", table, "--output", str(out)]) == 0
    assert spark.read.parquet(str(out)).count() == 20000


@pytest.mark.parametrize("damage", ["an older commit in the newest's place", "a stray file"])
def test_a_commit_log_with_a_file_no_change_wrote_stops_every_command_naming_it(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """FAULTS 4 (a stale copy; a stray file). Before (attack 9): commit 1's document saved as commit 2 made every
    change stop with "commit 2 was taken first … running it again is safe" forever, and select gave half the rows,
    exit 0; a stray `_log/notes.json` stopped every command on `ValueError: invalid literal for int()`, naming no
    file. Now each stops naming the file and the way out; followed, select gives every row."""
    table = str(tmp_path / "t")
    assert main(["table", "create", "--table", table, "--engine", "replacing", "--key", "id"]) == 0
    for name, rows in (("a.csv", "a,1\nb,2\n"), ("b.csv", "c,3\n")):
        (tmp_path / name).write_text(f"id,v\n{rows}", encoding="utf-8")
        assert main(["table", "insert", "--table", table, "--input", str(tmp_path / name), "--format", "csv"]) == 0
    log = tmp_path / "t" / "_log"
    newest = sorted(log.glob("*.json"))[-1]
    whole = newest.read_bytes()
    stray = log / "notes.json"
    if damage == "a stray file":
        stray.write_text("{}")
        expected = f"error: --table: {log} holds notes.json, which is no commit (a commit is named by its number, "
    else:
        newest.write_bytes(sorted(log.glob("*.json"))[-2].read_bytes())
        expected = f"error: --table: commit {newest} is damaged (it records commit 1: another commit's file, "
    capsys.readouterr()
    assert main(["table", "select", "--table", table, "--output", str(tmp_path / "o")]) == 1
    assert error_line(capsys).startswith(expected)
    stray.unlink(missing_ok=True)  # the way out: the stray moved out, or the commit restored from a backup
    newest.write_bytes(whole)
    assert main(["table", "select", "--table", table, "--output", str(tmp_path / "o")]) == 0
    assert spark.read.parquet(str(tmp_path / "o")).count() == 3
