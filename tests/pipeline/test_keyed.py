"""The keyed deduper (`python -m jobs keyed`): exact rows for every rule, state across runs, reruns, errors."""

from __future__ import annotations

import csv
import io
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from jobs.errors import InputNotFoundError, InvalidArgumentError
from jobs.frames import local_frame
from jobs.keyed.csv_lines import OPEN_QUOTE, WRONG_WIDTH
from jobs.keyed.job import KeyedOptions, run, settings_from
from jobs.keyed.period import parse_period
from jobs.runtime.cli import main

RUN1, RUN2, RUN3 = "2026-11-01-00-00-00", "2026-11-02-00-00-00", "2026-11-03-00-00-00"


def write_csv(path: Path, header: str, rows: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def keyed(
    spark: SparkSession, tmp_path: Path, input_path: Path, run_id: str = RUN1, fmt: str = "csv", **options: Any
) -> dict[str, Any]:
    opts = KeyedOptions(
        input=str(input_path), output=str(tmp_path / "out"), format=fmt, state=str(tmp_path / "state"),
        key=options.pop("key", "id"), **options,
    )  # fmt: skip
    return run(spark, opts, run_id)


def rows(spark: SparkSession, tmp_path: Path, outcome: str, run_id: str = RUN1) -> list[tuple[str, ...]]:
    """An output folder's rows, sorted (each output file is in input order, but there may be several files)."""
    folder = tmp_path / "out" / f"run={run_id}" / outcome
    files = sorted(folder.glob("part-*"))
    result: list[tuple[str, ...]] = []
    header = ""
    for name in files:
        header, *lines = name.read_text(encoding="utf-8").splitlines()
        result.extend(tuple(line.split(",")) for line in lines)
    # Spark reads as many records back (its schema from the header read here: one Spark job, not two).
    schema = ", ".join(f"`{column}` string" for column in header.split(",")) if header else "_c0 string"
    assert spark.read.option("header", "true").schema(schema).csv(str(folder)).count() == len(result)
    return sorted(result)


def test_expiry_boundary_and_doc_example(spark: SparkSession, tmp_path: Path) -> None:
    # The Apex doc's example (period 10): 21 arrives after 40 and is expired. 30 is exactly one period older
    # than 40: expired. 31 is not.
    data = write_csv(tmp_path / "in" / "a.csv", "id,t", ["k10,10", "k20,20", "k25,25", "k40,40", "k21,21", "k35,35",
                                                          "k30,30", "k31,31", "k45,45", "k57,57"])  # fmt: skip
    summary = keyed(spark, tmp_path, data, expiry_key="t", expiry_period="10")
    assert rows(spark, tmp_path, "expired") == sorted([("k21", "21"), ("k30", "30")])
    assert [r[0] for r in rows(spark, tmp_path, "unique")] == sorted(
        ["k10", "k20", "k25", "k40", "k35", "k31", "k45", "k57"]
    )
    assert summary["counts"] == {"input": 10, "unique": 8, "duplicate": 0, "expired": 2, "error": 0}
    assert summary["state"]["latest_point_after"] == "57.000000"


def test_expiry_is_decided_before_the_duplicate_lookup(spark: SparkSession, tmp_path: Path) -> None:
    data = write_csv(tmp_path / "in" / "a.csv", "id,t,v", ["a,100,1", "a,105,2", "b,200,3", "a,100,4", "a,195,5"])
    keyed(spark, tmp_path, data, expiry_key="t", expiry_period="10")
    assert rows(spark, tmp_path, "unique") == sorted([("a", "100", "1"), ("b", "200", "3"), ("a", "195", "5")])
    assert rows(spark, tmp_path, "duplicate") == sorted([("a", "105", "2")])
    assert rows(spark, tmp_path, "expired") == sorted(
        [("a", "100", "4")]
    )  # a replayed copy too old: expired, not duplicate


def test_a_duplicate_needs_a_live_earlier_record(spark: SparkSession, tmp_path: Path) -> None:
    # a@100 dies when the latest reaches 110 (100 <= 110 - 10); a@106 then is unique, a@107 its duplicate.
    data = write_csv(tmp_path / "in" / "a.csv", "id,t", ["a,100", "z,110", "a,106", "a,107", "z,101"])
    keyed(spark, tmp_path, data, expiry_key="t", expiry_period="10")
    assert rows(spark, tmp_path, "unique") == sorted([("a", "100"), ("z", "110"), ("a", "106")])
    assert rows(spark, tmp_path, "duplicate") == sorted([("a", "107"), ("z", "101")])


def test_without_expiry_first_in_file_order_wins_with_composite_key(spark: SparkSession, tmp_path: Path) -> None:
    write_csv(tmp_path / "in" / "b.csv", "id,kind,v", ["1,x,b1", "1,y,b2"])
    write_csv(tmp_path / "in" / "a.csv", "id,kind,v", ["1,x,a1", "2,x,a2", "1,x,a3"])
    summary = keyed(spark, tmp_path, tmp_path / "in", key="id,kind")
    assert rows(spark, tmp_path, "unique") == sorted([("1", "x", "a1"), ("2", "x", "a2"), ("1", "y", "b2")])
    assert rows(spark, tmp_path, "duplicate") == sorted([("1", "x", "a3"), ("1", "x", "b1")])
    assert summary["counts"]["input"] == 5


def test_bad_records_go_to_error_with_their_reason(spark: SparkSession, tmp_path: Path) -> None:
    too_large = "9" * 41  # a number, but too large for the expiry: out of range, not "not a number"
    data = write_csv(tmp_path / "in" / "a.csv", "id,t", ["a,1", ",2", "b,", "c,abc", "d,4", f"e,{too_large}"])
    summary = keyed(spark, tmp_path, data.parent, expiry_key="t", expiry_period="10")
    out_of_range = "expiry field 't' is out of range; allowed: at most 32 digits before the decimal point"
    assert rows(spark, tmp_path, "error") == [
        ("", "2", "key field 'id' is missing or null", ""),
        ("b", "", "expiry field 't' is missing or null", ""),
        ("c", "abc", "expiry field 't' is not a number", ""),
        ("e", too_large, out_of_range, ""),
    ]
    assert summary["counts"] == {"input": 6, "unique": 2, "duplicate": 0, "expired": 0, "error": 4}
    assert summary["errors_by_reason"] == {
        "key field 'id' is missing or null": 1,
        "expiry field 't' is missing or null": 1,
        "expiry field 't' is not a number": 1,
        out_of_range: 1,
    }


def test_timestamp_expiry_with_a_duration(spark: SparkSession, tmp_path: Path) -> None:
    data = write_csv(tmp_path / "in" / "a.csv", "id,ts", [
        "a,2026-11-22T10:00:00Z", "b,2026-11-22 11:00:00", "c,2026-11-22T10:00:00Z", "d,2026-11-22T10:00:01Z",
        "e,yesterday",
    ])  # fmt: skip
    summary = keyed(spark, tmp_path, data, expiry_key="ts", expiry_period="1h", bucket_span="15m")
    assert [r[0] for r in rows(spark, tmp_path, "expired")] == sorted(["c"])  # exactly 1 h older than the latest
    assert [r[0] for r in rows(spark, tmp_path, "unique")] == sorted(["a", "b", "d"])
    assert [r[2] for r in rows(spark, tmp_path, "error")] == sorted(["expiry field 'ts' is not a timestamp"])
    assert summary["state"]["latest_point_after"] == "2026-11-22T11:00:00+00:00"


def test_state_across_runs_and_bucket_deletion(spark: SparkSession, tmp_path: Path) -> None:
    first = write_csv(tmp_path / "in1" / "a.csv", "id,t", ["a,100", "b,104"])
    keyed(spark, tmp_path, first, RUN1, expiry_key="t", expiry_period="10", bucket_span="5")
    second = write_csv(tmp_path / "in2" / "a.csv", "id,t", ["a,101", "b,103", "x,90", "c,112", "b,105", "a,106"])
    summary = keyed(spark, tmp_path, second, RUN2, expiry_key="t", expiry_period="10")
    # a@101: a@100 of run 1 is live (100 > 104 - 10): duplicate. x@90 <= 104 - 10: expired (run 1's latest point).
    # After c@112, a@100 and a@101 are dead (<= 102) but b@104 is not: b@105 duplicate, a@106 unique.
    assert rows(spark, tmp_path, "duplicate", RUN2) == sorted([("a", "101"), ("b", "103"), ("b", "105")])
    assert rows(spark, tmp_path, "expired", RUN2) == sorted([("x", "90")])
    assert rows(spark, tmp_path, "unique", RUN2) == sorted([("c", "112"), ("a", "106")])
    assert summary["state"]["parent_run"] == RUN1
    assert summary["state"]["latest_point_before"] == "104.000000"
    commit = json.loads((tmp_path / "state" / "commits" / f"{RUN2}.json").read_text())
    # Bucket 20 = [100, 105) is fully expired at latest 112 (105 <= 102 is false) -> still live; nothing retired yet.
    assert sorted(commit["buckets"]) == ["20", "21", "22"]
    third = write_csv(tmp_path / "in3" / "a.csv", "id,t", ["d,125"])
    keyed(spark, tmp_path, third, RUN3, expiry_key="t", expiry_period="10")
    commit3 = json.loads((tmp_path / "state" / "commits" / f"{RUN3}.json").read_text())
    assert sorted(commit3["retired"]) == ["20", "21", "22"]  # (B+1)*5 <= 115
    assert list(commit3["buckets"]) == ["25"]
    fourth = write_csv(tmp_path / "in4" / "a.csv", "id,t", ["d,126"])
    summary4 = keyed(spark, tmp_path, fourth, "2026-11-04-00-00-00", expiry_key="t", expiry_period="10")
    assert summary4["state"]["bucket_folders_deleted"] == 3  # run 1 wrote bucket 20; run 2 wrote 21 (a, b) and 22
    assert not (tmp_path / "state" / "runs" / f"run={RUN1}" / "bucket=20").exists()
    assert rows(spark, tmp_path, "duplicate", "2026-11-04-00-00-00") == sorted([("d", "126")])


def test_state_without_expiry_and_rerun_of_a_failed_run(spark: SparkSession, tmp_path: Path) -> None:
    keyed(spark, tmp_path, write_csv(tmp_path / "in1" / "a.csv", "id", ["a", "b"]), RUN1)
    second = write_csv(tmp_path / "in2" / "a.csv", "id", ["c", "a", "c", "d"])
    keyed(spark, tmp_path, second, RUN2)
    expected = {o: rows(spark, tmp_path, o, RUN2) for o in ("unique", "duplicate")}
    assert expected == {"unique": [("c",), ("d",)], "duplicate": [("a",), ("c",)]}
    # The run "failed" after its state commit but before _SUCCESS: a rerun reads the state before RUN2.
    (tmp_path / "out" / f"run={RUN2}" / "_SUCCESS").unlink()
    keyed(spark, tmp_path, second, RUN2)
    assert {o: rows(spark, tmp_path, o, RUN2) for o in ("unique", "duplicate")} == expected
    # ... and one that failed before its commit (half-written state files) gives the same too.
    (tmp_path / "state" / "commits" / f"{RUN2}.json").unlink()
    keyed(spark, tmp_path, second, RUN2)
    assert {o: rows(spark, tmp_path, o, RUN2) for o in ("unique", "duplicate")} == expected
    assert (tmp_path / "out" / f"run={RUN2}" / "_SUCCESS").exists()
    keyed(spark, tmp_path, write_csv(tmp_path / "in3" / "a.csv", "id", ["d", "e"]), RUN3)
    assert rows(spark, tmp_path, "unique", RUN3) == sorted([("e",)])
    # A later run must use the state's key (from test_bad_input_errors, which had to build a state for it).
    in4 = write_csv(tmp_path / "in4" / "a.csv", "id,t", ["a,1"])
    with pytest.raises(InvalidArgumentError, match="--key: given t, but the state was built with id"):
        keyed(spark, tmp_path, in4, "2026-11-04-00-00-00", key="t")


def test_jsonl_lines_are_written_back_unchanged(spark: SparkSession, tmp_path: Path) -> None:
    data = tmp_path / "in" / "a.jsonl"
    data.parent.mkdir()
    lines = ['{"id": 1, "n": {"x": 1}}', '{"id":1,"n":2}', '{"id": null}', "not json", '{"other": 3}', '{"id": "2"}']
    # A record that repeats a key is an error, at the top (the key field or another) or in an inner object.
    repeats = ['{"id":"a","id":"b"}', '{"id":"b"}', '{"id":"c","n":{"x":1,"x":2}}']
    data.write_text("\n".join(lines + repeats) + "\n", encoding="utf-8")
    summary = keyed(spark, tmp_path, data, fmt="jsonl")
    out = tmp_path / "out" / f"run={RUN1}"

    def read(outcome: str) -> list[str]:
        return sorted(line for p in (out / outcome).glob("part-*") for line in p.read_text().splitlines())

    assert read("unique") == sorted([lines[0], lines[5], repeats[1]])
    assert read("duplicate") == [lines[1]]
    errors = sorted((json.loads(line) for line in read("error")), key=lambda e: str(e["line"]))
    assert errors == sorted([
        {"line": lines[2], "error": "key field 'id' is missing or null"},
        {"line": "not json", "error": "not a JSON object"},
        {"line": lines[4], "error": "key field 'id' is missing or null"},
        {"line": repeats[0], "error": "a key appears more than once"},
        {"line": repeats[2], "error": "not valid JSON, or an inner object repeats a key"},
    ], key=lambda e: e["line"])  # fmt: skip
    assert summary["counts"]["input"] == 9


def test_parquet_in_parquet_out(spark: SparkSession, tmp_path: Path) -> None:
    frame = local_frame(spark, [(1, 10, "a"), (1, 11, "b"), (2, 12, "c")], "id long, seq long, v string")
    frame.coalesce(1).write.parquet(str(tmp_path / "in"))
    keyed(spark, tmp_path, tmp_path / "in", fmt="parquet", expiry_key="seq", expiry_period="100")
    unique = spark.read.parquet(str(tmp_path / "out" / f"run={RUN1}" / "unique"))
    assert sorted(tuple(r) for r in unique.collect()) == [(1, 10, "a"), (2, 12, "c")]
    assert unique.schema == frame.schema


def reference_model(records: list[tuple[str, int]], period: int) -> list[str]:
    """The rule, record by record in input order, in plain Python."""
    latest: int | None = None
    seen: dict[str, int] = {}
    outcomes = []
    for key, value in records:
        latest = value if latest is None else max(latest, value)
        if value <= latest - period:
            outcomes.append("expired")
            continue
        earlier = seen.get(key)
        outcomes.append("duplicate" if earlier is not None and earlier > latest - period else "unique")
        seen[key] = value if earlier is None else max(earlier, value)
    return outcomes


def test_matches_the_sequential_model_whatever_the_partitioning(spark: SparkSession, tmp_path: Path) -> None:
    rng = random.Random(7)
    files: dict[str, list[tuple[str, int]]] = {}
    for name in ("b.csv", "a.csv", "c.csv"):
        offset = 300 if name == "c.csv" else 0
        files[name] = [(f"k{rng.randrange(30)}", rng.randrange(1000) + offset) for _ in range(150)]
        write_csv(tmp_path / "in" / name, "id,t,n", [f"{k},{t},{name}:{i}" for i, (k, t) in enumerate(files[name])])
    ordered = [(f"{name}:{i}", k, t) for name in sorted(files) for i, (k, t) in enumerate(files[name])]
    model = reference_model([(k, t) for _, k, t in ordered], 200)
    expected = dict(zip([n for n, _, _ in ordered], model, strict=True))
    for max_bytes in ("512", "128MB"):  # 512 bytes: every file (about 2.5 KB) is read as several splits and tasks
        spark.conf.set("spark.sql.files.maxPartitionBytes", max_bytes)
        spark.conf.set("spark.sql.files.openCostInBytes", "0" if max_bytes == "512" else "4194304")
        out = tmp_path / f"run-{max_bytes}"
        try:
            options = KeyedOptions(input=str(tmp_path / "in"), output=str(out), format="csv", key="id",
                                   state=str(out / "state"), expiry_key="t", expiry_period="200")  # fmt: skip
            run(spark, options, RUN1)
        finally:
            spark.conf.unset("spark.sql.files.maxPartitionBytes")
            spark.conf.unset("spark.sql.files.openCostInBytes")
        got = {}
        for outcome in ("unique", "duplicate", "expired"):  # read in Python: no Spark job per outcome
            for part in (out / f"run={RUN1}" / outcome).glob("part-*"):
                got.update({row["n"]: outcome for row in csv.DictReader(part.read_text(encoding="utf-8").splitlines())})
        assert got == expected
    assert sorted(set(model)) == ["duplicate", "expired", "unique"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"expiry_key": "t"}, "--expiry-key given alone"),
        ({"expiry_period": "10"}, "--expiry-period given alone"),
        ({"expiry_key": "t", "expiry_period": "ten"}, "--expiry-period: given 'ten'; allowed: a positive number"),
        ({"expiry_key": "t", "expiry_period": "-3"}, "not positive"),
        ({"expiry_key": "t", "expiry_period": "1d", "bucket_span": "3"}, "both plain numbers or both durations"),
        ({"bucket_span": "3"}, "--bucket-span: only allowed with"),
        ({"key": "a,,b"}, "--key: given 'a,,b'"),
        ({"key": "a,a"}, "names a field twice"),
    ],
)
def test_bad_arguments(options: dict[str, str], message: str) -> None:
    base: dict[str, Any] = {"input": "in", "output": "out", "format": "csv", "key": "id", "state": "s"}
    with pytest.raises(InvalidArgumentError, match=message):
        settings_from(KeyedOptions(**{**base, **options}))


