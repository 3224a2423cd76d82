"""Wide rows: column naming, the JSON lines and the Parquet columns of `shred --format widerow[-parquet]`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.enriched.fields import FIELD_NAMES
from jobs.shred.widerow import column_name
from tests.pipeline.helpers import (
    ID_A,
    ID_B,
    LINK_CLICK,
    SP_WEB_PAGE,
    UA_PARSER,
    WEB_PAGE,
    contexts,
    event,
    read_lines,
    shred,
    unstruct,
)

# The spec's atomic columns: the 131 fields without 52 (contexts), 58 (unstruct_event), 122 (derived_contexts).
ATOMIC = [name for index, name in enumerate(FIELD_NAMES) if index not in (52, 58, 122)]


@pytest.mark.parametrize(
    ("kind", "vendor", "name", "model", "column"),
    [
        ("contexts", "org.w3", "PerformanceTiming", "1", "contexts_org_w3_performance_timing_1"),
        ("contexts", "org.schema", "WebPage", "1", "contexts_org_schema_web_page_1"),
        ("unstruct_event", "com.snowplowanalytics.snowplow", "link_click", "1", "unstruct_event_com_snowplowanalytics_snowplow_link_click_1"),
        ("contexts", "com.acme-corp", "client.sessionId", "12", "contexts_com_acme_corp_client_session_id_12"),
        ("contexts", "com.acme", "ABTest", "2", "contexts_com_acme_abtest_2"),
        ("contexts", "com.acme", "a_Bc", "1", "contexts_com_acme_a_bc_1"),
    ],
)  # fmt: skip
def test_column_names_follow_the_analytics_sdk(kind: str, vendor: str, name: str, model: str, column: str) -> None:
    assert column_name(kind, vendor, name, model) == column


WEB_PAGE_101 = '{"schema":"iglu:org.schema/WebPage/jsonschema/1-0-1","data":{"genre":"news"}}'
DERIVED_WEB_PAGE = '{"schema":"iglu:com.snowplowanalytics.snowplow/web_page/jsonschema/1-0-0","data":{"id":"derived"}}'
COLUMNS = [
    "contexts_com_snowplowanalytics_snowplow_ua_parser_context_1",
    "contexts_com_snowplowanalytics_snowplow_web_page_1",
    "contexts_org_schema_web_page_1",
    "unstruct_event_com_snowplowanalytics_snowplow_link_click_1",
]


def lines() -> tuple[str, str]:
    full = event(
        ID_A,
        contexts=contexts(WEB_PAGE, SP_WEB_PAGE, WEB_PAGE_101),
        derived_contexts=contexts(DERIVED_WEB_PAGE, UA_PARSER),
        unstruct_event=unstruct(LINK_CLICK),
        page_title='Say "hi"\\',
    )
    return full, event(ID_B)


def atomic_values(line: str) -> dict[str, str | None]:
    values = dict(zip(FIELD_NAMES, line.split("\t"), strict=True))
    return {name: values[name] or None for name in ATOMIC}


def test_widerow_json_has_every_atomic_field_and_one_column_per_entity_family(
    spark: SparkSession, tmp_path: Path
) -> None:
    full, bare = lines()
    run = shred(tmp_path, [full, bare], "--format", "widerow")

    written = read_lines(run / "widerow")
    by_id = {json.loads(line)["event_id"]: line for line in written}
    # Key order: the 128 atomic fields in TSV order, then the entity columns by name.
    assert list(json.loads(by_id[ID_A])) == ATOMIC + COLUMNS
    assert json.loads(by_id[ID_A]) == {
        **atomic_values(full),
        # Custom contexts first, then derived ones; revisions of one model share a column.
        "contexts_com_snowplowanalytics_snowplow_ua_parser_context_1": [{"useragentFamily": "Firefox", "useragentMajor": "120"}],
        "contexts_com_snowplowanalytics_snowplow_web_page_1": [{"id": "p-1"}, {"id": "derived"}],
        "contexts_org_schema_web_page_1": [{"genre": "blog", "keywords": ["a", "b"], "n": 7}, {"genre": "news"}],
        "unstruct_event_com_snowplowanalytics_snowplow_link_click_1": {"targetUrl": "https://shop.example/a", "elementId": "nav"},
    }  # fmt: skip
    assert json.loads(by_id[ID_B]) == {**atomic_values(bare), **dict.fromkeys(COLUMNS)}
    # The entity data is spliced in as it was parsed: compact, keys in their order.
    assert (
        '"contexts_org_schema_web_page_1":[{"genre":"blog","keywords":["a","b"],"n":7},{"genre":"news"}]' in by_id[ID_A]
    )
    assert not (run / "atomic-events").exists() and not (run / "shredded-types").exists()
    assert json.loads((run / "summary.json").read_text())["counts"] == {"input": 2, "good": 2, "bad": 0}


def test_widerow_parquet_has_the_same_columns(spark: SparkSession, tmp_path: Path) -> None:
    full, bare = lines()
    run = shred(tmp_path, [full, bare, "not an event"], "--format", "widerow-parquet")

    table = spark.read.parquet(str(run / "widerow"))
    assert table.columns == ATOMIC + COLUMNS
    rows = {row["event_id"]: row.asDict() for row in table.collect()}
    assert rows[ID_A] == {
        **atomic_values(full),
        "contexts_com_snowplowanalytics_snowplow_ua_parser_context_1": ['{"useragentFamily":"Firefox","useragentMajor":"120"}'],
        "contexts_com_snowplowanalytics_snowplow_web_page_1": ['{"id":"p-1"}', '{"id":"derived"}'],
        "contexts_org_schema_web_page_1": ['{"genre":"blog","keywords":["a","b"],"n":7}', '{"genre":"news"}'],
        "unstruct_event_com_snowplowanalytics_snowplow_link_click_1": '{"targetUrl":"https://shop.example/a","elementId":"nav"}',
    }  # fmt: skip
    assert rows[ID_B] == {**atomic_values(bare), **dict.fromkeys(COLUMNS)}
    assert len(read_lines(run / "bad")) == 1
