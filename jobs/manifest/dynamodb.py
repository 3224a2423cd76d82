"""The DynamoDB events manifest, item-compatible with Snowplow's: an existing table can be reused.

Table: partition key `eventId` (S), sort key `fingerprint` (S), TTL on `ttl`. Item: `eventId`, `fingerprint`,
`etlTime` (N, epoch seconds of the run), `ttl` (N), and Winnow's `runKey` (S, the run that recorded it: another
run of the same second delivered it; items without one, Snowplow's or older, keep the rule by `etlTime` alone).
Numbers are written as text, so they are 64-bit.
Throttling slows a run, it does not fail it (`paced`, and `jobs.manifest.dynamodb_client`'s requests):
- pacing: the driver reads the table's capacity (provisioned units, or on-demand's maximum or warm throughput,
  else the documented 4,000 writes and 12,000 reads per second of a new on-demand table) and divides it by the
  number of tasks that can run at once; each Python worker (one task at a time) keeps its puts and its queries
  under its share, so the tasks together stay under the table's capacity instead of storming it;
- retries: botocore's adaptive mode (client-side rate limiting plus backoff), `max_attempts` in all; a throttling
  error that still comes back (botocore's retry quota drained, or its attempts used up) is waited out here, with
  growing waits, for up to `patience_seconds` per request; only then does the run stop, with one line, to be
  rerun with the same run id. Transient server errors (`transient_server_error`: a 500 or 503, which AWS says to
  retry, or a connection the server closed) are waited out the same way. Other errors fail the task as before.
The checks and set-up before a run (`check`, `create`, `paced`) make their requests the same way: an outage there
stops the run as it would during the run (exit 1, the way out named), not as a configuration error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from jobs.contract import DYNAMODB_ON_DEMAND_READ_UNITS, DYNAMODB_ON_DEMAND_WRITE_UNITS, DYNAMODB_QUERIES_PER_READ_UNIT
from jobs.manifest.base import ManifestClient, ManifestError
from jobs.manifest.dynamodb_client import (
    FINGERPRINT,
    ID,
    OWN_ITEMS,
    TTL,
    DynamoDbClient,
    Pace,
    no_answer,
)
from jobs.manifest.requests import RequestManifest

EXPECTED_KEYS = [(ID, "HASH", "S"), (FINGERPRINT, "RANGE", "S")]
BOTOCORE_TIMEOUT_SECONDS = 60.0  # botocore's default read and connect timeouts
SHORTEST_TIMEOUT_SECONDS = 5.0  # a busy table's answer, or a loaded machine's, may take a few seconds


@dataclass(frozen=True)
class Capacity:
    """What the table serves per second, and where that figure comes from (for summary.json)."""

    writes_per_second: float
    queries_per_second: float
    source: str


def table_capacity(table: dict[str, Any]) -> Capacity:
    """The request rates a DescribeTable answer allows: provisioned units, else on-demand's limits."""
    provisioned = table.get("ProvisionedThroughput", {})
    mode = table.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED")
    if mode == "PROVISIONED" and provisioned.get("WriteCapacityUnits"):
        return Capacity(
            float(provisioned["WriteCapacityUnits"]),
            float(provisioned["ReadCapacityUnits"] * DYNAMODB_QUERIES_PER_READ_UNIT),
            "provisioned capacity",
        )
    maximum = table.get("OnDemandThroughput", {})
    warm = table.get("WarmThroughput", {})
    writes = maximum.get("MaxWriteRequestUnits") or warm.get("WriteUnitsPerSecond") or DYNAMODB_ON_DEMAND_WRITE_UNITS
    reads = maximum.get("MaxReadRequestUnits") or warm.get("ReadUnitsPerSecond") or DYNAMODB_ON_DEMAND_READ_UNITS
    return Capacity(float(writes), float(reads * DYNAMODB_QUERIES_PER_READ_UNIT), "on-demand throughput")


