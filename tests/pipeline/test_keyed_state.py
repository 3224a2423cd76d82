"""A damaged keyed state (`--state`) stops the next run before it writes, in one line naming the file and the way
out; the way out taken, the run gives the rows of an intact state. Attack 9's keyed findings: a lost newest commit
or bucket file re-delivered keys as unique (exit 0), a cut commit stopped on a bare JSONDecodeError, a stray
`commits/zzz.json` asked for "a run id after zzz" forever, a lost bucket folder stopped on Spark's PATH_NOT_FOUND."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.keyed import completion
from jobs.runtime.cli import main
from tests.pipeline.test_keyed import RUN1, RUN2, RUN3, rows, write_csv

RESTORE = "Restore it from a backup (or its earlier version, in a versioned bucket) and run again"
RESTORE_FOLDER = "Restore its files from a backup (or their earlier versions, in a versioned bucket) and run again"
MOVE_OUT = "Move it out of commits/ and run again"
NOTHING = "nothing was written"


def keyed(
    tmp_path: Path, run_id: str, ids: list[str], capsys: pytest.CaptureFixture[str], state: str = "state",
    output: str = "out",
) -> tuple[int, str]:  # fmt: skip
    """`keyed` of a csv of `ids` (key `id`) on the state `tmp_path/state`: its exit code and, when it failed, its
    last stderr line."""
    data = write_csv(tmp_path / f"in-{run_id}" / "a.csv", "id", ids)
    code = main(["keyed", "--input", str(data.parent), "--format", "csv", "--key", "id", "--output",
                 str(tmp_path / output), "--state", str(tmp_path / state), "--run-id", run_id])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    return code, err[-1] if err and code else ""


def two_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """A state after RUN1 (a, b) and RUN2 (c), and a copy of it at `tmp_path/copy`; the state's folder."""
    assert keyed(tmp_path, RUN1, ["a", "b"], capsys)[0] == 0
    assert keyed(tmp_path, RUN2, ["c"], capsys)[0] == 0
    shutil.copytree(tmp_path / "state", tmp_path / "copy")
    return tmp_path / "state"


