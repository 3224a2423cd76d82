"""The jobs' large column expressions are built once per process (docs/concepts.md "Expressions built once"): a run
with other settings in the same process must still write exactly what it writes with nothing built before it."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession

from jobs.dedup import inbatch
from jobs.enriched import parse
from jobs.runtime.cli import main
from jobs.shred import lines as shred_lines
from tests.pipeline.helpers import ID_A, ID_B, ID_C, RUN_ID, event, write_lines, written

# Every builder cached by its arguments; cleared, the next run builds its expressions as a fresh process would.
BUILDERS = (
    parse._parse_columns,
    parse._narrow_columns,
    inbatch._decide,
    inbatch._rdb_bad_rows,
    inbatch._line_columns,
    shred_lines._decision_columns,
    shred_lines._entity_columns,
    shred_lines._own_text_of,
)
ID_D = "d0000000-0000-4000-8000-000000000004"
# Each setting decides these lines differently: a natural copy; synthetic copies (one whose derived_contexts reid
# cannot take the duplicate context); lines without a fingerprint that differ in page_title (hashed by default, not
# with FINGERPRINT_FIELDS) or in geo_city (the other way round); a bad line.
LINES = [
    event(ID_A),
    event(ID_A),
    event(ID_B, event_fingerprint="fp-b1", derived_contexts="not json"),
    event(ID_B, event_fingerprint="fp-b2", collector_tstamp="2026-11-01 10:00:01.000"),
    event(ID_C, event_fingerprint="", page_title="x"),
    event(ID_C, event_fingerprint="", page_title="y"),
    event(ID_D, event_fingerprint="", geo_city="Paris"),
    event(ID_D, event_fingerprint="", geo_city="Lyon"),
    "not\tan\tevent",
]
FINGERPRINT_FIELDS = ["app_id", "geo_city"]
A = ("--synthetic", "reid", "--layout", "rdb")
B = ("--synthetic", "keep-last", "--layout", "legacy")


def dedup(tmp_path: Path, name: str, settings: tuple[str, ...]) -> tuple[dict[str, list[str]], object]:
    """The lines of every output folder of a dedup run of LINES with `settings`, and its summary's counts."""
    config = tmp_path / "fingerprint.json"
    config.write_text(json.dumps({"dedup": {"fingerprint_fields": FINGERPRINT_FIELDS}}), encoding="utf-8")
    options = (*settings, "--config", str(config)) if settings is B else settings
    out = tmp_path / name
    argv = ["dedup", "--input", str(tmp_path / "in"), "--output", str(out), "--run-id", RUN_ID, *options]
    assert main(argv) == 0
    run = out / f"run={RUN_ID}"
    return written(run), json.loads((run / "summary.json").read_text(encoding="utf-8"))["counts"]


def clear_built_expressions() -> None:
    for builder in BUILDERS:
        builder.cache_clear()


def test_runs_with_other_settings_in_one_process_write_what_a_fresh_process_writes(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_lines(tmp_path / "in" / "part-0.tsv", LINES)
    clear_built_expressions()
    a_first = dedup(tmp_path, "a-first", A)  # built from nothing
    b_after_a = dedup(tmp_path, "b-after-a", B)
    a_after_b = dedup(tmp_path, "a-after-b", A)
    clear_built_expressions()
    b_first = dedup(tmp_path, "b-first", B)
    assert a_after_b == a_first
    assert b_after_a == b_first
    # The settings do decide these lines differently, so a leak would show.
    assert a_first[1] == {"input": 9, "good": 5, "bad": 2, "duplicates": 2, "quarantined": 0, "dropped": 0}
    assert b_first[1] == {"input": 9, "good": 4, "bad": 1, "duplicates": 4, "quarantined": 0, "dropped": 0}
    assert set(b_first[0]) - set(a_first[0]) == {"duplicates/reason=in_batch_synthetic"}
    assert b_first[0]["bad"][0].startswith('{"line":"not\\tan\\tevent"')  # legacy bad rows
