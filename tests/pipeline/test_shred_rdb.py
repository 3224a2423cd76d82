"""The rdb layout against Snowplow's own transformer tests, and what a run hands to RDB Loader.

`tests/data/upstream/shred/specs.json` holds the input lines and expected outputs of snowplow-rdb-loader's
transformer-batch good and bad shredding specs (LinkClickEventSpec, WebsitePageContextSpec, ...), taken
from the Scala sources at the commit it names: same folders, same lines (JSON compared as parsed).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from pyspark.sql import SparkSession

from jobs.config import DedupConfig
from jobs.enriched.parse import parse_events
from jobs.frames import local_frame
from jobs.runtime.cli import main
from jobs.shred import rdb
from jobs.shred.entities import ATOMIC_FIELDS
from jobs.shred.lines import rdb_outputs, shred_events
from tests.pipeline.helpers import (
    ID_A,
    ID_B,
    ID_C,
    LINK_CLICK,
    RUN_ID,
    WEB_PAGE,
    contexts,
    event,
    numbered_id,
    read_lines,
    shred,
    unstruct,
)

DATA = Path(__file__).resolve().parent.parent / "data"
SPECS: dict[str, dict[str, Any]] = json.loads((DATA / "upstream" / "shred" / "specs.json").read_text())["specs"]
MESSAGE_SCHEMA = json.loads(
    (DATA / "iglu/com.snowplowanalytics.snowplow.storage/shredding_complete/jsonschema/2-0-1").read_text()
)
ATOMIC = f"{rdb.GOOD}/{rdb.ATOMIC_PATH}"
PARSING_ERRORS = f"{rdb.BAD}/{rdb.PARSING_ERROR_PATH}"


def outputs(spark: SparkSession, lines: list[str]) -> dict[str, list[str]]:
    """The rdb output lines of `lines`, per folder under the run folder (the job's functions, nothing written)."""
    source = local_frame(spark, [(line,) for line in lines], "value string")
    parsed = parse_events(source, DedupConfig().fingerprint_fields).select(
        "line", "errors", "event_id", "collector_tstamp"
    )
    found: dict[str, list[str]] = {}
    for row in rdb_outputs(shred_events(parsed, "rdb")).collect():
        found.setdefault(row["folder"], []).append(row["text"])
    return {folder: sorted(texts) for folder, texts in found.items()}


def as_parsed(lines: list[str]) -> list[Any]:
    return sorted((json.loads(line) for line in lines), key=json.dumps)


def our_processor(bad_row: dict[str, Any]) -> dict[str, Any]:
    """Upstream's expected bad row with our processor in place of snowplow-transformer-batch."""
    from jobs import __version__

    data = {**bad_row["data"], "processor": {"artifact": "winnow", "version": __version__}}
    return {**bad_row, "data": data}


GOOD_SPECS = [name for name, spec in SPECS.items() if spec["good"]]
ALL_INPUT = [line for spec in SPECS.values() for line in spec["input"]]


@pytest.fixture(scope="module")
def upstream(spark: SparkSession) -> dict[str, list[str]]:
    """The output lines of every spec's input, in one Spark job (each spec's lines are then looked up in it)."""
    return outputs(spark, ALL_INPUT)


def test_all_specs_together_give_exactly_upstream_lines(upstream: dict[str, list[str]]) -> None:
    expected: dict[str, list[str]] = {}
    for spec in SPECS.values():
        for path, lines in spec["good"].items():
            expected.setdefault(f"{rdb.GOOD}/{path}", []).extend(lines)
        expected.setdefault(PARSING_ERRORS, []).extend(json.dumps(our_processor(row)) for row in spec["bad"])

    assert sorted(upstream) == sorted(expected)
    assert upstream[ATOMIC] == sorted(expected[ATOMIC])  # TSV: compared as text
    for folder in expected.keys() - {ATOMIC, PARSING_ERRORS}:
        assert as_parsed(upstream[folder]) == as_parsed(expected[folder])
    assert len(upstream[PARSING_ERRORS]) == len(expected[PARSING_ERRORS])


@pytest.mark.parametrize("name", GOOD_SPECS)
def test_good_events_as_upstream_shreds_them(upstream: dict[str, list[str]], name: str) -> None:
    for path, lines in SPECS[name]["good"].items():
        found = upstream[f"{rdb.GOOD}/{path}"]
        for line in lines:
            assert line in found if path == rdb.ATOMIC_PATH else json.loads(line) in as_parsed(found)


def bad_rows_of(upstream: dict[str, list[str]], name: str) -> list[dict[str, Any]]:
    payloads = SPECS[name]["input"]
    rows = [json.loads(text) for text in upstream[PARSING_ERRORS]]
    return sorted((row for row in rows if row["data"]["payload"] in payloads), key=json.dumps)


def test_lines_that_are_no_enriched_events_as_upstream(upstream: dict[str, list[str]]) -> None:
    expected = [our_processor(row) for row in SPECS["NotEnrichedEventsSpec"]["bad"]]
    assert bad_rows_of(upstream, "NotEnrichedEventsSpec") == sorted(expected, key=json.dumps)


def test_values_that_do_not_decode_as_upstream(upstream: dict[str, list[str]]) -> None:
    assert bad_rows_of(upstream, "InvalidEnrichedEventsSpec") == [
        our_processor(SPECS["InvalidEnrichedEventsSpec"]["bad"][0])
    ]


def test_invalid_json_fields_as_upstream_but_for_the_parser_message(upstream: dict[str, list[str]]) -> None:
    """Upstream quotes its JSON parser (jawn) in the message; ours says what is wrong in our words. Everything
    else (schema, failure type, keys, values, order, payload) is upstream's."""
    (row,) = bad_rows_of(upstream, "InvalidJsonsSpec")
    expected = our_processor(SPECS["InvalidJsonsSpec"]["bad"][0])
    assert [error.pop("message") for error in expected["data"]["failure"]["errors"]] == [
        "ParsingFailure: expected json value got '&&&' (line 1, column 1)",
        "ParsingFailure: expected json value got '|%|' (line 1, column 1)",
    ]
    assert [error.pop("message") for error in row["data"]["failure"]["errors"]] == [
        "not a valid JSON object: '&&&'",
        "not a valid JSON object: '|%|'",
    ]
    assert row == expected


def test_every_typed_value_is_decoded_and_rendered_as_the_sdk_does(spark: SparkSession) -> None:
    line = event(
        ID_A.upper(),
        collector_tstamp="2026-11-01 10:00:00",
        dvce_created_tstamp="2026-11-01 09:59:59.123456",
        txn_id="+007",
        se_value="1",
        geo_latitude="12345678.9",
        tr_total="NaN",
        br_cookies="1",
        page_urlport="80",
    )
    bad = event(
        ID_A,
        txn_id="1.0",
        domain_sessionidx="99999999999",
        se_value="one",
        br_cookies="true",
        v_etl="",
        derived_tstamp="2026-02-30 00:00:00",
    )
    found = outputs(spark, [line, bad, "a\tb\tc"])

    (atomic,) = found[ATOMIC]
    values = dict(zip(ATOMIC_FIELDS, atomic.split("\t"), strict=True))
    assert {name: values[name] for name in ("event_id", "collector_tstamp", "dvce_created_tstamp", "txn_id")} == {
        "event_id": ID_A,
        "collector_tstamp": "2026-11-01 10:00:00.000",
        "dvce_created_tstamp": "2026-11-01 09:59:59.123",
        "txn_id": "7",
    }
    assert (values["se_value"], values["geo_latitude"], values["tr_total"]) == ("1.0", "1.23456789E7", "")
    assert (values["br_cookies"], values["page_urlport"], values["app_id"]) == ("1", "80", "shop")

    rows = {json.loads(text)["data"]["payload"]: json.loads(text) for text in found[PARSING_ERRORS]}
    assert rows["a\tb\tc"]["data"]["failure"] == {"type": "FieldNumberMismatch", "fieldCount": 3}
    row = rows[bad]
    assert row["data"]["failure"] == {
        "type": "RowDecodingError",
        "errors": [
            {"type": "InvalidValue", "key": key, "value": value, "message": message}
            for key, value, message in [
                ("txn_id", "1.0", "Cannot parse key txn_id into integer"),
                ("v_etl", "", "Field v_etl cannot be empty"),
                ("domain_sessionidx", "99999999999", "Cannot parse key domain_sessionidx into integer"),
                ("se_value", "one", "Cannot parse key se_value into double"),
                ("br_cookies", "true", "Cannot parse key br_cookies into boolean"),
                ("derived_tstamp", "2026-02-30 00:00:00", "Cannot parse key derived_tstamp into datetime"),
            ]
        ],
    }


def test_a_collector_tstamp_in_year_0_is_the_loader_message_s_min(spark: SparkSession, tmp_path: Path) -> None:
    """Year 0 is a year to java.time (upstream's `Instant`), not to Python's datetime: the run completes."""
    run = shred(tmp_path, [event(ID_A, collector_tstamp="0000-01-01 00:00:00.000"), event(ID_B)])
    timestamps = json.loads((run / "shredding_complete.json").read_text())["data"]["timestamps"]
    assert (timestamps["min"], timestamps["max"]) == ("0000-01-01T00:00:00Z", "2026-11-01T10:00:00Z")


def test_a_value_ending_in_a_line_terminator_is_not_what_its_pattern_allows(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Java's `$` also matches before a final line terminator (a JSON-escaped newline; U+2028 inside a TSV field):
    the patterns end at the text's end, so such a schema URI, event id or timestamp is an error, as the SDK finds."""
    thing_with_a_newline = '{"schema":"iglu:com.acme/thing/jsonschema/1-0-0\\n","data":{"a":1}}'
    lines = [
        event(ID_A, contexts=contexts(thing_with_a_newline)),
        event(ID_B[:-1] + "2\u2028"),
        event(ID_C, collector_tstamp="2026-11-01 10:00:00.000\u2028"),
        event(numbered_id(4)),
    ]
    run = shred(tmp_path, lines)
    assert json.loads((run / "summary.json").read_text())["counts"] == {"input": 4, "good": 1, "bad": 3}
    assert [path.name for path in run.rglob("*") if "\n" in path.name or "\u2028" in path.name] == []
    # Read as lines split on "\n" only: a bad row keeps the line's U+2028, which `splitlines` would split on.
    rows = [
        row for part in sorted((run / PARSING_ERRORS).glob("part-*")) for row in part.read_text().split("\n") if row
    ]
    errors = {error["key"]: error["message"] for row in rows for error in json.loads(row)["data"]["failure"]["errors"]}
    assert sorted(errors) == ["collector_tstamp", "contexts", "event_id"]
    assert errors["contexts"].startswith(
        "entity 1 has no valid schema URI (given 'iglu:com.acme/thing/jsonschema/1-0-0\n')"
    )


def test_a_run_hands_its_folder_to_the_loader(spark: SparkSession, tmp_path: Path) -> None:
    good = event(ID_A, contexts=contexts(WEB_PAGE), unstruct_event=unstruct(LINK_CLICK), event="unstruct")
    run = shred(tmp_path, [good, "not an event"])

    assert sorted(path.name for path in run.iterdir() if not path.name.startswith(".")) == [
        "_SUCCESS", "output=bad", "output=good", "shredding_complete.json", "summary.json"
    ]  # fmt: skip
    assert sorted({path.parent.relative_to(run).as_posix() for path in run.rglob("part-*")}) == [
        PARSING_ERRORS,
        ATOMIC,
        "output=good/vendor=com.snowplowanalytics.snowplow/name=link_click/format=json/model=1/revision=0/addition=1",
        "output=good/vendor=org.schema/name=WebPage/format=json/model=1/revision=0/addition=0",
    ]
    assert read_lines(run / ATOMIC) == [outputs(spark, [good])[ATOMIC][0]]

    text = (run / "shredding_complete.json").read_text()
    document = json.loads(text)
    assert (
        document["schema"]
        == "iglu:com.snowplowanalytics.snowplow.storage.rdbloader/shredding_complete/jsonschema/2-0-1"
    )
    jsonschema.Draft4Validator(MESSAGE_SCHEMA).validate(document["data"])
    assert document["data"]["base"] == run.as_uri().replace("%3D", "=") + "/"
    assert document["data"]["typesInfo"] == {
        "transformation": "SHREDDED",
        "types": [
            {"schemaKey": "iglu:org.schema/WebPage/jsonschema/1-0-0", "format": "JSON", "snowplowEntity": "CONTEXT"},
            {
                "schemaKey": "iglu:com.snowplowanalytics.snowplow/link_click/jsonschema/1-0-1",
                "format": "JSON",
                "snowplowEntity": "SELF_DESCRIBING_EVENT",
            },
        ],
    }
    assert document["data"]["timestamps"]["min"] == document["data"]["timestamps"]["max"] == "2026-11-01T10:00:00Z"
    assert (document["data"]["compression"], document["data"]["count"]) == ("NONE", {"good": 1, "bad": 1})

    summary = json.loads((run / "summary.json").read_text())
    assert summary["layout"] == "rdb" and summary["counts"] == {"input": 2, "good": 1, "bad": 1}
    assert summary["shredded_types"] == {
        "com.snowplowanalytics.snowplow/link_click/jsonschema/1-0-1": 1,
        "org.schema/WebPage/jsonschema/1-0-0": 1,
    }
    assert summary["loader_message"] == {"file": "shredding_complete.json", "queue": None}
    assert (run / "_SUCCESS").exists()


def test_the_message_reaches_the_loader_queue_and_a_failed_send_leaves_the_run_incomplete(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import boto3
    from moto import mock_aws

    config = tmp_path / "config.json"
    # gzip output too (test_gzip_output_is_what_the_message_says merged here: one run proves both)
    config.write_text(json.dumps({"output": {"queue": "sqs://loader.fifo", "compression": "gzip"}}))
    source = tmp_path / "in" / "part-0.tsv"
    source.parent.mkdir()
    source.write_text(event(ID_A) + "\n")
    argv = ["shred", "--input", str(source.parent), "--output", str(tmp_path / "out"), "--run-id", RUN_ID]
    run = tmp_path / "out" / f"run={RUN_ID}"
    with mock_aws():
        # No queue yet: the run stops with one line, before _SUCCESS; the loader has nothing to act on.
        assert main([*argv, "--config", str(config)]) == 1
        assert "loader message to sqs://loader.fifo not sent" in capsys.readouterr().err.strip().splitlines()[-1]
        assert not (run / "_SUCCESS").exists()

        sqs = boto3.client("sqs")
        url = sqs.create_queue(QueueName="loader.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        assert main([*argv, "--config", str(config)]) == 0  # the rerun sends it
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]

    assert (run / "_SUCCESS").exists()
    assert [message["Body"] for message in received] == [(run / "shredding_complete.json").read_text()]
    # gzip output is what the message says: every part file gzip, its one line readable, GZIP in the message
    files = [path for path in (run / ATOMIC).iterdir() if path.name.startswith("part-")]
    assert files and all(path.suffix == ".gz" for path in files)
    assert gzip.decompress(files[0].read_bytes()).decode().count("\n") == 1
    assert json.loads((run / "shredding_complete.json").read_text())["data"]["compression"] == "GZIP"
    assert received[0]["Attributes"]["MessageGroupId"] == "shredding"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["loader_message"] == {
        "file": "shredding_complete.json",
        "queue": "sqs://loader.fifo",
        "message_id": received[0]["MessageId"],
    }


def test_wide_rows_go_directly_in_output_good_with_typed_atomic_columns(spark: SparkSession, tmp_path: Path) -> None:
    good = event(ID_A, contexts=contexts(WEB_PAGE), tr_total="12.50", br_cookies="0", doc_width="1024")
    run = shred(tmp_path, [good, "not an event"], "--format", "widerow-parquet")

    rows = spark.read.parquet(str(run / rdb.GOOD))
    types = dict(rows.dtypes)
    assert (types["collector_tstamp"], types["tr_total"], types["br_cookies"], types["doc_width"]) == (
        "timestamp",
        "decimal(18,2)",
        "boolean",
        "int",
    )
    assert types["contexts_org_schema_web_page_1"] == "array<string>"
    (row,) = rows.collect()
    assert (row["event_id"], str(row["tr_total"]), row["br_cookies"], row["doc_width"]) == (ID_A, "12.50", False, 1024)
    bad = [json.loads(line) for line in read_lines(run / rdb.BAD)]
    assert [row["data"]["failure"] for row in bad] == [{"type": "NotTSV"}]

    document = json.loads((run / "shredding_complete.json").read_text())
    assert document["data"]["typesInfo"] == {
        "transformation": "WIDEROW",
        "fileFormat": "PARQUET",
        "types": [{"schemaKey": "iglu:org.schema/WebPage/jsonschema/1-0-0", "snowplowEntity": "CONTEXT"}],
    }
    jsonschema.Draft4Validator(MESSAGE_SCHEMA).validate(document["data"])


def test_wide_json_rows_go_directly_in_output_good(spark: SparkSession, tmp_path: Path) -> None:
    good = event(ID_A, contexts=contexts(WEB_PAGE), doc_width="1024", br_cookies="1")
    run = shred(tmp_path, [good], "--format", "widerow")

    (row,) = [json.loads(line) for line in read_lines(run / rdb.GOOD)]
    assert (row["event_id"], row["doc_width"], row["br_cookies"], row["collector_tstamp"]) == (
        ID_A,
        1024,
        True,
        "2026-11-01T10:00:00Z",
    )
    assert row["contexts_org_schema_web_page_1"] == [json.loads(WEB_PAGE)["data"]]
    assert read_lines(run / rdb.BAD) == []
    info = json.loads((run / "shredding_complete.json").read_text())["data"]["typesInfo"]
    assert (info["transformation"], info["fileFormat"]) == ("WIDEROW", "JSON")
