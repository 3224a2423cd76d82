"""dedup's bad rows: Snowplow's `loader_parsing_error` 2-0-0 by default (the rows shred's rdb layout writes, so one
bad-rows table serves both jobs), the legacy `{line, errors, failure_tstamp}` shape with `--layout legacy`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from pyspark.sql import SparkSession

from jobs import __version__
from jobs.config import DedupConfig, Layout
from jobs.dedup.inbatch import apply_decisions, decision_rows, with_row_ids
from jobs.enriched.badrows import PARSING_ERROR_SCHEMA
from jobs.enriched.fields import DEFAULT_FINGERPRINT_FIELDS, FIELD_COUNT
from jobs.enriched.parse import parse_events
from jobs.frames import local_frame
from jobs.shred.lines import rdb_outputs, shred_events
from tests.pipeline.helpers import ID_A, ID_B, RUN_ID, event, read_lines, run_folder_content

RUN_TIME = datetime(2026, 11, 22, 3, tzinfo=UTC)  # the run time of RUN_ID
DATA = Path(__file__).resolve().parent.parent / "data"
BADROWS_SCHEMA = json.loads(
    (DATA / "iglu/com.snowplowanalytics.snowplow.badrows/loader_parsing_error/jsonschema/2-0-0").read_text()
)
PROCESSOR = {"artifact": "winnow-dedup", "version": __version__}
NOT_AN_ENVELOPE = (
    'derived_contexts is neither empty nor a contexts envelope {"schema":…,"data":[…]}, so the duplicate context of '
    "this synthetic duplicate cannot be added (dedup.synthetic reid)"
)

# One line per way dedup rejects a line (the messages of jobs/enriched/parse.py), valid but for that.
BROKEN = {
    "empty line": "",
    "no tab": "not an event",
    "too few fields": "a\tb\tc",
    "one field too many": event(ID_A) + "\textra",
    "empty event_id": event(""),
    "event_id not a UUID": event("nope"),
    "empty collector_tstamp": event(ID_A, collector_tstamp=""),
    "collector_tstamp not a time": event(ID_A, collector_tstamp="yesterday"),
    "etl_tstamp not a day": event(ID_A, etl_tstamp="2026-02-30 00:00:00"),
    "empty v_collector": event(ID_A, v_collector=""),
    "empty v_etl": event(ID_A, v_etl=""),
    "several values": event("nope", collector_tstamp="", v_etl=""),
}
# reid cannot add the duplicate context to a synthetic copy whose derived_contexts is not an envelope.
NOT_REIDENTIFIED = event(ID_B, event_fingerprint="fp-1", derived_contexts="not json")
ITS_SYNTHETIC_COPY = event(ID_B, event_fingerprint="fp-2")


def bad_texts(spark: SparkSession, lines: list[str], layout: Layout) -> list[str]:
    """The text of every line dedup (in-batch, reid) decides bad, as `apply_decisions` writes it."""
    frame = with_row_ids(local_frame(spark, [(line,) for line in lines], "value string"))
    decisions = decision_rows(frame, "reid", DEFAULT_FINGERPRINT_FIELDS)
    rows = apply_decisions(frame, decisions, "reid", RUN_TIME, layout).where("outcome = 'bad'").collect()
    return sorted(row["text"] for row in rows)


@pytest.fixture(scope="module")
def rdb_rows(spark: SparkSession) -> dict[str, dict[str, Any]]:
    """dedup's bad row of every broken line (and of the copy reid cannot re-identify), parsed, by payload."""
    texts = bad_texts(spark, [*BROKEN.values(), NOT_REIDENTIFIED, ITS_SYNTHETIC_COPY], "rdb")
    rows = [json.loads(text) for text in texts]
    return {row["data"]["payload"]: row for row in rows}


def test_every_kind_of_failure_is_one_bad_row_the_badrows_schema_accepts(rdb_rows: dict[str, Any]) -> None:
    assert sorted(rdb_rows) == sorted([*BROKEN.values(), NOT_REIDENTIFIED])
    for row in rdb_rows.values():
        assert row["schema"] == PARSING_ERROR_SCHEMA
        jsonschema.Draft4Validator(BADROWS_SCHEMA).validate(row["data"])
        assert row["data"]["processor"] == PROCESSOR


