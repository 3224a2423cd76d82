"""The cases measured inside one Spark session: the pass-through limit, the dropDuplicates peer, Winnow's jobs.

Each case does all its work (an action that writes files), so the caller times exactly one job, without the
Spark start-up.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.config import JobConfig, ShredFormat, ShredLayout
from jobs.dedup import inbatch
from jobs.dedup import job as dedup_job
from jobs.enriched.fields import FIELD_COUNT, FIELD_INDEX
from jobs.enriched.parse import field, narrow_events, parse_events
from jobs.fs.input import read_lines
from jobs.fs.runs import run_timestamp
from jobs.keyed import job as keyed_job
from jobs.shred import job as shred_job
from jobs.shred import lines as shred_lines
from jobs.shred.entities import ATOMIC_FIELDS, CONTEXTS_SCHEMA, JSON_FIELDS, UNSTRUCT_SCHEMA, parse_json_fields
from jobs.shred.target import DECIDED_STORAGE
from jobs.tables import job as table_job
from jobs.tables.log import TableSettings

RUN_ID = "2026-11-22-05-00-00"


def passthrough(spark: SparkSession, input_path: str, output_path: str) -> None:
    """The limit: read the enriched TSV as text and write it back unchanged."""
    read_lines(spark, input_path).write.mode("overwrite").text(output_path)


def keyed_lines(spark: SparkSession, input_path: str) -> DataFrame:
    """The lines with their (event_id, event_fingerprint) as `id`, `fp`, taken with substring_index."""
    lines = read_lines(spark, input_path)
    value = lines["value"]
    return lines.select("value", field(value, "event_id").alias("id"), field(value, "event_fingerprint").alias("fp"))


def drop_duplicates(spark: SparkSession, input_path: str, output_path: str) -> None:
    """The Spark peer: `dropDuplicates` on (event_id, event_fingerprint)."""
    unique = keyed_lines(spark, input_path).dropDuplicates(["id", "fp"])
    unique.select("value").write.mode("overwrite").text(output_path)


def in_batch_config(config: JobConfig) -> JobConfig:
    """The config without a manifest: in-batch dedup only (what the issue's targets are about)."""
    return dataclasses.replace(config, manifest=dataclasses.replace(config.manifest, uri=None))


def with_manifest(config: JobConfig, uri: str) -> JobConfig:
    return dataclasses.replace(config, manifest=dataclasses.replace(config.manifest, uri=uri))


def dedup(
    spark: SparkSession, config: JobConfig, input_path: str, output_path: str, create_manifest: bool = False
) -> dict[str, Any]:
    return dedup_job.run(spark, config, input_path, output_path, RUN_ID, create_manifest=create_manifest)


IGLU_CONFIG = str(Path(__file__).resolve().parent.parent / "iglu" / "resolver.json")


def shred(
    spark: SparkSession,
    config: JobConfig,
    input_path: str,
    output_path: str,
    layout: ShredLayout = "rdb",
    output_format: ShredFormat = "shred",
    iglu: bool = False,
) -> dict[str, Any]:
    """The shred job; `iglu`: with the resolver config shipped in `iglu/` (TSV columns, typed Parquet columns)."""
    if iglu:
        config = dataclasses.replace(config, shred=dataclasses.replace(config.shred, iglu_config=IGLU_CONFIG))
    return shred_job.run(spark, config, input_path, output_path, RUN_ID, output_format=output_format, layout=layout)


def run_pipeline(spark: SparkSession, config: JobConfig, input_path: str, output_path: str) -> dict[str, Any]:
    """`python -m jobs run` without its command line: dedup, then shred of the deduplicated good events."""
    deduplicated = dedup_job.run(spark, config, input_path, f"{output_path}/deduplicated", RUN_ID)
    shredded = shred_job.run(spark, config, f"{deduplicated['output']}/good", f"{output_path}/shredded", RUN_ID)
    return {"dedup": deduplicated, "shred": shredded}


def keyed(spark: SparkSession, input_path: str, output_path: str, state: str) -> dict[str, Any]:
    """The keyed deduper on the generated records (key `id`), from an empty state."""
    shutil.rmtree(state, ignore_errors=True)
    options = keyed_job.KeyedOptions(input=input_path, output=output_path, format="csv", key="id", state=state)
    return keyed_job.run(spark, options, RUN_ID)


def replacing_table(spark: SparkSession, input_path: str, table: str) -> None:
    """A replacing table (key `id`, version `ver`) holding the generated records as one insert."""
    shutil.rmtree(table, ignore_errors=True)
    table_job.create(spark, table, TableSettings(engine="replacing", key=("id",), version="ver"))
    table_job.insert(spark, table, input_path, "csv", token=None)


def select_final(spark: SparkSession, table: str, output_path: str) -> dict[str, Any]:
    return table_job.select(spark, table, output_path, final=True, fmt_text="parquet")


def computed(frame: DataFrame) -> None:
    """Compute every row and column of `frame` and write nothing (Spark's `noop` sink)."""
    frame.write.format("noop").mode("overwrite").save()


def persisted_and_read(frame: DataFrame) -> None:
    """Compute `frame` into a copy on disk (as TSV shredding and typed Parquet keep the decided lines), then read the
    copy once: the copy's cost is this step's time beyond `frame` computed alone."""
    copy = frame.persist(DECIDED_STORAGE)
    try:
        copy.count()  # computes and writes the copy
        computed(copy)  # reads it back
    finally:
        copy.unpersist()


def unchecked_output_lines(split: DataFrame) -> DataFrame:
    """The cheapest rdb output lines: the atomic fields joined by tabs as they are, and each entity's JSON as parsed
    (schema, data), nothing checked, typed or rendered: the peer of the shred job's output step."""
    fields = F.col("all_fields")
    contexts = [
        F.from_json(F.get(fields, FIELD_INDEX[name]), CONTEXTS_SCHEMA)["data"]
        for name in ("contexts", "derived_contexts")
    ]
    unstruct = F.from_json(F.get(fields, FIELD_INDEX["unstruct_event"]), UNSTRUCT_SCHEMA)["data"]
    entities = F.concat(F.array(unstruct), *(F.coalesce(c, F.array()) for c in contexts))
    atomic = F.concat_ws("\t", *(F.get(fields, FIELD_INDEX[name]) for name in ATOMIC_FIELDS))
    entity_lines = F.transform(
        F.filter(entities, lambda e: e.isNotNull()), lambda e: F.concat_ws("\t", e["schema"], e["data"])
    )
    return split.select(F.explode(F.concat(F.array(atomic), entity_lines)).alias("text"))


def profile_steps(spark: SparkSession, config: JobConfig, input_path: str) -> dict[str, Callable[[], None]]:
    """The jobs' steps, each run alone and computed without writing: where a job's time goes.

    Each step reads the input itself, so `read` is in every figure; the jobs' own figures (with writes) are
    the `spark` section's. The `peer:` steps are the cheapest way to do a step's work without its semantics.
    """
    fingerprints, run_time = config.dedup.fingerprint_fields, run_timestamp(RUN_ID)
    strategy = config.dedup.synthetic
    lines = read_lines(spark, input_path)
    with_ids = inbatch.with_row_ids(lines)
    events = narrow_events(with_ids, fingerprints, computed_fingerprints=False)  # as the in-batch job
    parsed = parse_events(lines, fingerprints).select("line", "errors", "event_id", "collector_tstamp")
    # The three fields taken from the split line, as the job takes them (`field` would scan the line for each use).
    split = lines.select(F.split("value", "\t").alias("all_fields"))
    json_fields = split.select(
        *parse_json_fields({name: F.get("all_fields", FIELD_INDEX[name]) for name in JSON_FIELDS})
    )
    decided_events = shred_lines.shred_events(parsed)
    keyed = keyed_lines(spark, input_path)
    return {
        "read": lambda: computed(lines),
        "dedup: every line split and checked": lambda: computed(events),
        # The cheapest peers of the dedup steps: what a check and a decision cost at the least, semantics aside.
        "peer: fields counted only (131 or not)": lambda: computed(
            lines.select((F.size(F.split("value", "\t")) == FIELD_COUNT).alias("ok"))
        ),
        "dedup: lines to decide (ids on more than one line)": lambda: computed(inbatch.to_decide(events)),
        "dedup: decision table (their lines read again)": lambda: computed(
            inbatch.decision_rows(with_ids, strategy, fingerprints, events=events)
        ),
        "dedup: every line decided": lambda: computed(
            inbatch.apply_decisions(
                with_ids, inbatch.decision_rows(with_ids, strategy, fingerprints, events=events), strategy, run_time
            )
        ),
        "peer: dropDuplicates (event_id, fingerprint)": lambda: computed(keyed.dropDuplicates(["id", "fp"])),
        "peer: smallest line per (event_id, fingerprint)": lambda: computed(
            keyed.groupBy("id", "fp").agg(F.min("value").alias("value"))
        ),
        "shred: 131 fields parsed and checked": lambda: computed(parsed),
        "shred: JSON fields parsed alone": lambda: computed(json_fields),
        "shred: events decided (rdb)": lambda: computed(decided_events),
        "shred: output lines built (rdb)": lambda: computed(shred_lines.rdb_outputs(decided_events)),
        "shred: output lines built (legacy)": lambda: computed(
            shred_lines.shredded_outputs(shred_lines.shred_events(parsed, "legacy"), run_time)
        ),
        "peer: output lines, the entities' JSON as parsed (nothing checked)": lambda: computed(
            unchecked_output_lines(split)
        ),
        # TSV shredding and typed Parquet keep the decided lines on disk until they know the entity types.
        "shred: events decided, kept on disk, read once (TSV)": lambda: persisted_and_read(
            decided_events.withColumn("line", F.when(~F.col("good"), F.col("line")))
        ),
        "peer: the input lines kept on disk, read once": lambda: persisted_and_read(lines),
    }
