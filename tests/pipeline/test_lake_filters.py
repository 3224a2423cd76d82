"""The lake manifest's past days are read through their filters (issue 32): a few bytes a key instead of the entries,
exact entries only from the bucket files a filter could not rule out, and the same decisions as reading everything.

Through the command line and real Spark, as in test_lake_manifest.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.manifest import lake_filter
from jobs.manifest.lake_filter import entry_bucket, filter_hash, filter_matches, register_filters, write_filter
from jobs.manifest.lake_state import State
from jobs.manifest.lake_writes import id_halves
from tests.pipeline.test_lake_integrity import RESTORE, refused
from tests.pipeline.test_lake_manifest import IDS, commits, config, dedup, line, write_batch

RUNS = ("2026-11-01-01-00-00", "2026-11-01-02-00-00", "2026-11-02-01-00-00", "2026-11-03-01-00-00")
BATCHES = (
    [line("A", "a1"), line("B", "b1"), line("C", "c1")],
    [line("D", "d1"), line("E", "e1")],
    [line("F", "f1")],
    # A/a1 and D/d1 delivered on Nov 1 (past day, read through its filter), B again as b2 (synthetic), F/f1 on
    # Nov 2 (yesterday: its filter is written by this run's commit, after its check).
    [line("A", "a1", etl="2026-11-03 00:30:00.000"), line("B", "b2"), line("D", "d1"), line("F", "f1")],
)


def sequence(tmp_path: Path, manifest: str, before_last: Callable[[], None] = lambda: None) -> list[dict]:  # type: ignore[type-arg]
    tmp_path.mkdir(parents=True, exist_ok=True)
    out, settings = tmp_path / "out", config(tmp_path, ttl_days=30)
    runs = []
    for number, (run_id, lines) in enumerate(zip(RUNS, BATCHES, strict=True)):
        batch = write_batch(tmp_path / f"batch={number}", lines)
        if number == len(RUNS) - 1:
            before_last()
        runs.append(dedup(batch, out, run_id, manifest, settings, *(["--create"] if number == 0 else [])))
    return runs


@pytest.fixture(scope="module")
def read_whole(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:  # type: ignore[type-arg]
    """The runs on SQLite: what every run on the lake must write and count."""
    folder = tmp_path_factory.mktemp("sqlite")
    return sequence(folder, f"sqlite:{folder / 'manifest.db'}")


def manifest_figures(tmp_path: Path, run_id: str) -> dict[str, int]:
    figures: dict[str, int] = json.loads((tmp_path / "out" / f"run={run_id}" / "summary.json").read_text())["manifest"]
    return figures


def files_holding(spark: SparkSession, folder: Path, names: str) -> set[str]:
    """The Parquet files of a segment folder that hold the entries of the ids `names`."""
    halves = [id_halves(F.lit(IDS[name])) for name in names]
    wanted = F.lit(False)
    for high, low in halves:
        wanted = wanted | ((F.col("id_hi") == high) & (F.col("id_lo") == low))
    rows = spark.read.parquet(str(folder)).where(wanted).select(F.input_file_name()).distinct().collect()
    return {row[0].rsplit("/", 1)[-1] for row in rows}


def test_past_days_are_read_through_their_filters_and_decide_as_read_whole(
    spark: SparkSession,
    tmp_path: Path,
    read_whole: list[dict],  # type: ignore[type-arg]
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "lake" / "manifest"
    # A compaction killed while writing a filter: a folder no commit names, removed by the next commit; and one of
    # the first filter layout's folders, named by no kept commit either.
    leftovers = [
        root / "filters-v2" / "segment=day-2026-10-31.0badc0de",
        root / "filters" / "segment=day-2026-10-30.0badc0de",
    ]

    def plant_leftovers() -> None:
        for leftover in leftovers:
            leftover.mkdir(parents=True)
            (leftover / "part-00000-x_00000.c000.zstd.parquet").write_bytes(b"not read")

    lake = sequence(tmp_path / "lake", f"lake:{root}", before_last=plant_leftovers)
    assert lake == read_whole
    assert not any(leftover.exists() for leftover in leftovers)
    assert lake[3]["content"]["duplicates"] == sorted([BATCHES[3][0], BATCHES[3][2], BATCHES[3][3]])
    assert lake[3]["by_reason"]["duplicates"] == {"cross_batch_natural": 3}

    # Run 3's commit merged Nov 1 and gave it a filter; run 4's gave Nov 2 one (after run 4's check).
    state = commits(root)[-1]
    day_1 = next(s for s in state["segments"] if s["name"].startswith("day-2026-11-01"))
    day_2 = next(s for s in state["segments"] if s["name"].startswith(RUNS[2]))
    assert sorted(state["segment_filters_v2"]) == sorted([day_1["name"], day_2["name"]])
    # 4 buckets of entries, 16 to a filter file: one file a day, holding the hashes of the day's 5 entries (too
    # few for more than one row a bucket).
    filter_record = state["segment_filters_v2"][day_1["name"]]
    assert {k: filter_record[k] for k in ("bits", "block_bits", "file_buckets", "keys")} == {
        "bits": 40, "block_bits": 0, "file_buckets": 1, "keys": 5
    }  # fmt: skip
    assert len(filter_record["file_sizes"]) == 1
    # Exactly the hashes of the day's entries.
    stored = spark.read.parquet(str(root / "filters-v2" / f"segment={day_1['name']}")).select(F.explode("hashes"))
    entries = spark.read.parquet(str(root / "segments" / f"segment={day_1['name']}")).select(filter_hash(40))
    assert sorted(row[0] for row in stored.collect()) == sorted(row[0] for row in entries.collect())

    # Run 4 read Nov 2 whole (1 entry), Nov 1 through its filter (5 filter rows), and exact entries only from the
    # bucket files of Nov 1 that hold A, B or D (F is no Nov 1 id: a chance match of 40 bits is ~5e-12 here).
    figures = manifest_figures(tmp_path / "lake", RUNS[3])
    day_1_files = state["segment_files"][day_1["name"]]
    read = files_holding(spark, root / "segments" / f"segment={day_1['name']}", "ABD")
    filter_bytes = sum(filter_record["file_sizes"].values())
    assert figures["live_keys"] == 6
    assert figures["keys_read"] == 1 + 5
    assert figures["filter_matches"] == 3
    assert figures["lookup_files_read"] == len(read)
    assert figures["files_read"] == day_2["files"] + 1 + len(read)
    assert figures["bytes_read"] == day_2["bytes"] + filter_bytes + sum(day_1_files[f] for f in read)

    # A filter file that lost bytes would rule out ids it holds: the run stops before it reads or writes.
    (damaged, size), *_ = sorted(filter_record["file_sizes"].items())
    path = root / "filters-v2" / f"segment={day_1['name']}" / damaged
    saved = path.read_bytes()
    path.write_bytes(saved[: size // 2])
    settings, batch = str(tmp_path / "lake" / "config.json"), write_batch(tmp_path / "b5", [line("A", "a1")])
    last = refused(batch, tmp_path / "lake" / "out", "2026-11-04-01-00-00", root, settings, capsys)
    assert last == (
        f"error: manifest lake:{root} is damaged: segment {day_1['name']}'s filter: file {path} holds {size // 2} "
        f"bytes, commit {state['commit']} records {size}; nothing was written. {RESTORE}"
    )
    path.write_bytes(saved)  # restored, as the line says: the run goes through
    assert dedup(batch, tmp_path / "lake" / "out", "2026-11-04-01-00-00", f"lake:{root}", settings)["content"][
        "duplicates"
    ] == [line("A", "a1")]


def test_a_run_of_a_row_a_bucket_gets_its_filter_and_the_day_s_later_runs_read_through_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    root, out, settings = tmp_path / "manifest", tmp_path / "out", config(tmp_path, ttl_days=30)
    first, later = "2026-11-01-01-00-00", "2026-11-01-02-00-00"
    batch_1 = write_batch(tmp_path / "b1", [line("A", "a1"), line("B", "b1"), line("C", "c1"), line("D", "d1")])
    # A/a1 again (natural), B as b2 (synthetic), E new: run 1's segment is today's, read through its filter.
    batch_2 = write_batch(tmp_path / "b2", [line("A", "a1"), line("B", "b2"), line("E", "e1")])
    # A row of one hash (KEYS_A_ROW 1): a run of 4 keys over 4 buckets gets a filter, one of 2 keys does not.
    with mock.patch.object(lake_filter, "KEYS_A_ROW", 1):
        run_1 = dedup(batch_1, out, first, f"lake:{root}", settings, "--create")
        first_segment = commits(root)[-1]["runs"][0]["segment"]
        assert sorted(commits(root)[-1]["segment_filters_v2"]) == [first_segment]
        run_2 = dedup(batch_2, out, later, f"lake:{root}", settings)
        # Run 2 read run 1's 4 keys as filter hashes, and exact entries only from the files holding A and B.
        figures = manifest_figures(tmp_path, later)
        read = files_holding(spark, root / "segments" / f"segment={first_segment}", "AB")
        assert (figures["live_keys"], figures["keys_read"], figures["filter_matches"]) == (4, 4, 2)
        assert figures["lookup_files_read"] == len(read)
        redo = dedup(batch_1, out, first, f"lake:{root}", settings)

    assert run_2["content"]["duplicates"] == [line("A", "a1")]
    assert run_2["by_reason"]["duplicates"] == {"cross_batch_natural": 1}
    assert run_2["synthetic"]["by_reason"] == {"in_batch_synthetic": 0, "cross_batch_synthetic": 1}
    # The redo of run 1 decides as it did; its new segment has its own filter, and the replaced segment's filter
    # went with it (from the commit and the disk); run 2's 2 keys got none.
    assert redo == run_1
    state = commits(root)[-1]
    redone_segment = next(r["segment"] for r in state["runs"] if r["run_id"] == first)
    assert redone_segment != first_segment
    assert sorted(state["segment_filters_v2"]) == [redone_segment]
    assert sorted(path.name for path in (root / "filters-v2").iterdir()) == [f"segment={redone_segment}"]


def test_a_filter_packs_its_hashes_by_block_and_holds_every_key_written(spark: SparkSession, tmp_path: Path) -> None:
    numbered = spark.range(24_000).select(
        "id", F.xxhash64("id").alias("id_hi"), F.xxhash64(F.lit(7), "id").alias("id_lo")
    )
    ids, written = numbered.drop("id"), numbered.where(F.col("id") < 16_000).drop("id")
    root, name = tmp_path / "filters-v2", "day-2026-11-01.0123abcd"
    made = write_filter(written, 16_000, str(root / f"segment={name}"), buckets=128)
    # About KEYS_A_ROW (32) hashes a row: 16,000 keys over 128 buckets is 2^2 blocks a bucket; 64 buckets a file.
    assert (made.bits, made.block_bits, made.file_buckets, made.keys, made.files) == (40, 2, 2, 16_000, 2)
    rows = spark.read.parquet(str(root / f"segment={name}")).collect()
    assert sum(len(row["hashes"]) for row in rows) == 16_000
    assert all(row["hashes"] == sorted(row["hashes"]) for row in rows)
    assert all(hash_ >> (40 - 2) == row["block"] for row in rows for hash_ in row["hashes"])
    assert len({(row["bucket"], row["block"]) for row in rows}) == len(rows) == 128 * 2**2

    table = "winnow_filter_test"
    register_filters(spark, table, str(root), made.file_buckets, [name])
    try:
        matches = filter_matches(spark, ids, table, 128, made)
    finally:
        spark.sql(f"DROP TABLE {table}")
    # Every written id is found in its bucket (a filter never rules out what it holds); the 8,000 others are not (a
    # chance match of 40 bits among 125 keys a bucket: ~2e-7 here).
    per_bucket = written.groupBy(entry_bucket(128).alias("bucket")).count().collect()
    assert matches == sorted((name, row["bucket"], row["count"]) for row in per_bucket)


def test_a_commit_of_the_first_filter_layout_reads_its_days_whole_and_drops_that_record() -> None:
    # One row a hash under filters/: this version cannot join those files, so it reads the days whole, and the
    # commits it writes do not carry the record (an older version reading them reads the days whole too).
    first = {"bits": 40, "file_buckets": 1, "keys": 5, "file_sizes": {"part-00000-x_00000.c000.zstd.parquet": 90}}
    segment = {"name": "day-2026-11-01.0123abcd", "runs": [1], "files": 1, "bytes": 10, "keys": 5, "max_ttl": 9}
    document = {
        "commit": 3,
        "buckets": 4,
        "segments": [segment],
        "runs": [],
        "segment_filters": {segment["name"]: first},
    }
    state = State.parse(document)
    assert state.filters == {}
    assert "segment_filters" not in state.document("dedup", "2026-11-02-01-00-00")
