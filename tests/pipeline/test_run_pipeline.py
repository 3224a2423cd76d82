"""`python -m jobs run`: dedup then shred under one run id, every line accounted for from input to entities."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.fs.run_folder import RunFolder
from jobs.runtime.cli import main
from jobs.tools.generate import GenerateOptions, generate
from tests.pipeline.helpers import ID_A, ID_B, event, read_lines

RUN_ID = "2026-11-22-04-00-00"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("generated")
    generate(folder, GenerateOptions(events=2000, seed=5, files=2, duplicate_share=0.05, bad_share=0.01))
    return folder


def test_the_pipeline_accounts_for_every_line_and_every_entity(
    spark: SparkSession, generated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["run", "--input", str(generated), "--output", str(tmp_path), "--run-id", RUN_ID, "--synthetic", "reid"])
        == 0
    )
    deduplicated, shredded = tmp_path / "deduplicated" / f"run={RUN_ID}", tmp_path / "shredded" / f"run={RUN_ID}"
    dedup = json.loads((deduplicated / "summary.json").read_text())
    shred = json.loads((shredded / "summary.json").read_text())
    assert (deduplicated / "_SUCCESS").exists() and (shredded / "_SUCCESS").exists()

    # dedup: input = good + bad + duplicates + quarantined + dropped; shred reads exactly dedup's good.
    assert dedup["counts"]["input"] == len(read_lines(generated)) == 2000
    assert shred["input"] == f"{deduplicated}/good"
    assert shred["counts"] == {"input": dedup["counts"]["good"], "good": dedup["counts"]["good"], "bad": 0}
    assert dedup["synthetic"]["good"] > 0  # the batch has synthetic copies, re-identified with a duplicate context

    # The atomic events (rdb layout): one 128-column line per good event, the same event ids as dedup's good/.
    good = shredded / "output=good"
    atomic_path = "vendor=com.snowplowanalytics.snowplow/name=atomic/format=tsv/model=1/revision=0/addition=0"
    atomic = read_lines(good / atomic_path)
    assert len(atomic) == shred["counts"]["good"]
    assert {len(line.split("\t")) for line in atomic} == {128}
    good_ids = sorted(line.split("\t")[6].lower() for line in read_lines(deduplicated / "good"))
    assert sorted(line.split("\t")[6] for line in atomic) == good_ids

    # One folder per entity type: it holds that type's entities, counted in summary.json, each joined to an event.
    per_type = {}
    ids = set(good_ids)
    for folder in sorted({path.parent for path in good.rglob("part-*")} - {good / atomic_path}):
        parts = dict(part.split("=", 1) for part in folder.relative_to(good).parts)
        version = "{model}-{revision}-{addition}".format(**parts)
        lines = [json.loads(line) for line in read_lines(folder)]
        assert {json.dumps(line["schema"], sort_keys=True) for line in lines} == {
            json.dumps({"vendor": parts["vendor"], "name": parts["name"], "format": "jsonschema", "version": version},
                       sort_keys=True)
        }  # fmt: skip
        assert all(line["hierarchy"]["rootId"] in ids for line in lines)
        per_type["{vendor}/{name}/jsonschema/".format(**parts) + version] = len(lines)
    assert per_type == shred["shredded_types"]
    assert sum(per_type.values()) == shred["entities"]
    assert per_type["com.snowplowanalytics.snowplow/duplicate/jsonschema/1-0-0"] == dedup["synthetic"]["good"]
    # Every good generated event has the web_page and ua_parser contexts.
    assert per_type["com.snowplowanalytics.snowplow/web_page/jsonschema/1-0-0"] == shred["counts"]["good"]

    table = capsys.readouterr().out
    assert table.startswith(f"Winnow run  run {RUN_ID}\n  dedup\n")
    assert "\n  shred\n" in table
    assert f"{shred['counts']['good']:,}" in table
    assert f"  shredded:     {shredded}" in table


def test_a_missing_input_stops_the_pipeline_before_any_output(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["run", "--input", str(tmp_path / "nowhere"), "--output", str(tmp_path / "out"), "--run-id", RUN_ID]) == 2
    )
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: --input: {tmp_path / 'nowhere'} does not exist"
    assert not (tmp_path / "out" / "shredded").exists()


def test_the_dedup_options_reach_the_dedup_step(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Also test_incremental's test_run_incremental_with_nothing_new_writes_neither_step (merged: one `run` proves
    both): `--incremental` is a dedup option too, and a second run with nothing new writes neither step."""
    source = tmp_path / "enriched" / "run=2026-11-22-03-00-00" / "in.tsv"
    source.parent.mkdir(parents=True)
    source.write_text(
        "".join(
            line + "\n"
            for line in (event(ID_A, event_fingerprint="x"), event(ID_A, event_fingerprint="y"), event(ID_B))
        )
    )
    manifest = tmp_path / "manifest.db"
    output = tmp_path / "out"
    argv = ["run", "--input", str(tmp_path / "enriched"), "--output", str(output), "--incremental", "--run-id"]
    assert main([*argv, RUN_ID, "--synthetic", "quarantine", "--manifest", f"sqlite:{manifest}", "--create"]) == 0

    dedup = json.loads((output / "deduplicated" / f"run={RUN_ID}" / "summary.json").read_text())
    shred = json.loads((output / "shredded" / f"run={RUN_ID}" / "summary.json").read_text())
    assert dedup["synthetic"]["strategy"] == "quarantine"
    assert dedup["manifest"]["uri"] == f"sqlite:{manifest}"
    assert manifest.exists()
    assert (dedup["counts"]["quarantined"], dedup["counts"]["good"]) == (2, 1)
    assert shred["counts"] == {"input": 1, "good": 1, "bad": 0}
    # --incremental reached dedup: its ledger entry; and shred sealed its run
    assert (output / "deduplicated" / "_ledger" / f"{1:020d}.json").exists()
    assert (output / "shredded" / f"run={RUN_ID}" / "_SUCCESS").exists()

    capsys.readouterr()
    later = "2026-11-22-05-00-00"
    assert main([*argv, later, "--synthetic", "quarantine", "--manifest", f"sqlite:{manifest}"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert not (output / "deduplicated" / f"run={later}").exists()
    assert not (output / "shredded" / f"run={later}").exists()


def test_a_failed_run_is_named_once_in_its_line(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Attack 6 noticed `error: run run ID failed, …`: the job's name and "run" said twice for the `run` job."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part-0.tsv").write_text(event(ID_A) + "\n")

    def failing(*_: object, **__: object) -> None:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(RunFolder, "write_text_split", failing)
    assert main(["run", "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out"), "--run-id", RUN_ID]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: run {RUN_ID} failed, no _SUCCESS written: RuntimeError: the disk went away (run with --debug for "
        "the traceback)"
    )
