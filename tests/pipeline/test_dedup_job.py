"""The dedup job end to end through the command line: outputs, accounting, reruns, determinism, errors."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.enriched.badrows import PARSING_ERROR_SCHEMA
from jobs.runtime.cli import main
from jobs.tools.generate import GenerateOptions, generate
from tests.pipeline.helpers import ID_A, ID_B, event, fields_of, read_lines, run_folder_content, spark_conf

RUN_ID = "2026-11-22-03-00-00"


def dedup(input_path: Path, output: Path, *extra: str) -> int:
    return main(["dedup", "--input", str(input_path), "--output", str(output), "--run-id", RUN_ID, *extra])


GENERATED = GenerateOptions(events=3000, seed=11, files=3, duplicate_share=0.05, bad_share=0.01)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("generated")
    generate(folder, GENERATED)
    return folder


@pytest.fixture(scope="module")
def generated_run(spark: SparkSession, generated: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output folder of one dedup run of `generated`, done once: tests read or copy it, never change it."""
    output = tmp_path_factory.mktemp("generated-run")
    assert dedup(generated, output) == 0
    return output


def test_every_input_line_is_accounted_for_in_the_outputs(generated: Path, generated_run: Path) -> None:
    run = generated_run / f"run={RUN_ID}"
    summary = json.loads((run / "summary.json").read_text())
    content = run_folder_content(run)
    counts = summary["counts"]

    assert (run / "_SUCCESS").exists()
    assert counts["input"] == len(read_lines(generated)) == 3000
    assert (
        counts["input"]
        == counts["good"] + counts["bad"] + counts["duplicates"] + counts["quarantined"] + counts["dropped"]
    )
    assert len(content["good"]) == counts["good"]
    assert len(content["bad"]) == counts["bad"]
    assert len(content["duplicates"]) == counts["duplicates"] + counts["dropped"]
    assert len(content["quarantine"]) == counts["quarantined"]
    assert counts["bad"] > 0 and counts["duplicates"] > 0 and summary["synthetic"]["events"] > 0
    assert sum(summary["by_reason"]["duplicates"].values()) == counts["duplicates"]
    # Each duplicate reason has its own folder.
    for reason, count in summary["by_reason"]["duplicates"].items():
        assert len(read_lines(run / "duplicates" / f"reason={reason}")) == count
    # Every bad row is a loader_parsing_error bad row (the rdb layout, the default) that quotes its input line.
    for text in content["bad"]:
        row = json.loads(text)
        assert row["schema"] == PARSING_ERROR_SCHEMA and set(row["data"]) == {"processor", "failure", "payload"}
    # good/ holds unique event ids (reid gave synthetic copies new ones).
    ids = [line.split("\t")[6].lower() for line in content["good"]]
    assert len(ids) == len(set(ids))


def test_a_rerun_with_the_same_run_id_replaces_the_folder_with_identical_content(
    spark: SparkSession, generated: Path, generated_run: Path, tmp_path: Path
) -> None:
    shutil.copytree(generated_run, tmp_path, dirs_exist_ok=True)  # the first run (done once, copied)
    run = tmp_path / f"run={RUN_ID}"
    first = run_folder_content(run)
    first_counts = json.loads((run / "summary.json").read_text())["counts"]
    (run / "good" / "stale-part-from-a-failed-attempt.txt").write_text("stale\n")
    assert dedup(generated, tmp_path) == 0
    assert run_folder_content(run) == first
    assert json.loads((run / "summary.json").read_text())["counts"] == first_counts


def test_output_does_not_depend_on_file_order_or_partitioning(
    spark: SparkSession, generated: Path, generated_run: Path, tmp_path: Path
) -> None:
    """The generated lines (3 files, in order, the session's partitioning: the run done once) against the same
    lines shuffled into 7 files, read in 64 KiB splits and shuffled into 7 partitions."""
    lines = read_lines(generated)
    many_files = tmp_path / "many"
    many_files.mkdir()
    shuffled = lines[:]
    random.Random(5).shuffle(shuffled)
    for i in range(7):
        (many_files / f"{i:02d}.tsv").write_text("\n".join(shuffled[i::7]) + "\n")

    with spark_conf(spark, **{"spark.sql.shuffle.partitions": "7", "spark.sql.files.maxPartitionBytes": "65536",
                              "spark.sql.adaptive.enabled": "false"}):  # fmt: skip
        assert dedup(many_files, tmp_path / "out-many") == 0
    assert run_folder_content(generated_run / f"run={RUN_ID}") == run_folder_content(
        tmp_path / "out-many" / f"run={RUN_ID}"
    )


