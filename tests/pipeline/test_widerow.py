"""Wide rows: column naming, the typed atomic columns, the JSON lines and the Parquet columns of
`shred --format widerow[-parquet]`, compared with upstream's (snowplow-rdb-loader 6.1.5) test fixtures."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.enriched.fields import FIELD_INDEX, FIELD_NAMES
from jobs.enriched.parse import parse_events
from jobs.frames import local_frame
from jobs.iglu.names import column_name
from jobs.shred.lines import shred_events
from jobs.shred.widerow import (
    ATOMIC_TYPES,
    Family,
    entity_families,
    iso_instant,
    typed_atomic_columns,
    widerow_json,
    widerow_table,
)
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
UPSTREAM = Path(__file__).parents[1] / "data" / "upstream" / "widerow"
TIMESTAMPS = [name for name, spark_type in ATOMIC_TYPES.items() if spark_type == "timestamp"]


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


# --- upstream's fixtures -------------------------------------------------------------------------------------------

# A top-level column of upstream's Parquet schema (`message spark_schema {…}`, fields indented by 2 spaces).
_PARQUET_PRIMITIVE = re.compile(r"^  (?:optional|required) (\w+) (\w+)(?: \((.+)\))?;$")
_PARQUET_GROUP = re.compile(r"^  optional group (\w+)(?: \(LIST\))? \{$")
_SPARK_TYPE = {
    ("binary", "UTF8"): "string",
    ("int64", "TIMESTAMP_MICROS"): "timestamp",
    ("int32", None): "int",
    ("double", None): "double",
    ("boolean", None): "boolean",
    ("int64", "DECIMAL(18,2)"): "decimal(18,2)",
}


def upstream_parquet_schema() -> tuple[list[tuple[str, str]], list[str]]:
    """Upstream's expected Parquet schema: the atomic columns (name, Spark type) and the entity column names."""
    atomic, entities = [], []
    for line in (UPSTREAM / "parquet-output-schema").read_text().splitlines():
        if primitive := _PARQUET_PRIMITIVE.match(line):
            physical, name, annotation = primitive.groups()
            atomic.append((name, _SPARK_TYPE[physical, annotation]))
        elif group := _PARQUET_GROUP.match(line):
            entities.append(group.group(1))
    return atomic, entities


def upstream_lines() -> list[str]:
    return (UPSTREAM / "input-events").read_text(encoding="utf-8").splitlines()


def decide(spark: SparkSession, lines: list[str]) -> tuple[DataFrame, list[Family]]:
    """The good events and their entity families, as the shred job builds them (`jobs.shred.widerow_writer.write_wide_rows`)."""
    raw = local_frame(spark, [(line,) for line in lines], "value string")
    # Persisted before its types are read, as the job does: Spark plans the read of the types over the decided
    # lines' whole plan otherwise, which takes longer than the tests.
    good = shred_events(parse_events(raw, ("app_id",))).where("good").persist()
    type_rows = (
        good.select(F.explode("entities").alias("e"))
        .groupBy(*(F.col("e")[name].alias(name) for name in ("kind", "vendor", "name", "version")))
        .count()
        .collect()
    )
    return good, entity_families(type_rows)


def test_atomic_types_are_upstreams() -> None:
    atomic, _ = upstream_parquet_schema()
    assert list(ATOMIC_TYPES.items()) == atomic
    assert list(ATOMIC_TYPES) == ATOMIC
    assert [name for name, spark_type in atomic if spark_type == "decimal(18,2)"] == [
        "tr_total", "tr_tax", "tr_shipping", "ti_price", "tr_total_base", "tr_tax_base", "tr_shipping_base", "ti_price_base",
    ]  # fmt: skip


def decided_once(spark: SparkSession, lines: list[str]) -> Iterator[tuple[DataFrame, list[Family]]]:
    """`lines` decided, the good events persisted for a module's tests (freed after them)."""
    good, families = decide(spark, lines)
    yield good, families
    good.unpersist()


@pytest.fixture(scope="module")
def upstream_decided(spark: SparkSession) -> Iterator[tuple[DataFrame, list[Family]]]:
    """Upstream's input events decided once for the tests that compare with upstream's outputs."""
    yield from decided_once(spark, upstream_lines())