def test_period_syntax() -> None:
    assert parse_period("30d", "-").value == 30 * 86400
    assert parse_period("1h30m", "-").value == 5400
    assert parse_period("250ms", "-").kind == "timestamp"
    assert parse_period("2.5", "-").kind == "number"


def test_bad_input_errors(spark: SparkSession, tmp_path: Path) -> None:
    data = write_csv(tmp_path / "in" / "a.csv", "id,t", ["a,1"])
    with pytest.raises(InvalidArgumentError, match=r"--key/--expiry-key: field\(s\) \['nope'\] are not in the input"):
        keyed(spark, tmp_path, data, key="nope")
    with pytest.raises(InvalidArgumentError, match="--format: given 'xml'; allowed: csv, jsonl, parquet"):
        keyed(spark, tmp_path, data, fmt="xml")
    with pytest.raises(InputNotFoundError):
        keyed(spark, tmp_path, tmp_path / "missing")
    # A key other than the state's: in test_state_without_expiry_and_rerun_of_a_failed_run (it needs a state).


def test_command_line_keeps_output_state_and_input_apart_and_the_state_has_one_writer(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_csv(tmp_path / "in" / "a.csv", "id", ["a", "a"])
    base = ["keyed", "--input", str(data.parent), "--format", "csv", "--key", "id", "--run-id", RUN1]
    assert main([*base, "--output", str(tmp_path / "in" / "out"), "--state", str(tmp_path / "state")]) == 2
    assert f"error: --output: given {tmp_path / 'in' / 'out'}, which is, holds or lies inside --input" in (
        capsys.readouterr().err
    )
    assert main([*base, "--output", str(tmp_path / "out"), "--state", str(tmp_path / "in" / "state")]) == 2
    assert f"error: --state: given {tmp_path / 'in' / 'state'}, which is, holds or lies inside --input" in (
        capsys.readouterr().err
    )
    lease = tmp_path / "state" / "_leases" / "writer.json"
    lease.parent.mkdir(parents=True)
    lease.write_text(json.dumps({"job": "keyed", "run_id": RUN2, "host": "h", "pid": 1, "started_at": "t",
                                 "token": "x"}))  # fmt: skip
    assert main([*base, "--output", str(tmp_path / "out"), "--state", str(tmp_path / "state")]) == 1
    assert f"error: state {tmp_path / 'state'} is being written by keyed run {RUN2} (host h, pid 1, since t)" in (
        capsys.readouterr().err
    )
    lease.unlink()
    assert main([*base, "--output", str(tmp_path / "out"), "--state", str(tmp_path / "state")]) == 0
    assert "duplicate" in capsys.readouterr().out
    assert not lease.exists()
    assert main([*base[:4], "tsv", *base[5:], "--output", str(tmp_path / "o"), "--state", str(tmp_path / "s")]) == 2
    assert "--format: given 'tsv'" in capsys.readouterr().err


def output_lines(tmp_path: Path, outcome: str) -> list[str]:
    folder = tmp_path / "out" / f"run={RUN1}" / outcome
    return sorted(line for path in folder.glob("part-*") for line in path.read_text(encoding="utf-8").splitlines()[1:])


def test_csv_records_are_written_as_read_and_rows_of_another_width_are_errors(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows = [" a ,1", "a,2", "b\x00c,3", "\x00g,5", "d,4,extra", "e", "f,"]
    summary = keyed(spark, tmp_path, write_csv(tmp_path / "in" / "a.csv", "id,v", rows).parent)
    # " a " and "a" are two keys, written as they were read; a NUL stays in its key, leading or not.
    assert output_lines(tmp_path, "unique") == sorted([" a ,1", "a,2", "b\x00c,3", "\x00g,5", "f,"])
    wrong = "the row's number of fields differs from the header's"
    # The row as read is kept beside the reason (`_line`): a long row's extra field is not lost.
    assert output_lines(tmp_path, "error") == sorted([f'd,4,{wrong},"d,4,extra"', f"e,,{wrong},e"])
    assert summary["counts"] == {"input": 7, "unique": 5, "duplicate": 0, "expired": 0, "error": 2}


def keyed_or_inserted(tmp_path: Path, job: str, source: list[str]) -> int:
    """`keyed` (key `id`, run RUN1) or `table insert` into a new replacing table, of `source`; the exit code."""
    if job == "keyed":
        return main(["keyed", *source, "--key", "id", "--output", str(tmp_path / "out"),
                     "--state", str(tmp_path / "state"), "--run-id", RUN1])  # fmt: skip
    table = str(tmp_path / "table")
    assert main(["table", "create", "--table", table, "--engine", "replacing", "--key", "id"]) == 0
    return main(["table", "insert", "--table", table, *source])


@pytest.mark.parametrize("job", ["keyed", "table insert"])
@pytest.mark.parametrize(
    ("header", "shown"), [("v,id", "['v', 'id']"), ("id, v", "['id', ' v']"), ("id,v,w", "['id', 'v', 'w']")]
)
def test_csv_files_whose_headers_differ_are_not_read_by_position(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], job: str, header: str, shown: str
) -> None:
    """b.csv names its columns in another order: its row is b with v=2, or the run is refused naming b.csv. Spark
    takes one file's header for all and drops the others' (enforceSchema): b's row became id=2, v=b, exit 0. Spark's
    own check then showed `id, v` and `id,v` as the same header, and no header at all for another number of
    columns."""
    write_csv(tmp_path / "in" / "a.csv", "id,v", ["a,1"])
    write_csv(tmp_path / "in" / "b.csv", header, ["2,b"])
    source = ["--input", str(tmp_path / "in"), "--format", "csv"]
    code = keyed_or_inserted(tmp_path, job, source)
    assert code == 2  # refused before anything is written, naming the file and both headers
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --input: {tmp_path / 'in' / 'b.csv'}: its csv header is {shown}, where {tmp_path / 'in' / 'a.csv'}'s "
        "is ['id', 'v']; allowed: the same columns in the same order in every csv file of an input. Fix the file or "
        "move it to an input of its own, then run the command again. Nothing was written"
    )
    assert not (tmp_path / "out" / f"run={RUN1}" / "unique").exists()
    assert not (tmp_path / "state" / "commits").exists()


