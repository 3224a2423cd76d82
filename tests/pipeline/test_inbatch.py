"""In-batch dedup: every rule and strategy, with exact expected output lines."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs import __version__
from jobs.config import SyntheticStrategy
from jobs.dedup.inbatch import NOT_AN_ENVELOPE, apply_decisions, decision_rows, with_row_ids
from jobs.dedup.synthetic import uuid5, with_duplicate_context
from jobs.enriched.badrows import PARSING_ERROR_SCHEMA
from jobs.enriched.fields import DEFAULT_FINGERPRINT_FIELDS, FIELD_INDEX
from jobs.frames import local_frame
from tests.pipeline.helpers import ID_A, ID_B, ID_C, event

RUN_TIME = datetime(2026, 11, 22, 3, tzinfo=UTC)
DUPLICATE = "iglu:com.snowplowanalytics.snowplow/duplicate/jsonschema/1-0-0"
CONTEXTS = "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-0"
UA_CONTEXT = '{"schema":"iglu:com.snowplowanalytics.snowplow/ua_parser_context/jsonschema/1-0-0","data":{"useragentFamily":"Chrome"}}'

Decided = list[tuple[str, str | None, str]]


def in_order(rows: Decided) -> Decided:
    return sorted(rows, key=lambda row: (row[0], row[1] or "", row[2]))


def decide(spark: SparkSession, lines: list[str], strategy: SyntheticStrategy = "reid") -> Decided:
    """(outcome, reason, text) for every input line, sorted."""
    frame = with_row_ids(local_frame(spark, [(line,) for line in lines], "value string"))
    decisions = decision_rows(frame, strategy, DEFAULT_FINGERPRINT_FIELDS)  # as the job decides, in-batch only
    rows = apply_decisions(frame, decisions, strategy, RUN_TIME).collect()
    return in_order([(row["outcome"], row["reason"], row["text"]) for row in rows])


def reidentified(line: str, fingerprint: str, derived_contexts: str) -> str:
    """The expected `reid` rewrite, written independently of the Spark code."""
    values = line.split("\t")
    original = values[FIELD_INDEX["event_id"]]
    values[FIELD_INDEX["event_id"]] = str(uuid.uuid5(uuid.UUID(original.lower()), fingerprint))
    values[FIELD_INDEX["derived_contexts"]] = derived_contexts
    return "\t".join(values)


def duplicate_context(original: str) -> str:
    return json.dumps({"schema": DUPLICATE, "data": {"originalEventId": original}}, separators=(",", ":"))


def test_unique_events_pass_unchanged(spark: SparkSession) -> None:
    lines = [event(ID_A), event(ID_B), event(ID_C, event_fingerprint="")]
    assert decide(spark, lines) == in_order([("good", None, line) for line in lines])


def test_natural_copies_keep_the_earliest_etl_tstamp(spark: SparkSession) -> None:
    first = event(ID_A, etl_tstamp="2026-11-01 10:00:05.000")
    later = event(ID_A, etl_tstamp="2026-11-01 10:30:00.000")
    other = event(ID_B)
    assert decide(spark, [later, other, first]) == in_order(
        [("good", None, first), ("good", None, other), ("duplicate", "in_batch_natural", later)]
    )


def test_natural_ties_go_to_the_earliest_collector_tstamp_then_the_smallest_line(spark: SparkSession) -> None:
    early = event(ID_A, collector_tstamp="2026-11-01 09:00:00.000")
    late = event(ID_A, collector_tstamp="2026-11-01 11:00:00.000")
    small = event(ID_B, app_id="a-shop")
    large = event(ID_B, app_id="z-shop")
    assert decide(spark, [late, early, large, small]) == in_order([
        ("good", None, early), ("duplicate", "in_batch_natural", late),
        ("good", None, small), ("duplicate", "in_batch_natural", large),
    ])  # fmt: skip


def test_an_absent_etl_tstamp_sorts_after_a_present_one(spark: SparkSession) -> None:
    absent = event(ID_A, etl_tstamp="")
    present = event(ID_A, etl_tstamp="2026-11-01 23:00:00.000")
    assert decide(spark, [absent, present]) == in_order(
        [("good", None, present), ("duplicate", "in_batch_natural", absent)]
    )


def test_identical_lines_are_kept_once(spark: SparkSession) -> None:
    line = event(ID_A)
    assert decide(spark, [line, line, line]) == in_order(
        [("good", None, line), ("duplicate", "in_batch_natural", line), ("duplicate", "in_batch_natural", line)]
    )


def test_event_ids_compare_case_insensitively(spark: SparkSession) -> None:
    lower = event(ID_A, etl_tstamp="2026-11-01 10:00:01.000")
    upper = event(ID_A.upper(), etl_tstamp="2026-11-01 10:00:02.000")
    assert decide(spark, [upper, lower]) == in_order([("good", None, lower), ("duplicate", "in_batch_natural", upper)])


def test_events_without_fingerprint_dedup_naturally_on_the_computed_one(spark: SparkSession) -> None:
    first = event(ID_A, event_fingerprint="", etl_tstamp="2026-11-01 10:00:05.000")
    again = event(
        ID_A, event_fingerprint="", etl_tstamp="2026-11-01 10:00:09.000", dvce_sent_tstamp="2026-11-01 10:00:08.000"
    )
    assert decide(spark, [again, first]) == in_order([("good", None, first), ("duplicate", "in_batch_natural", again)])


def test_reid_gives_every_synthetic_copy_a_uuid5_and_the_duplicate_context(spark: SparkSession) -> None:
    empty = event(ID_A, event_fingerprint="fp-1", derived_contexts="")
    with_contexts = event(
        ID_A, event_fingerprint="fp-2", derived_contexts=f'{{"schema":"{CONTEXTS}","data":[{UA_CONTEXT}]}}'
    )
    empty_array = event(ID_A, event_fingerprint="fp-3", derived_contexts=f'{{"schema":"{CONTEXTS}","data":[]}}')
    spaced = event(
        ID_A, event_fingerprint="fp-4", derived_contexts=f'{{ "data" : [ {UA_CONTEXT} ], "schema":"{CONTEXTS}" }}'
    )
    dup = duplicate_context(ID_A)
    result = decide(spark, [empty, with_contexts, empty_array, spaced])
    assert result == in_order([
        ("good", "in_batch_synthetic", reidentified(empty, "fp-1", f'{{"schema":"{CONTEXTS}","data":[{dup}]}}')),
        ("good", "in_batch_synthetic", reidentified(with_contexts, "fp-2", f'{{"schema":"{CONTEXTS}","data":[{dup},{UA_CONTEXT}]}}')),
        ("good", "in_batch_synthetic", reidentified(empty_array, "fp-3", f'{{"schema":"{CONTEXTS}","data":[{dup}]}}')),
        ("good", "in_batch_synthetic", reidentified(spaced, "fp-4", f'{{ "data" : [{dup}, {UA_CONTEXT} ], "schema":"{CONTEXTS}" }}')),
    ])  # fmt: skip
    # Every copy a new id, none the original (read from the same decision: no second run of it).
    new_ids = [line.split("\t")[FIELD_INDEX["event_id"]] for _, _, line in result]
    assert len(set(new_ids)) == 4 and ID_A not in new_ids


def test_reid_keeps_the_original_id_as_written_in_the_context(spark: SparkSession) -> None:
    upper = event(ID_A.upper(), event_fingerprint="fp-1")
    lower = event(ID_A, event_fingerprint="fp-2")
    results = decide(spark, [upper, lower])
    contexts = sorted(
        json.loads(text.split("\t")[FIELD_INDEX["derived_contexts"]])["data"][0]["data"]["originalEventId"]
        for _, _, text in results
    )
    assert contexts == sorted([ID_A.upper(), ID_A])


def test_natural_dedup_runs_before_synthetic(spark: SparkSession) -> None:
    first = event(ID_A, event_fingerprint="fp-1", etl_tstamp="2026-11-01 10:00:05.000")
    natural = event(ID_A, event_fingerprint="fp-1", etl_tstamp="2026-11-01 10:00:07.000")
    other = event(ID_A, event_fingerprint="fp-2")
    dup = duplicate_context(ID_A)
    assert decide(spark, [natural, other, first]) == in_order([
        ("duplicate", "in_batch_natural", natural),
        ("good", "in_batch_synthetic", reidentified(first, "fp-1", f'{{"schema":"{CONTEXTS}","data":[{dup}]}}')),
        ("good", "in_batch_synthetic", reidentified(other, "fp-2", f'{{"schema":"{CONTEXTS}","data":[{dup}]}}')),
    ])  # fmt: skip


def test_reid_of_a_line_whose_derived_contexts_is_not_an_envelope_is_a_bad_row(spark: SparkSession) -> None:
    broken = event(ID_A, event_fingerprint="fp-1", derived_contexts="not json")
    fine = event(ID_A, event_fingerprint="fp-2")
    dup = duplicate_context(ID_A)
    result = decide(spark, [broken, fine])
    assert result[1] == (
        "good",
        "in_batch_synthetic",
        reidentified(fine, "fp-2", f'{{"schema":"{CONTEXTS}","data":[{dup}]}}'),
    )
    outcome, reason, text = result[0]
    assert (outcome, reason) == ("bad", "in_batch_synthetic")
    assert json.loads(text) == {
        "schema": PARSING_ERROR_SCHEMA,
        "data": {
            "processor": {"artifact": "winnow-dedup", "version": __version__},
            "failure": {"type": "RowDecodingError", "errors": [
                {"type": "InvalidValue", "key": "derived_contexts", "value": "not json", "message": NOT_AN_ENVELOPE},
            ]},
            "payload": broken,
        },
    }  # fmt: skip


@pytest.fixture
def synthetic_group() -> dict[str, str]:
    """Three synthetic copies of one id (one with a natural copy) and an unrelated event."""
    return {
        "early": event(ID_A, event_fingerprint="fp-1", collector_tstamp="2026-11-01 08:00:00.000"),
        "early_natural": event(ID_A, event_fingerprint="fp-1", collector_tstamp="2026-11-01 08:00:00.000", etl_tstamp="2026-11-01 12:00:00.000"),
        "middle": event(ID_A, event_fingerprint="fp-2", collector_tstamp="2026-11-01 09:00:00.000"),
        "late": event(ID_A, event_fingerprint="fp-3", collector_tstamp="2026-11-01 10:00:00.000", etl_tstamp="2026-11-01 09:00:00.000"),
        "unique": event(ID_B),
    }  # fmt: skip


def expected(group: dict[str, str], synthetic: dict[str, tuple[str, str | None]]) -> Decided:
    rows = [("duplicate", "in_batch_natural", group["early_natural"]), ("good", None, group["unique"])]
    rows += [(outcome, reason, group[name]) for name, (outcome, reason) in synthetic.items()]
    return in_order(rows)


def test_quarantine_moves_every_synthetic_copy_out(spark: SparkSession, synthetic_group: dict[str, str]) -> None:
    q = ("quarantined", "in_batch_synthetic")
    assert decide(spark, list(synthetic_group.values()), "quarantine") == expected(
        synthetic_group, {"early": q, "middle": q, "late": q}
    )


def test_keep_first_keeps_the_earliest(spark: SparkSession, synthetic_group: dict[str, str]) -> None:
    # "late" has the earliest etl_tstamp: first is decided by etl_tstamp before collector_tstamp.
    lost = ("duplicate", "in_batch_synthetic")
    assert decide(spark, list(synthetic_group.values()), "keep-first") == expected(
        synthetic_group, {"late": ("good", "in_batch_synthetic"), "early": lost, "middle": lost}
    )


def test_keep_last_keeps_the_latest_collector_tstamp(spark: SparkSession, synthetic_group: dict[str, str]) -> None:
    lost = ("duplicate", "in_batch_synthetic")
    assert decide(spark, list(synthetic_group.values()), "keep-last") == expected(
        synthetic_group, {"late": ("good", "in_batch_synthetic"), "early": lost, "middle": lost}
    )


def test_keep_last_breaks_collector_ties_by_latest_etl_then_largest_line(spark: SparkSession) -> None:
    same_time = {"collector_tstamp": "2026-11-01 08:00:00.000"}
    a = event(ID_A, event_fingerprint="fp-1", etl_tstamp="2026-11-01 09:00:00.000", **same_time)
    b = event(ID_A, event_fingerprint="fp-2", etl_tstamp="2026-11-01 10:00:00.000", **same_time)
    c = event(ID_B, event_fingerprint="fp-1", app_id="a", **same_time)
    d = event(ID_B, event_fingerprint="fp-2", app_id="b", **same_time)
    lost = ("duplicate", "in_batch_synthetic")
    assert decide(spark, [a, b, c, d], "keep-last") == in_order([
        ("good", "in_batch_synthetic", b), (*lost, a), ("good", "in_batch_synthetic", d), (*lost, c),
    ])  # fmt: skip


def test_drop_removes_every_synthetic_copy(spark: SparkSession, synthetic_group: dict[str, str]) -> None:
    d = ("dropped", "in_batch_synthetic")
    assert decide(spark, list(synthetic_group.values()), "drop") == expected(
        synthetic_group, {"early": d, "middle": d, "late": d}
    )


def test_off_keeps_every_synthetic_copy_unchanged(spark: SparkSession, synthetic_group: dict[str, str]) -> None:
    g = ("good", "in_batch_synthetic")
    assert decide(spark, list(synthetic_group.values()), "off") == expected(
        synthetic_group, {"early": g, "middle": g, "late": g}
    )


def test_bad_lines_become_bad_rows_and_do_not_take_part_in_dedup(spark: SparkSession) -> None:
    good = event(ID_A)
    bad_same_id = event(ID_A, collector_tstamp="", event_fingerprint="fp-9")
    result = decide(spark, [good, bad_same_id])
    assert result[1] == ("good", None, good)
    assert result[0][:2] == ("bad", None)
    assert json.loads(result[0][2])["data"]["failure"] == {
        "type": "RowDecodingError",
        "errors": [{"type": "InvalidValue", "key": "collector_tstamp", "value": "", "message": "Field collector_tstamp cannot be empty"}],
    }  # fmt: skip


def test_uuid5_matches_python(spark: SparkSession) -> None:
    cases = [
        (str(uuid.UUID(int=i * 7919 + 1, version=4)), name)
        for i, name in enumerate(["fp", "", "ünïcødé", "x" * 300, "0" * 32])
    ]
    df = local_frame(spark, cases, "namespace string, name string")
    got = [row[0] for row in df.select(uuid5(F.col("namespace"), F.col("name"))).collect()]
    assert got == [str(uuid.uuid5(uuid.UUID(ns), name)) for ns, name in cases]


def test_with_duplicate_context_only_touches_the_envelope_array(spark: SparkSession) -> None:
    nested = f'{{"schema":"{CONTEXTS}","data":[{{"schema":"iglu:a/b/jsonschema/1-0-0","data":{{"data":[1,2]}}}}]}}'
    df = local_frame(spark, [(nested,)], "dc string")
    ((result,),) = df.select(with_duplicate_context(F.col("dc"), F.lit("CTX"))).collect()
    assert (
        result
        == f'{{"schema":"{CONTEXTS}","data":[CTX,{{"schema":"iglu:a/b/jsonschema/1-0-0","data":{{"data":[1,2]}}}}]}}'
    )
