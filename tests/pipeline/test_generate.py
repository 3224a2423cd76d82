"""`python -m jobs generate` writes into a new or empty folder; `--overwrite` replaces only its own files."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.enriched.fields import FIELD_INDEX
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


def test_the_heavy_tail_gives_groups_past_the_long_tails_cap_half_of_their_copies_synthetic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--tail heavy`: Pareto(1.2) copies per shared id, so groups far larger than the long tail's cap of
    events / 250, and each copy synthetic by --synthetic-share alone (the long tail makes every copy past the 20th
    synthetic)."""
    output = tmp_path / "heavy"
    assert main(["generate", "--output", str(output), "--events", "20000", "--tail", "heavy", "--synthetic-share",
                 "0.5", "--bad-share", "0"]) == 0  # fmt: skip
    groups: dict[str, list[str]] = {}
    for line in (output / "part-00000.tsv").read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        groups.setdefault(fields[6], []).append(line)
    largest = max(len(lines) for lines in groups.values())
    assert 20000 // 250 < largest <= 5000
    copies = sum(len(lines) - 1 for lines in groups.values())
    printed = capsys.readouterr().out
    natural = int(printed.split(" natural")[0].rsplit(", ", 1)[1].replace(",", ""))
    assert 0.45 < natural / copies < 0.55
    # In the largest group, copies past the 20th include natural ones: the same line again (or re-enriched).
    fingerprints = [line.split("\t")[FIELD_INDEX["event_fingerprint"]] for line in max(groups.values(), key=len)]
    assert len(set(fingerprints[21:])) < len(fingerprints[21:])


def test_an_unknown_tail_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["generate", "--output", str(tmp_path / "x"), "--events", "10", "--tail", "fat"])
    assert stopped.value.code == 2
    assert "argument --tail: invalid choice: 'fat' (choose from 'long', 'heavy')" in capsys.readouterr().err