def test_parquet_files_of_other_columns_lose_no_field(spark: SparkSession, tmp_path: Path) -> None:
    """b.parquet has a column w that a.parquet has not: its value is kept, or the run is refused naming the file.
    Spark read one file's schema for all: b's w was dropped and its v written as null, exit 0."""
    (tmp_path / "in").mkdir()
    for name, row, schema in [("a", ("a", "1"), "id string, v string"), ("b", ("b", "2"), "id string, w string")]:
        local_frame(spark, [row], schema).coalesce(1).write.parquet(str(tmp_path / "parts" / name))
        next((tmp_path / "parts" / name).glob("part-*.parquet")).rename(tmp_path / "in" / f"{name}.parquet")
    try:
        keyed(spark, tmp_path, tmp_path / "in", fmt="parquet")
    except InvalidArgumentError as err:
        assert "b.parquet" in str(err)
        return
    unique = spark.read.parquet(str(tmp_path / "out" / f"run={RUN1}" / "unique"))
    assert sorted(tuple(v for v in r if v is not None) for r in unique.collect()) == [("a", "1"), ("b", "2")]


def test_a_csv_input_of_empty_files_names_them(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A header-only file is an input of no record (exit 0) and so is an empty jsonl file; a csv folder of empty
    files stopped with exit 2 on "field(s) ['id'] are not in the input; the input's fields are: " (no field, no
    file named, no way out)."""
    for name in ["a.csv", "b.csv"]:
        (tmp_path / "in").mkdir(exist_ok=True)
        (tmp_path / "in" / name).write_bytes(b"")
    code = main(["keyed", "--input", str(tmp_path / "in"), "--format", "csv", "--key", "id", "--output",
                 str(tmp_path / "out"), "--state", str(tmp_path / "state"), "--run-id", RUN1])  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --input: the 2 csv file(s) under {tmp_path / 'in'} hold no line, so no header: "
        f"{tmp_path / 'in' / 'a.csv'}, {tmp_path / 'in' / 'b.csv'}; allowed: csv files whose first line names their "
        "columns. Nothing was written"
    )


def test_a_rerun_of_a_run_that_later_runs_built_on_leaves_the_state_usable(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """RUN1 then RUN2 complete; RUN1 is rerun (same id, "always safe") after its input changed: exit 0. RUN2's commit
    names RUN1's buckets, which the rerun replaced: RUN3 failed, exit 1, "[PATH_NOT_FOUND] Path does not exist:
    .../state/runs/run=RUN1/bucket=6" (no way out: the state is stuck). The rerun must be refused (naming RUN2) or
    leave a state RUN3 reads."""
    data = write_csv(tmp_path / "in" / "a.csv", "id,v", ["k1,1"])
    base = ["keyed", "--input", str(data.parent), "--format", "csv", "--key", "id", "--output", str(tmp_path / "out"),
            "--state", str(tmp_path / "state"), "--run-id"]  # fmt: skip
    assert main([*base, RUN1]) == 0
    assert main([*base, RUN2]) == 0
    write_csv(data, "id,v", ["k2,1"])
    capsys.readouterr()
    assert main([*base, RUN1]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --run-id: given {RUN1}, but state {tmp_path / 'state'} holds later runs ({RUN2}), which decided "
        f"against the state before them; allowed: a run id after {RUN2} (a late or changed batch is a new run: give it "
        "a new id). Nothing was written"
    )
    write_csv(data, "id,v", ["k1,3", "k2,3"])
    assert main([*base, RUN3]) == 0  # the state as RUN2 left it: k1 seen, k2 new
    assert rows(spark, tmp_path, "duplicate", RUN3) == [("k1", "3")]
    assert rows(spark, tmp_path, "unique", RUN3) == [("k2", "3")]


def test_a_jsonl_record_holding_a_bare_carriage_return_is_one_record(spark: SparkSession, tmp_path: Path) -> None:
    """\\r is JSON whitespace: '{"id":"a",\\r"v":1}' is one valid record. Spark's text reader ended the line at the
    bare \\r: two error records ('not a JSON object'), input 3 for 2 lines, a unique record lost, exit 0."""
    data = tmp_path / "in" / "a.jsonl"
    data.parent.mkdir(parents=True)
    data.write_bytes(b'{"id":"a",\r"v":1}\n{"id":"b","v":2}\n')
    summary = keyed(spark, tmp_path, data.parent, fmt="jsonl")
    assert summary["counts"] == {"input": 2, "unique": 2, "duplicate": 0, "expired": 0, "error": 0}
    unique = tmp_path / "out" / f"run={RUN1}" / "unique"
    lines = sorted(line for path in unique.glob("part-*") for line in path.read_bytes().split(b"\n") if line)
    assert lines == [b'{"id":"a",\r"v":1}', b'{"id":"b","v":2}']  # each line written back as read


def test_an_unclosed_quote_does_not_swallow_the_records_after_it(spark: SparkSession, tmp_path: Path) -> None:
    """`a,"x` opens a quote that no later line closes. Read to the line break outside quotes (multiLine), record a
    took the rest of the file as its v ('x\\nb,2\\nc,3\\n'): exit 0, counts input 1 for 3 records, unique 1, b and c in
    no output and nothing said. Read line by line, a was then the record (a, x), a value cut short with no word. Now
    a's line is an error, kept as read; b and c are records."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_bytes(b'id,v\na,"x\nb,2\nc,3\n')
    summary = keyed(spark, tmp_path, folder)
    assert summary["counts"] == {"input": 3, "unique": 2, "duplicate": 0, "expired": 0, "error": 1}
    assert rows(spark, tmp_path, "unique") == [("b", "2"), ("c", "3")]
    assert output_lines(tmp_path, "error") == [f'a,x,"{OPEN_QUOTE}","a,""x"']


def rfc_4180_rows(folder: Path) -> list[list[str]]:
    """The rows of a csv output folder as Python's csv module (an RFC 4180 reader) reads them, headers dropped."""
    return [
        row
        for path in folder.glob("part-*")
        for row in list(csv.reader(io.StringIO(path.read_bytes().decode(), newline="")))[1:]
    ]


CSV_CASES = [  # (the line in the file, where it goes, the fields as read, the line written)
    (b"a,1", "unique", ["a", "1"], "a,1"),
    (b'b,"x""y"', "unique", ["b", 'x"y'], 'b,"x""y"'),  # RFC 4180: a quote in quotes is doubled
    (b'c,"p,q"', "unique", ["c", "p,q"], 'c,"p,q"'),
    (b"d,x\ry", "unique", ["d", "x\ry"], 'd,"x\ry"'),  # a bare \r is data: the line ends at \n or \r\n
    (b" e , v ", "unique", [" e ", " v "], " e , v "),  # no trimming
    (b'f,"p', "error", None, 'f,"p'),  # a line break in quotes: both lines are errors, kept whole
    (b'q",g', "error", None, 'q",g'),
    (b'h,12" pipe', "error", None, 'h,12" pipe'),  # a quote in a field not in quotes: the record is unclear
    (b'i,"p\\"q"', "error", None, 'i,"p\\"q"'),  # a backslash escapes nothing in RFC 4180
    (b"j,1,2", "error", None, "j,1,2"),
]


@pytest.mark.parametrize(
    ("line_end", "file_end"),
    [(b"\n", b"\n"), (b"\r\n", b"\r\n"), (b"\n", b""), (b"\r\n", b"\r")],
    ids=["lf", "crlf", "no-last-line-end", "crlf-cut-before-its-last-lf"],
)
def test_csv_lines_are_read_as_rfc_4180_says_and_written_back_so(
    spark: SparkSession, tmp_path: Path, line_end: bytes, file_end: bytes
) -> None:
    """Before: `"x""y"` was read as '"x""y"' (quotes kept, exit 0); `d,x\\ry` was cut into the record (d, x) and an
    error row y; `f,"p` + `q",g` (a quoted line break) gave the record (f, p) and the record (q", g); `12" pipe` was
    read as data. Each record is now as RFC 4180 reads it; each line that is none is an error kept as read. The
    file's last line ends at the file's end, or at a `\\r` there (a CRLF file cut before its last `\\n`)."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_bytes(line_end.join([b"\xef\xbb\xbfid,v", *[line for line, *_ in CSV_CASES]]) + file_end)
    summary = keyed(spark, tmp_path, folder)
    errors = [case for case in CSV_CASES if case[1] == "error"]
    assert summary["counts"] == {"input": len(CSV_CASES), "unique": len(CSV_CASES) - len(errors), "duplicate": 0,
                                 "expired": 0, "error": len(errors)}  # fmt: skip
    unique = tmp_path / "out" / f"run={RUN1}" / "unique"
    written_lines = sorted(
        line for path in unique.glob("part-*") for line in path.read_bytes().decode().split("\n")[1:] if line
    )  # split at \n only: a \r is data
    assert written_lines == sorted(written for _, outcome, _, written in CSV_CASES if outcome == "unique")
    assert sorted(rfc_4180_rows(unique)) == sorted(fields for _, outcome, fields, _ in CSV_CASES if fields)
    assert sorted((row[2], row[3]) for row in rfc_4180_rows(tmp_path / "out" / f"run={RUN1}" / "error")) == sorted(
        (WRONG_WIDTH if line == "j,1,2" else OPEN_QUOTE, line) for _, _, _, line in errors
    )


def test_a_csv_file_of_bare_carriage_return_line_ends_is_refused_naming_it(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file whose lines end in a bare \\r (classic Mac OS) is one line when a bare \\r is data: its header would
    take every record in, and the run would decide on no record with exit 0. Refused, named, nothing written."""
    write_csv(tmp_path / "in" / "a.csv", "id,v", ["a,1"])
    (tmp_path / "in" / "b.csv").write_bytes(b"id,v\rb,2\rc,3\r")
    code = keyed_or_inserted(tmp_path, "keyed", ["--input", str(tmp_path / "in"), "--format", "csv"])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --input: {tmp_path / 'in' / 'b.csv'}: its first line holds a bare \\r ('id,v\\rb,2\\rc,3'); allowed: "
        "lines ended by \\n or \\r\\n (convert the file's line ends, e.g. with `tr '\\r' '\\n'`). Nothing was written"
    )
    assert not (tmp_path / "out" / f"run={RUN1}").exists()


