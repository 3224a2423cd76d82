"""The jobs' outputs on a fixed generated input, line for line as recorded in `tests/data/fixed-outputs.json`.

A change made to speed a job up must leave every output line as it was: this test fails naming each output
folder whose lines changed. After a change meant to alter outputs (or the generator), record them again with
`WINNOW_RECORD_FIXED_OUTPUTS=1 pytest tests/pipeline/test_fixed_outputs.py` and say why in the commit.
The lines are the same whether Spark compiles the plans (an input over `spark.small_input_mb`) or interprets them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.runtime.cli import main
from jobs.runtime.session import SMALL_INPUT_CONF
from jobs.tools.generate import GenerateOptions, generate
from tests.pipeline.helpers import (
    ID_A,
    ID_B,
    ID_C,
    LINK_CLICK,
    RUN_ID,
    SP_WEB_PAGE,
    UA_PARSER,
    contexts,
    event,
    read_lines,
    resolver_config,
    unstruct,
)

RECORDED = Path(__file__).resolve().parent.parent / "data" / "fixed-outputs.json"
RECORD = "WINNOW_RECORD_FIXED_OUTPUTS"
# Enough copies and bad lines that every outcome and reason has lines (the generator's defaults have few).
INPUT = GenerateOptions(events=3000, seed=2026, files=3, duplicate_share=0.2, bad_share=0.01)
# dedup's default (rdb) bad/ holds loader_parsing_error rows; `--layout legacy` must write the rows recorded before
# that default came (the legacy entry is those lines), and everything else as the default does.
DEDUPS = {"dedup": (), "dedup-legacy": ("--layout", "legacy")}
SHREDS = {
    "shred": ("--layout", "rdb"),
    "shred-tsv": ("--layout", "rdb", "--format", "shred-tsv"),
    "shred-legacy": ("--layout", "legacy"),
    "shred-parquet-typed": ("--layout", "rdb", "--format", "widerow-parquet"),
}
# Entities whose data does not fit their typed Parquet columns (each event a loader_iglu_error row there), one beside
# data that fits: the generator writes only data that fits.
MISFITS = [
    event(ID_A, event="unstruct", unstruct_event=unstruct(LINK_CLICK.replace('"nav"', "7"))),
    event(ID_B, contexts=contexts(SP_WEB_PAGE, SP_WEB_PAGE.replace('"p-1"', "null"))),
    event(ID_C, contexts=contexts(UA_PARSER.replace('"120"', '["120"]'), SP_WEB_PAGE)),
]


# Spark's own settings for the keys a small input's session sets (an input over spark.small_input_mb runs with them).
COMPILED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}


@contextmanager
def plans(spark: SparkSession, compiled: bool) -> Iterator[None]:
    """The test session's plans compiled (Spark's defaults, as for a big input) or interpreted (as for a small one)."""
    assert set(COMPILED) == set(SMALL_INPUT_CONF)
    before = {key: str(spark.conf.get(key)) for key in COMPILED}
    for key, setting in (COMPILED if compiled else SMALL_INPUT_CONF).items():
        spark.conf.set(key, setting)
    try:
        yield
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)


def digest(run: Path, spark: SparkSession) -> dict[str, dict[str, object]]:
    """Per data folder of a run: how many lines, and the SHA-256 of its lines sorted (file order aside). A Parquet
    folder's lines are its schema, then each row as JSON."""
    return {
        folder: {
            "lines": len(lines),
            "sha256": hashlib.sha256("".join(f"{line}\n" for line in lines).encode()).hexdigest(),
        }
        for folder, lines in data_lines(run, spark).items()
    }


def data_lines(run: Path, spark: SparkSession) -> dict[str, list[str]]:
    """Lines per data folder under the run folder; a Parquet folder's: its schema, then its rows as JSON, sorted."""
    lines = {}
    for folder in sorted({path.parent for path in run.rglob("part-*")}):
        if any(folder.glob("part-*.parquet")):
            frame = spark.read.parquet(str(folder))
            rows = sorted(row[0] for row in frame.select(F.to_json(F.struct("*"))).collect())
            lines[folder.relative_to(run).as_posix()] = [frame.schema.simpleString(), *rows]
        else:
            lines[folder.relative_to(run).as_posix()] = read_lines(folder)
    return lines


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "interpreted"])
def test_the_jobs_write_the_recorded_lines_for_a_fixed_input(
    spark: SparkSession, tmp_path: Path, compiled: bool
) -> None:
    with plans(spark, compiled):
        outputs = outputs_of_every_job(spark, tmp_path)
    if os.environ.get(RECORD) == "1":
        RECORDED.write_text(json.dumps(outputs, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        pytest.skip(f"recorded {RECORDED}")
    # Compared whole: pytest names each job and folder whose figures differ.
    assert outputs == json.loads(RECORDED.read_text(encoding="utf-8"))
    # Every outcome the input should exercise is there: the test would say little on a trivial input.
    assert {"good", "bad", "duplicates/reason=in_batch_natural"} <= set(outputs["dedup"])
    assert {**outputs["dedup"], "bad": None} == {**outputs["dedup-legacy"], "bad": None}
    for name in ("shred", "shred-tsv", "shred-parquet-typed"):
        assert any(folder.split("/")[0] == "output=bad" for folder in outputs[name]), name
    # Typed Parquet's bad rows: the input's unparseable lines, and each of MISFITS.
    (parsing_errors,) = (figures["lines"] for folder, figures in outputs["shred"].items() if "output=bad/" in folder)
    assert outputs["shred-parquet-typed"]["output=bad"]["lines"] == cast(int, parsing_errors) + len(MISFITS)
    assert any("/format=tsv/" in folder and "name=atomic" not in folder for folder in outputs["shred-tsv"])


def outputs_of_every_job(spark: SparkSession, tmp_path: Path) -> dict[str, dict[str, dict[str, object]]]:
    """Each job's run on the fixed input (`INPUT`; typed Parquet's with MISFITS too): its data folders' digests."""
    generate(tmp_path / "in", INPUT)
    outputs = {}
    for name, options in DEDUPS.items():
        out = tmp_path / name
        assert main(["dedup", "--input", str(tmp_path / "in"), "--output", str(out), "--run-id", RUN_ID, *options]) == 0
        outputs[name] = digest(out / f"run={RUN_ID}", spark)
    iglu = str(resolver_config(tmp_path))
    misfits = tmp_path / "in-misfits"  # the input and MISFITS, for typed Parquet
    shutil.copytree(tmp_path / "in", misfits)
    (misfits / "misfits.tsv").write_text("".join(f"{line}\n" for line in MISFITS), encoding="utf-8")
    for name, options in SHREDS.items():
        out, source = tmp_path / name, misfits if "widerow-parquet" in options else tmp_path / "in"
        argv = ["shred", "--input", str(source), "--output", str(out), "--run-id", RUN_ID, *options]
        typed = {"shred-tsv", "widerow-parquet"} & set(options)
        assert main([*argv, "--iglu-config", iglu] if typed else argv) == 0
        outputs[name] = digest(out / f"run={RUN_ID}", spark)
    return outputs
