"""The DynamoDB events manifest, item-compatible with Snowplow's: an existing table can be reused.

Table: partition key `eventId` (S), sort key `fingerprint` (S), TTL on `ttl`. Item: `eventId`, `fingerprint`,
`etlTime` (N, epoch seconds of the run), `ttl` (N). Numbers are written as text, so they are 64-bit.
Retries: botocore's adaptive mode (client-side rate limiting plus backoff); throttling never becomes a
lost event: after the retries the call raises and the job fails, to be rerun with the same run id.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from jobs.manifest.base import IdResult, Manifest, ManifestClient, ManifestError

# A put succeeds for a new pair, a pair this run or a LATER run wrote (the item then keeps this, the earliest,
# delivery: a run's decisions depend only on earlier runs, so redoing runs in any order gives the same output),
# or an expired pair (TTL deletion is lazy in DynamoDB, so an expired item can still be there).
PUT_CONDITION = "attribute_not_exists(eventId) OR etlTime >= :etl OR #ttl <= :etl"
THROTTLING_CODES = {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
EXPECTED_KEYS = [("eventId", "HASH", "S"), ("fingerprint", "RANGE", "S")]


@dataclass(frozen=True)
class DynamoDbManifest(Manifest):
    """`dynamodb://TABLE`; region and endpoint come from the driver's AWS settings and travel with it."""

    uri: str
    table: str
    region: str | None = None
    endpoint_url: str | None = None
    concurrency: int = 16
    max_attempts: int = 10

    def _client(self, max_pool_connections: int = 10) -> Any:
        import boto3
        from botocore.config import Config

        config = Config(
            retries={"mode": "adaptive", "max_attempts": self.max_attempts},
            max_pool_connections=max_pool_connections,
        )
        return boto3.client("dynamodb", region_name=self.region, endpoint_url=self.endpoint_url, config=config)

    @contextlib.contextmanager
    def _environment_errors(self) -> Iterator[None]:
        """No credentials, an unreachable endpoint, access denied: one-line ManifestErrors (exit 2)."""
        try:
            yield
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
        client = self._client()
        fix = "create it with the Storage stack (make deploy) or, for local/dev, rerun with --create"
        try:
            table = client.describe_table(TableName=self.table)["Table"]
        except client.exceptions.ResourceNotFoundException:
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
                "eventId (S) and sort key fingerprint (S), as Snowplow's: use such a table"
            )
        ttl = client.describe_time_to_live(TableName=self.table)["TimeToLiveDescription"]
        if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING") or ttl.get("AttributeName") != "ttl":
            raise ManifestError(
                f"manifest {self.uri}: TTL on table {self.table} is {ttl.get('TimeToLiveStatus', 'DISABLED')} "
                f"(attribute {ttl.get('AttributeName')!r}); enable it on attribute 'ttl': aws dynamodb "
                f"update-time-to-live --table-name {self.table} --time-to-live-specification Enabled=true,AttributeName=ttl"
            )

    def create(self) -> None:
        with self._environment_errors():
            self._create()

    def _create(self) -> None:
        client = self._client()
        # An existing table is left as it is: check() then says whether it is right.
        with contextlib.suppress(client.exceptions.ResourceInUseException):
            client.create_table(
                TableName=self.table,
                AttributeDefinitions=[{"AttributeName": "eventId", "AttributeType": "S"},
                                      {"AttributeName": "fingerprint", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "eventId", "KeyType": "HASH"},
                           {"AttributeName": "fingerprint", "KeyType": "RANGE"}],
                BillingMode="PAY_PER_REQUEST",
            )  # fmt: skip
        client.get_waiter("table_exists").wait(TableName=self.table, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
        ttl = client.describe_time_to_live(TableName=self.table)["TimeToLiveDescription"]
        if ttl.get("TimeToLiveStatus") in (None, "DISABLED"):
            client.update_time_to_live(
                TableName=self.table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"}
            )

    def client(self) -> ManifestClient:
        return DynamoDbClient(self._client(max_pool_connections=self.concurrency), self.table, self.concurrency)


class DynamoDbClient(ManifestClient):
    def __init__(self, client: Any, table: str, concurrency: int) -> None:
        super().__init__()
        self.client = client
        self.table = table
        self.concurrency = concurrency
        self._lock = threading.Lock()  # stats are updated from the pool's threads
        client.meta.events.register("needs-retry.dynamodb", self._count_throttle)

    def _count_throttle(self, response: Any = None, **_: Any) -> None:
        # Called before each retry decision; counts throttled responses, decides nothing.
        if response is not None and response[1].get("Error", {}).get("Code") in THROTTLING_CODES:
            with self._lock:
                self.stats.throttles += 1

    def _account(self, response: dict[str, Any], **counts: int) -> None:
        with self._lock:
            self.stats.requests += 1
            self.stats.retries += response.get("ResponseMetadata", {}).get("RetryAttempts", 0)
            self.stats.consumed_capacity += response.get("ConsumedCapacity", {}).get("CapacityUnits", 0.0)
            for name, count in counts.items():
                setattr(self.stats, name, getattr(self.stats, name) + count)

    def put(self, event_id: str, fingerprint: str, etl_time: int, ttl: int) -> bool:
        try:
            response = self.client.put_item(
                TableName=self.table,
                Item={"eventId": {"S": event_id}, "fingerprint": {"S": fingerprint},
                      "etlTime": {"N": str(etl_time)}, "ttl": {"N": str(ttl)}},
                ConditionExpression=PUT_CONDITION,
                ExpressionAttributeNames={"#ttl": "ttl"},
                ExpressionAttributeValues={":etl": {"N": str(etl_time)}},
                ReturnConsumedCapacity="TOTAL",
            )  # fmt: skip
        except self.client.exceptions.ConditionalCheckFailedException as err:
            self._account(err.response, puts=1, conditional_failures=1)
            return False
        self._account(response, puts=1)
        return True

    def earlier_fingerprints(self, event_id: str, etl_time: int) -> set[str]:
        found: set[str] = set()
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "eventId = :id",
            "ProjectionExpression": "fingerprint, etlTime, #ttl",
            "ExpressionAttributeNames": {"#ttl": "ttl"},
            "ExpressionAttributeValues": {":id": {"S": event_id}},
            "ReturnConsumedCapacity": "TOTAL",
        }
        while True:
            response = self.client.query(**request)
            self._account(response, queries=1)
            for item in response["Items"]:
                if int(item["etlTime"]["N"]) < etl_time and int(item["ttl"]["N"]) > etl_time:
                    found.add(item["fingerprint"]["S"])
            if "LastEvaluatedKey" not in response:
                return found
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def check_ids(
        self, ids: Iterable[tuple[str, list[str]]], etl_time: int, ttl: int, detect_synthetic: bool
    ) -> Iterable[tuple[str, list[str], IdResult]]:
        # Bounded concurrency: `concurrency` requests in flight per worker, a few chunks' worth of ids held
        # at a time, results in input order.
        def check(item: tuple[str, list[str]]) -> tuple[str, list[str], IdResult]:
            return item[0], item[1], self.check_id(item[0], item[1], etl_time, ttl, detect_synthetic)

        pending = iter(ids)
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            while chunk := list(itertools.islice(pending, self.concurrency * 8)):
                yield from pool.map(check, chunk)
