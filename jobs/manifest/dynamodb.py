"""The DynamoDB events manifest, item-compatible with Snowplow's: an existing table can be reused.

Table: partition key `eventId` (S), sort key `fingerprint` (S), TTL on `ttl`. Item: `eventId`, `fingerprint`,
`etlTime` (N, epoch seconds of the run), `ttl` (N), and Winnow's `runKey` (S, the run that recorded it: another
run of the same second delivered it; items without one, Snowplow's or older, keep the rule by `etlTime` alone).
Numbers are written as text, so they are 64-bit.
Throttling slows a run, it does not fail it (`paced`, `DynamoDbClient`):
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
import itertools
import random
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
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

from jobs.contract import (
    DYNAMODB_ETL_TIME,
    DYNAMODB_ON_DEMAND_READ_UNITS,
    DYNAMODB_ON_DEMAND_WRITE_UNITS,
    DYNAMODB_PARTITION_KEY,
    DYNAMODB_QUERIES_PER_READ_UNIT,
    DYNAMODB_SORT_KEY,
    DYNAMODB_TTL,
)
from jobs.manifest.base import IdResult, ManifestClient, ManifestError, others_entry
from jobs.manifest.requests import RequestManifest

# A put succeeds for a new pair, a pair this run or a LATER run wrote (the item then keeps this, the earliest,
# delivery: a run's decisions depend only on earlier runs, so redoing runs in any order gives the same output),
# or an expired pair (TTL deletion is lazy in DynamoDB, so an expired item can still be there).
ID, FINGERPRINT, ETL_TIME, TTL = DYNAMODB_PARTITION_KEY, DYNAMODB_SORT_KEY, DYNAMODB_ETL_TIME, DYNAMODB_TTL
RUN_KEY = "runKey"
PUT_CONDITION = (
    f"attribute_not_exists({ID}) OR {ETL_TIME} > :etl OR #ttl <= :etl OR "
    f"({ETL_TIME} = :etl AND (attribute_not_exists({RUN_KEY}) OR {RUN_KEY} = :key))"
)
"""A run with a run key: an item of its second passes only when it is its own or has no key (see base.others_entry)."""
PUT_CONDITION_WITHOUT_KEY = f"attribute_not_exists({ID}) OR {ETL_TIME} >= :etl OR #ttl <= :etl"
"""A run without one (populate-manifest): every item of its second is its own, as before run keys."""
OWN_ITEMS = f"{RUN_KEY} = :key OR (attribute_not_exists({RUN_KEY}) AND {ETL_TIME} = :etl)"
THROTTLING_CODES = {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
# DynamoDB's transient server errors, to be retried (AWS: "Error handling with DynamoDB"); a 500 or 503 counts
# whatever its code (a proxy or load balancer in between answers with its own).
SERVER_ERROR_CODES = {"InternalServerError", "ServiceUnavailable"}
SERVER_ERROR_STATUSES = {500, 503}
EXPECTED_KEYS = [(ID, "HASH", "S"), (FINGERPRINT, "RANGE", "S")]
LONGEST_WAIT_SECONDS = 20.0
BOTOCORE_TIMEOUT_SECONDS = 60.0  # botocore's default read and connect timeouts
SHORTEST_TIMEOUT_SECONDS = 5.0  # a busy table's answer, or a loaded machine's, may take a few seconds


class ManifestThrottledError(ManifestError):
    """A request was throttled for longer than `manifest.throttle_patience_seconds`: the run stops (exit 1)."""

    exit_code = 1


class ManifestServerError(ManifestError):
    """A request kept failing with a transient server error for longer than `manifest.throttle_patience_seconds`, or
    got no answer in botocore's attempts: the run stops (exit 1)."""

    exit_code = 1


def no_answer(table: str, operation: str, attempts: object, err: Exception, waited: float) -> ManifestServerError:
    """botocore's attempts spent, each past its timeout (or unable to connect): an outage, named, never a verdict."""
    return ManifestServerError(
        f"manifest table {table}: a {operation} got no answer in {attempts} attempt(s) ({type(err).__name__}: "
        f"{err}; {waited:.0f} s); nothing is lost: rerun with the same run id once DynamoDB answers"
    )


def transient_server_error(err: Exception) -> str | None:
    """What the transient server error `err` is, for the message; None when it is not one.

    Of the connection errors only a connection the server closed counts: the endpoint was reached, so it is not
    a wrong endpoint, DNS or network setting, which waiting would not fix (botocore still retries those within
    `max_attempts`). A read timeout does not count either: each attempt would first sit out botocore's timeout.
    """
    if isinstance(err, ConnectionClosedError):
        return type(err).__name__
    if not isinstance(err, ClientError):
        return None
    code = err.response.get("Error", {}).get("Code")
    status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code not in SERVER_ERROR_CODES and status not in SERVER_ERROR_STATUSES:
        return None
    return f"{code} (HTTP {status})" if code and code != str(status) else f"HTTP {status}"


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


class Pace:
    """At most `rate` calls per second on average, across the threads of one worker (a burst of at most one
    second's worth after an idle spell)."""

    def __init__(self, rate: float) -> None:
        self.interval = 1.0 / rate
        self.next = time.monotonic()
        self.lock = threading.Lock()

    def wait(self) -> None:
        with self.lock:
            now = time.monotonic()
            start = max(self.next, now - 1.0)
            self.next = start + self.interval
        if start > now:
            time.sleep(start - now)


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