def test_gzip_input_and_output(spark: SparkSession, generated_run: Path, tmp_path: Path) -> None:
    """The lines of `generated` gzipped in, gzipped out: the same content as the plain run (done once)."""
    zipped = tmp_path / "zipped"
    generate(zipped, dataclasses.replace(GENERATED, gzip=True))
    assert list(zipped.glob("*.tsv.gz"))
    config = tmp_path / "gzip.json"
    config.write_text('{"output": {"compression": "gzip"}}')
    assert dedup(zipped, tmp_path / "out-zipped", "--config", str(config)) == 0
    assert list((tmp_path / "out-zipped" / f"run={RUN_ID}" / "good").glob("*.gz"))
    assert run_folder_content(generated_run / f"run={RUN_ID}") == run_folder_content(
        tmp_path / "out-zipped" / f"run={RUN_ID}"
    )


def test_quarantine_strategy_from_the_command_line(spark: SparkSession, generated: Path, tmp_path: Path) -> None:
    assert dedup(generated, tmp_path, "--synthetic", "quarantine") == 0
    run = tmp_path / f"run={RUN_ID}"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["synthetic"]["strategy"] == "quarantine"
    assert (
        summary["counts"]["quarantined"]
        == summary["synthetic"]["quarantined"]
        == len(read_lines(run / "quarantine"))
        > 0
    )
    quarantined_ids = {line.split("\t")[6].lower() for line in read_lines(run / "quarantine")}
    good_ids = {line.split("\t")[6].lower() for line in read_lines(run / "good")}
    assert not quarantined_ids & good_ids


def test_a_missing_input_is_a_clear_error(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert dedup(tmp_path / "nowhere", tmp_path / "out") == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: --input: {tmp_path / 'nowhere'} does not exist"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            '{"dedup": {"synthetic": "maybe"}}',
            'dedup.synthetic: given "maybe"; allowed: reid, quarantine, keep-first, keep-last, drop, off',
        ),
        ('{"dedupe": {}}', "unknown key 'dedupe'; allowed keys: dedup, input, manifest, output, shred, spark"),
        ("{not json", "is not valid JSON"),
    ],
)
def test_config_errors_stop_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, config: str, message: str
) -> None:
    from jobs.runtime import session

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "spark_session", refuse)  # in this process: Spark's start refused
    path = tmp_path / "config.json"
    path.write_text(config)
    code = main(["dedup", "--input", str(tmp_path), "--output", str(tmp_path / "out"), "--config", str(path)])
    stderr = capsys.readouterr().err
    assert code == 2
    assert stderr.startswith(f"error: {path}: ") or stderr.startswith(f"error: config file {path}")
    assert message in stderr
    assert "Spark" not in stderr  # no "starting Spark" phase line either


def test_a_bad_run_id_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dedup", "--input", str(tmp_path), "--output", str(tmp_path), "--run-id", "2026-11-22"]) == 2
    assert "--run-id: given '2026-11-22'; allowed: YYYY-MM-DD-HH-MM-SS" in capsys.readouterr().err


def test_an_event_id_ending_in_a_line_terminator_is_bad_not_given_an_empty_id(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Java's `$` matches before a final line terminator, so `UUID_PATTERN` took "UUID" + U+2028 (or U+0085) as a UUID:
    the line was good, and reid's UUIDv5 (of the id's hex, unhex gives null) gave both synthetic copies the event_id
    "" in good/ (two events, one empty id; shred then makes both bad rows). Such an id is not a UUID: a bad line."""
    odd = ID_B[:-1] + "2\u2028"
    lines = [
        event(odd, event_fingerprint="fp-1"),
        event(odd, event_fingerprint="fp-2"),
        event(ID_B + "\u0085"),
        event(ID_A),
    ]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "part-1.tsv").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert dedup(tmp_path / "in", tmp_path / "out", "--synthetic", "reid") == 0

    run = tmp_path / "out" / f"run={RUN_ID}"
    counts = json.loads((run / "summary.json").read_text())["counts"]
    # Split on "\n" only: `splitlines` would split the ids' U+2028 too.
    good = [line for part in sorted((run / "good").glob("part-*")) for line in part.read_text().split("\n") if line]
    assert [fields_of(line)["event_id"] for line in good] == [ID_A]
    assert (counts["input"], counts["good"], counts["bad"]) == (4, 1, 3)
