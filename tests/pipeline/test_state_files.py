"""A run's state files are written whole or not at all, and a damaged one is named: a run killed as it wrote
`summary.json` is redone by its printed command; a state file cut by an older version never reads as empty."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from jobs.fs import store
from jobs.fs.hadoop import FileSystem
from jobs.fs.run_folder import RunFolder
from jobs.runtime.cli import main
from tests.pipeline.helpers import event, read_lines

RUN_A, RUN_B = "2026-11-24-01-00-00", "2026-11-24-02-00-00"


def uuid(number: int) -> str:
    return f"{number:08x}-0000-4000-8000-000000000000"


def events(numbers: range) -> list[str]:
    return [event(uuid(number)) for number in numbers]


def write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


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
