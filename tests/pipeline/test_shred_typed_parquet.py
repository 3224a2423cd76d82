"""Typed wide-row Parquet from a shred run: entity columns typed from their Iglu schemas, read back with Spark SQL
path expressions, upstream's Parquet schema, and `loader_iglu_error` rows for what cannot be typed."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession

from jobs.enriched.badrows import PARSING_ERROR_SCHEMA
from jobs.shred import rdb
from tests.pipeline.helpers import (
    ID_A,
    ID_B,
    ID_C,
    IGLU_CENTRAL,
    LINK_CLICK,
    contexts,
    event,
    read_lines,
    resolver_config,
    shred,
    unstruct,
)
from tests.pipeline.test_iglu_parquet import UPSTREAM, _groups, _parquet_footer

SESSION = (
    '{"schema":"iglu:com.snowplowanalytics.snowplow/client_session/jsonschema/1-0-1","data":{"userId":"u-1",'
    '"sessionId":"s-1","sessionIndex":3,"previousSessionId":null,"storageMechanism":"COOKIE_1","firstEventId":"e-0"}}'
)
OLD_SESSION = (
    '{"schema":"iglu:com.snowplowanalytics.snowplow/client_session/jsonschema/1-0-0","data":{"userId":"u-2",'
    '"sessionId":"s-2","sessionIndex":1,"previousSessionId":"s-0","storageMechanism":"SQLITE"}}'
)
UNKNOWN = '{"schema":"iglu:com.acme/unknown/jsonschema/1-0-0","data":{"a":1}}'


def parquet_run(spark: SparkSession, tmp_path: Path, lines: list[str]) -> Path:
    return shred(tmp_path, lines, "--format", "widerow-parquet", "--iglu-config", str(resolver_config(tmp_path)))


def test_entity_columns_are_typed_and_read_with_sql_paths(spark: SparkSession, tmp_path: Path) -> None:
    lines = [
        event(ID_A, event="unstruct", contexts=contexts(SESSION, OLD_SESSION), unstruct_event=unstruct(LINK_CLICK)),
        event(ID_B, contexts=contexts(OLD_SESSION)),
    ]
    run = parquet_run(spark, tmp_path, lines)

    spark.read.parquet(str(run / rdb.GOOD)).createOrReplaceTempView("events")
    rows = spark.sql(
        "select event_id, contexts_com_snowplowanalytics_snowplow_client_session_1[0].session_id as first_session,"
        " get(contexts_com_snowplowanalytics_snowplow_client_session_1, 1).previous_session_id as previous,"
        " size(contexts_com_snowplowanalytics_snowplow_client_session_1) as sessions,"
        " contexts_com_snowplowanalytics_snowplow_client_session_1[0].session_index + 1 as next_index,"
        " contexts_com_snowplowanalytics_snowplow_client_session_1[0].first_event_id as first_event,"
        " unstruct_event_com_snowplowanalytics_snowplow_link_click_1.target_url as target,"
        " unstruct_event_com_snowplowanalytics_snowplow_link_click_1.element_id as element"
        " from events order by event_id"
    ).collect()
    assert [row.asDict() for row in rows] == [
        {"event_id": ID_A, "first_session": "s-1", "previous": "s-0", "sessions": 2, "next_index": 4,
         "first_event": "e-0", "target": "https://shop.example/a", "element": "nav"},
        {"event_id": ID_B, "first_session": "s-2", "previous": None, "sessions": 1, "next_index": 2,
         "first_event": None, "target": None, "element": None},
    ]  # fmt: skip
    assert not (run / rdb.BAD).exists() or read_lines(run / rdb.BAD) == []
    message = json.loads((run / "shredding_complete.json").read_text())["data"]["typesInfo"]
    assert message["transformation"] == "WIDEROW" and message["fileFormat"] == "PARQUET"


def test_upstream_input_writes_upstreams_entity_parquet_schema(spark: SparkSession, tmp_path: Path) -> None:
    lines = (UPSTREAM / "input-events").read_text(encoding="utf-8").splitlines()
    run = parquet_run(spark, tmp_path, lines)

    files = sorted((run / rdb.GOOD).glob("*.parquet"))
    assert files
    expected = _groups((UPSTREAM / "parquet-output-schema").read_text())
    # upstream's file also has the duplicate context, which only its own in-batch dedup adds
    del expected["contexts_com_snowplowanalytics_snowplow_duplicate_1"]
    for file in files:  # every file holds every column
        folder = tmp_path / f"one-{file.name}"
        folder.mkdir()
        (folder / file.name).symlink_to(file)
        written = _groups(_parquet_footer(spark, folder).replace("(STRING)", "(UTF8)"))
        assert list(written) == list(expected), file.name
        assert written == expected, file.name
    # as upstream: 46 good, the 2 short lines and the 2 events whose session_context has a null required `id`
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {"input": 50, "good": 46, "bad": 4}
    assert summary["bad_rows"] == {"loader_parsing_error": 2, "loader_iglu_error": 2}
    theirs = [json.loads(line) for line in (UPSTREAM / "parquet-output-badrows").read_text().splitlines()]
    ours = [json.loads(line) for line in read_lines(run / rdb.BAD)]
    for rows in (theirs, ours):
        rows.sort(key=lambda row: json.dumps(row["data"]["payload"]))
        for row in rows:
            row["data"]["processor"] = None
    assert [(row["schema"], row["data"]["payload"]) for row in ours] == [
        (row["schema"], row["data"]["payload"]) for row in theirs
    ]
    parsing = [row["data"]["failure"] for row in ours if row["schema"] == PARSING_ERROR_SCHEMA]
    assert parsing == [row["data"]["failure"] for row in theirs if row["schema"] == PARSING_ERROR_SCHEMA]
    # the failing schema is upstream's; `value` and `expected` are the column's data and type here (upstream: the
    # value at fault and its type's name, {"value": null, "expected": "String"})
    iglu = [[f["schemaKey"] for f in row["data"]["failure"]] for row in ours if row["schema"] == rdb.IGLU_ERROR_SCHEMA]
    assert iglu == [["iglu:com.mparticle.snowplow/session_context/jsonschema/1-0-0"]] * 2


def test_a_family_without_schema_and_data_that_does_not_fit_are_loader_iglu_errors(
    spark: SparkSession, tmp_path: Path
) -> None:
    wrong_type = SESSION.replace('"sessionIndex":3', '"sessionIndex":"three"')
    lines = [
        event(ID_A, contexts=contexts(SESSION)),
        event(ID_B, contexts=contexts(UNKNOWN)),
        event(ID_C, contexts=contexts(wrong_type)),
    ]
    run = parquet_run(spark, tmp_path, lines)

    bad = {row["data"]["payload"]["event_id"]: row for row in map(json.loads, read_lines(run / rdb.BAD))}
    assert sorted(bad) == [ID_B, ID_C]
    assert all(row["schema"] == rdb.IGLU_ERROR_SCHEMA for row in bad.values())
    (unresolved,) = bad[ID_B]["data"]["failure"]
    assert unresolved["schemaKey"] == "iglu:com.acme/unknown/jsonschema/1-0-0"
    assert unresolved["error"]["error"] == "ResolutionError"
    (cast,) = bad[ID_C]["data"]["failure"]
    assert cast["schemaKey"] == "iglu:com.snowplowanalytics.snowplow/client_session/jsonschema/1-0-1"
    assert cast["value"][0]["sessionIndex"] == "three"
    assert cast["expected"].startswith("array<struct<")

    table = spark.read.parquet(str(run / rdb.GOOD))
    assert [row["event_id"] for row in table.collect()] == [ID_A]
    assert "contexts_com_acme_unknown_1" in table.columns  # the family is a column (JSON text), its event is bad
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {"input": 3, "good": 1, "bad": 2}
    assert summary["bad_rows"] == {"loader_parsing_error": 0, "loader_iglu_error": 2}
    assert summary["iglu"]["failures"] == [
        "iglu:com.acme/unknown/jsonschema/1-0-0 not found in Iglu Client Embedded (NotFound)"
    ]
    assert summary["shredded_types"] == {"com.snowplowanalytics.snowplow/client_session/jsonschema/1-0-1": 1}


def acme_schema(folder: Path, name: str, properties: dict[str, object]) -> None:
    """A com.acme schema 1-0-0 in an embedded repository at `folder`."""
    path = folder / "schemas" / "com.acme" / name / "jsonschema" / "1-0-0"
    path.parent.mkdir(parents=True)
    self_ = {"vendor": "com.acme", "name": name, "format": "jsonschema", "version": "1-0-0"}
    schema = "http://iglucentral.com/schemas/com.snowplowanalytics.self-desc/schema/jsonschema/1-0-0#"
    path.write_text(json.dumps({"$schema": schema, "self": self_, "type": "object", "properties": properties}))


def test_properties_that_would_share_a_field_make_loader_iglu_errors(spark: SparkSession, tmp_path: Path) -> None:
    """Issue 29: `fooBar` and `foo_bar` (`a.b` and `a_b`; `userId` and `user_id` inside an object) would be one
    Parquet field, so one value of each pair would be lost: every event holding such an entity is a bad row that
    names them, and the other events are written."""
    acme = tmp_path / "acme"
    text, number = {"type": "string"}, {"type": "integer"}
    acme_schema(acme, "collide", {"fooBar": text, "foo_bar": text, "a.b": number, "a_b": number})
    inner = {"type": "object", "properties": {"userId": text, "user_id": text}}
    acme_schema(acme, "nested_collide", {"inner": inner, "other": text})
    collide = '{"schema":"iglu:com.acme/collide/jsonschema/1-0-0","data":{"fooBar":"x","foo_bar":"y","a.b":1,"a_b":2}}'
    nested = '{"schema":"iglu:com.acme/nested_collide/jsonschema/1-0-0","data":{"inner":{"userId":"u","user_id":"v"}}}'
    lines = [
        event(ID_A, event="unstruct", unstruct_event=unstruct(collide)),
        event(ID_B, contexts=contexts(nested)),
        event(ID_C, contexts=contexts(SESSION)),
    ]
    repositories = [
        {"name": name, "priority": priority, "vendorPrefixes": [], "connection": {"embedded": {"path": str(path)}}}
        for name, priority, path in (("Iglu Client Embedded", 0, IGLU_CENTRAL), ("Acme", 1, acme))
    ]
    config = resolver_config(tmp_path, *repositories)
    run = shred(tmp_path, lines, "--format", "widerow-parquet", "--iglu-config", str(config))

    shared = "cannot be typed for Parquet: schema 1-0-0 has properties that would share a Parquet field"
    allowed = (
        "allowed: property names that differ once snake_cased and characters other than A-Z, a-z, 0-9 and _ made _"
    )
    collide_message = (
        f"{shared} of unstruct_event_com_acme_collide_1 (one value of each would be lost): $['a.b'] and $.a_b as"
        f" a_b; $.fooBar and $.foo_bar as foo_bar; {allowed}"
    )
    nested_message = (
        f"{shared} of contexts_com_acme_nested_collide_1 (one value of each would be lost): $.inner.userId and"
        f" $.inner.user_id as inner.user_id; {allowed}"
    )
    bad = {row["data"]["payload"]["event_id"]: row for row in map(json.loads, read_lines(run / rdb.BAD))}
    assert sorted(bad) == [ID_A, ID_B]
    assert [bad[i]["schema"] for i in (ID_A, ID_B)] == [rdb.IGLU_ERROR_SCHEMA] * 2
    assert bad[ID_A]["data"]["failure"] == [
        {"schemaKey": "iglu:com.acme/collide/jsonschema/1-0-0", "message": collide_message}
    ]
    assert bad[ID_B]["data"]["failure"] == [
        {"schemaKey": "iglu:com.acme/nested_collide/jsonschema/1-0-0", "message": nested_message}
    ]
    assert bad[ID_A]["data"]["payload"]["unstruct_event"] == json.loads(unstruct(collide))  # all four values kept

    table = spark.read.parquet(str(run / rdb.GOOD))
    rows = table.select("event_id", "contexts_com_snowplowanalytics_snowplow_client_session_1").collect()
    assert [(row[0], row[1][0]["session_id"]) for row in rows] == [(ID_C, "s-1")]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {"input": 3, "good": 1, "bad": 2}
    assert summary["bad_rows"] == {"loader_parsing_error": 0, "loader_iglu_error": 2}
    assert summary["iglu"]["failures"] == [  # in column order: contexts first
        f"iglu:com.acme/nested_collide/jsonschema/1-0-0 is not a usable schema: {nested_message}",
        f"iglu:com.acme/collide/jsonschema/1-0-0 is not a usable schema: {collide_message}",
    ]
