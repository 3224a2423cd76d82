"""Build enriched-event TSV lines for tests: valid by default, any field overridable by name."""

from __future__ import annotations

from jobs.enriched.fields import FIELD_COUNT, FIELD_INDEX

DEFAULTS = {
    "app_id": "shop",
    "platform": "web",
    "etl_tstamp": "2026-11-01 10:00:05.000",
    "collector_tstamp": "2026-11-01 10:00:00.000",
    "dvce_created_tstamp": "2026-11-01 09:59:59.500",
    "event": "page_view",
    "v_tracker": "js-4.1.0",
    "v_collector": "ssc-3.2.0",
    "v_etl": "enrich-5.1.0",
    "page_url": "https://shop.example/",
    "event_fingerprint": "fp-1",
}

ID_A = "a0000000-0000-4000-8000-000000000001"
ID_B = "b0000000-0000-4000-8000-000000000002"
ID_C = "c0000000-0000-4000-8000-000000000003"


def event(event_id: str = ID_A, **fields: str) -> str:
    """A 131-field enriched line with `DEFAULTS`, the given id and the given fields."""
    values = [""] * FIELD_COUNT
    for name, value in {**DEFAULTS, "event_id": event_id, **fields}.items():
        values[FIELD_INDEX[name]] = value
    return "\t".join(values)


def fields_of(line: str) -> dict[str, str]:
    """The named fields of a 131-field line."""
    values = line.split("\t")
    assert len(values) == FIELD_COUNT, f"expected {FIELD_COUNT} fields, found {len(values)}"
    return {name: values[index] for name, index in FIELD_INDEX.items()}
