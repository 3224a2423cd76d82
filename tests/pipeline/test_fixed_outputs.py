"""The jobs' outputs on a fixed generated input, line for line as recorded in `tests/data/fixed-outputs.json`.

A change made to speed a job up must leave every output line as it was: this test fails naming each output
folder whose lines changed. After a change meant to alter outputs (or the generator), record them again with
`WINNOW_RECORD_FIXED_OUTPUTS=1 pytest tests/pipeline/test_fixed_outputs.py` and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.runtime.cli import main
from jobs.tools.generate import GenerateOptions, generate
from tests.pipeline.helpers import RUN_ID, resolver_config, written

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
}


def digest(run: Path) -> dict[str, dict[str, object]]:
    """Per data folder of a run: how many lines, and the SHA-256 of its lines sorted (file order aside)."""
    return {
        folder: {
            "lines": len(lines),
            "sha256": hashlib.sha256("".join(f"{line}\n" for line in lines).encode()).hexdigest(),
        }
        for folder, lines in written(run).items()
    }


def test_the_jobs_write_the_recorded_lines_for_a_fixed_input(spark: SparkSession, tmp_path: Path) -> None:
    generate(tmp_path / "in", INPUT)
    outputs = {}
    for name, options in DEDUPS.items():
        out = tmp_path / name
        assert main(["dedup", "--input", str(tmp_path / "in"), "--output", str(out), "--run-id", RUN_ID, *options]) == 0
        outputs[name] = digest(out / f"run={RUN_ID}")
    iglu = str(resolver_config(tmp_path))
    for name, options in SHREDS.items():
        out = tmp_path / name
        argv = ["shred", "--input", str(tmp_path / "in"), "--output", str(out), "--run-id", RUN_ID, *options]
        assert main([*argv, "--iglu-config", iglu] if "shred-tsv" in options else argv) == 0
        outputs[name] = digest(out / f"run={RUN_ID}")

    if os.environ.get(RECORD) == "1":
        RECORDED.write_text(json.dumps(outputs, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        pytest.skip(f"recorded {RECORDED}")
    # Compared whole: pytest names each job and folder whose figures differ.
    assert outputs == json.loads(RECORDED.read_text(encoding="utf-8"))
    # Every outcome the input should exercise is there: the test would say little on a trivial input.
    assert {"good", "bad", "duplicates/reason=in_batch_natural"} <= set(outputs["dedup"])
    assert {**outputs["dedup"], "bad": None} == {**outputs["dedup-legacy"], "bad": None}
    for name in ("shred", "shred-tsv"):
        assert any(folder.startswith("output=bad/") for folder in outputs[name]), name
    assert any("/format=tsv/" in folder and "name=atomic" not in folder for folder in outputs["shred-tsv"])