@dataclass(frozen=True)
class DynamoDbManifest(RequestManifest):
    """`dynamodb://TABLE`; region and endpoint come from the driver's AWS settings and travel with it."""

    uri: str
    table: str
    region: str | None = None
    endpoint_url: str | None = None
    concurrency: int = 16
    max_attempts: int = 10
    patience_seconds: float = 3600.0
    writes_per_second: float | None = None
    """Per worker (set by `paced`); None: not paced."""
    queries_per_second: float | None = None

    def _client(self, max_pool_connections: int = 10) -> Any:
        import boto3
        from botocore.config import Config

        # Each attempt waits for an answer at most its share of the patience (botocore's 60 s at most), so a table
        # that stops answering stops the run within about manifest.throttle_patience_seconds.
        timeout = min(
            BOTOCORE_TIMEOUT_SECONDS, max(SHORTEST_TIMEOUT_SECONDS, self.patience_seconds / self.max_attempts)
        )
        config = Config(
            # total_max_attempts counts the first attempt too (`max_attempts` here would mean retries).
            retries={"mode": "adaptive", "total_max_attempts": self.max_attempts},
            max_pool_connections=max_pool_connections,
            read_timeout=timeout,
            connect_timeout=timeout,
        )
        return boto3.client("dynamodb", region_name=self.region, endpoint_url=self.endpoint_url, config=config)

    @contextlib.contextmanager
    def _environment_errors(self) -> Iterator[None]:
        """No credentials, access denied: one-line ManifestErrors (exit 2). An outage (no answer: requests made
        outside `DynamoDbClient.call`, as the table waiter's) is a ManifestServerError (exit 1)."""
        started = time.monotonic()
        try:
            yield
        except (ReadTimeoutError, ConnectTimeoutError, EndpointConnectionError, ConnectionClosedError) as err:
            raise no_answer(self.table, "request", self.max_attempts, err, time.monotonic() - started) from err
        except BotoCoreError as err:
            raise ManifestError(
                f"manifest {self.uri}: cannot reach table {self.table} in region {self.region}: {err}"
            ) from None
        except ClientError as err:
            error = err.response.get("Error", {})
            raise ManifestError(
                f"manifest {self.uri}: {err.operation_name} on table {self.table} in region {self.region} was refused: "
                f"{error.get('Code')}: {error.get('Message')}"
            ) from None

    def check(self) -> None:
        with self._environment_errors():
            self._check()

    def _check(self) -> None:
        # Through `call`, as the run's requests: no answer, or throttling or server errors past the patience, stop
        # it with ManifestServerError or ManifestThrottledError (exit 1), not as a wrong table (exit 2).
        client = self.dynamodb_client()
        fix = "create it with the Storage stack (make deploy) or, for local/dev, rerun with --create"
        try:
            table = client.call("describe_table", None, TableName=self.table)["Table"]
        except client.client.exceptions.ResourceNotFoundException:
            raise ManifestError(
                f"manifest {self.uri}: table {self.table} does not exist in region {self.region}; {fix}"
            ) from None
        except BotoCoreError as err:  # no credentials, endpoint unreachable, …: an environment error
            raise ManifestError(
                f"manifest {self.uri}: cannot reach table {self.table} in region {self.region}: {err}"
            ) from None
        except ClientError as err:  # access denied, invalid token, …
            error = err.response.get("Error", {})
            raise ManifestError(
                f"manifest {self.uri}: DescribeTable on {self.table} in region {self.region} was refused: "
                f"{error.get('Code')}: {error.get('Message')}"
            ) from None
        types = {a["AttributeName"]: a["AttributeType"] for a in table.get("AttributeDefinitions", [])}
        keys = [(k["AttributeName"], k["KeyType"], types.get(k["AttributeName"])) for k in table["KeySchema"]]
        if keys != EXPECTED_KEYS:
            raise ManifestError(
                f"manifest {self.uri}: table {self.table} has keys {keys}; an events manifest needs partition key "
                f"{ID} (S) and sort key {FINGERPRINT} (S), as Snowplow's: use such a table"
            )
        ttl = client.call("describe_time_to_live", None, TableName=self.table)["TimeToLiveDescription"]
        if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING") or ttl.get("AttributeName") != TTL:
            raise ManifestError(
                f"manifest {self.uri}: TTL on table {self.table} is {ttl.get('TimeToLiveStatus', 'DISABLED')} "
                f"(attribute {ttl.get('AttributeName')!r}); enable it on attribute '{TTL}': aws dynamodb "
                f"update-time-to-live --table-name {self.table} --time-to-live-specification Enabled=true,AttributeName={TTL}"
            )

    def create(self) -> None:
        with self._environment_errors():
            self._create()

    def _create(self) -> None:
        client = self.dynamodb_client()  # through `call`, as `_check`
        # An existing table is left as it is: check() then says whether it is right.
        with contextlib.suppress(client.client.exceptions.ResourceInUseException):
            client.call(
                "create_table", None, TableName=self.table,
                AttributeDefinitions=[{"AttributeName": ID, "AttributeType": "S"},
                                      {"AttributeName": FINGERPRINT, "AttributeType": "S"}],
                KeySchema=[{"AttributeName": ID, "KeyType": "HASH"}, {"AttributeName": FINGERPRINT, "KeyType": "RANGE"}],
                BillingMode="PAY_PER_REQUEST",
            )  # fmt: skip
        waiter = client.client.get_waiter("table_exists")
        waiter.wait(TableName=self.table, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
        ttl = client.call("describe_time_to_live", None, TableName=self.table)["TimeToLiveDescription"]
        if ttl.get("TimeToLiveStatus") in (None, "DISABLED"):
            client.call(
                "update_time_to_live", None, TableName=self.table,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL},
            )  # fmt: skip

    def paced(self, tasks: int) -> tuple[DynamoDbManifest, dict[str, Any]]:
        """This manifest with each worker's share of the table's capacity, for `tasks` tasks at once; and the
        figures for summary.json."""
        with self._environment_errors():
            capacity = table_capacity(
                self.dynamodb_client().call("describe_table", None, TableName=self.table)["Table"]
            )
        tasks = max(tasks, 1)
        paced = dataclasses.replace(
            self,
            writes_per_second=capacity.writes_per_second / tasks,
            queries_per_second=capacity.queries_per_second / tasks,
        )
        figures = {
            "capacity": capacity.source,
            "table_writes_per_second": capacity.writes_per_second,
            "table_queries_per_second": capacity.queries_per_second,
            "tasks_at_once": tasks,
            "writes_per_second_per_task": round(capacity.writes_per_second / tasks, 3),
            "queries_per_second_per_task": round(capacity.queries_per_second / tasks, 3),
        }
        return paced, figures

    def client(self) -> ManifestClient:
        return self.dynamodb_client()

    def own_pairs(self, run_key: str, legacy_etl_time: int | None = None) -> list[tuple[str, str]]:
        """A Scan of the table, filtered by the run key: done only for a redo (or an abandon), which are rare. The
        alternative, recording each attempt's pairs beside its register entry, would cost every run a write of its
        whole batch for the sake of the few that are redone with less input."""
        client = self.dynamodb_client()
        request: dict[str, Any] = {
            "TableName": self.table,
            "FilterExpression": OWN_ITEMS,
            "ProjectionExpression": "#id, #fp",
            "ExpressionAttributeNames": {"#id": ID, "#fp": FINGERPRINT},
            "ExpressionAttributeValues": {":key": {"S": run_key}, ":etl": {"N": str(legacy_etl_time or -1)}},
            "ConsistentRead": True,
        }
        pairs: list[tuple[str, str]] = []
        with self._environment_errors():
            while True:
                page = client.call("scan", None, **request)
                pairs += [(item[ID]["S"], item[FINGERPRINT]["S"]) for item in page.get("Items", [])]
                if "LastEvaluatedKey" not in page:
                    return pairs
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def remove_pairs(self, run_key: str, pairs: list[tuple[str, str]], legacy_etl_time: int | None = None) -> int:
        client = self.dynamodb_client()
        values = {":key": {"S": run_key}, ":etl": {"N": str(legacy_etl_time or -1)}}
        removed = 0
        with self._environment_errors():
            for event_id, fingerprint in pairs:
                # Only while it is still this run's: never an item another run has taken since.
                with contextlib.suppress(client.client.exceptions.ConditionalCheckFailedException):
                    client.call(
                        "delete_item", client.writes, TableName=self.table,
                        Key={ID: {"S": event_id}, FINGERPRINT: {"S": fingerprint}},
                        ConditionExpression=OWN_ITEMS, ExpressionAttributeValues=values,
                    )  # fmt: skip
                    removed += 1
        return removed

    def dynamodb_client(self) -> DynamoDbClient:
        return DynamoDbClient(
            self._client(max_pool_connections=self.concurrency),
            self.table,
            self.concurrency,
            patience_seconds=self.patience_seconds,
            writes=Pace(self.writes_per_second) if self.writes_per_second else None,
            queries=Pace(self.queries_per_second) if self.queries_per_second else None,
        )
