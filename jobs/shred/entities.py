"""Shredding one enriched event: its atomic line, its entities, what is wrong with its JSON fields.

Pure column expressions on Spark built-ins (`from_json` with generic envelope schemas, higher-order array
functions, `concat`); no Python on the per-row path.

Entity data is carried as JSON text: `from_json` with a string-typed `data` field gives the value's JSON,
which is spliced into the shredded line unchanged. Spark's JSON reader re-writes that text compactly:
whitespace between tokens goes, fractional numbers are written as Java doubles (1.50 -> 1.5, 1e2 -> 100.0),
string escapes are normalised (a \\u escape becomes its character); key order, integers and string contents are kept.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from jobs.enriched.fields import FIELD_COUNT, FIELD_INDEX, FIELD_NAMES

JSON_FIELDS = ("contexts", "unstruct_event", "derived_contexts")
ATOMIC_FIELDS: tuple[str, ...] = tuple(name for name in FIELD_NAMES if name not in JSON_FIELDS)

# The envelopes the enriched format allows (any 1-0-* revision, as the Scala Analytics SDK accepts).
CONTEXTS_ENVELOPE = r"^iglu:com\.snowplowanalytics\.snowplow/contexts/jsonschema/1-0-[0-9]+\z"
UNSTRUCT_ENVELOPE = r"^iglu:com\.snowplowanalytics\.snowplow/unstruct_event/jsonschema/1-0-[0-9]+\z"
ALLOWED_ENVELOPE = {
    "contexts": "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-*",
    "derived_contexts": "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-*",
    "unstruct_event": "iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-*",
}
# An entity's schema: iglu:vendor/name/format/MODEL-REVISION-ADDITION (SchemaVer, model from 1).
IGLU_URI = (
    r"^iglu:([a-zA-Z0-9_.-]+)/([a-zA-Z0-9_-]+)/([a-zA-Z0-9_-]+)/(([1-9][0-9]*)-(0|[1-9][0-9]*)-(0|[1-9][0-9]*))\z"
)
# Values quoted in error messages are cut to this length, so one huge field cannot bloat a bad row.
QUOTED_LIMIT = 100

# Generic envelope schemas: the entities' data stays JSON text, so an object's text starts with `{`. A JSON
# string holding `{…}` gives the same text, so a field whose text may hold one (`"{` or `"\u007b` in it) is
# parsed again with the `_SKELETON` twin (an empty struct for `data`: non-null exactly for an object).
# That second parse is rare (generated events never need it), and too costly to run always.
CONTEXTS_SCHEMA = "struct<schema:string,data:array<struct<schema:string,data:string>>,_corrupt_record:string>"
CONTEXTS_SKELETON = "struct<data:array<struct<data:struct<>>>>"
UNSTRUCT_SCHEMA = "struct<schema:string,data:struct<schema:string,data:string>,_corrupt_record:string>"
UNSTRUCT_SKELETON = "struct<data:struct<data:struct<>>>"
_CORRUPT = {"columnNameOfCorruptRecord": "_corrupt_record", "mode": "PERMISSIVE"}

# Entity kinds, in the order upstream emits them (unstruct_event ++ derived_contexts ++ contexts).
KIND_ORDER = ("unstruct_event", "derived_contexts", "contexts")

# One entity as `field_entities` gives it (is_object: its data is a JSON object).
ENTITY_TYPE = "struct<kind:string,position:int,schema:string,data:string,is_object:boolean>"


def atomic_line(line: Column) -> Column:
    """The 128-column atomic-events line: the 131 fields, verbatim, minus contexts, unstruct_event, derived_contexts.

    Four `substring_index` cuts around fields 52, 58 and 122 (no split into 131 strings). Only meaningful
    on lines with exactly 131 fields.
    """
    contexts, unstruct, derived = (FIELD_INDEX[name] for name in ("contexts", "unstruct_event", "derived_contexts"))
    return F.concat_ws(
        "\t",
        F.substring_index(line, "\t", contexts),
        F.substring_index(F.substring_index(line, "\t", unstruct), "\t", -(unstruct - contexts - 1)),
        F.substring_index(F.substring_index(line, "\t", derived), "\t", -(derived - unstruct - 1)),
        F.substring_index(line, "\t", -(FIELD_COUNT - derived - 1)),
    )


def root_tstamp(collector_tstamp: Column) -> Column:
    """`yyyy-MM-dd HH:mm:ss.SSS` from a validated `yyyy-MM-dd HH:mm:ss[.fraction]`: sub-ms digits cut, padded to 3."""
    return F.concat(
        F.substring(collector_tstamp, 1, 19), F.lit("."), F.rpad(F.substring(collector_tstamp, 21, 3), 3, "0")
    )


def parse_json_fields(raw: dict[str, Column]) -> list[Column]:
    """Parsed envelopes of the three JSON fields (`raw` maps each field name to its text, null to skip).

    Returns columns `<field>_env`, and `<field>_skeleton`: null unless the text may quote a `{` (see above).
    """
    columns = []
    for name in JSON_FIELDS:
        schema, skeleton = (
            (UNSTRUCT_SCHEMA, UNSTRUCT_SKELETON) if name == "unstruct_event" else (CONTEXTS_SCHEMA, CONTEXTS_SKELETON)
        )
        text = F.when(raw[name] != "", raw[name])
        may_quote_a_brace = text.contains('"{') | text.contains('"\\u007b') | text.contains('"\\u007B')
        columns.append(F.from_json(text, schema, _CORRUPT).alias(f"{name}_env"))
        columns.append(F.when(may_quote_a_brace, F.from_json(text, skeleton)).alias(f"{name}_skeleton"))
    return columns


def field_entities(name: str) -> Column:
    """The entities of one parsed JSON field, as `struct(kind, position, schema, data, is_object)`.

    Reads `<name>_env` and `<name>_skeleton`; an empty array when the field is empty or its envelope is bad.
    Computed once per field (`shred_events` keeps it in a column): both the checks and the output read it.
    """
    env, skeleton = F.col(f"{name}_env"), F.col(f"{name}_skeleton")
    if name == "unstruct_event":
        entity = env["data"]
        is_object = _is_object(entity["data"], skeleton, skeleton["data"]["data"])
        entities = F.when(entity.isNotNull(), F.array(_entity(name, F.lit(1), entity, is_object)))
    else:
        entities = F.transform(
            env["data"],
            lambda e, i: _entity(
                name, i + 1, e, _is_object(e["data"], skeleton, F.try_element_at(skeleton["data"], i + 1)["data"])
            ),
        )
    return F.coalesce(entities, F.array().cast(f"array<{ENTITY_TYPE}>"))


def _is_object(data: Column, skeleton: Column, skeleton_data: Column) -> Column:
    """Whether an entity's data is a JSON object: from the skeleton parse where there is one, else its text."""
    return F.when(skeleton.isNotNull(), skeleton_data.isNotNull()).otherwise(data.startswith("{"))


