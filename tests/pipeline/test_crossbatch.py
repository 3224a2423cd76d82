"""Cross-batch dedup end to end through Spark: SQLite and DynamoDB (moto on 127.0.0.1) give the same runs."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.enriched.fields import FIELD_INDEX
from jobs.runtime.cli import main
from tests.pipeline.helpers import event, fresh_manifest, run_folder_content
from tests.pipeline.manifest_server import Faults, dynamodb_on_loopback

RUN_1, RUN_2 = "2026-11-21-03-00-00", "2026-11-22-03-00-00"
IDS = {name: f"{i:08x}-0000-4000-8000-00000000000{i}" for i, name in enumerate("ABCDE", start=1)}
CONTEXTS = "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-0"
DUPLICATE = "iglu:com.snowplowanalytics.snowplow/duplicate/jsonschema/1-0-0"


def line(name: str, fingerprint: str, etl: str = "2026-11-01 10:00:05.000") -> str:
    return event(IDS[name], event_fingerprint=fingerprint, etl_tstamp=etl)


BATCH_1 = [line("A", "a1"), line("B", "b1"), line("C", "c1")]
BATCH_2 = {
    "a1_again": line("A", "a1", etl="2026-11-02 10:00:00.000"),  # delivered by run 1: cross-batch natural
    "b2": line("B", "b2"),  # run 1 delivered B with another fingerprint: cross-batch synthetic
    "c1_again": line("C", "c1", etl="2026-11-02 10:00:00.000"),  # cross-batch natural …
    "c2": line("C", "c2"),  # … and, beside it, a cross-batch synthetic copy
    "d1": line("D", "d1"),
    "d1_again": line("D", "d1", etl="2026-11-02 11:00:00.000"),  # in-batch natural
    "e1": line("E", "e1"),
    "e2": line("E", "e2"),  # in-batch synthetic
}


def reidentified(text: str) -> str:
    values = text.split("\t")
    original = values[FIELD_INDEX["event_id"]]
    values[FIELD_INDEX["event_id"]] = str(uuid.uuid5(uuid.UUID(original), values[FIELD_INDEX["event_fingerprint"]]))
    context = json.dumps({"schema": DUPLICATE, "data": {"originalEventId": original}}, separators=(",", ":"))
    values[FIELD_INDEX["derived_contexts"]] = f'{{"schema":"{CONTEXTS}","data":[{context}]}}'
    return "\t".join(values)


EXPECTED_RUN_2 = {
    "good": sorted([reidentified(BATCH_2[n]) for n in ("b2", "c2", "e1", "e2")] + [BATCH_2["d1"]]),
    "bad": [],
    "duplicates": sorted(BATCH_2[n] for n in ("a1_again", "c1_again", "d1_again")),
    "quarantine": [],
}


@pytest.fixture
def batches(tmp_path: Path) -> tuple[Path, Path]:
    one, two = tmp_path / "batch=1", tmp_path / "batch=2"
    one.mkdir()
    two.mkdir()
    (one / "part-0.tsv").write_text("\n".join(BATCH_1) + "\n")
    (two / "part-0.tsv").write_text("\n".join(BATCH_2.values()) + "\n")
    return one, two


@pytest.fixture
def faults() -> Faults:
    return Faults()


@pytest.fixture
def dynamodb(monkeypatch: pytest.MonkeyPatch, faults: Faults) -> Iterator[str]:
    """A fresh DynamoDB endpoint on 127.0.0.1; the manifest URI's region/endpoint come from the environment."""
    with dynamodb_on_loopback(faults) as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        yield "dynamodb://events-manifest"


def dedup(input_path: Path, output: Path, run_id: str, manifest: str, *extra: str) -> int:
    args = ["dedup", "--input", str(input_path), "--output", str(output), "--run-id", run_id, "--manifest", manifest]
    return main([*args, *extra])