def test_keyed_reads_its_own_csv_output_back_as_the_same_records(spark: SparkSession, tmp_path: Path) -> None:
    """What keyed writes (quotes doubled, a field holding a comma, a quote or a \\r in quotes) is an input it reads
    back field for field: a second run over RUN1's unique/ finds each record a duplicate of itself."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_bytes(b'id,v\nk1,"x""y"\nk2,"p,q"\nk3,a\rb\nk4, s \nk5,\n')
    keyed(spark, tmp_path, folder)
    again = shutil.copytree(tmp_path / "out" / f"run={RUN1}" / "unique", tmp_path / "again")
    summary = keyed(spark, tmp_path, again, run_id=RUN2)
    assert summary["counts"] == {"input": 5, "unique": 0, "duplicate": 5, "expired": 0, "error": 0}
    assert rows(spark, tmp_path, "duplicate", RUN2) == rows(spark, tmp_path, "unique", RUN1)


@pytest.mark.parametrize(
    "data",
    [b"id,v\na,1\r\nb,2\n", b"id,v\r\na,1\nb,2\r\n"],
    ids=["lf-file-with-crlf-lines", "crlf-file-with-lf-lines"],
)
def test_a_csv_file_mixing_crlf_and_lf_line_ends_keeps_its_records(
    spark: SparkSession, tmp_path: Path, data: bytes
) -> None:
    """A file whose lines end in both \\r\\n and \\n (files concatenated, or appended to by another tool). multiLine
    takes the first line break as the file's: in a \\n file, a,1\\r\\n gave v='1\\r' (exit 0, a changed value, no
    word; read line by line it was '1'); in a \\r\\n file, 'a,1\\nb,2' became one error record of 3 fields (input 1
    for 2 records). Expected: a,1 and b,2, or a refusal naming the file."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv").write_bytes(data)
    try:
        summary = keyed(spark, tmp_path, folder)
    except InvalidArgumentError as err:
        assert str(folder / "a.csv") in str(err)
        return
    assert summary["counts"] == {"input": 2, "unique": 2, "duplicate": 0, "expired": 0, "error": 0}
    unique = tmp_path / "out" / f"run={RUN1}" / "unique"
    read_back = spark.read.options(header="true", multiLine="true").csv(str(unique)).collect()
    assert sorted(tuple(row) for row in read_back) == [("a", "1"), ("b", "2")]


@pytest.mark.parametrize("job", ["keyed", "table insert"])
def test_parquet_files_whose_column_types_differ_are_named(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], job: str
) -> None:
    """a.parquet holds v as int, b.parquet as bigint. Read with mergeSchema, the run stopped with exit 1 on
    "Py4JJavaError: An error occurred while calling oNNN.load." (no file, no column, no way out); before
    mergeSchema it named b.parquet and column v. Now refused naming the file, the column and both types."""
    (tmp_path / "in").mkdir()
    for name, row, schema in [("a", ("a", 1), "id string, v int"), ("b", ("b", 2), "id string, v bigint")]:
        local_frame(spark, [row], schema).coalesce(1).write.parquet(str(tmp_path / "parts" / name))
        next((tmp_path / "parts" / name).glob("part-*.parquet")).rename(tmp_path / "in" / f"{name}.parquet")
    source = ["--input", str(tmp_path / "in"), "--format", "parquet"]
    code = keyed_or_inserted(tmp_path, job, source)
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --input: {tmp_path / 'in' / 'b.parquet'}: column v is bigint, where {tmp_path / 'in' / 'a.parquet'} "
        "has int; allowed: one type per column in every parquet file of an input. Nothing was written"
    )
