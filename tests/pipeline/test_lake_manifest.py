"""The lake manifest (`lake:PATH`): the same decisions as SQLite and DynamoDB, commits, compaction, expiry, moving in.

Through the command line and real Spark.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.errors import InvalidArgumentError
from jobs.fs.lease import create_if_absent
from jobs.fs.runs import run_timestamp
from jobs.manifest import ManifestError, open_manifest
from jobs.manifest.completions import LakeCompletedRuns
from jobs.manifest.lake import open_lake
from jobs.manifest.lake_import import import_dynamodb_export
from jobs.manifest.lake_state import RunEntries, Segment, State
from jobs.runtime.cli import main
from tests.pipeline.helpers import event, run_folder_content
from tests.pipeline.test_crossbatch import reidentified

IDS = {name: f"{i:08x}-0000-4000-8000-0000000000a{i}" for i, name in enumerate("ABCDEF", start=1)}
# Run times: run 3 comes 2 days 6 hours after run 1, past its TTL of 2 days; run 2's entries are still live.
RUN_1, RUN_2, RUN_3 = "2026-11-01-00-00-00", "2026-11-01-12-00-00", "2026-11-03-06-00-00"


def line(name: str, fingerprint: str, etl: str = "2026-11-01 10:00:05.000") -> str:
    return event(IDS[name], event_fingerprint=fingerprint, etl_tstamp=etl)


BATCH_1 = [line("A", "a1"), line("B", "b1"), line("C", "c1")]
BATCH_2 = [
    line("A", "a1", etl="2026-11-01 11:00:00.000"),  # run 1 delivered it: cross-batch natural
    line("B", "b2"),  # run 1 delivered B as b1: cross-batch synthetic
    line("D", "d1"),
    line("D", "d1", etl="2026-11-01 11:30:00.000"),  # in-batch natural
    line("E", "e1"),
]
BATCH_3 = [
    line("C", "c1", etl="2026-11-03 05:00:00.000"),  # run 1's copy expired: delivered again
    line("D", "d1", etl="2026-11-03 05:00:00.000"),  # run 2's copy is live: cross-batch natural
    line("E", "e2"),  # run 2 delivered E as e1: cross-batch synthetic
    line("F", "f1"),
    line("F", "f1", etl="2026-11-03 05:30:00.000"),  # in-batch natural
]
SUMMARY_FIELDS = ("counts", "by_reason", "synthetic")


def epoch(run_id: str) -> int:
    return int(run_timestamp(run_id).timestamp())


def write_batch(folder: Path, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "part-0.tsv").write_text("".join(f"{text}\n" for text in lines), encoding="utf-8")
    return folder


def config(tmp_path: Path, ttl_days: int = 2) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"manifest": {"ttl_days": ttl_days, "buckets": 4}}))
    return str(path)


def dedup(source: Path, output: Path, run_id: str, manifest: str, settings: str, *extra: str) -> dict:  # type: ignore[type-arg]
    argv = ["dedup", "--input", str(source), "--output", str(output), "--run-id", run_id, "--manifest", manifest]
    assert main([*argv, "--config", settings, *extra]) == 0
    summary = json.loads((output / f"run={run_id}" / "summary.json").read_text())
    return {"content": run_folder_content(output / f"run={run_id}"), **{k: summary[k] for k in SUMMARY_FIELDS}}


def sequence(tmp_path: Path, manifest: str, redo: bool = True) -> list[dict]:  # type: ignore[type-arg]
    """Three batches, then (`redo`) a redo of the second: what each run wrote and counted."""
    batches = [write_batch(tmp_path / f"batch={i}", b) for i, b in enumerate((BATCH_1, BATCH_2, BATCH_3), start=1)]
    out, settings = tmp_path / "out", config(tmp_path)
    runs = [dedup(batches[0], out, RUN_1, manifest, settings, "--create")]
    runs.append(dedup(batches[1], out, RUN_2, manifest, settings))
    runs.append(dedup(batches[2], out, RUN_3, manifest, settings))
    if redo:
        runs.append(dedup(batches[1], out, RUN_2, manifest, settings))  # redone after run 3
    return runs


def test_the_lake_decides_as_sqlite_and_dynamodb_do(spark: SparkSession, tmp_path: Path) -> None:
    # SQLite stands for both: test_manifest_contract gives DynamoDB and SQLite the same answers request by request
    # (expiry included), and test_crossbatch the same runs, redo included.
    lake = sequence(tmp_path / "lake", f"lake:{tmp_path / 'lake' / 'manifest'}")
    # SQLite without the redo (one run less): its redo deciding as its first attempt is test_crossbatch's point
    # (runs in any order, redos included); the lake's redo is held to run 2 below, so to SQLite's run 2.
    sqlite = sequence(tmp_path / "sqlite", f"sqlite:{tmp_path / 'sqlite' / 'manifest.db'}", redo=False)
    assert lake[:3] == sqlite
    # What they agree on is right: run 3 delivers run 1's expired c1 again, drops run 2's live d1, re-ids e2.
    assert lake[2]["content"] == {
        "good": sorted([BATCH_3[0], reidentified(BATCH_3[2]), BATCH_3[3]]),
        "bad": [],
        "duplicates": sorted([BATCH_3[1], BATCH_3[4]]),
        "quarantine": [],
    }
    assert lake[2]["by_reason"]["duplicates"] == {"cross_batch_natural": 1, "in_batch_natural": 1}
    assert lake[2]["synthetic"]["by_reason"] == {"in_batch_synthetic": 0, "cross_batch_synthetic": 1}
    assert lake[1]["content"]["duplicates"] == sorted([BATCH_2[0], BATCH_2[3]])
    assert lake[3] == lake[1]  # the redo of run 2, after run 3, decides as run 2 did


def commits(root: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(path.read_text()) for path in sorted((root / "_commits").glob("*.json"))]


def segment_folders(root: Path) -> list[str]:
    return sorted(path.name.removeprefix("segment=") for path in (root / "segments").iterdir())


def test_entries_count_only_once_their_commit_exists(spark: SparkSession, tmp_path: Path) -> None:
    root, settings = tmp_path / "manifest", config(tmp_path)
    first = write_batch(tmp_path / "batch=1", BATCH_1)
    dedup(first, tmp_path / "out", RUN_1, f"lake:{root}", settings, "--create")
    [commit] = commits(root)
    assert [(s["runs"], s["keys"]) for s in commit["segments"]] == [([epoch(RUN_1)], 3)]
    # As if run 1 had stopped between writing its segment and creating its commit: the files are there, unread.
    (root / "_commits" / "0000000001.json").unlink()
    (root / "_latest").unlink()  # written after the commit
    (tmp_path / "out" / f"run={RUN_1}" / "_SUCCESS").unlink()  # written after both (else: an older copy, stale.py)
    [unread] = segment_folders(root)
    second = dedup(write_batch(tmp_path / "batch=2", BATCH_2), tmp_path / "out", RUN_2, f"lake:{root}", settings)
    assert second["by_reason"]["duplicates"] == {"in_batch_natural": 1}
    assert second["content"]["good"] == sorted([BATCH_2[0], BATCH_2[1], BATCH_2[2], BATCH_2[4]])
    # No commit names it, and run 1 is over (it held the writer lease): run 2's commit removes it.
    assert unread not in segment_folders(root)
    # The next attempt of run 1 commits its own segment.
    dedup(first, tmp_path / "out", RUN_1, f"lake:{root}", settings)
    assert len(segment_folders(root)) == 2 == len(commits(root)[-1]["segments"])


def test_a_redo_inside_a_compacted_day_keeps_what_later_runs_decided_against(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, settings = tmp_path / "manifest", config(tmp_path, ttl_days=30)
    manifest, out = f"lake:{root}", tmp_path / "out"
    dedup(write_batch(tmp_path / "b1", [line("A", "a1")]), out, RUN_1, manifest, settings, "--create")
    dedup(write_batch(tmp_path / "b2", [line("B", "b1"), line("C", "c1")]), out, RUN_2, manifest, settings)
    # A run on a later day merges Nov 1's two segments into one.
    dedup(write_batch(tmp_path / "b3", [line("D", "d1")]), out, RUN_3, manifest, settings)
    state = commits(root)[-1]
    assert [(s["name"].split(".")[0], s["runs"], s["keys"]) for s in state["segments"]] == [
        ("2026-11-03-06-00-00", [epoch(RUN_3)], 1), ("day-2026-11-01", [epoch(RUN_1), epoch(RUN_2)], 3),
    ]  # fmt: skip
    assert len(segment_folders(root)) == 2  # the two merged folders are gone
    # The register entry the commit keeps: run 3's own (until a later commit finds it sealed), not the sealed runs'.
    assert [(run["run_id"], run["folder"]) for run in state["open_runs"]] == [(RUN_3, f"{out}/run={RUN_3}")]
    # Run 2 redone with C only: B/b1, which run 3 may have found as a copy, would leave every output. Refused,
    # its rows counted inside the merged day segment; nothing committed.
    capsys.readouterr()
    argv = ["dedup", "--input", str(write_batch(tmp_path / "b2-fixed", [line("C", "c1")])), "--output", str(out),
            "--run-id", RUN_2, "--manifest", manifest, "--config", settings]  # fmt: skip
    assert main(argv) == 2
    assert "recording 1 event(s) in " in capsys.readouterr().err
    assert commits(root)[-1] == state
    # Redone with its input, inside the merged day: its own rows pass, and later runs decide as before.
    assert dedup(tmp_path / "b2", out, RUN_2, manifest, settings)["content"]["good"] == sorted(
        [line("B", "b1"), line("C", "c1")]
    )
    later = dedup(
        write_batch(tmp_path / "b4", [line("A", "a1"), line("B", "b1"), line("C", "c1"), line("E", "e1")]),
        out, "2026-11-04-00-00-00", manifest, settings,
    )  # fmt: skip
    assert later["content"]["good"] == [line("E", "e1")]
    assert later["content"]["duplicates"] == sorted([line("A", "a1"), line("B", "b1"), line("C", "c1")])


def test_expired_segments_are_dropped_whole(spark: SparkSession, tmp_path: Path) -> None:
    root, settings = tmp_path / "manifest", config(tmp_path, ttl_days=1)
    manifest, out = f"lake:{root}", tmp_path / "out"
    dedup(write_batch(tmp_path / "b1", [line("A", "a1")]), out, RUN_1, manifest, settings, "--create")
    first_segment = segment_folders(root)
    # Nine days later: run 1's entries expired eight days ago, more than the 7 days they are kept for redos.
    later = dedup(write_batch(tmp_path / "b2", [line("A", "a1")]), out, "2026-11-10-00-00-00", manifest, settings)
    assert later["content"]["good"] == [line("A", "a1")]
    assert [s["runs"] for s in commits(root)[-1]["segments"]] == [[epoch("2026-11-10-00-00-00")]]
    assert first_segment[0] not in segment_folders(root)
    assert len(segment_folders(root)) == 1


def test_a_lake_manifest_has_one_writer_at_a_time(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "manifest"
    open_manifest(f"lake:{root}").create()
    holder = {"job": "dedup", "run_id": RUN_1, "host": "worker-3", "pid": 12,
              "started_at": "2026-11-01T00:00:10+00:00", "token": "other"}  # fmt: skip
    assert create_if_absent(spark, f"{root}/_lease", json.dumps(holder).encode())
    argv = ["dedup", "--input", str(write_batch(tmp_path / "in", BATCH_2)), "--output", str(tmp_path / "out"),
            "--run-id", RUN_2, "--manifest", f"lake:{root}"]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: manifest lake:{root} is being written by dedup run {RUN_1} (host worker-3, pid 12, since "
        "2026-11-01T00:00:10+00:00); nothing was written. If that run is no longer running (killed or crashed), "
        f"remove its lease {root}/_lease and run again"
    )
    assert not (root / "_commits").exists()


def export_line(item: dict[str, dict[str, str]]) -> str:
    return json.dumps({"Item": item}) + "\n"


def test_a_dynamodb_export_moves_into_a_lake_manifest(spark: SparkSession, tmp_path: Path) -> None:
    """A table's export to S3 (DynamoDB JSON) loaded with populate-manifest: the next run decides as the table would."""
    data = tmp_path / "AWSDynamoDB" / "01700000000000-abcdef12" / "data"
    data.mkdir(parents=True)
    etl, ttl = str(epoch(RUN_1)), str(epoch(RUN_1) + 180 * 86_400)
    items = [
        {"eventId": {"S": IDS["A"]}, "fingerprint": {"S": "a1"}, "etlTime": {"N": etl}, "ttl": {"N": ttl}},
        {"eventId": {"S": IDS["B"].upper()}, "fingerprint": {"S": "b1"}, "etlTime": {"N": etl}, "ttl": {"N": ttl}},
        {"eventId": {"S": "not-a-uuid"}, "fingerprint": {"S": "x"}, "etlTime": {"N": etl}, "ttl": {"N": ttl}},
        # The table's own records: its identity, a completion and an output, which the lake takes over.
        {"eventId": {"S": "winnow:identity"}, "fingerprint": {"S": "winnow:identity"}, "manifest": {"S": "id-1"}},
        {"eventId": {"S": "winnow:completed"}, "fingerprint": {"S": f"{RUN_1}~ab"}, "attempt": {"S": "a-1"},
         "ttl": {"N": ttl}},
        {"eventId": {"S": "winnow:outputs"}, "fingerprint": {"S": str(tmp_path / "web")}},
    ]  # fmt: skip
    with gzip.open(data / "part-1.json.gz", "wt", encoding="utf-8") as handle:
        handle.writelines(export_line(item) for item in items)
    root = tmp_path / "manifest"
    argv = ["populate-manifest", "--input", str(data), "--input-format", "dynamodb-export",
            "--manifest", f"lake:{root}", "--create", "--run-id", RUN_2]  # fmt: skip
    assert main([*argv, "--config", config(tmp_path)]) == 0
    [commit] = commits(root)
    assert [(r["etl_time"], r["ttl"]) for r in commit["runs"]] == [(epoch(RUN_1), int(ttl))]
    assert commit["segments"][0]["keys"] == 2
    records = LakeCompletedRuns(str(root))  # an output naming the table checks the lake as that manifest
    assert (records.identity(make=False), records.attempt(f"{RUN_1}~ab"), records.outputs()) == (
        "id-1",
        "a-1",
        [str(tmp_path / "web")],
    )
    second = dedup(write_batch(tmp_path / "b2", BATCH_2), tmp_path / "out", RUN_2, f"lake:{root}", config(tmp_path))
    assert second["content"]["duplicates"] == sorted([BATCH_2[0], BATCH_2[3]])  # A/a1 from the table, D/d1 again
    assert second["content"]["good"] == sorted([reidentified(BATCH_2[1]), BATCH_2[2], BATCH_2[4]])  # B/b2 re-id'd
    # Only into an empty lake manifest: a second load would mix two histories.
    with pytest.raises(ManifestError, match="already holds 2 run\\(s\\); a DynamoDB export is loaded into an empty"):
        import_dynamodb_export(open_lake(f"lake:{root}"), spark, str(data), RUN_2)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (
            {"eventId": {"S": "winnow:runs"}, "fingerprint": {"S": f"{RUN_1}~0123456789abcdef"},
             "folder": {"S": "s3://out/run=" + RUN_1}, "redo": {"S": "redo"}},
            f"holds run {RUN_1} in its register of unfinished runs (no s3://out/run={RUN_1}/_SUCCESS): its pairs would "
            "count as delivered while its events are in no completed output; nothing was loaded. Redo it, complete",
        ),
        (
            {"eventId": {"S": "winnow:writer-lease"}, "fingerprint": {"S": "writer"}, "holder": {"S": "dedup run X"}},
            "holds the manifest's writer lease (dedup run X): a run was writing when it was taken, and its state would "
            "be lost; nothing was loaded. Let that run end, complete",
        ),
    ],
)  # fmt: skip
def test_a_dynamodb_export_with_a_run_in_flight_is_not_moved(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], item: dict[str, dict[str, str]],
    message: str,
) -> None:  # fmt: skip
    """Issue 44, 1: the register (and the lease) would not move with the entries, so the move is refused."""
    data = tmp_path / "data"
    data.mkdir()
    etl, ttl = str(epoch(RUN_1)), str(epoch(RUN_1) + 180 * 86_400)
    pair = {"eventId": {"S": IDS["A"]}, "fingerprint": {"S": "a1"}, "etlTime": {"N": etl}, "ttl": {"N": ttl}}
    (data / "part-1.json").write_text(export_line(pair) + export_line(item))
    root = tmp_path / "manifest"
    argv = ["populate-manifest", "--input", str(data), "--input-format", "dynamodb-export",
            "--manifest", f"lake:{root}", "--create", "--run-id", RUN_2, "--config", config(tmp_path)]  # fmt: skip
    assert main(argv) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"error: --input {data}: the export {message}"), line
    assert line.endswith("on the source table, then export again")
    assert not (root / "_commits").exists()