def _entity(kind: str, position: Column, entity: Column, is_object: Column) -> Column:
    return F.struct(
        F.lit(kind).alias("kind"),
        position.cast("int").alias("position"),
        entity["schema"].alias("schema"),
        entity["data"].alias("data"),
        F.coalesce(is_object, F.lit(False)).alias("is_object"),
    )


def field_errors(name: str, raw: Column, entities: Column) -> Column:
    """What is wrong with one JSON field of a valid event (`array<string>`, empty when nothing is).

    `entities` is the field's `field_entities`. The envelope is checked first; entities only when the
    envelope is right. Messages name the field, the entity's position (1-based, in the field's `data`) and
    what is allowed.
    """
    env = F.col(f"{name}_env")
    present = F.coalesce(raw != "", F.lit(False))
    shape = "an entity {schema, data}" if name == "unstruct_event" else "an array of entities {schema, data}"
    envelope_pattern = UNSTRUCT_ENVELOPE if name == "unstruct_event" else CONTEXTS_ENVELOPE
    # json_object_keys only runs for the rare corrupt records: it tells bad JSON from a wrong shape.
    envelope_error = (
        F.when(~present, F.lit(None))
        .when(
            env["_corrupt_record"].isNotNull() & F.json_object_keys(raw).isNull(),
            F.concat(F.lit(f"{name}: not a valid JSON object: '"), F.substring(raw, 1, QUOTED_LIMIT), F.lit("'")),
        )
        .when(
            ~F.coalesce(env["schema"].rlike(envelope_pattern), F.lit(False)),
            F.concat(
                F.lit(f"{name}: unknown envelope schema "),
                _quoted_or_missing(env["schema"]),
                F.lit(f"; allowed: {ALLOWED_ENVELOPE[name]}"),
            ),
        )
        .when(env["data"].isNull(), F.lit(f"{name}: the envelope's data is not {shape}"))
    )
    entity_errors = F.transform(
        entities,
        lambda e: F.when(
            ~F.coalesce(e["schema"].rlike(IGLU_URI), F.lit(False)),
            F.concat(
                F.lit(f"{name}: entity "),
                e["position"].cast("string"),
                F.lit(" has no valid schema URI (given "),
                _quoted_or_missing(e["schema"]),
                F.lit("); allowed: iglu:VENDOR/NAME/FORMAT/MODEL-REVISION-ADDITION"),
            ),
        ).when(
            ~e["is_object"],
            F.concat(
                F.lit(f"{name}: entity "),
                e["position"].cast("string"),
                F.lit(" ("),
                e["schema"],
                F.lit(") has no data object"),
            ),
        ),
    )
    return F.when(
        envelope_error.isNotNull(), F.array(envelope_error)
    ).otherwise(F.array_compact(entity_errors))  # fmt: skip


