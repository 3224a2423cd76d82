"""A run's state files are written whole or not at all, and a damaged one is named: a run killed as it wrote
`summary.json` is redone by its printed command; a state file cut by an older version never reads as empty.
Failures known by their cause (a dangling link, a damaged SQLite or Parquet file, a full disk) end in one line
naming the file, the cause and the way out."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from jobs.errors import DamagedFileError
from jobs.fs import store
from jobs.fs.hadoop import FileSystem
from jobs.fs.run_folder import RunFolder
from jobs.manifest import open_manifest
from jobs.manifest.base import RegisteredRun
from jobs.manifest.unfinished import run_register
from jobs.runtime.cli import main
from jobs.runtime.failures import explain
from tests.pipeline.helpers import error_line, read_lines
from tests.pipeline.helpers import numbered_events as events
from tests.pipeline.helpers import write_lines as write

RUN_A, RUN_B = "2026-11-24-01-00-00", "2026-11-24-02-00-00"


class Killed(BaseException):
    """The process dying (nothing catches it, as nothing outlives `kill -9`)."""


def test_a_run_killed_as_it_wrote_its_summary_is_redone_by_the_printed_command(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    output, manifest = tmp_path / "out", f"sqlite:{tmp_path / 'manifest.db'}"
    write(tmp_path / RUN_A / "a.tsv", events(range(0, 6)))
    write(tmp_path / RUN_B / "b.tsv", events(range(3, 9)))  # the next batch: 3 events again, 3 new

    def dedup(run_id: str) -> list[str]:
        return ["dedup", "--input", str(tmp_path / run_id), "--output", str(output), "--run-id", run_id,
                "--manifest", manifest]  # fmt: skip

    def dying(folder: RunFolder, name: str, document: dict[str, Any]) -> str:
        """What a kill during the write leaves: an empty summary.json (a version that wrote it in place) and the
        temporary file of a whole write."""
        (Path(folder.path) / name).write_bytes(b"")
        (Path(folder.path) / f".{name}.0123abcd.tmp").write_bytes(b'{"job": "de')
        raise Killed

    with monkeypatch.context() as patched:
        patched.setattr(RunFolder, "write_json", dying)
        with pytest.raises(Killed):
            main([*dedup(RUN_A), "--create"])  # its 6 pairs in the manifest, its folder unsealed

    assert main(dedup(RUN_B)) == 1
    line = error_line(capsys)
    assert f"run {RUN_A} recorded its events" in line and f"--run-id {RUN_A}" in line  # the printed redo
    assert main(dedup(RUN_A)) == 0  # 5cb60ce: "holds a None run, not a dedup run; it is not replaced"
    assert main(dedup(RUN_B)) == 0
    # Every event once, in completed runs.
    sealed = sorted(path.parent for path in output.glob("run=*/_SUCCESS"))
    assert sealed == [output / f"run={RUN_A}", output / f"run={RUN_B}"]
    assert sorted(line for folder in sealed for line in read_lines(folder / "good")) == sorted(events(range(0, 9)))
    assert read_lines(output / f"run={RUN_B}" / "duplicates") == sorted(events(range(3, 6)))
    capsys.readouterr()

    # A damaged summary in a completed folder is named, not replaced (and not read as a run of no kind).
    summary = output / f"run={RUN_A}" / "summary.json"
    summary.write_text('{"job": "ded')
    assert main(dedup(RUN_A)) == 1
    assert error_line(capsys) == (
        f"error: {summary} is damaged (not JSON: Unterminated string starting at: line 1 column 9 (char 8)) in a "
        "completed run folder (_SUCCESS); nothing was replaced. Restore it from a copy and run again, or choose "
        "another --output"
    )
    assert (output / f"run={RUN_A}" / "_SUCCESS").exists()


def test_a_small_file_is_replaced_whole_and_hadoop_reads_the_new_one(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs, path = FileSystem(spark), tmp_path / "run=1" / "summary.json"
    jfs, hpath = fs.resolve(str(path))
    stream = jfs.create(hpath, True)  # as Hadoop writes it: with its checksum file beside
    stream.write(bytearray(b'{"job": "dedup"}'))
    stream.close()
    assert (path.parent / ".summary.json.crc").exists()
    fs.write_bytes(str(path), b'{"job": "shred"}\n')
    assert fs.read_text(str(path)) == '{"job": "shred"}\n'  # not a checksum error against the old content

    def full(_: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        fs.write_bytes(str(path), b'{"job": "keyed"}\n')
    assert path.read_text() == '{"job": "shred"}\n'  # the old file, whole
    assert sorted(name.name for name in path.parent.iterdir()) == ["summary.json"]  # no temporary file left
    assert store.read_bytes(str(path)) == b'{"job": "shred"}\n'


def test_a_state_file_that_is_not_whole_json_is_named(tmp_path: Path) -> None:
    entry = tmp_path / "_runs" / f"run={RUN_A}.json"
    assert store.read_json(str(entry), "WAY OUT") is None
    entry.parent.mkdir()
    entry.write_text('{"run_id": "2026-11')
    with pytest.raises(DamagedFileError) as damaged:
        store.read_json(str(entry), "WAY OUT")
    assert str(damaged.value) == (
        f"{entry} is damaged (not JSON: Unterminated string starting at: line 1 column 12 (char 11)); WAY OUT"
    )
    entry.write_text("")
    with pytest.raises(DamagedFileError, match=r"is damaged \(empty\); WAY OUT$"):
        store.read_json(str(entry), "WAY OUT")


# Failures known by their cause: as the JVM, SQLite and the OS tell them (Spark 4.0's texts, shortened).
RERUN = "then rerun with the same run id (the failed attempt has no _SUCCESS; the rerun replaces it)"
DISK_FULL = f"""An error occurred while calling o1160.text.
: org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to file:/data/out/run={RUN_A}\
/_staging/_temporary/0/_temporary/attempt_202611271547_0005_m_000000_4/folder=good/part-00000-a58.c000.txt. SQLSTATE: 58030
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRowsError(QueryExecutionErrors.scala:774)
Caused by: org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device
Caused by: java.io.IOException: No space left on device
"""
ZEROED_PAGE = """An error occurred while calling o696.count.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 49.0 failed 1 times, most recent \
failure: Lost task 0.0 in stage 49.0 (TID 58) (localhost executor driver): org.apache.spark.SparkException: \
[FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///data/manifest/filters-v2/segment=A.6b8e/\
part-00000-4ea1_00000.c000.zstd.parquet.  SQLSTATE: KD001
Caused by: java.io.IOException: can not read class org.apache.parquet.format.PageHeader: Required field \
'uncompressed_page_size' was not found in serialized data! Struct: org.apache.parquet.format.PageHeader$PageHeaderS@77b2
Caused by: shaded.parquet.org.apache.thrift.protocol.TProtocolException: Required field 'uncompressed_page_size' was \
not found in serialized data!
"""
NOT_PARQUET = """An error occurred while calling o88.parquet.
: java.lang.RuntimeException: file:/data/in/x.parquet is not a Parquet file. Expected magic number at tail, but found \
[0, 0, 0, 0]
"""
SQLITE_IN_A_TASK = """An error occurred while calling o120.collectToPython.
: org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/work/jobs/manifest/sqlite.py", line 65, in _connect
sqlite3.DatabaseError: database disk image is malformed
"""


def test_failures_known_by_their_cause_name_the_file_and_the_way_out() -> None:
    lake, sqlite = "lake:/data/manifest", "sqlite:///data/m.db"
    assert explain(RuntimeError(DISK_FULL), "/data/out", lake) == (
        f"no space left on the device holding /data/out/run={RUN_A} (No space left on device). Free space there, {RERUN}"
    )
    assert explain(OSError(28, "No space left on device"), "/data/out", None, "/scratch") == (
        f"no space left on the device holding /data/out or Spark's scratch folder (/scratch) (No space left on "
        f"device). Free space there, {RERUN}"
    )
    assert explain(RuntimeError(ZEROED_PAGE), "/data/out", lake) == (
        "manifest lake:/data/manifest: its file /data/manifest/filters-v2/segment=A.6b8e/part-00000-4ea1_00000.c000."
        "zstd.parquet is damaged (can not read class org.apache.parquet.format.PageHeader: Required field "
        "'uncompressed_page_size' was not found in serialized data!). Restore it from a backup (or its earlier "
        f"version, in a versioned bucket), {RERUN}"
    )
    assert explain(RuntimeError(NOT_PARQUET), "/data/out", lake) == (
        f"/data/in/x.parquet cannot be read (file:/data/in/x.parquet is not a Parquet file.). Restore or replace it, "
        f"{RERUN}"
    )
    assert explain(RuntimeError(SQLITE_IN_A_TASK), "/data/out", sqlite) == (
        "manifest sqlite:///data/m.db: the SQLite file /data/m.db is damaged (database disk image is malformed). "
        f"Restore it from a copy (remove /data/m.db-wal and /data/m.db-shm beside it first, if there), {RERUN}"
    )
    assert explain(sqlite3.OperationalError("disk I/O error"), "/data/out", sqlite) == (
        "manifest sqlite:///data/m.db: SQLite could not write /data/m.db (disk I/O error: most often a full disk, else "
        f"a failing or vanished device). Free space on the device holding /data/m.db (df /data), {RERUN}"
    )  # what a full disk gives as the run takes its lease in the manifest (93cc664: no file named)
    assert explain(RuntimeError("An error occurred while calling o1.save.\n: java.io.IOException: disk"), None) is None


def test_a_cut_sqlite_manifest_and_a_dangling_link_are_named_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both stop the run before Spark starts."""
    root, database = tmp_path / "in", tmp_path / "manifest.db"
    write(root / "a.tsv", events(range(0, 3)))
    manifest = open_manifest(f"sqlite:{database}")
    manifest.create()
    run_register(manifest).begin(RegisteredRun(RUN_A, 1, 2, str(tmp_path / "out" / f"run={RUN_A}"), "redo A"))
    manifest.settle()  # everything in the .db itself, as a run leaves it
    database.with_name(f"{database.name}-wal").unlink(missing_ok=True)
    database.with_name(f"{database.name}-shm").unlink(missing_ok=True)
    os.truncate(database, database.stat().st_size // 2)  # a copy of the .db cut in half
    argv = ["dedup", "--input", str(root), "--output", str(tmp_path / "out"), "--run-id", RUN_B]
    assert main([*argv, "--manifest", f"sqlite:{database}"]) == 1
    assert error_line(capsys) == (
        f"error: dedup run {RUN_B} stopped before Spark started, nothing written: manifest sqlite:{database}: the "
        f"SQLite file {database} is damaged (database disk image is malformed). Restore it from a copy (remove "
        f"{database}-wal and {database}-shm beside it first, if there), {RERUN} (run with --debug for the traceback)"
    )  # 5cb60ce: "dedup failed: DatabaseError: database disk image is malformed"

    (root / "b.tsv").symlink_to(tmp_path / "gone.tsv")
    assert main(argv) == 1
    assert error_line(capsys) == (
        f"error: dedup run {RUN_B} stopped before Spark started, nothing written: {root / 'b.tsv'} is a symbolic link "
        f"to {tmp_path / 'gone.tsv'}, which does not exist. Remove the link or restore what it points to, then run "
        "again (run with --debug for the traceback)"
    )  # 5cb60ce: "dedup failed: FileNotFoundError: [Errno 2] No such file or directory: '…/in/b.tsv'"
    (root / "b.tsv").unlink()
    (root / "c.tsv").symlink_to(root / "c.tsv")  # a link to itself
    assert main(argv) == 1
    assert error_line(capsys) == (
        f"error: dedup run {RUN_B} stopped before Spark started, nothing written: {root / 'c.tsv'} is a loop of "
        f"symbolic links (one that leads back to itself: {root / 'c.tsv'}), which names no file. Remove the link or "
        "point it at a file, then run again (run with --debug for the traceback)"
    )  # 76a4c7a: "dedup failed: OSError: [Errno 40] Too many levels of symbolic links: '…/in/c.tsv'"
    with pytest.raises(OSError) as under_a_loop:
        os.stat(root / "c.tsv" / "d.tsv")  # a path whose folder is the loop: not itself a link to read
    assert explain(under_a_loop.value) == (
        f"{root / 'c.tsv' / 'd.tsv'} lies under a loop of symbolic links, which names no file. Remove the loop, then "
        "run again"
    )
    assert not (tmp_path / "out").exists()


def test_an_output_through_a_link_to_nothing_is_named(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 59's 06: `--output` a link to a folder not there (an unmounted disk) ended in a bare
    `FileNotFoundError: … 'CURRENT/_leases'`."""
    write(tmp_path / "in" / "a.tsv", events(range(0, 3)))
    (tmp_path / "current").symlink_to(tmp_path / "unmounted" / "out")
    argv = ["dedup", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "current"), "--run-id", RUN_B]
    assert main(argv) == 1
    assert error_line(capsys).endswith(
        f"{tmp_path / 'current'} is a symbolic link to {tmp_path / 'unmounted' / 'out'}, which does not exist. Remove "
        "the link or restore what it points to, then run again (run with --debug for the traceback)"
    )


def test_a_full_disk_names_the_run_folder(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, output = tmp_path / "in", tmp_path / "out"
    write(root / "a.tsv", events(range(0, 400)))  # about 150 kB of lines for 64 kB
    output.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(output)], capture_output=True).returncode:
        pytest.skip("no tmpfs to fill: mount is not permitted here")
    try:
        assert main(["dedup", "--input", str(root), "--output", str(output), "--run-id", RUN_A]) == 1
    finally:
        subprocess.run(["umount", "--lazy", str(output)], check=True)  # lazy: Spark may still hold a file open
    assert error_line(capsys) == (
        f"error: dedup run {RUN_A} failed, no _SUCCESS written: no space left on the device holding "
        f"{output}/run={RUN_A} (No space left on device). Free space there, {RERUN} (run with --debug for the "
        "traceback)"
    )  # 5cb60ce: "Py4JJavaError: An error occurred while calling o1389.text."


def test_a_full_disk_under_the_sqlite_manifest_names_its_device_and_the_rerun_completes(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The manifest's device full before the run and during its puts (in Spark tasks): each stop names that device
    (the output's is not full), and the rerun the line asks for, once space is freed, records every pair once."""
    root, output, small = tmp_path / "in", tmp_path / "out", tmp_path / "small"
    write(root / "a.tsv", events(range(0, 3000)))  # about 430 kB of manifest for 1 MB
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("no tmpfs to fill: mount is not permitted here")
    database, filler = small / "m.db", small / "filler"
    argv = ["dedup", "--input", str(root), "--output", str(output), "--manifest", f"sqlite:{database}", "--create"]
    full = (
        f"manifest sqlite:{database}: SQLite could not write {database} (database or disk is full). Free space on the "
        f"device holding {database} (df {small}), {RERUN} (run with --debug for the traceback)"
    )
    try:
        fill = os.open(filler, os.O_WRONLY | os.O_CREAT)
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(fill, b"\0" * 4096)
        os.close(fill)
        assert main([*argv, "--run-id", RUN_A]) == 1
        assert error_line(capsys) == f"error: dedup run {RUN_A} failed, no _SUCCESS written: {full}"
        filler.unlink()
        filler.write_bytes(b"\0" * (800 << 10))  # room for the table, not for the run's pairs
        assert main([*argv, "--run-id", RUN_A]) == 1
        assert error_line(capsys) == f"error: dedup run {RUN_A} failed, no _SUCCESS written: {full}"
        filler.unlink()
        assert main([*argv, "--run-id", RUN_A]) == 0  # as printed: the same run id, with space freed
        assert main([*argv, "--run-id", RUN_B]) == 0  # the same events again: every pair was recorded once
    finally:
        subprocess.run(["umount", "--lazy", str(small)], check=True)
    assert len(read_lines(output / f"run={RUN_A}" / "good")) == 3000
    assert read_lines(output / f"run={RUN_B}" / "good") == []
    assert len(read_lines(output / f"run={RUN_B}" / "duplicates" / "reason=cross_batch_natural")) == 3000
    # 93cc664: "Py4JJavaError: An error occurred while calling o459.count." and "OperationalError: disk I/O error"
