"""The shred job's legacy layout end to end: exact atomic-events and shredded-types lines, bad rows, the whole-event
rule (the rdb layout: test_shred_rdb.py)."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession

from tests.pipeline.helpers import (
    CONTEXTS,
    DUPLICATE,
    ID_A,
    ID_B,
    ID_C,
    LINK_CLICK,
    SP_WEB_PAGE,
    UA_PARSER,
    WEB_PAGE,
    atomic,
    contexts,
    event,
    hierarchy,
    read_lines,
    unstruct,
)
from tests.pipeline.helpers import shred as shred_run


def shred(tmp_path: Path, lines: list[str], *extra: str) -> Path:
    return shred_run(tmp_path, lines, "--layout", "legacy", *extra)


def shredded(run: Path) -> dict[str, list[str]]:
    """Lines per shredded-types folder, keyed `vendor=…/name=…/format=…/version=…`."""
    base = run / "shredded-types"
    folders = sorted({path.parent for path in base.rglob("part-*")})
    return {str(folder.relative_to(base)): read_lines(folder) for folder in folders}


def bad_rows(run: Path) -> list[dict[str, object]]:
    return sorted((json.loads(line) for line in read_lines(run / "bad")), key=lambda row: str(row["line"]))


def test_an_event_with_every_kind_of_entity(spark: SparkSession, tmp_path: Path) -> None:
    line = event(
        ID_A,
        collector_tstamp="2026-11-01 10:00:00.123456789",
        contexts=contexts(WEB_PAGE, SP_WEB_PAGE),
        unstruct_event=unstruct(LINK_CLICK),
        derived_contexts=contexts(
            DUPLICATE, UA_PARSER, envelope="iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-1"
        ),
        event="unstruct",
        se_value="1.50",
    )
    run = shred(tmp_path, [line])
    tstamp = "2026-11-01 10:00:00.123"

    assert read_lines(run / "atomic-events") == [atomic(line)]
    assert shredded(run) == {
        "vendor=com.snowplowanalytics.snowplow/name=duplicate/format=jsonschema/version=1-0-0": [
            '{"schema":{"vendor":"com.snowplowanalytics.snowplow","name":"duplicate","format":"jsonschema","version":"1-0-0"},'
            f'"data":{{"originalEventId":"{ID_B}"}},{hierarchy(ID_A, tstamp, "duplicate")}}}'
        ],
        "vendor=com.snowplowanalytics.snowplow/name=link_click/format=jsonschema/version=1-0-1": [
            '{"schema":{"vendor":"com.snowplowanalytics.snowplow","name":"link_click","format":"jsonschema","version":"1-0-1"},'
            f'"data":{{"targetUrl":"https://shop.example/a","elementId":"nav"}},{hierarchy(ID_A, tstamp, "link_click")}}}'
        ],
        "vendor=com.snowplowanalytics.snowplow/name=ua_parser_context/format=jsonschema/version=1-0-0": [
            '{"schema":{"vendor":"com.snowplowanalytics.snowplow","name":"ua_parser_context","format":"jsonschema","version":"1-0-0"},'
            f'"data":{{"useragentFamily":"Firefox","useragentMajor":"120"}},{hierarchy(ID_A, tstamp, "ua_parser_context")}}}'
        ],
        "vendor=com.snowplowanalytics.snowplow/name=web_page/format=jsonschema/version=1-0-0": [
            '{"schema":{"vendor":"com.snowplowanalytics.snowplow","name":"web_page","format":"jsonschema","version":"1-0-0"},'
            f'"data":{{"id":"p-1"}},{hierarchy(ID_A, tstamp, "web_page")}}}'
        ],
        "vendor=org.schema/name=WebPage/format=jsonschema/version=1-0-0": [
            '{"schema":{"vendor":"org.schema","name":"WebPage","format":"jsonschema","version":"1-0-0"},'
            f'"data":{{"genre":"blog","keywords":["a","b"],"n":7}},{hierarchy(ID_A, tstamp, "WebPage")}}}'
        ],
    }
    assert read_lines(run / "bad") == []
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {"input": 1, "good": 1, "bad": 0}
    assert summary["entities"] == 5
    assert summary["shredded_types"] == {
        "com.snowplowanalytics.snowplow/duplicate/jsonschema/1-0-0": 1,
        "com.snowplowanalytics.snowplow/link_click/jsonschema/1-0-1": 1,
        "com.snowplowanalytics.snowplow/ua_parser_context/jsonschema/1-0-0": 1,
        "com.snowplowanalytics.snowplow/web_page/jsonschema/1-0-0": 1,
        "org.schema/WebPage/jsonschema/1-0-0": 1,
    }
    assert (run / "_SUCCESS").exists()


def test_root_tstamp_is_the_collector_tstamp_to_the_millisecond(spark: SparkSession, tmp_path: Path) -> None:
    cases = {
        ID_A: ("2026-11-01 10:00:00", "2026-11-01 10:00:00.000"),
        ID_B: ("2026-11-01 10:00:00.5", "2026-11-01 10:00:00.500"),
        ID_C: ("2026-11-01 10:00:00.999999", "2026-11-01 10:00:00.999"),
    }
    run = shred(
        tmp_path,
        [
            event(id_, collector_tstamp=collector, contexts=contexts(SP_WEB_PAGE))
            for id_, (collector, _) in cases.items()
        ],
    )
    (lines,) = shredded(run).values()
    assert lines == sorted(
        '{"schema":{"vendor":"com.snowplowanalytics.snowplow","name":"web_page","format":"jsonschema","version":"1-0-0"},'
        f'"data":{{"id":"p-1"}},{hierarchy(id_, root, "web_page")}}}'
        for id_, (_, root) in cases.items()
    )


def test_an_event_without_json_fields_has_an_atomic_line_and_no_entities(spark: SparkSession, tmp_path: Path) -> None:
    line = event(ID_A)
    run = shred(tmp_path, [line])
    assert read_lines(run / "atomic-events") == [atomic(line)]
    assert shredded(run) == {}
    assert (run / "shredded-types").is_dir()
    assert json.loads((run / "summary.json").read_text())["shredded_types"] == {}


def test_entity_data_keeps_key_order_and_values(spark: SparkSession, tmp_path: Path) -> None:
    data = '{"z":1,"a":{"y":[1,2,{"b":null}],"x":true},"s":"tab\\there \\"quoted\\"","big":12345678901234567890}'
    entity = f'{{"schema":"iglu:com.acme/order/jsonschema/2-1-0","data":{data}}}'
    run = shred(tmp_path, [event(ID_A, contexts=contexts(entity))])
    assert shredded(run) == {
        "vendor=com.acme/name=order/format=jsonschema/version=2-1-0": [
            '{"schema":{"vendor":"com.acme","name":"order","format":"jsonschema","version":"2-1-0"},'
            f'"data":{data},{hierarchy(ID_A, "2026-11-01 10:00:00.000", "order")}}}'
        ]
    }


def test_an_object_holding_strings_that_start_with_a_brace_is_good(spark: SparkSession, tmp_path: Path) -> None:
    # Such text is parsed a second time to tell an object from a string; the entity stays as it came.
    data = '{"note":"{not an object}","escaped":"\\u007b"}'
    entity = f'{{"schema":"iglu:com.acme/note/jsonschema/1-0-0","data":{data}}}'
    run = shred(tmp_path, [event(ID_A, unstruct_event=unstruct(entity), event="unstruct")])
    assert bad_rows(run) == []
    assert shredded(run) == {
        "vendor=com.acme/name=note/format=jsonschema/version=1-0-0": [
            '{"schema":{"vendor":"com.acme","name":"note","format":"jsonschema","version":"1-0-0"},'
            f'"data":{{"note":"{{not an object}}","escaped":"{{"}},{hierarchy(ID_A, "2026-11-01 10:00:00.000", "note")}}}'
        ]
    }


WHY_BAD = [
    (
        {"contexts": "not json"},
        ["contexts: not a valid JSON object: 'not json'"],
    ),
    (
        {"derived_contexts": '{"schema":"' + CONTEXTS + '","data":[{"schema":"iglu:a.b/c/jsonschema/1-0-0","data":{}}'},
        # Quoted values are cut to 100 characters.
        ["derived_contexts: not a valid JSON object: '" + ('{"schema":"' + CONTEXTS + '","data":[{"schema":"iglu:a.b')[:100] + "'"],
    ),
    (
        {"unstruct_event": unstruct(LINK_CLICK, envelope="iglu:com.acme/unstruct_event/jsonschema/1-0-0")},
        ["unstruct_event: unknown envelope schema 'iglu:com.acme/unstruct_event/jsonschema/1-0-0'; "
         "allowed: iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-*"],
    ),
    (
        {"contexts": unstruct(SP_WEB_PAGE, envelope=CONTEXTS)},
        ["contexts: the envelope's data is not an array of entities {schema, data}"],
    ),
    (
        {"contexts": '{"data":[]}'},
        ["contexts: unknown envelope schema none; allowed: iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-*"],
    ),
    (
        {"derived_contexts": contexts(UA_PARSER, '{"schema":"iglu:com.acme/thing/jsonschema/1-0","data":{}}')},
        ["derived_contexts: entity 2 has no valid schema URI (given 'iglu:com.acme/thing/jsonschema/1-0'); "
         "allowed: iglu:VENDOR/NAME/FORMAT/MODEL-REVISION-ADDITION"],
    ),
    (
        {"contexts": contexts('{"data":{"a":1}}', '{"schema":"iglu:com.acme/x/jsonschema/1-0-0","data":"{\\"a\\":1}"}')},
        ["contexts: entity 1 has no valid schema URI (given none); allowed: iglu:VENDOR/NAME/FORMAT/MODEL-REVISION-ADDITION",
         "contexts: entity 2 (iglu:com.acme/x/jsonschema/1-0-0) has no data object"],
    ),
    (
        # Strings that read like objects: escaped, with spaces around the colon, and in unstruct_event.
        {"contexts": contexts('{"schema":"iglu:com.acme/x/jsonschema/1-0-0","data" : "\\u007b}"}'),
         "unstruct_event": unstruct('{"schema":"iglu:com.acme/y/jsonschema/1-0-0","data":"{}"}')},
        ["contexts: entity 1 (iglu:com.acme/x/jsonschema/1-0-0) has no data object",
         "unstruct_event: entity 1 (iglu:com.acme/y/jsonschema/1-0-0) has no data object"],
    ),
    (
        {"unstruct_event": unstruct('{"schema":"com.acme/click/jsonschema/1-0-0","data":{}}'),
         "contexts": contexts('{"schema":"iglu:com.acme/x/jsonschema/1-0-0"}')},
        ["contexts: entity 1 (iglu:com.acme/x/jsonschema/1-0-0) has no data object",
         "unstruct_event: entity 1 has no valid schema URI (given 'com.acme/click/jsonschema/1-0-0'); "
         "allowed: iglu:VENDOR/NAME/FORMAT/MODEL-REVISION-ADDITION"],
    ),
]  # fmt: skip


def test_an_event_with_a_bad_json_field_is_one_bad_row_and_nothing_else(spark: SparkSession, tmp_path: Path) -> None:
    # Valid entities beside the bad field: the event is written whole or not at all.
    base = {
        "contexts": contexts(WEB_PAGE),
        "unstruct_event": unstruct(LINK_CLICK),
        "derived_contexts": contexts(UA_PARSER),
    }
    bad = {event(ID_A, **{**base, **fields}): errors for fields, errors in WHY_BAD}
    good = event(ID_C, contexts=contexts(SP_WEB_PAGE))
    run = shred(tmp_path, [*bad, good])

    assert bad_rows(run) == [
        {
            "line": line,
            "errors": [{"level": "error", "message": message} for message in errors],
            "failure_tstamp": "2026-11-22T03:00:00.000Z",
        }
        for line, errors in sorted(bad.items())
    ]
    assert read_lines(run / "atomic-events") == [atomic(good)]
    assert list(shredded(run)) == [
        "vendor=com.snowplowanalytics.snowplow/name=web_page/format=jsonschema/version=1-0-0"
    ]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {"input": len(WHY_BAD) + 1, "good": 1, "bad": len(WHY_BAD)}
    assert summary["shredded_types"] == {"com.snowplowanalytics.snowplow/web_page/jsonschema/1-0-0": 1}


def test_lines_the_enriched_parser_rejects_are_bad_rows(spark: SparkSession, tmp_path: Path) -> None:
    not_a_uuid = event("nope", contexts="not json")
    short = "a\tb\tc"
    run = shred(tmp_path, [not_a_uuid, short])
    assert bad_rows(run) == [
        {
            "line": short,
            "errors": [{"level": "error", "message": "expected 131 tab-separated fields, found 3"}],
            "failure_tstamp": "2026-11-22T03:00:00.000Z",
        },
        {
            # The parser's error alone: the JSON fields of an invalid line are not looked at.
            "line": not_a_uuid,
            "errors": [{"level": "error", "message": "event_id 'nope' is not a UUID"}],
            "failure_tstamp": "2026-11-22T03:00:00.000Z",
        },
    ]
    assert read_lines(run / "atomic-events") == []
    assert json.loads((run / "summary.json").read_text())["counts"] == {"input": 2, "good": 0, "bad": 2}
