"""The lake manifest's files: a damaged manifest stops the run before it decides; leftovers are removed.

Issue 29 (data safety II): a committed segment that lost, changed or gained a file stops the run with one line
(exit 1) before anything is written; a segment folder no commit names (a compaction killed mid-write) is
removed by the next commit. Issue 44 (data safety III): a file replaced by another valid one of the same size,
and a newest commit cut or deleted, stop the run too (checksums in the commits, the `_latest` anchor). Through the
command line and real Spark, as in test_lake_manifest.py.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.manifest.base import ManifestError, RegisteredRun
from jobs.manifest.lake import open_lake
from jobs.manifest.lake_integrity import ManifestDamagedError
from jobs.manifest.lake_state import RunEntries, Segment, State
from jobs.runtime.cli import main
from tests.pipeline.test_crossbatch import reidentified
from tests.pipeline.test_lake_manifest import (
    BATCH_1,
    BATCH_2,
    RUN_1,
    RUN_2,
    commits,
    config,
    dedup,
    line,
    segment_folders,
    write_batch,
)  # fmt: skip

# Six ids, spread over the 4 buckets of `config`: each run delivers all six again.
EVERY = [line(name, f"{name.lower()}1") for name in "ABCDEF"]
RESTORE = "Restore it from a backup (or its earlier version, in a versioned bucket) and run again"
# The next day, within run 1's TTL: its commit compacts Nov 1, which gives run 1's segment a filter.
NEXT_DAY, LATER = "2026-11-02-00-00-00", "2026-11-02-06-00-00"


def crc(path: Path) -> str:
    return crc_of(path.read_bytes())


def crc_of(content: bytes) -> str:
    return f"crc32:{zlib.crc32(content):08x}"


def sidecar(path: Path) -> Path:
    """The checksum file Hadoop writes beside a local file (and checks when it reads it)."""
    return path.with_name(f".{path.name}.crc")


@pytest.fixture(scope="module")
def after_run_1(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run 1 (EVERY) done once on a lake manifest of 4 buckets: its folder (manifest, out, b1, config.json), for tests
    to copy and go on from, never to change. Its commit names run 1's folder here, completed."""
    base = tmp_path_factory.mktemp("run-1")
    dedup(write_batch(base / "b1", EVERY), base / "out", RUN_1, f"lake:{base / 'manifest'}", config(base), "--create")
    return base


def after_run_1_in(tmp_path: Path, after_run_1: Path) -> tuple[Path, str, Path]:
    """A copy of run 1's lake manifest in tmp_path (Hadoop's `.crc` files with it): root, settings, out."""
    shutil.copytree(after_run_1 / "manifest", tmp_path / "manifest")
    return tmp_path / "manifest", config(tmp_path), tmp_path / "out"