def test_widerow_parquet_schema_is_upstreams(
    spark: SparkSession, tmp_path: Path, upstream_decided: tuple[DataFrame, list[Family]]
) -> None:
    good, families = upstream_decided
    widerow_table(good, families).write.parquet(str(tmp_path / "widerow"))

    table = spark.read.parquet(str(tmp_path / "widerow"))
    atomic, upstream_entities = upstream_parquet_schema()
    entities = [family.column for family in families]
    # Names, order and types of the 128 atomic columns are upstream's; the entity columns stay JSON text.
    assert [(field.name, field.dataType.simpleString()) for field in table.schema.fields] == atomic + [
        (column, "array<string>" if column.startswith("contexts_") else "string") for column in entities
    ]
    assert table.count() == 48
    # Upstream's schema file also has contexts_…_duplicate_1, which no event of the input carries.
    assert set(upstream_entities) - set(entities) == {"contexts_com_snowplowanalytics_snowplow_duplicate_1"}
    # Entity columns in upstream's order (contexts, then vendor, name): com.optimizely.optimizelyx after com.optimizely.
    assert entities == [column for column in upstream_entities if column in entities]


def _family_data(field_text: str, column: str) -> list[Any]:
    """The data of the contexts of one field (custom or derived) that belong to the wide-row column `column`."""
    if not field_text:
        return []
    found = []
    for entity in json.loads(field_text)["data"]:
        vendor, name, _, version = entity["schema"].removeprefix("iglu:").split("/")
        if column_name("contexts", vendor, name, version.split("-")[0]) == column:
            found.append(entity["data"])
    return found


def test_widerow_json_matches_upstreams_expected_lines(upstream_decided: tuple[DataFrame, list[Family]]) -> None:
    lines = upstream_lines()
    good, families = upstream_decided
    ours = {row["event_id"]: row for row in (json.loads(r["text"]) for r in widerow_json(good, families).collect())}
    expected = {
        row["event_id"]: row
        for row in map(json.loads, (UPSTREAM / "output-widerows").read_text(encoding="utf-8").splitlines())
    }
    by_id = {fields[FIELD_INDEX["event_id"]]: fields for fields in (line.split("\t") for line in lines)}
    columns = [family.column for family in families]

    assert ours.keys() == expected.keys() and len(ours) == 48
    replaced = 0
    for event_id, row in ours.items():
        upstream, fields = expected[event_id], by_id[event_id]
        # Key order: ours is the atomic fields in TSV order, then every entity column of the run by name
        # (upstream's comes from a Scala hash map: no order to follow).
        assert list(row) == ATOMIC + columns
        # Every entity column is in every line of ours (null when the event has none); upstream leaves it out.
        assert upstream.keys() <= row.keys()
        assert all(row[column] is None for column in row.keys() - upstream.keys())
        assert row.keys() - upstream.keys() <= set(columns)
        for key, value in upstream.items():
            custom = _family_data(fields[FIELD_INDEX["contexts"]], key)
            derived = _family_data(fields[FIELD_INDEX["derived_contexts"]], key)
            if key.startswith("contexts_") and custom and derived:
                # Upstream's known bug (SDK `toJson` merges maps): a derived context REPLACES the custom ones of
                # its family. We keep both, custom first, as upstream's Parquet does.
                assert value == derived and row[key] == custom + derived, key
                replaced += 1
            else:
                # Every other value is upstream's: ISO timestamps with nanoseconds, ints, nulls, entity data.
                assert row[key] == value, (event_id, key)
    assert replaced == 42  # client_session is both a custom and a derived context in 42 of the 48 events


# --- typed values --------------------------------------------------------------------------------------------------

TYPED = event(
    ID_A.upper(),
    etl_tstamp="2026-11-01 10:00:05.123456789",
    collector_tstamp="2026-11-01 10:00:00",
    dvce_created_tstamp="2026-11-01 09:59:59.5",
    true_tstamp="2026-11-01 09:59:58.000001",
    txn_id="42",
    domain_sessionidx="3",
    geo_latitude="51.5074",
    geo_longitude="-0.1278",
    se_value="10000000",
    tr_total="12.5",
    tr_tax="0.1",
    ti_price_base="1e3",
    br_cookies="1",
    dvce_ismobile="0",
    page_urlport="443",
)