@pytest.mark.parametrize("cut", ["register", "event"])
def test_a_dynamodb_export_with_a_cut_line_is_not_moved(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], cut: str
) -> None:
    """A line that is no whole item (cut: a damaged file) would be lost: a register entry's, and the move would go on
    past an unfinished run; an event's, and its event would be delivered again."""
    data = tmp_path / "data"
    data.mkdir()
    etl, ttl = str(epoch(RUN_1)), str(epoch(RUN_1) + 180 * 86_400)
    pair = {"eventId": {"S": IDS["A"]}, "fingerprint": {"S": "a1"}, "etlTime": {"N": etl}, "ttl": {"N": ttl}}
    other = {"eventId": {"S": IDS["B"]}, "fingerprint": {"S": "b1"}, "etlTime": {"N": etl}, "ttl": {"N": ttl}}
    register = {"eventId": {"S": "winnow:runs"}, "fingerprint": {"S": f"{RUN_1}~0123456789abcdef"},
                "folder": {"S": "s3://out/run=" + RUN_1}, "redo": {"S": "redo"}}  # fmt: skip
    last = export_line(register if cut == "register" else other)
    (data / "part-1.json").write_text(export_line(pair) + last[:60] + "\n")
    root = tmp_path / "manifest"
    argv = ["populate-manifest", "--input", str(data), "--input-format", "dynamodb-export",
            "--manifest", f"lake:{root}", "--create", "--run-id", RUN_2, "--config", config(tmp_path)]  # fmt: skip
    assert main(argv) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --input {data}: 1 line(s) of the export are no whole JSON item, the first in file://{data}/part-1.json: "
        f"{last[:60]!r}; nothing was loaded. Export the table again (or restore the file), then run again"
    )  # d8f0334: exit 0, "items skipped 1"
    assert not (root / "_commits").exists()


