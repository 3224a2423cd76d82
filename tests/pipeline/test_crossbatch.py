"""Cross-batch dedup end to end through Spark: SQLite and DynamoDB (moto on 127.0.0.1) give the same runs."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.enriched.fields import FIELD_INDEX
from jobs.runtime.cli import main
from tests.pipeline.helpers import event, run_folder_content
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


def two_runs(batches: tuple[Path, Path], output: Path, manifest: str, *extra: str) -> dict[str, list[str]]:
    assert dedup(batches[0], output, RUN_1, manifest, "--create", *extra) == 0
    assert run_folder_content(output / f"run={RUN_1}")["good"] == sorted(BATCH_1)
    assert dedup(batches[1], output, RUN_2, manifest, *extra) == 0
    return run_folder_content(output / f"run={RUN_2}")


def test_throttling_is_retried_and_changes_nothing(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path, dynamodb: str, faults: Faults
) -> None:
    faults.throttle_every = 3
    assert two_runs(batches, tmp_path / "out", dynamodb) == EXPECTED_RUN_2
    manifest = summary_of(tmp_path / "out", RUN_2)["manifest"]
    assert faults.throttled > 0
    assert manifest["throttles"] > 0 and manifest["retries"] >= manifest["throttles"]
    assert (manifest["puts"], manifest["conditional_failures"]) == (7, 2)


def test_a_run_that_fails_midway_is_completed_by_a_rerun(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path, dynamodb: str, faults: Faults
) -> None:
    out = tmp_path / "out"
    assert dedup(batches[0], out, RUN_1, dynamodb, "--create") == 0
    faults.puts, faults.fail_after = 0, 3  # three puts of run 2 land, then a task fails
    assert dedup(batches[1], out, RUN_2, dynamodb) == 1
    assert faults.failed == 1
    assert not (out / f"run={RUN_2}" / "_SUCCESS").exists()
    assert dedup(batches[1], out, RUN_2, dynamodb) == 0
    assert run_folder_content(out / f"run={RUN_2}") == EXPECTED_RUN_2


def test_throttling_past_the_patience_stops_the_run_with_one_line(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path, dynamodb: str, faults: Faults,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    out = tmp_path / "out"
    assert dedup(batches[0], out, RUN_1, dynamodb, "--create") == 0
    faults.throttle_every = 1  # every put throttled, for good
    config = tmp_path / "impatient.json"
    config.write_text('{"manifest": {"max_attempts": 2, "throttle_patience_seconds": 2}}')
    capsys.readouterr()
    assert dedup(batches[1], out, RUN_2, dynamodb, "--config", str(config)) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"error: dedup run {RUN_2} failed, no _SUCCESS written: ManifestThrottledError: manifest table "
        r"events-manifest: a put_item was throttled for [0-9]+ s \(manifest.throttle_patience_seconds: 2\); nothing "
        r"is lost: rerun with the same run id, with more table capacity or a lower manifest.concurrency "
        r"\(run with --debug for the traceback\)",
        line,
    ), line
    assert not (out / f"run={RUN_2}" / "_SUCCESS").exists()
    faults.throttle_every = 0
    assert dedup(batches[1], out, RUN_2, dynamodb) == 0
    assert run_folder_content(out / f"run={RUN_2}") == EXPECTED_RUN_2


def test_keep_first_drops_a_later_batchs_synthetic_copy(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path
) -> None:
    content = two_runs(batches, tmp_path / "out", f"sqlite:{tmp_path / 'm.db'}", "--synthetic", "keep-first")
    # b2 and c2 lose to run 1's copies; e1 beats e2 (same etl and collector time: the smaller line).
    assert content["good"] == sorted([BATCH_2["d1"], min(BATCH_2["e1"], BATCH_2["e2"])])
    summary = summary_of(tmp_path / "out", RUN_2)
    assert summary["by_reason"]["duplicates"] == {
        "cross_batch_natural": 2, "cross_batch_synthetic": 2, "in_batch_natural": 1, "in_batch_synthetic": 1,
    }  # fmt: skip


def test_cross_batch_synthetic_detection_can_be_switched_off(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path
) -> None:
    config = tmp_path / "no-synthetic.json"
    config.write_text('{"manifest": {"cross_batch_synthetic": false}}')
    content = two_runs(batches, tmp_path / "out", f"sqlite:{tmp_path / 'm.db'}", "--config", str(config))
    # Snowplow's behaviour: a later batch's other fingerprint is accepted unchanged.
    assert content["good"] == sorted(
        [BATCH_2["b2"], BATCH_2["c2"], BATCH_2["d1"], reidentified(BATCH_2["e1"]), reidentified(BATCH_2["e2"])]
    )
    assert summary_of(tmp_path / "out", RUN_2)["manifest"]["queries"] == 0


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


@pytest.fixture(params=["sqlite", "dynamodb"])
def manifest_uri(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh manifest of each backend."""
    if request.param == "sqlite":
        yield f"sqlite:{tmp_path / 'manifest.db'}"
        return
    with dynamodb_on_loopback(Faults()) as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        yield "dynamodb://events-manifest"