def micros(text: str) -> int:
    """A UTC `yyyy-MM-dd HH:mm:ss[.ffffff]` as microseconds since the epoch."""
    stamp = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return int(stamp.timestamp()) * 1_000_000 + stamp.microsecond


def collect_table(table: DataFrame) -> dict[str, dict[str, Any]]:
    """Rows by event_id; timestamps as microseconds since the epoch (not local `datetime`s)."""
    columns = [F.unix_micros(name).alias(name) if name in TIMESTAMPS else F.col(name) for name in table.columns]
    return {row["event_id"]: row.asDict() for row in table.select(*columns).collect()}


@pytest.fixture(scope="module")
def typed_decided(spark: SparkSession) -> Iterator[tuple[DataFrame, list[Family]]]:
    """TYPED and a bare event decided once for the Parquet and the JSON typed-value tests."""
    yield from decided_once(spark, [TYPED, event(ID_B)])


def test_widerow_parquet_has_typed_atomic_values(
    spark: SparkSession, tmp_path: Path, typed_decided: tuple[DataFrame, list[Family]]
) -> None:
    good, families = typed_decided
    widerow_table(good, families).write.parquet(str(tmp_path / "widerow"))

    rows = collect_table(spark.read.parquet(str(tmp_path / "widerow")))
    typed = rows[ID_A]  # event_id lower-cased, as upstream writes a UUID
    assert {name: typed[name] for name in (*TIMESTAMPS, "event_id")} == {
        "etl_tstamp": micros("2026-11-01 10:00:05.123456"),  # nanoseconds cut: Spark keeps microseconds
        "collector_tstamp": micros("2026-11-01 10:00:00"),
        "dvce_created_tstamp": micros("2026-11-01 09:59:59.500"),
        "dvce_sent_tstamp": None,
        "refr_dvce_tstamp": None,
        "derived_tstamp": None,
        "true_tstamp": micros("2026-11-01 09:59:58.000001"),
        "event_id": ID_A,
    }
    assert {name: typed[name] for name in ATOMIC if ATOMIC_TYPES[name] not in ("string", "timestamp")} == {
        "txn_id": 42, "domain_sessionidx": 3, "geo_latitude": 51.5074, "geo_longitude": -0.1278, "page_urlport": 443,
        "refr_urlport": None, "se_value": 1.0e7, "tr_total": Decimal("12.50"), "tr_tax": Decimal("0.10"),
        "tr_shipping": None, "ti_price": None, "ti_quantity": None, "pp_xoffset_min": None, "pp_xoffset_max": None,
        "pp_yoffset_min": None, "pp_yoffset_max": None,
        **dict.fromkeys(name for name in ATOMIC if name.startswith("br_features_")),
        "br_cookies": True, "br_viewwidth": None, "br_viewheight": None, "dvce_ismobile": False,
        "dvce_screenwidth": None, "dvce_screenheight": None, "doc_width": None, "doc_height": None,
        "tr_total_base": None, "tr_tax_base": None, "tr_shipping_base": None, "ti_price_base": Decimal("1000.00"),
    }  # fmt: skip
    assert typed["app_id"] == "shop" and typed["user_id"] is None  # strings as given, empty -> null
    assert rows[ID_B]["collector_tstamp"] == micros("2026-11-01 10:00:00")
    assert rows[ID_B]["etl_tstamp"] == micros("2026-11-01 10:00:05")
    assert rows[ID_B]["tr_total"] is None and rows[ID_B]["br_cookies"] is None