def test_populate_manifest_fills_a_lake_manifest(spark: SparkSession, tmp_path: Path) -> None:
    root, settings = tmp_path / "manifest", config(tmp_path)
    history = write_batch(tmp_path / "history", BATCH_1)
    argv = ["populate-manifest", "--input", str(history), "--manifest", f"lake:{root}", "--run-id", RUN_1]
    assert main([*argv, "--create", "--config", settings]) == 0
    assert main([*argv, "--config", settings]) == 0  # idempotent: the redo replaces its own segment
    assert [s["keys"] for s in commits(root)[-1]["segments"]] == [3]
    second = dedup(write_batch(tmp_path / "b2", BATCH_2), tmp_path / "out", RUN_2, f"lake:{root}", settings)
    assert second["content"]["duplicates"] == sorted([BATCH_2[0], BATCH_2[3]])
    assert second["content"]["good"] == sorted([reidentified(BATCH_2[1]), BATCH_2[2], BATCH_2[4]])


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("lake:", "given 'lake:'; allowed: lake:PATH with PATH a local folder or s3://bucket/prefix"),
        ("lake:hdfs://nn/m", "given 'lake:hdfs://nn/m'; allowed: lake:PATH with PATH a local folder or s3://"),
    ],
)
def test_a_lake_uri_names_a_local_folder_or_s3(uri: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message.replace("(", "\\(").replace("?", "\\?")):
        open_manifest(uri)


