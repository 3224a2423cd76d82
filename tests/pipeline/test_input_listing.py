"""One listing: plain and incremental runs read exactly the files `store.list_input` lists (hidden names and uploads
in progress left out, symlinked folders followed), and a line ends at `\\n` only."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from jobs.runtime.cli import main
from tests.pipeline.helpers import ID_A, ID_B, ID_C, RUN_ID, event

LATER = "2026-11-22-04-00-00"
ID_D = "d0000000-0000-4000-8000-000000000004"


def lines_of(folder: Path) -> list[str]:
    """The lines of every data file under `folder`, split at `\\n` only (a `\\r` inside a line is kept), sorted."""
    found: list[str] = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.startswith((".", "_")):
            found.extend(path.read_bytes().decode("utf-8").split("\n")[:-1])
    return sorted(found)


def dedup(root: Path, output: Path, run_id: str, *extra: str) -> int:
    return main(["dedup", "--input", str(root), "--output", str(output), "--run-id", run_id, *extra])


def summary_of(output: Path, run_id: str) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((output / f"run={run_id}" / "summary.json").read_text())
    return summary


def write(path: Path, *lines: str, end: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join(line + end for line in lines).encode("utf-8"))
    return path


def test_uploads_in_progress_symlinked_folders_and_underscore_names_are_listed_alike_in_every_mode(
    spark: SparkSession, tmp_path: Path
) -> None:
    """One input folder, a plain and an incremental run of it, then the next incremental run (merged from
    test_an_upload_in_progress_is_listed_not_read_and_read_once_renamed and
    test_symlinked_folders_and_underscore_names_are_read_alike_in_every_mode: they ran the same runs)."""
    root, elsewhere = tmp_path / "enriched", tmp_path / "elsewhere"
    output, plain = tmp_path / "incremental", tmp_path / "plain"
    write(root / "a" / "x.tsv", event(ID_A))
    write(elsewhere / "y.tsv", event(ID_B, event_fingerprint="fp-2"))
    os.symlink(elsewhere, root / "linked")  # followed, as Hadoop's local file system follows it
    os.symlink(root, root / "a" / "loop")  # a link back up: not followed (its files are listed once already)
    write(root / "_year=2026.tsv", event(ID_C, event_fingerprint="fp-3"))  # a name starting with _: hidden
    upload = write(root / "late.tsv._COPYING_", event(ID_D, event_fingerprint="fp-4"))  # an upload in progress
    in_progress = [{"path": f"file://{upload}", "size": upload.stat().st_size}]
    expected = sorted([event(ID_A), event(ID_B, event_fingerprint="fp-2")])

    # Plain and incremental runs read the same files: the linked folder's, not the hidden name's nor the upload's;
    # the upload is listed as in progress.
    for folder, extra in ((output, ("--incremental",)), (plain, ())):
        assert dedup(root, folder, RUN_ID, *extra) == 0, extra
        assert lines_of(folder / f"run={RUN_ID}" / "good") == expected, extra
        summary = summary_of(folder, RUN_ID)
        assert (summary["counts"]["input"], summary["input_files"]["files"]) == (2, 2), extra
        assert summary["input_files"]["in_progress"] == in_progress, extra
    entry = json.loads((output / "_ledger" / f"{1:020d}.json").read_text())
    # The upload is not recorded as read; the linked file is, by its path through the link.
    assert [file["path"] for file in entry["files"]] == [str(root / "a" / "x.tsv"), str(root / "linked" / "y.tsv")]

    upload.rename(root / "late.tsv")  # the upload done: the next run reads it, once
    assert dedup(root, output, LATER, "--incremental") == 0
    assert summary_of(output, LATER)["input_files"]["in_progress"] == []
    delivered = lines_of(output / f"run={RUN_ID}" / "good") + lines_of(output / f"run={LATER}" / "good")
    assert sorted(delivered) == sorted([*expected, event(ID_D, event_fingerprint="fp-4")])


def test_a_bare_carriage_return_inside_a_field_is_data(spark: SparkSession, tmp_path: Path) -> None:
    root, output = tmp_path / "enriched", tmp_path / "out"
    lf = [event(ID_A, page_title="before\rafter"), event(ID_B, event_fingerprint="fp-2")]
    crlf = [event(ID_C), event(ID_D, page_title="ends in\r", event_fingerprint="fp-4")]
    write(root / "lf.tsv", *lf)
    write(root / "crlf.tsv", *crlf, end="\r\n")  # CRLF line ends: the one \r before \n is not data

    assert dedup(root, output, RUN_ID) == 0
    summary = summary_of(output, RUN_ID)
    assert (summary["counts"]["input"], summary["counts"]["good"]) == (4, 4)
    assert lines_of(output / f"run={RUN_ID}" / "good") == sorted(lf + crlf)  # each field keeps its \r
    shredded = tmp_path / "shredded"
    assert main(["shred", "--input", str(output / f"run={RUN_ID}"), "--output", str(shredded), "--run-id", RUN_ID]) == 0
    assert summary_of(shredded, RUN_ID)["counts"] == {"input": 4, "good": 4, "bad": 0}