def run3_after_restoring(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The damaged run wrote nothing; with the copy restored, RUN3 finds a, c seen and d new."""
    assert not (tmp_path / "out" / f"run={RUN3}" / "unique").exists()
    shutil.rmtree(tmp_path / "state")
    shutil.copytree(tmp_path / "copy", tmp_path / "state")
    assert keyed(tmp_path, RUN3, ["a", "c", "d"], capsys) == (0, "")
    assert rows(spark, tmp_path, "duplicate", RUN3) == [("a",), ("c",)]
    assert rows(spark, tmp_path, "unique", RUN3) == [("d",)]


def cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def newest(state: Path) -> str:
    return f"{state}/commits/{RUN2}.json"


DAMAGED_LOG: dict[str, tuple[Callable[[Path], object], Callable[[Path], str]]] = {
    "newest commit cut": (
        lambda s: cut(s / "commits" / f"{RUN2}.json"),
        lambda s: (
            f"state {s} is damaged: commit {newest(s)} (100 bytes) is not the one {s}/_latest names (its SHA-256 differs: cut or "
            f"replaced); {NOTHING}. {RESTORE}"
        ),
    ),
    "newest commit replaced by another valid commit of its run": (  # attack 59's 07: taken for a stopped redo's
        lambda s: (s / "commits" / f"{RUN2}.json").write_text(
            json.dumps({**json.loads((s / "commits" / f"{RUN2}.json").read_text()), "latest_point": None})
        ),
        lambda s: (
            f"state {s} is damaged: commit {newest(s)} ({(s / 'commits' / f'{RUN2}.json').stat().st_size} bytes) is "
            f"not the one {s}/_latest names (its SHA-256 differs: cut or replaced); {NOTHING}. {RESTORE}"
        ),
    ),
    "newest commit lost (or an older commits/ restored)": (
        lambda s: (s / "commits" / f"{RUN2}.json").unlink(),
        lambda s: (
            f"state {s} is damaged: commit {newest(s)}, the newest, is missing (the keys of the runs it records would be forgotten "
            f"and delivered again); {NOTHING}. {RESTORE}"
        ),
    ),
    "anchor lost": (
        lambda s: (s / "_latest").unlink(),
        lambda s: (
            f"state {s} is damaged: anchor {s}/_latest is missing, and the newest commit is {newest(s)}; {NOTHING}. {RESTORE} "
            '(docs/operations.md ("A keyed state is damaged") says how to write it again)'
        ),
    ),
    "anchor cut": (
        lambda s: cut(s / "_latest"),
        lambda s: (
            f"anchor {s}/_latest is damaged (100 bytes, names no commit: JSONDecodeError: Unterminated string "
            f"starting at: line 1 column 45 (char 44)); {NOTHING}. {RESTORE} "
            '(docs/operations.md ("A keyed state is damaged") says how to write it again)'
        ),
    ),
    "anchor zeroed": (
        lambda s: (s / "_latest").write_bytes(bytes((s / "_latest").stat().st_size)),
        lambda s: (
            f"anchor {s}/_latest is damaged ({(s / '_latest').stat().st_size} bytes, names no commit: all zero bytes); "
            f'{NOTHING}. {RESTORE} (docs/operations.md ("A keyed state is damaged") says how to write it again)'
        ),
    ),
    "anchor replaced by a binary file": (
        lambda s: (s / "_latest").write_bytes(b"\xff\xd8\xff\xe0" + bytes(12)),
        lambda s: (
            f"anchor {s}/_latest is damaged (16 bytes, names no commit: not UTF-8 text: byte 0xff at offset 0); "
            f'{NOTHING}. {RESTORE} (docs/operations.md ("A keyed state is damaged") says how to write it again)'
        ),
    ),
    "parent commit of a wrong shape": (
        lambda s: (s / "commits" / f"{RUN1}.json").write_text("[]"),
        lambda s: (
            f"commit {s}/commits/{RUN1}.json is damaged (no commit document: a JSON list, not an object); "
            f"{NOTHING}. {RESTORE}"
        ),
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGED_LOG))
def test_a_damaged_commit_log_stops_the_run_naming_the_file(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """The parent of a wrong shape: found by a rerun of RUN2 (which starts from RUN1); the others by RUN3."""
    state = two_runs(tmp_path, capsys)
    harm, message = DAMAGED_LOG[damage]
    harm(state)
    run_id = RUN2 if "parent" in damage else RUN3
    assert keyed(tmp_path, run_id, ["a", "c", "d"], capsys) == (1, f"error: {message(state)}")
    run3_after_restoring(spark, tmp_path, capsys)


def flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["file lost", "file swapped, same size", "file grown", "folder lost", "file added"])
def test_a_damaged_bucket_file_stops_the_run_naming_it(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    state = two_runs(tmp_path, capsys)
    folder = next(path for path in sorted((state / "runs" / f"run={RUN2}").glob("bucket=*")))
    files = sorted(folder.glob("part-*.parquet"))
    part, size, commit = files[0], files[0].stat().st_size, newest(state)
    crc = f"crc32:{zlib.crc32(part.read_bytes()):08x}"
    lost_folder = f"bucket folder {folder}, which commit {commit} lists (its {len(files)} file(s)), is missing or empty"
    if damage == "file lost":
        part.unlink()
        what = f"file {part} ({size} bytes), which commit {commit} records, is missing" if files[1:] else lost_folder
    elif damage == "file swapped, same size":
        flip_last_byte(part)
        what = f"file {part} has checksum crc32:{zlib.crc32(part.read_bytes()):08x}, commit {commit} records {crc} (replaced)"
    elif damage == "file grown":
        part.write_bytes(part.read_bytes() + b"x")
        what = f"file {part} holds {size + 1} bytes, commit {commit} records {size}"
    elif damage == "folder lost":
        shutil.rmtree(folder)
        what = lost_folder
    else:
        shutil.copy(part, folder / "extra.parquet")
        what = f"file {folder}/extra.parquet is in no commit, and this run would read it"
    way_out = "Move it out of the state's runs/ and run again" if damage == "file added" else RESTORE
    way_out = RESTORE_FOLDER if what == lost_folder else way_out
    expected = f"error: state {state} is damaged: {what}; {NOTHING}. {way_out}"
    assert keyed(tmp_path, RUN3, ["a", "c", "d"], capsys) == (1, expected)
    run3_after_restoring(spark, tmp_path, capsys)


def stray_commit(state: Path, run_id: str) -> None:
    document = json.loads((state / "commits" / f"{RUN1}.json").read_text())
    (state / "commits" / f"{run_id}.json").write_text(json.dumps({**document, "run_id": run_id}))


STRAYS: dict[str, tuple[Callable[[Path], object], Callable[[Path], str]]] = {
    "zzz.json": (
        lambda s: (s / "commits" / "zzz.json").write_text("{}"),
        lambda s: (
            f"state {s}: {s}/commits/zzz.json is no commit of this state (a commit is named RUN-ID.json, RUN-ID "
            f"as YYYY-MM-DD-HH-MM-SS); {NOTHING}. {MOVE_OUT}"
        ),
    ),
    "a run id's name, after the newest": (
        lambda s: (s / "commits" / "2026-12-31-00-00-00.json").write_text("{}"),
        lambda s: (
            f"commit {s}/commits/2026-12-31-00-00-00.json is damaged (no commit document: format, run_id, "
            f"parent, settings, latest_point, buckets, retired missing); {NOTHING}. If {s}/_latest was restored from an "
            "older copy, restore its newest version; else move it out of commits/; then run again"
        ),
    ),
    "a commit of no chain, before the newest": (
        lambda s: stray_commit(s, "2026-10-01-00-00-00"),
        lambda s: (
            f"state {s} is damaged: {s}/commits/2026-10-01-00-00-00.json is no commit of run {RUN2}'s chain; "
            f"{NOTHING}. {MOVE_OUT}"
        ),
    ),
}


@pytest.mark.parametrize("stray", list(STRAYS))
def test_a_stray_file_in_commits_is_named_with_move_it_out(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], stray: str
) -> None:
    state = two_runs(tmp_path, capsys)
    harm, message = STRAYS[stray]
    harm(state)
    # Whatever its name, no run id is asked for: the same line for any run after the newest.
    for run_id in (RUN3, "2027-12-31-23-59-59"):
        assert keyed(tmp_path, run_id, ["a", "c", "d"], capsys) == (1, f"error: {message(state)}")
    run3_after_restoring(spark, tmp_path, capsys)


def to_format_1(state: Path) -> None:
    """Make `state` one written before anchors: commits of format 1 (no depth, no file records, no run), no
    `_latest`, and the summaries of its runs in `out/` as that version wrote them (naming no commit)."""
    for path in (state / "commits").glob("*.json"):
        document = json.loads(path.read_text())
        legacy = {key: value for key, value in document.items() if key not in ("depth", "files", "run")}
        path.write_text(json.dumps({**legacy, "format": 1}))
    (state / "_latest").unlink()
    for path in (state.parent / "out").glob("run=*/summary.json"):
        summary = json.loads(path.read_text())
        for key in ("commit", "parent_commit"):
            summary["state"].pop(key)
        path.write_text(json.dumps(summary))


def test_a_file_lost_from_a_state_from_before_anchors_is_named_by_its_checksum_file(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A format-1 commit records its bucket folders, not their files: a part file removed from a folder that still
    holds others was read as no loss (the key delivered again, exit 0, and the next commit recorded the rest as
    whole). The checksum file Hadoop wrote beside it is still there, and names it."""
    assert keyed(tmp_path, RUN1, ["a", "b"], capsys)[0] == 0
    assert keyed(tmp_path, RUN2, [f"k{i}" for i in range(40)], capsys)[0] == 0
    state = tmp_path / "state"
    to_format_1(state)
    shutil.copytree(state, tmp_path / "copy")
    folder = next(
        f for f in sorted((state / "runs" / f"run={RUN2}").glob("bucket=*")) if len(list(f.glob("part-*"))) > 1
    )
    part = sorted(folder.glob("part-*"))[0]
    part.unlink()  # by hand: its .crc stays
    expected = (
        f"error: state {state} is damaged: file {part}, whose checksum file .{part.name}.crc is there, is missing "
        f"(commit {state}/commits/{RUN2}.json, written before commits recorded their files, lists its folder); "
        f"{NOTHING}. {RESTORE}"
    )
    assert keyed(tmp_path, RUN3, ["a", "k0", "d"], capsys) == (1, expected)
    assert not (tmp_path / "out" / f"run={RUN3}").exists() and not (state / "_latest").exists()
    shutil.copy(tmp_path / "copy" / part.relative_to(state), part)
    assert keyed(tmp_path, RUN3, ["a", "k0", "d"], capsys) == (0, "")
    assert (rows(spark, tmp_path, "duplicate", RUN3), rows(spark, tmp_path, "unique", RUN3)) == (
        [("a",), ("k0",)],
        [("d",)],
    )


def test_a_state_from_before_anchors_and_a_run_stopped_before_its_anchor_keep_working(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A state of format 1 (no anchor, no file records) is read as before; its next run anchors it and records
    every live file. A run stopped between its commit and its anchor is the current one for the next run."""
    state = two_runs(tmp_path, capsys)
    to_format_1(state)
    assert keyed(tmp_path, RUN3, ["a", "c", "d"], capsys) == (0, "")
    assert (rows(spark, tmp_path, "duplicate", RUN3), rows(spark, tmp_path, "unique", RUN3)) == (
        [("a",), ("c",)],
        [("d",)],
    )
    anchor = json.loads((state / "_latest").read_text())
    commit = json.loads((state / "commits" / f"{RUN3}.json").read_text())
    assert (anchor["run_id"], anchor["parent"], commit["format"], commit["depth"]) == (RUN3, RUN2, 2, 3)
    live = {f"run={run}/bucket={bucket}" for bucket, runs in commit["buckets"].items() for run in runs}
    assert set(commit["files"]) == live and all(commit["files"].values())
    # RUN4 committed and stopped before its anchor (the anchor of RUN3 put back): RUN5 starts from RUN4.
    anchor_of_run3 = (state / "_latest").read_bytes()
    run4, run5 = "2026-11-04-00-00-00", "2026-11-05-00-00-00"
    assert keyed(tmp_path, run4, ["e"], capsys) == (0, "")
    (state / "_latest").write_bytes(anchor_of_run3)
    assert keyed(tmp_path, run5, ["e", "f"], capsys) == (0, "")
    assert (rows(spark, tmp_path, "duplicate", run5), rows(spark, tmp_path, "unique", run5)) == ([("e",)], [("f",)])


def through_a_shell(line: str) -> None:
    """Paste the command in the way out of the error `line` (between `(` and `)` after `first`) into a shell."""
    command = line.split("(the first: " if "the first: " in line else "first (", 1)[1].rsplit("; a run stopped", 1)[0]
    command = command.removesuffix("), then run again")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_run_stopped_after_its_commit_is_redone_before_the_next(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """RUN3 stopped between its commit and its `_SUCCESS` (killed): its keys were seen by the state and in no completed
    output, and the next run, once the lease was gone, delivered them nowhere (attack 10A's 02: 100 of 600 keys
    lost). The next run now stops with the command that redoes RUN3; pasted, it gives RUN3's rows."""
    state = two_runs(tmp_path, capsys)
    last = tmp_path / "out" / "_LAST_COMPLETED.json"
    before = last.read_bytes()
    assert keyed(tmp_path, RUN3, ["a", "d", "e"], capsys) == (0, "")
    folder = tmp_path / "out" / f"run={RUN3}"
    for name in ("_SUCCESS", "summary.json"):  # as a kill after the commit leaves it
        (folder / name).unlink()
    last.write_bytes(before)  # written after the _SUCCESS
    run4 = "2026-11-04-00-00-00"
    code, line = keyed(tmp_path, run4, ["d", "e", "f"], capsys)
    assert (code, line.split(" (", 1)[0]) == (
        1,
        f"error: state {state}: its newest commit {state}/commits/{RUN3}.json is run {RUN3}'s, whose run folder {folder} holds no _SUCCESS",
    )
    assert line.endswith(
        f"{NOTHING}. Redo that run first ({completion.redo_command(json.loads((state / 'commits' / f'{RUN3}.json').read_text())['run']['arguments'])}), then run again"
    )
    assert not (tmp_path / "out" / f"run={run4}").exists()
    anchor = (state / "_latest").read_bytes()
    through_a_shell(line)
    # The printed redo killed between its commit and its anchor (attack 58's 08: "damaged, restore a backup"): the
    # next run asks for the redo again, and the redo goes through.
    (state / "_latest").write_bytes(anchor)
    for name in ("_SUCCESS", "summary.json"):
        (folder / name).unlink()
    last.write_bytes(before)
    assert keyed(tmp_path, run4, ["d", "e", "f"], capsys)[1].split(" (", 1)[0] == line.split(" (", 1)[0]
    assert keyed(tmp_path, RUN3, ["a", "d", "e"], capsys) == (0, "")
    assert (rows(spark, tmp_path, "duplicate", RUN3), rows(spark, tmp_path, "unique", RUN3)) == (
        [("a",)],
        [("d",), ("e",)],
    )
    assert keyed(tmp_path, run4, ["d", "e", "f"], capsys) == (0, "")
    assert (rows(spark, tmp_path, "duplicate", run4), rows(spark, tmp_path, "unique", run4)) == (
        [("d",), ("e",)],
        [("f",)],
    )


def test_an_older_copy_of_the_whole_state_stops_the_run_and_the_completed_runs_rebuild_it(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The state put back as it was after RUN1 (RUN2 completed since) agreed with its own anchor: RUN3 delivered
    RUN2's keys again, exit 0 (attack 10A's 01). RUN2's summary names the commit it made, which the copy lacks;
    the printed redo of RUN2, pasted, rebuilds it, and RUN3 then finds c seen."""
    assert keyed(tmp_path, RUN1, ["a", "b"], capsys)[0] == 0
    state = tmp_path / "state"
    shutil.copytree(state, tmp_path / "copy")
    assert keyed(tmp_path, RUN2, ["c"], capsys)[0] == 0
    shutil.rmtree(state)
    shutil.copytree(tmp_path / "copy", state)
    code, line = keyed(tmp_path, RUN3, ["a", "c", "d"], capsys)
    summary = tmp_path / "out" / f"run={RUN2}" / "summary.json"
    redo = completion.redo_command(json.loads(summary.read_text())["arguments"])
    assert (code, line) == (1, (
        f"error: state {state} is an older copy: {summary} records its commit {RUN2} (depth 2), which it does not "
        f"hold (it is at commit {RUN1} (depth 1)), so the keys of the runs completed after the copy was taken would "
        f"be delivered again; {NOTHING}. Put the newest copy back; or, if there is none, redo the runs completed "
        f"since, oldest first, each as it ran (the first: {redo}; a run stopped here names the next), then run again"
    ))  # fmt: skip
    assert not (tmp_path / "out" / f"run={RUN3}").exists()
    through_a_shell(line)
    assert rows(spark, tmp_path, "unique", RUN2) == [("c",)]
    assert keyed(tmp_path, RUN3, ["a", "c", "d"], capsys) == (0, "")
    assert (rows(spark, tmp_path, "duplicate", RUN3), rows(spark, tmp_path, "unique", RUN3)) == (
        [("a",), ("c",)],
        [("d",)],
    )


def test_an_older_copy_of_a_state_named_through_a_link_is_found(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 58's 03: runs gave the state through a link, the next its folder: the summaries' names differed, so
    the older copy put back was not found (200 keys delivered again, exit 0)."""
    (tmp_path / "state").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "state")
    assert keyed(tmp_path, RUN1, ["a", "b"], capsys, state="link")[0] == 0
    shutil.copytree(tmp_path / "state", tmp_path / "copy")
    assert keyed(tmp_path, RUN2, ["c"], capsys, state="link")[0] == 0
    shutil.rmtree(tmp_path / "state")
    shutil.copytree(tmp_path / "copy", tmp_path / "state")
    code, line = keyed(tmp_path, RUN3, ["a", "c", "d"], capsys)
    assert (code, line.startswith(f"error: state {tmp_path / 'state'} is an older copy: ")) == (1, True), line


def test_an_output_moved_whole_holds_its_completed_runs(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 58's 04: the output renamed with its run folders; the newest commit's folder was looked for where it
    was, so the next run stopped as if that run had not completed, and its printed redo led round in a loop."""
    two_runs(tmp_path, capsys)
    (tmp_path / "out").rename(tmp_path / "moved")
    assert keyed(tmp_path, RUN3, ["a", "c", "d"], capsys, output="moved") == (0, "")
    assert sorted(path.name for path in (tmp_path / "moved").glob("run=*")) == [f"run={r}" for r in (RUN1, RUN2, RUN3)]


def test_a_completed_run_folder_archived_is_not_taken_for_a_stopped_run(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 58's 10: the newest run's folder moved away once loaded (an archive step); the next run stopped as if
    that run had stopped after its commit, and its printed redo delivered its 100 keys a second time."""
    two_runs(tmp_path, capsys)
    (tmp_path / "archive").mkdir()
    (tmp_path / "out" / f"run={RUN2}").rename(tmp_path / "archive" / f"run={RUN2}")
    assert keyed(tmp_path, RUN3, ["a", "c", "d"], capsys) == (0, "")
    assert (rows(spark, tmp_path, "duplicate", RUN3), rows(spark, tmp_path, "unique", RUN3)) == (
        [("a",), ("c",)],
        [("d",)],
    )