def summary_of(output: Path, run_id: str) -> dict:  # type: ignore[type-arg]
    return json.loads((output / f"run={run_id}" / "summary.json").read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def run_1_manifest(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run 1 done once on a SQLite manifest: the .db it leaves, for tests to copy and go on from, never to change."""
    root = tmp_path_factory.mktemp("run-1")
    (root / "batch=1").mkdir()
    (root / "batch=1" / "part-0.tsv").write_text("\n".join(BATCH_1) + "\n")
    assert dedup(root / "batch=1", root / "out", RUN_1, f"sqlite:{root / 'manifest.db'}", "--create") == 0
    assert run_folder_content(root / "out" / f"run={RUN_1}")["good"] == sorted(BATCH_1)
    return root / "manifest.db"


def run_2_after_run_1(run_1_manifest: Path, batch: Path, tmp_path: Path, *extra: str) -> dict[str, list[str]]:
    """Run 2 on a copy of run 1's manifest (the .db alone), to tmp_path/out; what it wrote."""
    manifest = tmp_path / "manifest.db"
    shutil.copyfile(run_1_manifest, manifest)
    assert dedup(batch, tmp_path / "out", RUN_2, f"sqlite:{manifest}", *extra) == 0
    return run_folder_content(tmp_path / "out" / f"run={RUN_2}")


def test_a_failed_run_is_completed_by_a_rerun_that_throttling_slows_and_does_not_change(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path, dynamodb: str, faults: Faults,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    out = tmp_path / "out"
    assert dedup(batches[0], out, RUN_1, dynamodb, "--create") == 0
    assert run_folder_content(out / f"run={RUN_1}")["good"] == sorted(BATCH_1)

    # A task fails midway: three puts of run 2 land, then one gets an error that is not retried.
    faults.puts, faults.fail_after = 0, 3
    assert dedup(batches[1], out, RUN_2, dynamodb) == 1
    assert faults.failed == 1
    assert not (out / f"run={RUN_2}" / "_SUCCESS").exists()

    # Every put throttled, for good: past the patience the run stops with one line.
    faults.throttle_every = 1
    config = tmp_path / "impatient.json"
    config.write_text('{"manifest": {"max_attempts": 2, "throttle_patience_seconds": 1, "concurrency": 1}}')
    capsys.readouterr()
    assert dedup(batches[1], out, RUN_2, dynamodb, "--config", str(config)) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"error: dedup run {RUN_2} failed, no _SUCCESS written: ManifestThrottledError: manifest table "
        r"events-manifest: a put_item was throttled for [0-9]+ s \(manifest.throttle_patience_seconds: 1\); nothing "
        r"is lost: rerun with the same run id, with more table capacity or a lower manifest.concurrency "
        r"\(run with --debug for the traceback\)",
        line,
    ), line
    assert not (out / f"run={RUN_2}" / "_SUCCESS").exists()

    # The rerun, its puts throttled now and then: retried, and the folder an untroubled run gives. It passes the
    # puts its failed attempts landed (its own writes): the same figures as a first run 2.
    faults.puts, faults.throttled, faults.throttle_every = 0, 0, 7
    assert dedup(batches[1], out, RUN_2, dynamodb) == 0
    assert run_folder_content(out / f"run={RUN_2}") == EXPECTED_RUN_2
    manifest = summary_of(out, RUN_2)["manifest"]
    assert faults.throttled > 0
    assert manifest["throttles"] > 0 and manifest["retries"] >= manifest["throttles"]
    assert (manifest["puts"], manifest["conditional_failures"]) == (7, 2)


def test_keep_first_drops_a_later_batchs_synthetic_copy(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path, run_1_manifest: Path
) -> None:
    content = run_2_after_run_1(run_1_manifest, batches[1], tmp_path, "--synthetic", "keep-first")
    # b2 and c2 lose to run 1's copies; e1 beats e2 (same etl and collector time: the smaller line).
    assert content["good"] == sorted([BATCH_2["d1"], min(BATCH_2["e1"], BATCH_2["e2"])])
    summary = summary_of(tmp_path / "out", RUN_2)
    assert summary["by_reason"]["duplicates"] == {
        "cross_batch_natural": 2, "cross_batch_synthetic": 2, "in_batch_natural": 1, "in_batch_synthetic": 1,
    }  # fmt: skip


def test_cross_batch_synthetic_detection_can_be_switched_off(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path, run_1_manifest: Path
) -> None:
    config = tmp_path / "no-synthetic.json"
    config.write_text('{"manifest": {"cross_batch_synthetic": false}}')
    content = run_2_after_run_1(run_1_manifest, batches[1], tmp_path, "--config", str(config))
    # Snowplow's behaviour: a later batch's other fingerprint is accepted unchanged.
    assert content["good"] == sorted(
        [BATCH_2["b2"], BATCH_2["c2"], BATCH_2["d1"], reidentified(BATCH_2["e1"]), reidentified(BATCH_2["e2"])]
    )
    assert summary_of(tmp_path / "out", RUN_2)["manifest"]["queries"] == 0

    # After a run the SQLite manifest is one self-contained file: the .db alone, as README names it (run 2 went on
    # from a copy of run 1's), holds every pair, each with its earliest delivery.
    copy = tmp_path / "copy" / "manifest.db"
    copy.parent.mkdir()
    shutil.copyfile(tmp_path / "manifest.db", copy)
    with contextlib.closing(sqlite3.connect(copy)) as db:
        rows = sorted(db.execute("SELECT event_id, fingerprint, etl_time FROM events_manifest"))
    etl_1, etl_2 = 1_795_230_000, 1_795_316_400  # 2026-11-21 and 2026-11-22 03:00:00 UTC
    assert rows == [
        (IDS["A"], "a1", etl_1), (IDS["B"], "b1", etl_1), (IDS["B"], "b2", etl_2), (IDS["C"], "c1", etl_1),
        (IDS["C"], "c2", etl_2), (IDS["D"], "d1", etl_2), (IDS["E"], "e1", etl_2), (IDS["E"], "e2", etl_2),
    ]  # fmt: skip


def test_a_manifest_that_is_not_there_stops_the_run_before_it_starts(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path, dynamodb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert dedup(batches[0], tmp_path / "out", RUN_1, dynamodb) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: manifest dynamodb://events-manifest: table events-manifest does not exist in region eu-west-1; "
        "create it with the Storage stack (make deploy) or, for local/dev, rerun with --create"
    )
    assert not (tmp_path / "out").exists()


def test_populate_manifest_backfills_what_a_dedup_run_would_have_recorded(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = f"sqlite:{tmp_path / 'm.db'}"
    populate = ["populate-manifest", "--input", str(batches[0]), "--manifest", manifest, "--run-id", RUN_1]
    assert main([*populate, "--create"]) == 0
    assert "pairs recorded                    3" in capsys.readouterr().out
    assert main(populate) == 0  # the same run again: idempotent
    assert "pairs recorded                    3" in capsys.readouterr().out
    assert main([*populate[:-1], "2026-11-21-04-00-00"]) == 0  # another run: all there already
    assert "pairs already present             3" in capsys.readouterr().out

    assert dedup(batches[1], tmp_path / "out", RUN_2, manifest) == 0
    assert run_folder_content(tmp_path / "out" / f"run={RUN_2}") == EXPECTED_RUN_2


@pytest.fixture(params=["sqlite", "dynamodb", "lake"])
def manifest_uri(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh manifest of each backend."""
    with fresh_manifest(request.param, tmp_path, monkeypatch) as uri:
        yield uri


def test_a_late_run_finds_what_a_later_run_delivered_as_copies_and_redos_in_any_order_give_the_same(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path, manifest_uri: str
) -> None:
    """A run never takes over what a later run delivered (a late batch, or another pipeline's run with a later id):
    the later run's output has those events, so they are copies; redoing either run, in any order, gives its output
    again byte for byte."""
    out = tmp_path / "out"
    assert dedup(batches[1], tmp_path / "alone", RUN_2, f"sqlite:{tmp_path / 'alone.db'}", "--create") == 0
    alone = run_folder_content(tmp_path / "alone" / f"run={RUN_2}")
    assert dedup(batches[1], out, RUN_2, manifest_uri, "--create") == 0  # the later run first
    assert run_folder_content(out / f"run={RUN_2}") == alone
    assert dedup(batches[0], out, RUN_1, manifest_uri) == 0
    late = {
        "good": [reidentified(line("B", "b1"))],  # run 2 delivered B with another fingerprint: a synthetic copy
        "bad": [],
        "duplicates": sorted([line("A", "a1"), line("C", "c1")]),  # run 2 delivered these pairs
        "quarantine": [],
    }
    assert run_folder_content(out / f"run={RUN_1}") == late
    assert summary_of(out, RUN_1)["by_reason"]["duplicates"] == {"cross_batch_natural": 2}
    assert summary_of(out, RUN_1)["synthetic"]["by_reason"] == {"in_batch_synthetic": 0, "cross_batch_synthetic": 1}

    for run_id, batch, content in ((RUN_2, 1, alone), (RUN_1, 0, late), (RUN_2, 1, alone), (RUN_1, 0, late)):
        assert dedup(batches[batch], out, run_id, manifest_uri) == 0
        assert run_folder_content(out / f"run={run_id}") == content
    # 93cc664: run 1 took A and C over and delivered them again (good: all three of its events), and run 2's redo
    # then found them, and B's b1, as run 1's