def refused(source: Path, out: Path, run_id: str, root: Path, settings: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run dedup expecting exit 1: the last line it printed."""
    capsys.readouterr()
    argv = ["dedup", "--input", str(source), "--output", str(out), "--run-id", run_id, "--manifest", f"lake:{root}"]
    assert main([*argv, "--config", settings]) == 1
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_a_damaged_lake_manifest_stops_the_run_before_it_writes(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], after_run_1: Path
) -> None:
    root, settings, out = after_run_1_in(tmp_path, after_run_1)
    [name] = segment_folders(root)
    folder = root / "segments" / f"segment={name}"
    files = sorted(folder.glob("*.parquet"))
    assert len(files) == 4
    second, start = write_batch(tmp_path / "b2", EVERY), f"error: manifest lake:{root} is damaged: segment {name}"

    def refusal() -> str:
        last = refused(second, out, NEXT_DAY, root, settings, capsys)
        assert not (out / f"run={NEXT_DAY}").exists()  # nothing of the run was written, nothing committed
        assert len(commits(root)) == 1
        assert not list(root.glob("_runs/*.json"))  # it recorded nothing, so it is not registered as having done so
        return last

    shutil.move(folder, tmp_path / "aside")
    assert refusal() == (
        f"{start}: its folder {folder} holds none of the 4 files commit 1 records; nothing was written. "
        "Restore the segment's files from a backup (or their earlier versions, in a versioned bucket) and run again"
    )
    shutil.move(tmp_path / "aside", folder)
    lost, content = files[0], files[0].read_bytes()
    lost.unlink()
    assert refusal() == (
        f"{start}: file {lost.name} of commit 1 ({len(content)} bytes) is missing from {folder}; nothing was "
        f"written. {RESTORE}"
    )
    lost.write_bytes(content + b"\0")
    assert refusal() == (
        f"{start}: file {lost} holds {len(content) + 1} bytes, commit 1 records {len(content)}; nothing was "
        f"written. {RESTORE}"
    )
    lost.write_bytes(content)
    stray = folder / "part-00000-stray_00000.c000.zstd.parquet"
    shutil.copy(files[1], stray)
    assert refusal() == (
        f"{start}: file {stray} is not in commit 1, and the check would read it; nothing was written. "
        "Move it out of the manifest folder and run again"
    )
    shutil.move(stray, tmp_path / stray.name)
    # Two bucket files of one size swapped (a restore that mixed up their names): each is valid, each in the wrong
    # bucket; 5cb60ce delivered their ids again, exit 0.
    # Their hidden `.NAME.crc` go with them, as in a mix-up of names (else Hadoop's local reader would stop at them).
    one, other = [file for file in files if file.stat().st_size == files[1].stat().st_size][:2]
    swapped = [(one, other), (sidecar(one), sidecar(other))]
    for a, b in swapped:
        a_content, b_content = a.read_bytes(), b.read_bytes()
        a.write_bytes(b_content)
        b.write_bytes(a_content)
    assert refusal() == (
        f"{start}: file {one} has checksum {crc(one)}, commit 1 records {crc(other)} (replaced or damaged) (and 1 "
        f"more difference(s)); nothing was written. {RESTORE}"
    )
    for a, b in swapped:
        a_content, b_content = a.read_bytes(), b.read_bytes()
        a.write_bytes(b_content)
        b.write_bytes(a_content)
    # Restored as committed: the run decides as if nothing had happened.
    again = dedup(second, out, NEXT_DAY, f"lake:{root}", settings)
    assert again["content"]["duplicates"] == sorted(EVERY)
    assert again["by_reason"]["duplicates"] == {"cross_batch_natural": 6}
    # What was compared: the commit records each file of the segment with its size, by its name in the folder,
    # and its checksum by its path in the manifest.
    assert commits(root)[0]["segment_files"] == {name: {file.name: file.stat().st_size for file in files}}
    assert commits(root)[0]["file_checksums"] == {f"segments/segment={name}/{file.name}": crc(file) for file in files}
    # Nov 1 compacted: run 1's segment has a filter, its checksum recorded. A byte of it changed, the size kept:
    # the check names it before anything reads it.
    [kept] = (root / "filters-v2" / f"segment={name}").glob("*.parquet")
    recorded = commits(root)[-1]["file_checksums"][f"filters-v2/segment={name}/{kept.name}"]
    assert recorded == crc(kept)
    kept_content = kept.read_bytes()
    changed = bytearray(kept_content)
    changed[len(changed) // 2] ^= 0xFF
    kept.write_bytes(bytes(changed))
    capsys.readouterr()
    argv = ["dedup", "--input", str(second), "--output", str(out), "--run-id", LATER, "--manifest", f"lake:{root}"]
    assert main([*argv, "--config", settings]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: manifest lake:{root} is damaged: segment {name}'s filter: file {kept} has checksum {crc(kept)}, "
        f"commit 3 records {recorded} (replaced or damaged); nothing was written. {RESTORE}"
    )
    assert not (out / f"run={LATER}").exists()
    kept.write_bytes(kept_content)


def test_a_zeroed_page_in_a_segment_file_stops_the_next_run_naming_the_file(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], after_run_1: Path
) -> None:
    """Issue 44, symptom 11: a span of a segment bucket file zeroed in place (its size kept; Hadoop's `.crc` beside
    it left as it was). 5cb60ce stopped with `… o696.count.` and a register entry saying the run "recorded its
    events", which it had not. (The way out, restored and run again, is the test above's.)"""
    root, settings, out = after_run_1_in(tmp_path, after_run_1)
    [name] = segment_folders(root)
    damaged = max((root / "segments" / f"segment={name}").glob("*.parquet"), key=lambda file: file.stat().st_size)
    content = damaged.read_bytes()
    middle = len(content) // 2
    damaged.write_bytes(content[: middle - 32] + bytes(64) + content[middle + 32 :])
    second = write_batch(tmp_path / "b2", EVERY)
    assert refused(second, out, NEXT_DAY, root, settings, capsys) == (
        f"error: manifest lake:{root} is damaged: segment {name}: file {damaged} has checksum {crc(damaged)}, commit 1 "
        f"records {crc_of(content)} (replaced or damaged); nothing was written. {RESTORE}"
    )
    assert not (out / f"run={NEXT_DAY}").exists()  # nothing sealed, nothing of the run written
    assert len(commits(root)) == 1
    # No register entry saying it recorded its events: the commit's is run 1's (completed, as it says), and no file.
    assert [run.run_id for run in open_lake(f"lake:{root}").state().open_runs] == [RUN_1]
    assert not list(root.glob("_runs/*.json"))


def test_a_commit_of_the_previous_version_is_checked_by_its_file_count(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], after_run_1: Path
) -> None:
    root, settings, out = after_run_1_in(tmp_path, after_run_1)
    # As the previous version wrote it: each segment with its file count, no file names.
    path = root / "_commits" / "0000000001.json"
    document = json.loads(path.read_text())
    document.pop("segment_files", None)
    document.pop("file_checksums", None)
    path.write_text(json.dumps(document, indent=1))
    (root / "_latest").unlink()
    descriptor = json.loads((root / "_manifest.json").read_text())
    (root / "_manifest.json").write_text(json.dumps({**descriptor, "version": 1}))
    [name] = segment_folders(root)
    folder = root / "segments" / f"segment={name}"
    lost = sorted(folder.glob("*.parquet"))[0]
    content = lost.read_bytes()
    lost.unlink()
    second = write_batch(tmp_path / "b2", EVERY)
    assert refused(second, out, RUN_2, root, settings, capsys) == (
        f"error: manifest lake:{root} is damaged: segment {name}: {folder} holds 3 data files, commit 1 records 4; "
        "nothing was written. Restore the segment's files from a backup (or their earlier versions, in a versioned "
        "bucket) and run again"
    )
    lost.write_bytes(content)
    again = dedup(second, out, RUN_2, f"lake:{root}", settings)
    assert again["content"]["duplicates"] == sorted(EVERY)
    # The new commit records its own segment's files; the older segment keeps its count only.
    assert [(s["name"] == name, s["files"]) for s in commits(root)[-1]["segments"]] == [(True, 4), (False, 0)]
    assert list(commits(root)[-1]["segment_files"]) == [commits(root)[-1]["segments"][1]["name"]]
    # It became a lake of the current version (3): anchored, and its new segment's files have checksums.
    assert json.loads((root / "_manifest.json").read_text())["version"] == 3
    assert json.loads((root / "_latest").read_text())["commit"] == 2
    assert commits(root)[-1]["file_checksums"] == {}  # run 1's files have no list (version 1); run 2's segment none


