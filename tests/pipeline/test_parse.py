"""The enriched-event parser: valid lines, the bad-input corpus, fingerprints."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.enriched.badrows import bad_row_json, line_failure
from jobs.enriched.fields import DEFAULT_FINGERPRINT_FIELDS, FIELD_INDEX
from jobs.enriched.parse import is_valid, narrow_events, parse_events
from jobs.frames import local_frame
from tests.pipeline.helpers import ID_A, event


def parse(
    spark: SparkSession, lines: list[str], fingerprint_fields: tuple[str, ...] = DEFAULT_FINGERPRINT_FIELDS
) -> DataFrame:
    return parse_events(local_frame(spark, [(line,) for line in lines], "value string"), fingerprint_fields)


def errors_of(spark: SparkSession, lines: list[str]) -> list[list[str]]:
    rows = parse(spark, lines).select("line", "errors").collect()
    by_line = {row["line"]: list(row["errors"]) for row in rows}
    return [by_line[line] for line in lines]


def test_a_valid_line_parses_to_its_key_columns(spark: SparkSession) -> None:
    line = event(ID_A.upper(), etl_tstamp="2026-11-01 10:00:05.123456789", event_fingerprint="abc")
    (row,) = parse(spark, [line]).collect()
    assert row.asDict() == {
        "line": line,
        "errors": [],
        "event_id": ID_A.upper(),
        "event_key": ID_A,
        "fingerprint": "abc",
        "etl_tstamp": "2026-11-01 10:00:05.123456789",
        "collector_tstamp": "2026-11-01 10:00:00.000",
    }


def test_an_absent_etl_tstamp_is_null(spark: SparkSession) -> None:
    (row,) = parse(spark, [event(etl_tstamp="")]).collect()
    assert row["errors"] == []
    assert row["etl_tstamp"] is None


def test_bad_input_corpus_gives_one_message_per_problem(spark: SparkSession) -> None:
    good = event()
    corpus = {
        "": ["expected 131 tab-separated fields, found 1"],
        "\x00\x01binary garbage\x7f\ufffd": ["expected 131 tab-separated fields, found 1"],
        good.rsplit("\t", 1)[0]: ["expected 131 tab-separated fields, found 130"],
        good + "\textra": ["expected 131 tab-separated fields, found 132"],
        "\t".join(["x"] * 500): ["expected 131 tab-separated fields, found 500"],
        event(event_id=""): ["event_id is empty"],
        event(event_id="not-a-uuid"): ["event_id 'not-a-uuid' is not a UUID"],
        event(event_id="a0000000-0000-4000-8000-00000000000Z"): [
            "event_id 'a0000000-0000-4000-8000-00000000000Z' is not a UUID"
        ],
        event(collector_tstamp=""): ["collector_tstamp is empty"],
        event(collector_tstamp="yesterday"): [
            "collector_tstamp 'yesterday' is not a timestamp (yyyy-MM-dd HH:mm:ss[.fraction], UTC)"
        ],
        event(collector_tstamp="2026-13-01 10:00:00"): [
            "collector_tstamp '2026-13-01 10:00:00' is not a timestamp (yyyy-MM-dd HH:mm:ss[.fraction], UTC)"
        ],
        event(collector_tstamp="2026-02-30 10:00:00"): [
            "collector_tstamp '2026-02-30 10:00:00' is not a timestamp (yyyy-MM-dd HH:mm:ss[.fraction], UTC)"
        ],
        event(collector_tstamp="2026-11-01T10:00:00Z"): [
            "collector_tstamp '2026-11-01T10:00:00Z' is not a timestamp (yyyy-MM-dd HH:mm:ss[.fraction], UTC)"
        ],
        event(etl_tstamp="2026-11-01 10:00"): [
            "etl_tstamp '2026-11-01 10:00' is not a timestamp (yyyy-MM-dd HH:mm:ss[.fraction], UTC)"
        ],
        event(v_collector=""): ["v_collector is empty"],
        event(v_etl=""): ["v_etl is empty"],
        event(event_id="", collector_tstamp="", v_collector="", v_etl=""): [
            "event_id is empty",
            "collector_tstamp is empty",
            "v_collector is empty",
            "v_etl is empty",
        ],
        **{
            event(collector_tstamp=value): [
                f"collector_tstamp '{value}' is not a timestamp (yyyy-MM-dd HH:mm:ss[.fraction], UTC)"
            ]
            for value in (
                "2026-02-29 10:00:00",
                "2026-04-31 10:00:00",
                "2026-00-10 10:00:00",
                "2026-11-01 24:00:00",
                "2026-11-01 10:60:00",
                "2026-11-01 10:00:60",
                "2026-11-32 10:00:00",
            )
        },
        good: [],
        event(collector_tstamp="2026-11-01 10:00:00"): [],
        event(collector_tstamp="2021-10-15 09:06:26.323397414"): [],
        event(collector_tstamp="2024-02-29 23:59:59.5"): [],
        event(collector_tstamp="2026-12-31 00:00:00"): [],
    }
    lines = list(corpus)
    assert errors_of(spark, lines) == [corpus[line] for line in lines]
    # The per-row check the dedup job uses says "valid" exactly for the lines without messages.
    frame = local_frame(spark, [(line,) for line in lines], "value string")
    valid = {
        row["value"]: row["valid"] for row in frame.select("value", is_valid(F.col("value")).alias("valid")).collect()
    }
    assert [valid[line] for line in lines] == [not corpus[line] for line in lines]
    # So does the dedup job's one split of every line.
    narrow = narrow_events(frame.select("value", F.col("value").alias("line")), DEFAULT_FINGERPRINT_FIELDS)
    split_valid = {row["line"]: row["valid"] for row in narrow.collect()}
    assert [split_valid[line] for line in lines] == [not corpus[line] for line in lines]
    # And the loader_parsing_error failure of its bad rows is null exactly for them.
    failures = frame.select("value", line_failure(F.col("value")).alias("failure")).collect()
    failed = {row["value"]: row["failure"] is not None for row in failures}
    assert [failed[line] for line in lines] == [bool(corpus[line]) for line in lines]


def test_a_huge_bad_value_is_quoted_cut_to_100_characters(spark: SparkSession) -> None:
    (errors,) = errors_of(spark, [event(event_id="x" * 5000)])
    assert errors == ["event_id '" + "x" * 100 + "' is not a UUID"]


def test_a_missing_fingerprint_is_computed_from_the_client_sent_fields(spark: SparkSession) -> None:
    line = event(event_fingerprint="", user_id="u1", page_title="Home", network_userid="n1")
    (row,) = parse(spark, [line]).collect()
    # The construction, written out independently: name␟value␟ for non-empty fields, in name order, MD5.
    values = line.split("\t")
    material = "".join(
        f"{name}\x1f{values[FIELD_INDEX[name]]}\x1f"
        for name in sorted(DEFAULT_FINGERPRINT_FIELDS)
        if values[FIELD_INDEX[name]]
    )
    assert row["fingerprint"] == hashlib.md5(material.encode("utf-8")).hexdigest()


def test_computed_fingerprints_ignore_collector_and_enrichment_fields(spark: SparkSession) -> None:
    base = {"event_fingerprint": "", "user_id": "u1"}
    lines = [
        event(**base),
        event(
            **base,
            etl_tstamp="2026-11-02 00:00:00",
            collector_tstamp="2026-11-02 00:00:00",
            dvce_sent_tstamp="2026-11-02 00:00:00",
            network_userid="other",
            user_ipaddress="10.0.0.9",
            geo_country="FR",
            v_collector="other",
            derived_contexts='{"schema":"x","data":[]}',
        ),
        event(**{**base, "user_id": "u2"}),
        event(**base, page_title="Other page"),
    ]
    rows = {row["line"]: row["fingerprint"] for row in parse(spark, lines).collect()}
    fingerprints = [rows[line] for line in lines]
    assert fingerprints[0] == fingerprints[1]
    assert len({fingerprints[0], fingerprints[2], fingerprints[3]}) == 3


def test_the_dedup_jobs_narrow_parse_gives_the_same_fields_as_the_full_one(spark: SparkSession) -> None:
    lines = [
        event(event_id="4A5B6C7D-0000-4000-8000-00000000000A", event_fingerprint="given"),
        event(event_fingerprint="", user_id="u1", page_title="Home"),
        event(etl_tstamp="", collector_tstamp="2026-11-01 10:00:00.123456789"),
    ]
    frame = local_frame(spark, [(line,) for line in lines], "value string")
    full = parse_events(frame, DEFAULT_FINGERPRINT_FIELDS).select(
        "line", "event_key", "fingerprint", "etl_tstamp", "collector_tstamp"
    )
    narrow = narrow_events(frame.select("value", F.col("value").alias("line")), DEFAULT_FINGERPRINT_FIELDS)
    assert narrow.where("valid").drop("valid").sort("line").collect() == full.sort("line").collect()


def test_the_fingerprint_field_list_is_configurable(spark: SparkSession) -> None:
    lines = [event(event_fingerprint="", user_id="u1"), event(event_fingerprint="", user_id="u2")]
    rows = parse(spark, lines, fingerprint_fields=("app_id",)).collect()
    assert rows[0]["fingerprint"] == rows[1]["fingerprint"] == hashlib.md5(b"app_id\x1fshop\x1f").hexdigest()


def test_bad_row_json_has_the_design_format(spark: SparkSession) -> None:
    df = local_frame(spark, [("a\tb", ["first", 'second "quoted"'])], "line string, errors array<string>")
    ((text,),) = df.select(
        bad_row_json(F.col("line"), F.col("errors"), datetime(2026, 11, 22, 3, tzinfo=UTC))
    ).collect()
    assert text == (
        '{"line":"a\\tb","errors":[{"level":"error","message":"first"},'
        '{"level":"error","message":"second \\"quoted\\""}],"failure_tstamp":"2026-11-22T03:00:00.000Z"}'
    )
    assert json.loads(text)["line"] == "a\tb"