def error(key: str, value: str, message: str) -> dict[str, str]:
    return {"type": "InvalidValue", "key": key, "value": value, "message": message}


def test_each_failure_is_what_the_sdk_reports(rdb_rows: dict[str, Any]) -> None:
    failures = {name: dict(rdb_rows[line]["data"]["failure"]) for name, line in BROKEN.items()}  # popped below
    decoding = {name: failure.pop("errors") for name, failure in failures.items() if "errors" in failure}
    assert failures == {
        "empty line": {"type": "NotTSV"},
        "no tab": {"type": "NotTSV"},
        "too few fields": {"type": "FieldNumberMismatch", "fieldCount": 3},
        "one field too many": {"type": "FieldNumberMismatch", "fieldCount": FIELD_COUNT + 1},
        **{name: {"type": "RowDecodingError"} for name in decoding},
    }
    assert decoding == {
        "empty event_id": [error("event_id", "", "Field event_id cannot be empty")],
        "event_id not a UUID": [error("event_id", "nope", "Cannot parse key event_id into UUID")],
        "empty collector_tstamp": [error("collector_tstamp", "", "Field collector_tstamp cannot be empty")],
        "collector_tstamp not a time": [
            error("collector_tstamp", "yesterday", "Cannot parse key collector_tstamp into datetime")
        ],
        "etl_tstamp not a day": [
            error("etl_tstamp", "2026-02-30 00:00:00", "Cannot parse key etl_tstamp into datetime")
        ],
        "empty v_collector": [error("v_collector", "", "Field v_collector cannot be empty")],
        "empty v_etl": [error("v_etl", "", "Field v_etl cannot be empty")],
        "several values": [  # in field order, as the SDK lists them
            error("collector_tstamp", "", "Field collector_tstamp cannot be empty"),
            error("event_id", "nope", "Cannot parse key event_id into UUID"),
            error("v_etl", "", "Field v_etl cannot be empty"),
        ],
    }


def test_exact_rows_of_representative_lines(spark: SparkSession) -> None:
    """The whole text, as written: key order, escapes, the failure's own keys only."""
    texts = bad_texts(spark, ["a\tb\tc", event("nope"), NOT_REIDENTIFIED, ITS_SYNTHETIC_COPY, "x"], "rdb")
    head = f'{{"schema":"{PARSING_ERROR_SCHEMA}","data":{{"processor":{{"artifact":"winnow-dedup","version":"{__version__}"}}'
    nope = json.dumps(event("nope"))
    not_reidentified = json.dumps(NOT_REIDENTIFIED)
    assert texts == sorted([
        f'{head},"failure":{{"type":"FieldNumberMismatch","fieldCount":3}},"payload":"a\\tb\\tc"}}}}',
        f'{head},"failure":{{"type":"NotTSV"}},"payload":"x"}}}}',
        f'{head},"failure":{{"type":"RowDecodingError","errors":[{{"type":"InvalidValue","key":"event_id",'
        f'"value":"nope","message":"Cannot parse key event_id into UUID"}}]}},"payload":{nope}}}}}',
        f'{head},"failure":{{"type":"RowDecodingError","errors":[{{"type":"InvalidValue","key":"derived_contexts",'
        f'"value":"not json","message":{json.dumps(NOT_AN_ENVELOPE, ensure_ascii=False)}}}]}},'
        f'"payload":{not_reidentified}}}}}',
    ])  # fmt: skip