def test_a_missing_or_foreign_lake_manifest_is_named(tmp_path: Path) -> None:
    with pytest.raises(ManifestError) as missing:
        open_manifest(f"lake:{tmp_path}").check()
    assert str(missing.value) == (
        f"manifest lake:{tmp_path}: no _manifest.json in {tmp_path}; run once with --create to make an empty one"
    )
    (tmp_path / "_manifest.json").write_text('{"format": "something-else"}')
    with pytest.raises(ManifestError, match="is no winnow-lake-manifest version 1, 2 or 3 descriptor"):
        open_manifest(f"lake:{tmp_path}").check()
    shutil.rmtree(tmp_path)


def test_a_commit_on_top_of_another_writers_is_refused(tmp_path: Path) -> None:
    """Only if someone removed a live run's lease: the run's commit fails and deletes nothing of the other's."""
    manifest = open_lake(f"lake:{tmp_path}", buckets=4)
    manifest.create()
    base = manifest.state()
    (tmp_path / "segments" / "segment=theirs").mkdir(parents=True)
    theirs = State(
        0, 4, {"theirs": Segment("theirs", (100,), 4, 900, 7, 200)}, {100: RunEntries(100, "r", 200, "theirs")}
    )
    manifest.commit(theirs, base, "dedup", "theirs")
    with pytest.raises(ManifestError) as refused:
        manifest.commit(State(0, 4), base, "dedup", RUN_2)
    assert str(refused.value) == (
        f"manifest lake:{tmp_path}: commit 1 was written by another writer while dedup run {RUN_2} held the "
        "manifest's lease; nothing of this run was committed: run it again"
    )
    assert list(manifest.state().segments) == ["theirs"]
    assert (tmp_path / "segments" / "segment=theirs").is_dir()


