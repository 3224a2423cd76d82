"""Re-identifying synthetic duplicates: a deterministic new event_id and the `duplicate` context."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from jobs.enriched.fields import FIELD_COUNT, FIELD_INDEX
from jobs.enriched.parse import lower_hex

DUPLICATE_SCHEMA = "iglu:com.snowplowanalytics.snowplow/duplicate/jsonschema/1-0-0"
CONTEXTS_SCHEMA = "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-0"
# The envelope's data array: the first `"data":[` of the field (the envelope's own `schema` value is a
# plain iglu URI, so the first match is the envelope's array whichever key comes first).
_EMPTY_DATA = r'^(.*?"data"\s*:\s*\[)\s*\]'
_NONEMPTY_DATA = r'^(.*?"data"\s*:\s*\[)'
_ENVELOPE = r'^\s*\{.*"data"\s*:\s*\[.*\}\s*$'
_ORIGINAL_ID = (
    r'"data"\s*:\s*\[\{"schema":"'
    + DUPLICATE_SCHEMA.replace(".", r"\.")
    + r'","data":\{"originalEventId":"([^"]+)"\}\}'
)


def uuid5(namespace: Column, name: Column) -> Column:
    """RFC 4122 UUID version 5 of `name` in the `namespace` UUID, like Python's `uuid.uuid5`.

    Built from `sha1`, so it is deterministic: a rerun, or Spark recomputing a lost partition, gives the
    same id, and shredded entities never lose their parent.
    """
    digest = F.sha1(F.concat(F.unhex(F.regexp_replace(namespace, "-", "")), F.encode(name, "UTF-8")))
    variant = lower_hex(F.hex(F.conv(F.substring(digest, 17, 1), 16, 10).cast("int").bitwiseAND(3).bitwiseOR(8)))
    return F.concat_ws(
        "-",
        F.substring(digest, 1, 8),
        F.substring(digest, 9, 4),
        F.concat(F.lit("5"), F.substring(digest, 14, 3)),
        F.concat(variant, F.substring(digest, 18, 3)),
        F.substring(digest, 21, 12),
    )


def duplicate_context(original_event_id: Column) -> Column:
    """`{"schema":"iglu:…/duplicate/jsonschema/1-0-0","data":{"originalEventId":…}}` as compact JSON."""
    return F.concat(
        F.lit(f'{{"schema":"{DUPLICATE_SCHEMA}","data":{{"originalEventId":"'),
        original_event_id,
        F.lit('"}}'),
    )


def original_event_key(line: Column) -> Column:
    """The `event_key` of the id a re-identified line replaced, from the duplicate context `reidentified_line`
    prepended to its derived_contexts (null for any other line): the id its run recorded in the manifest."""
    derived = F.element_at(F.split(line, "\t"), FIELD_INDEX["derived_contexts"] + 1)
    found = F.regexp_extract(derived, _ORIGINAL_ID, 1)
    return F.when(line.contains(DUPLICATE_SCHEMA) & (found != ""), lower_hex(found))


def can_take_duplicate_context(derived_contexts: Column) -> Column:
    """True when `derived_contexts` is empty or has the contexts envelope's `"data":[…]` array."""
    return (derived_contexts == "") | derived_contexts.rlike(_ENVELOPE)


def with_duplicate_context(derived_contexts: Column, context: Column) -> Column:
    """Prepend `context` to a derived_contexts field, creating the envelope when the field is empty."""
    return (
        F.when(derived_contexts == "", F.concat(F.lit(f'{{"schema":"{CONTEXTS_SCHEMA}","data":['), context, F.lit("]}")))
        .when(derived_contexts.rlike(_EMPTY_DATA), F.regexp_replace(derived_contexts, _EMPTY_DATA, F.concat(F.lit("$1"), context, F.lit("]"))))
        .otherwise(F.regexp_replace(derived_contexts, _NONEMPTY_DATA, F.concat(F.lit("$1"), context, F.lit(","))))
    )  # fmt: skip


def reidentified_line(line: Column, event_id: Column, event_key: Column, fingerprint: Column) -> Column:
    """The line with event_id = UUIDv5(original id, fingerprint) and the duplicate context prepended.

    The UUIDv5 namespace is the lower-cased id (`event_key`); the context records the id as written.

    Every other field is kept byte for byte. Splits the line, which is fine: only synthetic copies get here.
    """
    fields = F.split(line, "\t")
    event_id_at, derived_at = FIELD_INDEX["event_id"], FIELD_INDEX["derived_contexts"]
    derived = F.element_at(fields, derived_at + 1)
    return F.concat_ws(
        "\t",
        F.slice(fields, 1, event_id_at),
        uuid5(event_key, fingerprint),
        F.slice(fields, event_id_at + 2, derived_at - event_id_at - 1),
        with_duplicate_context(derived, duplicate_context(event_id)),
        F.slice(fields, derived_at + 2, FIELD_COUNT - derived_at - 1),
    )