class DynamoDbClient(ManifestClient):
    def __init__(
        self,
        client: Any,
        table: str,
        concurrency: int,
        patience_seconds: float = 3600.0,
        writes: Pace | None = None,
        queries: Pace | None = None,
    ) -> None:
        super().__init__()
        self.client = client
        self.table = table
        self.concurrency = concurrency
        self.patience_seconds = patience_seconds
        self.writes = writes
        self.queries = queries
        self._lock = threading.Lock()  # stats are updated from the pool's threads
        client.meta.events.register("needs-retry.dynamodb", self._count_throttle)

    def call(self, operation: str, pace: Pace | None, **request: Any) -> dict[str, Any]:
        """One request, paced; throttling or a transient server error that botocore gives up on is waited out, up
        to `patience_seconds`."""
        started = time.monotonic()
        for waits in itertools.count():
            if pace is not None:
                pace.wait()
            try:
                response: dict[str, Any] = getattr(self.client, operation)(**request)
                return response
            except (ReadTimeoutError, ConnectTimeoutError, EndpointConnectionError) as err:
                attempts = self.client.meta.config.retries.get("total_max_attempts", "all its")
                raise no_answer(self.table, operation, attempts, err, time.monotonic() - started) from err
            except (ClientError, ConnectionClosedError) as err:
                throttled = (
                    isinstance(err, ClientError) and err.response.get("Error", {}).get("Code") in THROTTLING_CODES
                )
                server_error = None if throttled else transient_server_error(err)
                if not throttled and server_error is None:
                    raise
                # Sending a put again is safe even when it landed before a server error: this run's own write
                # passes PUT_CONDITION (botocore's own retries rely on that too).
                waited = time.monotonic() - started
                if waited >= self.patience_seconds:
                    patience = f"(manifest.throttle_patience_seconds: {self.patience_seconds:.0f}); nothing is lost"
                    if server_error is not None:
                        raise ManifestServerError(
                            f"manifest table {self.table}: a {operation} kept failing with {server_error} for "
                            f"{waited:.0f} s {patience}: rerun with the same run id"
                        ) from err
                    raise ManifestThrottledError(
                        f"manifest table {self.table}: a {operation} was throttled for {waited:.0f} s {patience}: "
                        "rerun with the same run id, with more table capacity or a lower manifest.concurrency"
                    ) from err
                with self._lock:
                    if throttled:
                        self.stats.throttle_waits += 1
                    else:
                        self.stats.server_error_waits += 1
                # Full jitter on a doubling wait: workers that were throttled together do not return together.
                wait = random.uniform(0, min(LONGEST_WAIT_SECONDS, 0.1 * 2**waits))
                time.sleep(min(wait, max(self.patience_seconds - waited, 0.0)))
        raise AssertionError("unreachable")

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

    def put(self, event_id: str, fingerprint: str, etl_time: int, ttl: int, run_key: str = "") -> bool:
        item = {ID: {"S": event_id}, FINGERPRINT: {"S": fingerprint},
                ETL_TIME: {"N": str(etl_time)}, TTL: {"N": str(ttl)}}  # fmt: skip
        values = {":etl": {"N": str(etl_time)}}
        if run_key:
            item[RUN_KEY] = values[":key"] = {"S": run_key}
        try:
            response = self.call(
                "put_item",
                self.writes,
                TableName=self.table,
                Item=item,
                ConditionExpression=PUT_CONDITION if run_key else PUT_CONDITION_WITHOUT_KEY,
                ExpressionAttributeNames={"#ttl": TTL},
                ExpressionAttributeValues=values,
                ReturnConsumedCapacity="TOTAL",
            )  # fmt: skip
        except self.client.exceptions.ConditionalCheckFailedException as err:
            self._account(err.response, puts=1, conditional_failures=1)
            return False
        self._account(response, puts=1)
        return True

    def earlier_fingerprints(self, event_id: str, etl_time: int, run_key: str = "") -> set[str]:
        found: set[str] = set()
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": f"{ID} = :id",
            "ProjectionExpression": f"{FINGERPRINT}, {ETL_TIME}, #ttl, {RUN_KEY}",
            "ExpressionAttributeNames": {"#ttl": TTL},
            "ExpressionAttributeValues": {":id": {"S": event_id}},
            "ReturnConsumedCapacity": "TOTAL",
        }
        while True:
            response = self.call("query", self.queries, **request)
            self._account(response, queries=1)
            for item in response["Items"]:
                written, key = int(item[ETL_TIME]["N"]), item.get(RUN_KEY, {}).get("S")
                if int(item[TTL]["N"]) > etl_time and (
                    written < etl_time or others_entry(written, key, etl_time, run_key)
                ):
                    found.add(item[FINGERPRINT]["S"])
            if "LastEvaluatedKey" not in response:
                return found
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def check_ids(
        self, ids: Iterable[tuple[str, list[str]]], etl_time: int, ttl: int, detect_synthetic: bool, run_key: str = ""
    ) -> Iterable[tuple[str, list[str], IdResult]]:
        # Bounded concurrency: `concurrency` requests in flight per worker, a few chunks' worth of ids held
        # at a time, results in input order.
        def check(item: tuple[str, list[str]]) -> tuple[str, list[str], IdResult]:
            return item[0], item[1], self.check_id(item[0], item[1], etl_time, ttl, detect_synthetic, run_key)

        pending = iter(ids)
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            while chunk := list(itertools.islice(pending, self.concurrency * 8)):
                yield from pool.map(check, chunk)
