"""`python -m jobs generate` writes into a new or empty folder; `--overwrite` replaces only its own files."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.runtime.cli import main


def generate(output: Path, *options: str) -> int:
    return main(["generate", "--output", str(output), "--events", "40", "--seed", "3", *options])


def contents(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def test_a_folder_holding_files_is_refused_without_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert generate(tmp_path, "--batches", "2") == 0
    before = contents(tmp_path)
    capsys.readouterr()
    assert generate(tmp_path) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: --output: given {tmp_path}, which holds 4 entries (e.g. batch=1); allowed: a new or empty folder, "
        "or --overwrite to replace what an earlier generate wrote there"
    ]
    assert contents(tmp_path) == before


def test_overwrite_leaves_exactly_the_new_files(tmp_path: Path) -> None:
    assert generate(tmp_path, "--batches", "2", "--files", "2", "--gzip") == 0
    assert sorted(contents(tmp_path)) == [
        "batch=1/part-00000.tsv.gz", "batch=1/part-00001.tsv.gz", "batch=2/part-00000.tsv.gz",
        "batch=2/part-00001.tsv.gz",
    ]  # fmt: skip
    assert generate(tmp_path, "--overwrite") == 0
    fresh = tmp_path.parent / "fresh"
    assert generate(fresh) == 0
    assert contents(tmp_path) == contents(fresh) != {}


def test_overwrite_never_removes_a_file_generate_does_not_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert generate(tmp_path) == 0
    (tmp_path / "notes.txt").write_text("keep me\n")
    before = contents(tmp_path)
    capsys.readouterr()
    assert generate(tmp_path, "--overwrite") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: --overwrite: {tmp_path} holds notes.txt, which generate does not write; allowed: a folder holding "
        "only part-NNNNN.tsv[.gz] files, directly or in batch=N/ folders (move the others away)"
    ]
    assert contents(tmp_path) == before


def test_a_file_as_output_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "events.tsv"
    target.write_text("x\n")
    assert generate(target, "--overwrite") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: --output: given {target}, which is a file; allowed: a new or empty folder"
    ]
    assert target.read_text() == "x\n"