def test_the_legacy_layout_keeps_the_lines_errors_and_failure_tstamp(spark: SparkSession) -> None:
    texts = bad_texts(spark, ["a\tb\tc", event("nope", v_etl=""), NOT_REIDENTIFIED, ITS_SYNTHETIC_COPY], "legacy")
    tail = '"failure_tstamp":"2026-11-22T03:00:00.000Z"}'

    def row(line: str, *messages: str) -> str:
        errors = ",".join('{"level":"error","message":' + json.dumps(m, ensure_ascii=False) + "}" for m in messages)
        return '{"line":' + json.dumps(line) + ',"errors":[' + errors + "]," + tail

    assert texts == sorted([
        row("a\tb\tc", "expected 131 tab-separated fields, found 3"),
        row(event("nope", v_etl=""), "event_id 'nope' is not a UUID", "v_etl is empty"),
        row(NOT_REIDENTIFIED, 'derived_contexts is not a contexts envelope {"schema":…,"data":[…]}, so the duplicate '
            "context of this synthetic duplicate cannot be added: 'not json'"),
    ])  # fmt: skip


def shred_rows(spark: SparkSession, lines: list[str]) -> dict[str, dict[str, Any]]:
    """shred's (rdb layout) bad rows of `lines`, parsed, by payload."""
    source = local_frame(spark, [(line,) for line in lines], "value string")
    parsed = parse_events(source, DedupConfig().fingerprint_fields).select(
        "line", "errors", "event_id", "collector_tstamp"
    )
    rows = rdb_outputs(shred_events(parsed, "rdb")).where("folder LIKE 'output=bad/%'").collect()
    return {row["data"]["payload"]: row for row in (json.loads(r["text"]) for r in rows)}


def test_dedup_and_shred_write_the_same_bad_row_for_the_same_broken_line(
    spark: SparkSession, rdb_rows: dict[str, Any]
) -> None:
    """One table serves both jobs: the same schema, failure and payload; only the processor tells them apart."""
    theirs = shred_rows(spark, list(BROKEN.values()))
    assert sorted(theirs) == sorted(BROKEN.values())
    for line, row in theirs.items():
        ours = rdb_rows[line]
        assert (ours["schema"], ours["data"]["failure"]) == (row["schema"], row["data"]["failure"]), line
        assert (ours["data"]["processor"], row["data"]["processor"]) == (
            PROCESSOR,
            {"artifact": "winnow", "version": __version__},
        )


def dedup(input_path: Path, output: Path, *extra: str) -> Path:
    from jobs.runtime.cli import main

    assert main(["dedup", "--input", str(input_path), "--output", str(output), "--run-id", RUN_ID, *extra]) == 0
    return output / f"run={RUN_ID}"


def test_the_job_writes_badrows_by_default_and_legacy_rows_with_the_option(spark: SparkSession, tmp_path: Path) -> None:
    """Either way every bad line is one row of bad/, counted as before; the rest of the run is the same."""
    source = tmp_path / "in"
    source.mkdir()
    lines = [*BROKEN.values(), event(ID_A), NOT_REIDENTIFIED, ITS_SYNTHETIC_COPY]
    (source / "events.tsv").write_text("".join(f"{line}\n" for line in lines))
    rdb, legacy = dedup(source, tmp_path / "rdb"), dedup(source, tmp_path / "legacy", "--layout", "legacy")

    summaries = [json.loads((run / "summary.json").read_text()) for run in (rdb, legacy)]
    assert [summary["layout"] for summary in summaries] == ["rdb", "legacy"]
    assert summaries[0]["counts"] == summaries[1]["counts"] == {
        "input": 15, "good": 2, "bad": 13, "duplicates": 0, "quarantined": 0, "dropped": 0,
    }  # fmt: skip
    bad_lines = sorted([*BROKEN.values(), NOT_REIDENTIFIED])
    ours = [json.loads(text) for text in read_lines(rdb / "bad")]
    assert sorted(row["data"]["payload"] for row in ours) == bad_lines
    for row in ours:
        jsonschema.Draft4Validator(BADROWS_SCHEMA).validate(row["data"])
    assert sorted(json.loads(text)["line"] for text in read_lines(legacy / "bad")) == bad_lines
    rdb_content, legacy_content = run_folder_content(rdb), run_folder_content(legacy)
    assert {**rdb_content, "bad": []} == {**legacy_content, "bad": []}
