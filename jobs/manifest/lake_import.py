"""Moving a DynamoDB manifest table into a lake manifest: its export to S3 loaded as one segment."""

from __future__ import annotations

import uuid

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from jobs.contract import DYNAMODB_ETL_TIME, DYNAMODB_PARTITION_KEY, DYNAMODB_SORT_KEY, DYNAMODB_TTL
from jobs.enriched.parse import UUID_PATTERN
from jobs.errors import DamagedFileError
from jobs.fs.paths import exact
from jobs.manifest.base import ManifestError
from jobs.manifest.completions import (
    DYNAMODB_COMPLETED_KEY,
    DYNAMODB_IDENTITY_KEY,
    DYNAMODB_OUTPUTS_KEY,
    LakeCompletedRuns,
)
from jobs.manifest.lake import LakeManifest
from jobs.manifest.lake_state import RunEntries, State
from jobs.manifest.lake_writes import id_halves
from jobs.manifest.unfinished import DYNAMODB_RUNS_KEY
from jobs.manifest.writer_lease import LEASE_KEY

LEASE_ID = LEASE_KEY[DYNAMODB_PARTITION_KEY]["S"]
WHOLE_SECONDS = r"^[0-9]{1,18}$"


class ExportInFlightError(ManifestError):
    """The export holds a run that has not completed, or the writer lease: moving it would drop that state."""


def import_dynamodb_export(manifest: LakeManifest, spark: SparkSession, export: str, run_id: str) -> dict[str, int]:
    """Load a DynamoDB manifest table's export to S3 (DynamoDB JSON, from `aws dynamodb
    export-table-to-point-in-time`: its `data/` folder of `.json.gz` files) into this empty lake manifest, as
    one segment; each item keeps its `etlTime` and `ttl`. The counts: items read, entries written, items
    skipped (no UUID event id: the register's own items, its generation).

    Raises:
        ManifestError: the lake manifest already holds entries (import first, then run).
        DamagedFileError: a line is no whole JSON item, or an item no whole entry (`_require_whole_entries`).
        ExportInFlightError: the export holds a register entry (a run that recorded events and has not completed) or
            the writer lease (a run was writing when it was exported): nothing is written.
    """
    state = manifest.state()
    if state.runs:
        raise ManifestError(
            f"manifest {manifest.uri}: already holds {len(state.runs)} run(s); a DynamoDB export is loaded into an "
            "empty lake manifest only: --create a new one and load the export first"
        )
    schema = (
        f"Item struct<{DYNAMODB_PARTITION_KEY}: struct<S: string>, {DYNAMODB_SORT_KEY}: struct<S: string>, "
        f"{DYNAMODB_ETL_TIME}: struct<N: string>, {DYNAMODB_TTL}: struct<N: string>, folder: struct<S: string>, "
        "holder: struct<S: string>, attempt: struct<S: string>, manifest: struct<S: string>>, _corrupt_record string"
    )
    reader = spark.read.schema(schema).option("columnNameOfCorruptRecord", "_corrupt_record")
    items = reader.json(exact(export)).withColumn("_file", F.input_file_name())
    items = items.persist(StorageLevel.MEMORY_AND_DISK)  # Spark reads a corrupt record's column from a copy only
    try:
        _require_whole_lines(items, export)
        records = _table_records(items)
        _require_nothing_in_flight(records, export)
        _require_whole_entries(items, export)
        _carry_records(manifest, records)  # before the commit: a load stopped between is loaded again whole
        return _load(manifest, items, state, run_id)
    finally:
        items.unpersist()


def _load(manifest: LakeManifest, items: DataFrame, state: State, run_id: str) -> dict[str, int]:
    """The export's usable items as the lake's one segment, committed; the counts."""
    event_key = F.lower(F.col(f"Item.{DYNAMODB_PARTITION_KEY}.S"))
    fingerprint = F.col(f"Item.{DYNAMODB_SORT_KEY}.S")
    etl_time = F.col(f"Item.{DYNAMODB_ETL_TIME}.N").cast("long")
    ttl = F.col(f"Item.{DYNAMODB_TTL}.N").cast("long")
    usable = F.coalesce(_whole_entry(event_key), F.lit(False))  # an event's item not whole stopped the load
    high, low = id_halves(event_key)
    # Read once (an export can be large): every item, with the entry it makes if it is usable.
    converted = items.select(
        usable.alias("usable"), high.alias("id_hi"), low.alias("id_lo"),
        F.xxhash64(fingerprint).alias("fingerprint"), etl_time.alias("etl_time"), ttl.alias("ttl"),
    ).persist(StorageLevel.MEMORY_AND_DISK)  # fmt: skip
    try:
        read = converted.count()
        entries = converted.where("usable").drop("usable")
        name = f"dynamodb-export-{run_id}.{uuid.uuid4().hex[:8]}"
        segment = manifest.write_segment(entries, name, state.buckets)
        ttls = {row[0]: row[1] for row in entries.groupBy("etl_time").agg(F.max("ttl")).collect()}
    finally:
        converted.unpersist()
    runs: dict[int | str, RunEntries] = {
        t: RunEntries(t, f"dynamodb-export {run_id}", ttls[t], name) for t in segment.runs
    }
    manifest.commit(State(state.commit, state.buckets, {name: segment}, runs), state, "populate-manifest", run_id)
    return {"items": read, "entries": segment.keys, "skipped": read - segment.keys}


