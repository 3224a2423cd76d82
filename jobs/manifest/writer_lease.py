"""One writer per manifest: a dedup or populate run holds the manifest's writer lease while it runs.

Two runs writing one manifest at once would each look up an id before the other recorded it, so which one sees
the other's fingerprints (cross-batch synthetic dedup) would depend on timing. With the lease the second run
stops at once, naming the first. SQLite: a lease file beside the database (`PATH.lease`). Lake: `PATH/_lease`
(created only if absent: an S3 conditional write on S3). DynamoDB: one item
in the manifest table itself, put only if absent; its key is no event id (those are UUIDs), so no event's
item and no query of the jobs ever meets it.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from jobs.contract import DYNAMODB_PARTITION_KEY, DYNAMODB_SORT_KEY, LAKE_LEASE
from jobs.fs.lease import FileLease, Lease
from jobs.manifest.base import Manifest

if TYPE_CHECKING:
    from jobs.manifest.dynamodb_client import DynamoDbClient

LEASE_KEY = {DYNAMODB_PARTITION_KEY: {"S": "winnow:writer-lease"}, DYNAMODB_SORT_KEY: {"S": "writer"}}


class DynamoDbLease(Lease):
    """The writer lease as an item of the manifest table (conditional put, conditional delete), through the
    manifest's own client, so a throttled table delays the lease as it delays the events (never fails it
    before `manifest.throttle_patience_seconds`)."""

    def __init__(self, client: DynamoDbClient, target: str, job: str, run_id: str) -> None:
        super().__init__(target, job, run_id)
        self.call = client.call
        self.errors = client.client.exceptions
        self.table = client.table

    def _create(self, document: bytes) -> bool:
        try:
            self.call(
                "put_item",
                None,
                TableName=self.table,
                Item={**LEASE_KEY, "holder": {"S": document.decode("utf-8")}, "token": {"S": self.holder.token}},
                ConditionExpression=f"attribute_not_exists({DYNAMODB_PARTITION_KEY})",
            )
        except self.errors.ConditionalCheckFailedException:
            return False
        return True

    def _read(self) -> bytes | None:
        item = self.call("get_item", None, TableName=self.table, Key=LEASE_KEY, ConsistentRead=True).get("Item")
        return None if item is None else item["holder"]["S"].encode("utf-8")

    def _delete(self) -> None:
        # Only our own item: a lease someone removed by hand and another run took stays.
        with contextlib.suppress(self.errors.ConditionalCheckFailedException):
            self.call(
                "delete_item", None, TableName=self.table, Key=LEASE_KEY, ConditionExpression="#token = :token",
                ExpressionAttributeNames={"#token": "token"}, ExpressionAttributeValues={":token": {"S": self.holder.token}},
            )  # fmt: skip

    def removal(self) -> str:
        return (
            f"remove its lease: aws dynamodb delete-item --table-name {self.table} "
            f"--key '{json.dumps(LEASE_KEY, separators=(',', ':'))}'"
        )


def writer_lease(spark: SparkSession, manifest: Manifest, job: str, run_id: str) -> Lease:
    """The writer lease of `manifest` (not yet taken: use it as a context manager)."""
    from jobs.manifest.dynamodb import DynamoDbManifest
    from jobs.manifest.lake import LakeManifest
    from jobs.manifest.sqlite import SqliteManifest

    target = f"manifest {manifest.uri}"
    if isinstance(manifest, SqliteManifest):
        return FileLease(spark, f"{manifest.path}.lease", target, job, run_id)
    if isinstance(manifest, LakeManifest):
        return FileLease(spark, f"{manifest.root}/{LAKE_LEASE}", target, job, run_id)
    if isinstance(manifest, DynamoDbManifest):
        return DynamoDbLease(manifest.dynamodb_client(), target, job, run_id)
    raise TypeError(f"no writer lease for {type(manifest).__name__}")
