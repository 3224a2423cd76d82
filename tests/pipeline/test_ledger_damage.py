"""A lost, damaged or replaced ledger entry of incremental runs (FAULTS 4): the run stops before it writes, naming
what is wrong and a way out that, followed as printed, keeps every event once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.incremental.entries import entry_digest
from jobs.runtime.cli import main
from tests.pipeline.helpers import error_line, good_everywhere, numbered_events, write_lines

RUN_A, RUN_C, RUN_B = "2026-12-01-01-00-00", "2026-12-01-01-30-00", "2026-12-01-02-00-00"
RUN_C_LATER = "2026-12-01-03-00-00"


def incremental(input_path: Path, output: Path, run_id: str) -> list[str]:
    return ["dedup", "--input", str(input_path), "--output", str(output), "--run-id", run_id, "--incremental"]


@pytest.mark.parametrize("lost", ["newest", "between"])
def test_a_lost_ledger_entry_stops_the_next_incremental_run_naming_it(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], lost: str
) -> None:
    """FAULTS 4 (damaged state: a ledger entry missing, or an older ledger restored).

    Given: incremental dedup runs (no manifest) A reads a.tsv (events 0-99) and, for `between`, C reads c.tsv; A's
    ledger entry `OUT/_ledger/00000000000000000001.json` is then lost; b.tsv (events 100-199) arrives and run B starts.
    Before: exit 0; B took a.tsv as new and read it again: events 0-99 in A's and B's completed good/ (100 of 200
    events doubled), though OUT/run=A/ is sealed and its summary.json names its entry.
    Now: B stops before it writes, naming the entry; restored as printed, B reads b.tsv alone: every event once.
    """
    source, out = tmp_path / "in", tmp_path / "out"
    write_lines(source / "a.tsv", numbered_events(range(0, 100)))
    assert main(incremental(source, out, RUN_A)) == 0
    runs = [RUN_A]
    if lost == "between":
        write_lines(source / "c.tsv", numbered_events(range(200, 210)))
        assert main(incremental(source, out, RUN_C)) == 0
        runs.append(RUN_C)
    entry = out / "_ledger" / "00000000000000000001.json"
    copy = entry.read_bytes()
    entry.unlink()
    write_lines(source / "b.tsv", numbered_events(range(100, 200)))
    assert main(incremental(source, out, RUN_B)) == 1
    of = f" (completed run {RUN_A} read its files, as its summary.json says)" if lost == "newest" else ""
    assert error_line(capsys) == (
        f"error: --incremental: the ledger {out / '_ledger'} lacks entry 1{of}; without it the files it named would "
        f"be read again and their events delivered twice. Restore {entry} from a copy (an earlier version of the "
        "bucket's object), then run again; nothing was written"
    )
    assert not (out / f"run={RUN_B}").exists()
    entry.write_bytes(copy)  # the way out, as printed
    assert main(incremental(source, out, RUN_B)) == 0
    expected = [*range(0, 200), *(range(200, 210) if lost == "between" else [])]
    assert good_everywhere(out) == sorted(numbered_events(expected))


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda entry: entry.write_bytes(entry.read_bytes()[:100]), id="cut"),
        pytest.param(lambda entry: entry.write_bytes(bytes(len(entry.read_bytes()))), id="zeroed"),
        pytest.param(lambda entry: entry.with_name("00000000000000000009.json").write_text("{}"), id="stray"),
    ],
)
def test_a_damaged_ledger_entry_stops_the_run_naming_it_and_the_way_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: object
) -> None:
    """FAULTS 4 (damaged state: a ledger entry cut, zeroed inside, or a stray file added) and the promise's
    "one line that names what is wrong and a way out".

    Given: an output whose ledger holds entry 1 of a completed incremental run (as that run wrote it), then the
    entry is cut to 100 bytes, zeroed (same size), or a stray `{}` is added as entry 9; an incremental dedup runs.
    Happened: exit 1 with `error: dedup run ID failed, no _SUCCESS written: JSONDecodeError: Unterminated string
    starting at: line 5 column 2 (char 94) (run with --debug for the traceback)` (zeroed: `UnicodeDecodeError: 'utf-32-be'
    codec can't decode bytes …` or `JSONDecodeError: Expecting value`; stray: `KeyError: 'entry'`): no file named, no way out (docs/operations.md promises
    `FILE is damaged (…)` with its own way out for a ledger entry).
    Expected: the line names the ledger entry's file and what to do (restore it, or move the stray file out).
    """
    source, out = tmp_path / "in", tmp_path / "out"
    write_lines(source / "a.tsv", numbered_events(range(0, 10)))
    entry = out / "_ledger" / "00000000000000000001.json"
    entry.parent.mkdir(parents=True)
    document = {"entry": 1, "run_id": RUN_A, "created_at": "2026-12-01T01:00:00+00:00", "input": str(source),
                "window": {"since": None, "until": None, "max_files": None, "max_bytes": None},
                "files": [{"path": str(source / "a.tsv"), "size": (source / "a.tsv").stat().st_size,
                           "modified_ms": int((source / "a.tsv").stat().st_mtime * 1000), "etag": None}]}  # fmt: skip
    entry.write_text(json.dumps(document, indent=1))
    write_lines(out / f"run={RUN_A}" / "_SUCCESS", [])
    damage(entry)  # type: ignore[operator]
    assert main(incremental(source, out, RUN_B)) == 1
    line = error_line(capsys)
    named = (
        entry.with_name("00000000000000000009.json") if entry.with_name("00000000000000000009.json").exists() else entry
    )
    assert line.startswith(f"error: {named} is damaged ("), line
    assert line.endswith(
        "restore it from a copy (an entry names the files its run read: without it they would be read again), or "
        "move it out of _ledger/ if no run wrote it; then run again"
    ), line


@pytest.mark.parametrize("replaced", ["swapped", "newest", "link"])
def test_a_ledger_entry_replaced_by_another_valid_one_stops_the_run_naming_it(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], replaced: str
) -> None:
    """FAULTS 4 (damaged state: a file replaced by another valid one, of the same size when swapped).

    Given: incremental runs A, B and C read a.tsv, b.tsv and c.tsv (events 0-9, 10-19, 20-29), one file each. Then
    `swapped`: the files lists of entries 1 and 2 are swapped, and A is redone; `newest`: entry 3 is given entry
    2's files (an older ledger's entry restored in its place); `link`: entry 2's record of entry 1 (`previous`) is
    edited; then run D starts with d.tsv (events 30-39).
    Before (attack 6): exit 0 both: A's redo read b.tsv, so events 0-9 were in no completed good/ and 10-19 in
    two; D took c.tsv, no longer named, as new: events 20-29 delivered twice. Attack 8: a damaged link named entry
    1 alone, which was whole: restored as printed, the runs stayed stopped.
    Now: the run stops before it writes, naming both files that disagree; restored as printed, every event is in
    one good/.
    """
    source, out = tmp_path / "in", tmp_path / "out"
    for name, start, run in (("a", 0, RUN_A), ("b", 10, RUN_B), ("c", 20, RUN_C_LATER)):
        write_lines(source / f"{name}.tsv", numbered_events(range(start, start + 10)))
        assert main(incremental(source, out, run)) == 0
    entries = [out / "_ledger" / f"{number:020d}.json" for number in (1, 2, 3)]
    summary = out / f"run={RUN_C_LATER}" / "summary.json"
    copies = [entry.read_bytes() for entry in entries]
    documents = [json.loads(copy) for copy in copies]
    redo, files = "2026-12-01-04-00-00", f"{entries[0]} and {entries[1]}"
    how = "the second recorded the first as it was when its run started"
    if replaced == "swapped":
        redo = RUN_A
        first, second = documents[0], documents[1]
        first["files"], second["files"] = second["files"], first["files"]
        entries[0].write_text(json.dumps(first, indent=1) + "\n")
        entries[1].write_text(json.dumps(second, indent=1) + "\n")
    elif replaced == "newest":
        files, how = f"{entries[2]} and {summary}", f"the summary recorded the entry as run {RUN_C_LATER} sealed"
        entries[2].write_text(json.dumps({**documents[2], "files": documents[1]["files"]}, indent=1) + "\n")
    else:
        entries[1].write_text(json.dumps({**documents[1], "previous": "0" * 64}, indent=1) + "\n")
    write_lines(source / "d.tsv", numbered_events(range(30, 40)))
    capsys.readouterr()
    assert main(incremental(source, out, redo)) == 1
    assert error_line(capsys) == (
        f"error: ledger files disagree: {files} ({how}, and it is not so now: one was replaced, two entries' files "
        "swapped, an older copy restored, or a stray entry added); reading them could give files to the wrong run. "
        "Restore both as their runs wrote them (an earlier version of the bucket's objects, or a backup), or move "
        "out of _ledger/ an entry no run wrote; then run again; nothing was written"
    )
    assert (out / f"run={RUN_A}" / "_SUCCESS").exists() and not (out / "run=2026-12-01-04-00-00").exists()
    for entry, copy in zip(entries, copies, strict=True):
        entry.write_bytes(copy)  # the way out, as printed (the summary was not touched)
    assert main(incremental(source, out, redo)) == 0
    expected = range(0, 30) if replaced == "swapped" else range(0, 40)
    assert good_everywhere(out) == sorted(numbered_events(expected))


def test_a_stray_entry_after_a_gap_is_named_with_the_way_to_move_it_out(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """FAULTS 4 (a stray file added: an entry no run wrote, numbered past the newest, linked to it as a run would).

    Before (attack 8): the line said the ledger lacks entry 2 and "Restore it from a copy": there was none (no run
    ever wrote entry 2), so no printed way on. Now it names the entry after the gap too, and the other way out; moved
    out as printed, the next run reads its own file alone: every event once."""
    source, out = tmp_path / "in", tmp_path / "out"
    write_lines(source / "a.tsv", numbered_events(range(0, 10)))
    assert main(incremental(source, out, RUN_A)) == 0
    first = out / "_ledger" / f"{1:020d}.json"
    stray = out / "_ledger" / f"{3:020d}.json"
    document = json.loads(first.read_text())
    stray.write_text(json.dumps({**document, "entry": 3, "run_id": RUN_C, "previous": entry_digest(document)}))
    write_lines(source / "b.tsv", numbered_events(range(10, 20)))
    assert main(incremental(source, out, RUN_B)) == 1
    assert error_line(capsys) == (
        f"error: --incremental: the ledger {out / '_ledger'} lacks entry 2; without it the files it named would be read "
        f"again and their events delivered twice. Restore {out / '_ledger' / f'{2:020d}.json'} from a copy (an "
        f"earlier version of the bucket's object), then run again. If no run wrote {stray} (run {RUN_C}: no run "
        "folder), move it out of _ledger/ instead; nothing was written"
    )
    stray.rename(tmp_path / "stray.json")  # the way out, as printed
    assert main(incremental(source, out, RUN_B)) == 0
    assert good_everywhere(out) == sorted(numbered_events(range(0, 20)))


def test_a_stray_entry_naming_files_another_entry_lists_stops_every_run_naming_both(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """FAULTS 4 (a stray entry, linked right: `previous` is the digest of the entry before it).

    Before (attack 9): the next run printed "run R (ledger entry 2) has not completed … Redo it first"; the redo, as
    printed, read entry 1's file again: 10 of 10 events in two completed good/, exit 0. Now every run stops naming
    both entries; the stray one moved out as printed, the next run reads its own file alone: every event once."""
    source, out = tmp_path / "in", tmp_path / "out"
    write_lines(source / "a.tsv", numbered_events(range(0, 10)))
    assert main(incremental(source, out, RUN_A)) == 0
    first, stray = out / "_ledger" / f"{1:020d}.json", out / "_ledger" / f"{2:020d}.json"
    document = json.loads(first.read_text())
    stray.write_text(json.dumps({**document, "entry": 2, "run_id": RUN_C, "previous": entry_digest(document)}))
    write_lines(source / "b.tsv", numbered_events(range(10, 20)))
    for run in (RUN_C, RUN_B):  # the stray entry's redo, and a new run
        assert main(incremental(source, out, run)) == 1
        assert error_line(capsys).startswith(
            f"error: ledger files disagree: {first} and {stray} (each file is read by one run, and both list "
            f"{document['files'][0]['path']}, and it is not so now"
        )
    stray.rename(tmp_path / "stray.json")  # the way out, as printed
    assert main(incremental(source, out, RUN_B)) == 0
    assert good_everywhere(out) == sorted(numbered_events(range(0, 20)))