def test_a_newest_commit_cut_or_deleted_stops_the_run(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], after_run_1: Path
) -> None:
    root, settings, out = after_run_1_in(tmp_path, after_run_1)
    second, newest = write_batch(tmp_path / "b2", EVERY), root / "_commits" / "0000000001.json"
    content, start = newest.read_bytes(), f"error: manifest lake:{root} is damaged: commit {newest}"
    # Cut (5cb60ce: a bare JSONDecodeError).
    newest.write_bytes(content[: len(content) // 2])
    assert refused(second, out, RUN_2, root, settings, capsys) == (
        f"{start} ({len(content) // 2} bytes) is not the one {root}/_latest names (its SHA-256 differs: cut or "
        f"replaced); nothing was written. {RESTORE}"
    )
    # Deleted, as an operator would next (5cb60ce decided by the commit before, none: all six delivered again).
    newest.unlink()
    assert refused(second, out, RUN_2, root, settings, capsys) == (
        f"{start}, the newest, which {root}/_latest names, is missing (no commit is left: the runs committed after "
        f'it would be forgotten); nothing was written. {RESTORE}; docs/operations.md ("A lake manifest is damaged") '
        "says how to go on without it"
    )
    assert not (out / f"run={RUN_2}").exists()
    assert segment_folders(root) != []  # run 1's segment stays, to be named when its commit is restored


def test_a_killed_compactions_leftover_is_removed_by_the_next_commit(spark: SparkSession, tmp_path: Path) -> None:
    root, settings, out = tmp_path / "manifest", config(tmp_path), tmp_path / "out"
    dedup(write_batch(tmp_path / "b1", BATCH_1), out, RUN_1, f"lake:{root}", settings, "--create")
    [first] = segment_folders(root)
    parquet = next((root / "segments" / f"segment={first}").glob("*.parquet"))

    def folder_with_a_file(name: str) -> None:
        (root / "segments" / name).mkdir()
        shutil.copy(parquet, root / "segments" / name / parquet.name)

    # A compaction of Oct 31 killed while writing its day segment: a folder no commit names.
    folder_with_a_file("segment=day-2026-10-31.0badc0de")
    # Kept: a segment an older commit (still kept) names, and folders that are no segment by their name.
    named = "2026-10-31-00-00-00.0ddba11a"
    folder_with_a_file(f"segment={named}")
    older = {**commits(root)[0], "commit": 0, "runs": [], "segment_files": {}}
    older["segments"] = [{**older["segments"][0], "name": named}]
    (root / "_commits" / "0000000000.json").write_text(json.dumps(older))
    for other in ("segment=day-2026-10-31.0BADC0DE", "segment=notes", "scratch"):
        folder_with_a_file(other)
    second = dedup(write_batch(tmp_path / "b2", BATCH_2), out, RUN_2, f"lake:{root}", settings)
    [_, own] = [s["name"] for s in commits(root)[-1]["segments"]]
    assert segment_folders(root) == sorted([first, own, named, "day-2026-10-31.0BADC0DE", "notes", "scratch"])
    # Decisions as without the leftovers: A/a1 seen in run 1, B re-identified, D/d1 twice in the batch.
    assert second["content"]["duplicates"] == sorted([BATCH_2[0], BATCH_2[3]])
    assert second["content"]["good"] == sorted([reidentified(BATCH_2[1]), BATCH_2[2], BATCH_2[4]])


@pytest.mark.aws
def test_on_s3_the_listings_etags_are_compared_and_the_newest_commit_is_anchored() -> None:
    import boto3
    from moto import mock_aws

    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="lake-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        manifest = open_lake("lake:s3://lake-bucket/manifest", buckets=4)
        manifest.create()
        name, files = (
            "2026-11-01-00-00-00.0000abcd",
            ["part-00000_00000.c000.zstd.parquet", "part-00000_00001.c000.zstd.parquet"],
        )
        folder = f"manifest/segments/segment={name}"
        for file, body in zip(files, (b"first", b"other"), strict=True):
            s3.put_object(Bucket="lake-bucket", Key=f"{folder}/{file}", Body=body)
        segment = Segment(name, (100,), 2, 10, 2, 200, {file: 5 for file in files})
        base = manifest.state()
        state = manifest.commit(
            State(0, 4, {name: segment}, {100: RunEntries(100, "r", 200, name)}), base, "dedup", "r"
        )
        etag = s3.head_object(Bucket="lake-bucket", Key=f"{folder}/{files[0]}")["ETag"].strip('"')
        assert manifest.state().checksums[f"segments/segment={name}/{files[0]}"] == f"etag:{etag}"
        assert manifest.verify(manifest.state()) == 2
        # Another valid object of the same size in its place: its ETag differs.
        s3.put_object(Bucket="lake-bucket", Key=f"{folder}/{files[0]}", Body=b"swaps")
        swapped = s3.head_object(Bucket="lake-bucket", Key=f"{folder}/{files[0]}")["ETag"].strip('"')
        with pytest.raises(ManifestDamagedError) as damaged:
            manifest.verify(state)
        assert str(damaged.value) == (
            f"manifest lake:s3://lake-bucket/manifest is damaged: segment {name}: file s3://lake-bucket/{folder}/"
            f"{files[0]} has checksum etag:{swapped}, commit 1 records etag:{etag} (replaced or damaged); nothing was "
            f"written. {RESTORE}"
        )
        s3.delete_object(Bucket="lake-bucket", Key="manifest/_commits/0000000001.json")
        with pytest.raises(
            ManifestDamagedError, match=r"0000000001\.json, the newest, which .*_latest names, is missing"
        ):
            manifest.state()


def test_a_damaged_open_run_is_a_damaged_commit_and_a_later_versions_lake_is_refused(tmp_path: Path) -> None:
    """An entry of a commit's `open_runs` that is no run's entry stops the run as a damaged commit (not a traceback
    later, when the register reads it); a lake a later Winnow wrote is refused rather than read without what its
    version added (as a Winnow of version 2 refuses this one, whose commits carry the open runs)."""
    lake = open_lake(f"lake:{tmp_path / 'manifest'}", buckets=4)
    lake.create()
    entry = {"run_id": "2026-11-24-01-00-00", "etl_time": 1, "ttl": 2, "folder": "/out/run=x", "redo": "python -m jobs"}
    commit = tmp_path / "manifest" / "_commits" / f"{1:010d}.json"
    commit.parent.mkdir()
    for entries in ([{**entry, "etl_time": "1"}], [{"run_id": entry["run_id"]}], ["run"], [entry]):
        commit.write_text(json.dumps({**State(commit=1, buckets=4).document("dedup", "x"), "open_runs": entries}))
        if entries == [entry]:
            assert lake.state().open_runs == (RegisteredRun(**entry),)  # type: ignore[arg-type]
            continue
        with pytest.raises(
            ManifestDamagedError, match=r"commit .*0000000001\.json .* is no commit document \(TypeError: "
        ):
            lake.state()

    descriptor = tmp_path / "manifest" / "_manifest.json"
    descriptor.write_text(json.dumps({**json.loads(descriptor.read_text()), "version": 4}))
    with pytest.raises(ManifestError, match="is no winnow-lake-manifest version 1, 2 or 3 descriptor"):
        open_lake(f"lake:{tmp_path / 'manifest'}").check()