def test_typed_atomic_columns_are_null_for_values_that_are_not_of_their_type(spark: SparkSession) -> None:
    # What the shred job turns into bad rows never reaches the wide rows; the conversion is null-safe anyway
    # (Spark 4 runs with ANSI mode on, where a plain cast of bad text fails the job).
    line = event(
        etl_tstamp="2026-02-30 10:00:00",
        dvce_created_tstamp="2026-11-01",
        dvce_sent_tstamp="yesterday",
        txn_id="1.5",
        domain_sessionidx="99999999999",
        geo_latitude="NaN",
        geo_longitude="Infinity",
        se_value="ten",
        tr_total="123456789012345678",
        tr_tax="abc",
        br_cookies="true",
        dvce_ismobile="2",
    )
    lines = local_frame(spark, [(line,)], "value string")
    row = lines.select(*typed_atomic_columns(F.split("value", "\t"))).collect()[0].asDict()
    assert {name for name, value in row.items() if value is None} >= {
        "etl_tstamp", "dvce_created_tstamp", "dvce_sent_tstamp", "txn_id", "domain_sessionidx", "geo_latitude",
        "geo_longitude", "se_value", "tr_total", "tr_tax", "br_cookies", "dvce_ismobile",
    }  # fmt: skip
    assert row["collector_tstamp"] is not None


# Text -> what Java's Instant.toString writes (None: not an instant the SDK reads).
ISO_INSTANTS: list[tuple[str, str | None]] = [
    ("2021-10-15 09:06:24.026", "2021-10-15T09:06:24.026Z"),
    ("2021-10-15 09:06:24.0260", "2021-10-15T09:06:24.026Z"),
    ("2021-10-15 09:06:24.1", "2021-10-15T09:06:24.100Z"),
    ("2021-10-15 09:06:24.000001", "2021-10-15T09:06:24.000001Z"),
    ("2021-10-15 09:06:42.4071856", "2021-10-15T09:06:42.407185600Z"),
    ("2021-10-15 09:06:26.323397414", "2021-10-15T09:06:26.323397414Z"),
    ("2021-10-15 09:06:24.000000001", "2021-10-15T09:06:24.000000001Z"),
    ("2021-10-15 09:06:24.000", "2021-10-15T09:06:24Z"),
    ("2021-10-15 09:06:24", "2021-10-15T09:06:24Z"),
    ("2021-10-15T09:06:24.5", "2021-10-15T09:06:24.500Z"),
    ("2024-02-29 23:59:59", "2024-02-29T23:59:59Z"),
    ("2023-02-29 23:59:59", None),
    ("2021-10-15 24:00:00", None),
    ("2021-10-15 09:06", None),
    ("2021-10-15 09:06:24.1234567891", None),
    ("2021-10-15 09:06:24Z", None),
    ("", None),
]


def test_iso_instant_writes_what_javas_instant_to_string_writes(spark: SparkSession) -> None:
    # Every case in one frame (one Spark job, not one per case); each case is still compared on its own.
    frame = local_frame(spark, [(text,) for text, _ in ISO_INSTANTS], "t string")
    got = [(row[0], row[1]) for row in frame.select("t", iso_instant(F.col("t"))).collect()]
    assert got == [(text, iso) for text, iso in ISO_INSTANTS]


def test_widerow_json_has_typed_atomic_values_and_geo_location(
    typed_decided: tuple[DataFrame, list[Family]],
) -> None:
    good, families = typed_decided
    texts = {json.loads(row["text"])["event_id"]: row["text"] for row in widerow_json(good, families).collect()}

    text = texts[ID_A]
    # Doubles as Java's Double.toString (1.0E7), money fields as the SDK's doubles (not decimals).
    for part in (
        '"etl_tstamp":"2026-11-01T10:00:05.123456789Z"', '"collector_tstamp":"2026-11-01T10:00:00Z"',
        '"dvce_created_tstamp":"2026-11-01T09:59:59.500Z"', '"txn_id":42', '"se_value":1.0E7', '"tr_total":12.5',
        '"ti_price_base":1000.0', '"br_cookies":true', '"dvce_ismobile":false', '"tr_shipping":null',
    ):  # fmt: skip
        assert part in text, part
    # geo_location ("lat,lon", each as Java writes a double) when both are present: last, as the SDK adds it.
    assert text.endswith(',"geo_location":"51.5074,-0.1278"}')
    row = json.loads(text)
    assert list(row) == [*ATOMIC, "geo_location"]
    assert row["true_tstamp"] == "2026-11-01T09:59:58.000001Z" and row["geo_latitude"] == 51.5074
    assert "geo_location" not in json.loads(texts[ID_B])