def test_a_manifest_finds_cross_batch_copies_and_any_run_can_be_redone(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path, manifest_uri: str
) -> None:
    out = tmp_path / "out"
    assert two_runs(batches, out, manifest_uri) == EXPECTED_RUN_2
    summary = summary_of(out, RUN_2)
    assert summary["by_reason"]["duplicates"] == {"cross_batch_natural": 2, "in_batch_natural": 1}
    assert summary["synthetic"] == {
        "strategy": "reid",
        "events": 4,
        "good": 4,
        "bad": 0,
        "duplicates": 0,
        "quarantined": 0,
        "dropped": 0,
        "by_reason": {"in_batch_synthetic": 2, "cross_batch_synthetic": 2},
    }
    # One put per distinct (event_id, fingerprint) after in-batch dedup, one look-up per event id.
    manifest_figures = {k: summary["manifest"][k] for k in ("puts", "queries", "conditional_failures", "requests")}
    assert manifest_figures == {"puts": 7, "queries": 5, "conditional_failures": 2, "requests": 12}

    # A rerun of run 2 with its run id passes its own writes and gives the same folder.
    assert dedup(batches[1], out, RUN_2, manifest_uri) == 0
    assert run_folder_content(out / f"run={RUN_2}") == EXPECTED_RUN_2
    first_run_1 = run_folder_content(out / f"run={RUN_1}")
    # Run 2 recorded B and C with other fingerprints: they are later, so redoing run 1 must not see them.
    assert dedup(batches[0], out, RUN_1, manifest_uri) == 0
    assert run_folder_content(out / f"run={RUN_1}") == first_run_1
    assert dedup(batches[1], out, RUN_2, manifest_uri) == 0
    assert run_folder_content(out / f"run={RUN_2}") == EXPECTED_RUN_2


def test_runs_done_out_of_order_depend_only_on_earlier_runs(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path, manifest_uri: str
) -> None:
    out = tmp_path / "out"
    assert dedup(batches[1], out, RUN_2, manifest_uri, "--create") == 0  # the later run first
    assert dedup(batches[0], out, RUN_1, manifest_uri) == 0
    # Run 1 gives what it gives alone: nothing of run 2 counts for it.
    assert run_folder_content(out / f"run={RUN_1}") == {"good": sorted(BATCH_1), "bad": [], "duplicates": [],
                                                        "quarantine": []}  # fmt: skip
    # Redoing run 2 now that run 1 is recorded gives the in-order result.
    assert dedup(batches[1], out, RUN_2, manifest_uri) == 0
    assert run_folder_content(out / f"run={RUN_2}") == EXPECTED_RUN_2


def test_the_sqlite_manifest_is_one_self_contained_file_after_a_run(
    spark: SparkSession, batches: tuple[Path, Path], tmp_path: Path
) -> None:
    import shutil
    import sqlite3

    manifest = tmp_path / "manifest.db"
    assert dedup(batches[0], tmp_path / "out", RUN_1, f"sqlite:{manifest}", "--create") == 0
    copy = tmp_path / "copy" / "manifest.db"
    copy.parent.mkdir()
    shutil.copyfile(manifest, copy)  # the .db alone, as README names it
    with sqlite3.connect(copy) as db:
        rows = sorted(db.execute("SELECT event_id, fingerprint, etl_time FROM events_manifest"))
    etl = 1_795_230_000  # 2026-11-21 03:00:00 UTC
    assert rows == [(IDS["A"], "a1", etl), (IDS["B"], "b1", etl), (IDS["C"], "c1", etl)]