def _table_records(items: DataFrame) -> list[Row]:
    """The table's own items (the register, the lease, the identity, the completions, the outputs), read in one pass
    over the export: `kind` (partition key), `name` (sort key), and the attributes they carry."""
    partition = F.col(f"Item.{DYNAMODB_PARTITION_KEY}.S")
    kinds = (DYNAMODB_RUNS_KEY, LEASE_ID, DYNAMODB_IDENTITY_KEY, DYNAMODB_COMPLETED_KEY, DYNAMODB_OUTPUTS_KEY)
    return items.where(partition.isin(*kinds)).select(
        partition.alias("kind"), F.col(f"Item.{DYNAMODB_SORT_KEY}.S").alias("name"),
        F.col("Item.folder.S").alias("folder"), F.col("Item.holder.S").alias("holder"),
        F.col("Item.attempt.S").alias("attempt"), F.col(f"Item.{DYNAMODB_TTL}.N").alias("ttl"),
        F.col("Item.manifest.S").alias("identity"),
    ).collect()  # fmt: skip


def _carry_records(manifest: LakeManifest, records: list[Row]) -> None:
    """The table's identity, completion records and outputs, taken over by the lake: an output whose
    `_LAST_COMPLETED.json` names the table then checks the lake as that manifest, so an export older than the
    output's last run is found as an older copy (attack 59's 03, by way of an export)."""
    identity = next((row["identity"] for row in records if row["kind"] == DYNAMODB_IDENTITY_KEY), None)
    completed = [(row["name"], row["attempt"], int(row["ttl"])) for row in records
                 if row["kind"] == DYNAMODB_COMPLETED_KEY and row["attempt"] and row["ttl"]]  # fmt: skip
    outputs = sorted(row["name"] for row in records if row["kind"] == DYNAMODB_OUTPUTS_KEY)
    LakeCompletedRuns(manifest.root).carry(identity, completed, outputs)


def _require_whole_lines(items: DataFrame, export: str) -> None:
    """Refuse an export with a line that is no JSON document (cut, or damaged): its item, an event's entry or a
    register's, would be lost, and its event delivered again.

    Raises:
        DamagedFileError: named with the file and the line's start; nothing is loaded.
    """
    damaged = items.where(F.col("_corrupt_record").isNotNull())
    first = damaged.select(F.col("_file").alias("file"), "_corrupt_record").limit(1).collect()
    if first:
        count = damaged.count()
        raise DamagedFileError(
            f"--input {export}: {count} line(s) of the export are no whole JSON item, the first in {first[0]['file']}: "
            f"{first[0]['_corrupt_record'][:80]!r}; nothing was loaded. Export the table again (or restore the file), "
            "then run again"
        )


def _require_whole_entries(items: DataFrame, export: str) -> None:
    """Refuse an export with an event's item (a UUID `eventId`) that is whole JSON but no whole entry (edited or
    damaged: no etlTime, a wrong type): its pair would silently leave the moved manifest, and its event be delivered
    again. Items without a UUID event id (the register's own, its generation) are not events': skipped as before.

    Raises:
        DamagedFileError: named with the file and the item; nothing is loaded.
    """
    event_key = F.lower(F.col(f"Item.{DYNAMODB_PARTITION_KEY}.S"))
    damaged = items.where(event_key.rlike(UUID_PATTERN) & ~F.coalesce(_whole_entry(event_key), F.lit(False)))
    first = damaged.select(F.col("_file").alias("file"), F.to_json("Item").alias("item")).limit(1).collect()
    if first:
        count = damaged.count()
        raise DamagedFileError(
            f"--input {export}: {count} event item(s) of the export are no whole manifest entry (a "
            f"{DYNAMODB_SORT_KEY} S, and {DYNAMODB_ETL_TIME} and {DYNAMODB_TTL} N in whole seconds), the first in "
            f"{first[0]['file']}, the line holding {first[0]['item'][:160]!r}: its event would be delivered again; "
            "nothing was loaded. Export the table again (or restore the file), then run again"
        )


def _whole_entry(event_key: Column) -> Column:
    """An event's entry as the table holds it; numbers of at most 18 digits (a 64-bit cast never overflows)."""
    return (
        event_key.rlike(UUID_PATTERN)
        & F.col(f"Item.{DYNAMODB_SORT_KEY}.S").isNotNull()
        & F.col(f"Item.{DYNAMODB_ETL_TIME}.N").rlike(WHOLE_SECONDS)
        & F.col(f"Item.{DYNAMODB_TTL}.N").rlike(WHOLE_SECONDS)
    )


def _require_nothing_in_flight(records: list[Row], export: str) -> None:
    """Refuse an export whose table held a run's register entry or the writer lease (`_table_records`): the lake
    would count that run's pairs as delivered while its events are in no completed output (the register does not
    move)."""
    state = [row for row in records if row["kind"] in (DYNAMODB_RUNS_KEY, LEASE_ID)]
    way_out = "complete it (or abandon it: python -m jobs manifest abandon) on the source table, then export again"
    for row in sorted(state, key=lambda row: row["kind"] != LEASE_ID):
        if row["kind"] == LEASE_ID:
            raise ExportInFlightError(
                f"--input {export}: the export holds the manifest's writer lease ({row['holder']}): a run was "
                f"writing when it was taken, and its state would be lost; nothing was loaded. Let that run end, "
                f"{way_out}"
            )
        raise ExportInFlightError(
            f"--input {export}: the export holds run {row['name'].split('~')[0]} in its register of unfinished runs "
            f"(no {row['folder']}/_SUCCESS): its pairs would count as delivered while its events are in no completed "
            f"output; nothing was loaded. Redo it, {way_out}"
        )