# --- the job ---------------------------------------------------------------------------------------------------------

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
    """The atomic fields as text (empty -> null): every non-null field of `lines()` is a string or a timestamp."""
    values = dict(zip(FIELD_NAMES, line.split("\t"), strict=True))
    return {name: values[name] or None for name in ATOMIC}


def json_values(line: str) -> dict[str, str | None]:
    """`atomic_values` with the timestamps as upstream's JSON writes them (the helpers' have milliseconds)."""
    values = atomic_values(line)
    for name in TIMESTAMPS:
        if (text := values[name]) is not None:
            seconds, _, fraction = text.partition(".")
            values[name] = seconds.replace(" ", "T") + (f".{fraction}" if fraction.strip("0") else "") + "Z"
    return values


def test_widerow_json_has_every_atomic_field_and_one_column_per_entity_family(
    spark: SparkSession, tmp_path: Path
) -> None:
    full, bare = lines()
    run = shred(tmp_path, [full, bare], "--format", "widerow", "--layout", "legacy")

    written = read_lines(run / "widerow")
    by_id = {json.loads(line)["event_id"]: line for line in written}
    # Key order: the 128 atomic fields in TSV order, then the entity columns by name.
    assert list(json.loads(by_id[ID_A])) == ATOMIC + COLUMNS
    assert json.loads(by_id[ID_A]) == {
        **json_values(full),
        # Custom contexts first, then derived ones; revisions of one model share a column.
        "contexts_com_snowplowanalytics_snowplow_ua_parser_context_1": [{"useragentFamily": "Firefox", "useragentMajor": "120"}],
        "contexts_com_snowplowanalytics_snowplow_web_page_1": [{"id": "p-1"}, {"id": "derived"}],
        "contexts_org_schema_web_page_1": [{"genre": "blog", "keywords": ["a", "b"], "n": 7}, {"genre": "news"}],
        "unstruct_event_com_snowplowanalytics_snowplow_link_click_1": {"targetUrl": "https://shop.example/a", "elementId": "nav"},
    }  # fmt: skip
    assert json.loads(by_id[ID_B]) == {**json_values(bare), **dict.fromkeys(COLUMNS)}
    assert json.loads(by_id[ID_B])["dvce_created_tstamp"] == "2026-11-01T09:59:59.500Z"
    # The entity data is spliced in as it was parsed: compact, keys in their order.
    assert (
        '"contexts_org_schema_web_page_1":[{"genre":"blog","keywords":["a","b"],"n":7},{"genre":"news"}]' in by_id[ID_A]
    )
    assert not (run / "atomic-events").exists() and not (run / "shredded-types").exists()
    assert json.loads((run / "summary.json").read_text())["counts"] == {"input": 2, "good": 2, "bad": 0}


def test_widerow_parquet_has_the_same_columns(spark: SparkSession, tmp_path: Path) -> None:
    full, bare = lines()
    run = shred(tmp_path, [full, bare, "not an event"], "--format", "widerow-parquet", "--layout", "legacy")

    table = spark.read.parquet(str(run / "widerow"))
    assert table.columns == ATOMIC + COLUMNS
    assert [table.schema[name].dataType.simpleString() for name in ATOMIC] == list(ATOMIC_TYPES.values())
    rows = collect_table(table)
    timestamps = {name: micros(text) for name, text in atomic_values(full).items() if name in TIMESTAMPS and text}
    assert rows[ID_A] == {
        **atomic_values(full),
        **timestamps,
        "contexts_com_snowplowanalytics_snowplow_ua_parser_context_1": ['{"useragentFamily":"Firefox","useragentMajor":"120"}'],
        "contexts_com_snowplowanalytics_snowplow_web_page_1": ['{"id":"p-1"}', '{"id":"derived"}'],
        "contexts_org_schema_web_page_1": ['{"genre":"blog","keywords":["a","b"],"n":7}', '{"genre":"news"}'],
        "unstruct_event_com_snowplowanalytics_snowplow_link_click_1": '{"targetUrl":"https://shop.example/a","elementId":"nav"}',
    }  # fmt: skip
    assert rows[ID_B] == {**atomic_values(bare), **timestamps, **dict.fromkeys(COLUMNS)}
    assert len(read_lines(run / "bad")) == 1