@pytest.mark.parametrize(
    "etl_time", [None, {"S": "1795000000"}, {"N": "1795000000.5"}, {"N": "soon"}], ids=["none", "S", "fraction", "text"]
)
def test_a_dynamodb_export_with_an_event_item_that_is_no_whole_entry_is_not_moved(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], etl_time: dict[str, str] | None
) -> None:
    """An event's item that is whole JSON but lacks its etlTime (or holds one of another type): 2b93506 skipped it,
    exit 0, "items skipped 1", and its event would be delivered again. The register's generation item (no UUID
    event id) is skipped as before."""
    data = tmp_path / "data"
    data.mkdir()
    etl, ttl = str(epoch(RUN_1)), str(epoch(RUN_1) + 180 * 86_400)
    pair = {"eventId": {"S": IDS["A"]}, "fingerprint": {"S": "a1"}, "etlTime": {"N": etl}, "ttl": {"N": ttl}}
    fields = {"eventId": {"S": IDS["B"]}, "fingerprint": {"S": "b1"}, "etlTime": etl_time, "ttl": {"N": ttl}}
    damaged = {name: value for name, value in fields.items() if value is not None}
    read = {**damaged, "etlTime": {}} if etl_time and "N" not in etl_time else damaged  # the schema reads N only
    generation = {"eventId": {"S": "winnow:generation"}, "fingerprint": {"S": "generation"}, "generation": {"N": "3"}}
    (data / "part-1.json").write_text(export_line(pair) + export_line(generation) + export_line(damaged))
    root = tmp_path / "manifest"
    argv = ["populate-manifest", "--input", str(data), "--input-format", "dynamodb-export",
            "--manifest", f"lake:{root}", "--create", "--run-id", RUN_2, "--config", config(tmp_path)]  # fmt: skip
    assert main(argv) == 1
    shown = json.dumps(read, separators=(",", ":"))  # Spark's to_json: the fields it read, in its schema's order
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --input {data}: 1 event item(s) of the export are no whole manifest entry (a fingerprint S, and "
        f"etlTime and ttl N in whole seconds), the first in file://{data}/part-1.json, the line holding "
        f"{shown!r}: its event would be delivered again; nothing was loaded. Export the table again (or restore the "
        "file), then run again"
    )
    assert not (root / "_commits").exists()
    (data / "part-1.json").write_text(export_line(pair) + export_line(generation))
    assert main(argv) == 0  # the export taken again: the generation item skipped, as before
    assert re.search(r"items skipped +1\n", capsys.readouterr().out)