def _quoted_or_missing(value: Column) -> Column:
    return F.coalesce(F.concat(F.lit("'"), F.substring(value, 1, QUOTED_LIMIT), F.lit("'")), F.lit("none"))


def typed_entities(entities: Column) -> Column:
    """Valid entities with their schema split: `struct(kind, vendor, name, format, version, model, data)`.

    The schemas passed `IGLU_URI`, so `substring_index` cuts at `/` and `-` (cheaper than regex groups).
    """

    def parts(e: Column) -> Column:
        path = F.substring(e["schema"], len("iglu:") + 1, 1 << 16)
        version = F.substring_index(path, "/", -1)
        return F.struct(
            e["kind"].alias("kind"),
            F.substring_index(path, "/", 1).alias("vendor"),
            F.substring_index(F.substring_index(path, "/", 2), "/", -1).alias("name"),
            F.substring_index(F.substring_index(path, "/", 3), "/", -1).alias("format"),
            version.alias("version"),
            F.substring_index(version, "-", 1).alias("model"),
            e["data"].alias("data"),
        )

    return F.transform(entities, parts)


def shredded_line(entity: Column, event_id: Column, tstamp: Column) -> Column:
    """The shredded-types JSON line of one entity (key order of upstream's `Hierarchy`), built by `concat`.

    vendor, name, format and version passed the Iglu pattern and the event id the UUID check, so none of
    them needs JSON escaping; `data` is already JSON text.
    """
    return F.concat(
        F.lit('{"schema":{"vendor":"'),
        entity["vendor"],
        F.lit('","name":"'),
        entity["name"],
        F.lit('","format":"'),
        entity["format"],
        F.lit('","version":"'),
        entity["version"],
        F.lit('"},"data":'),
        entity["data"],
        F.lit(',"hierarchy":{"rootId":"'),
        event_id,
        F.lit('","rootTstamp":"'),
        tstamp,
        F.lit('","refRoot":"events","refTree":["events","'),
        entity["name"],
        F.lit('"],"refParent":"events"}}'),
    )
