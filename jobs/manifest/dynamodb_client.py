"""Requests to the DynamoDB events manifest's table, paced and patient: what every Python worker (and the driver's
checks) sends through (`DynamoDbClient.call`), and the item-level operations of the manifest (`put`,
`fingerprints_of`, `check_ids`).

Throttling slows a run, it does not fail it: each worker keeps its puts and queries under its share of the table's
capacity (`Pace`); botocore's adaptive mode retries, `max_attempts` in all; a throttling error that still comes back is
waited out here, with growing waits, for up to `patience_seconds` per request; only then does the run stop, with one
line, to be rerun with the same run id. Transient server errors (`transient_server_error`: a 500 or 503, which AWS
says to retry, or a connection the server closed) are waited out the same way; no answer at all within botocore's
attempts is an outage (`no_answer`). Other errors fail the task as before.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from jobs.contract import DYNAMODB_ETL_TIME, DYNAMODB_PARTITION_KEY, DYNAMODB_SORT_KEY, DYNAMODB_TTL
from jobs.manifest.base import (
    RECORDED,
    SEEN_EARLIER,
    SEEN_LATER,
    IdResult,
    ManifestClient,
    ManifestError,
    back_filled_key,
    later_only,
    later_runs_entry,
    others_entry,
)  # fmt: skip

# A put succeeds for a new pair, a pair this run wrote, a pair a later run wrote without a run key (the item then
# keeps this, the earliest, delivery), or an expired pair (TTL deletion is lazy in DynamoDB, so an expired item can
# still be there). A pair a later run with a run key delivered is never taken over: its completed output has the
# event (base.later_runs_entry); the failed condition's old item says which it was.
ID, FINGERPRINT, ETL_TIME, TTL = DYNAMODB_PARTITION_KEY, DYNAMODB_SORT_KEY, DYNAMODB_ETL_TIME, DYNAMODB_TTL
RUN_KEY = "runKey"
PUT_CONDITION = (
    f"attribute_not_exists({ID}) OR #ttl <= :etl OR "
    f"({ETL_TIME} >= :etl AND (attribute_not_exists({RUN_KEY}) OR {RUN_KEY} IN (:key, :back_filled)))"
)
"""A run with a run key: an item of its second or later passes only when it is its own (base.same_run: also one
populate-manifest back-filled from its run folder) or has no key (see base.others_entry and base.later_runs_entry)."""
PUT_CONDITION_WITHOUT_KEY = f"attribute_not_exists({ID}) OR {ETL_TIME} >= :etl OR #ttl <= :etl"
"""A run without one (an older populate-manifest): every item of its second is its own, as before run keys."""
OWN_ITEMS = f"{RUN_KEY} = :key OR (attribute_not_exists({RUN_KEY}) AND {ETL_TIME} = :etl)"
THROTTLING_CODES = {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"}
# DynamoDB's transient server errors, to be retried (AWS: "Error handling with DynamoDB"); a 500 or 503 counts
# whatever its code (a proxy or load balancer in between answers with its own).
SERVER_ERROR_CODES = {"InternalServerError", "ServiceUnavailable"}
SERVER_ERROR_STATUSES = {500, 503}
LONGEST_WAIT_SECONDS = 20.0


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

    def partition(self, key: str, sort_prefix: str = "") -> list[dict[str, Any]]:
        """Every item under partition key `key` (whose sort key starts with `sort_prefix`), read consistently (the
        register's own items, not events')."""
        items: list[dict[str, Any]] = []
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#id = :key" + (" AND begins_with(#sort, :prefix)" if sort_prefix else ""),
            "ExpressionAttributeNames": {
                "#id": DYNAMODB_PARTITION_KEY,
                **({"#sort": DYNAMODB_SORT_KEY} if sort_prefix else {}),
            },
            "ExpressionAttributeValues": {
                ":key": {"S": key},
                **({":prefix": {"S": sort_prefix}} if sort_prefix else {}),
            },
            "ConsistentRead": True,
        }
        while True:
            page = self.call("query", None, **request)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

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

    def put(self, event_id: str, fingerprint: str, etl_time: int, ttl: int, run_key: str = "") -> str:
        item = {ID: {"S": event_id}, FINGERPRINT: {"S": fingerprint},
                ETL_TIME: {"N": str(etl_time)}, TTL: {"N": str(ttl)}}  # fmt: skip
        values = {":etl": {"N": str(etl_time)}}
        if run_key:
            item[RUN_KEY] = values[":key"] = {"S": run_key}
            values[":back_filled"] = {"S": back_filled_key(run_key)}
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
                ReturnValuesOnConditionCheckFailure="ALL_OLD",  # no extra capacity: which run has the pair
            )  # fmt: skip
        except self.client.exceptions.ConditionalCheckFailedException as err:
            self._account(err.response, puts=1, conditional_failures=1)
            old = err.response.get("Item", {})
            written, key = int(old.get(ETL_TIME, {}).get("N", "0")), old.get(RUN_KEY, {}).get("S")
            return SEEN_LATER if later_runs_entry(written, key, etl_time, run_key) else SEEN_EARLIER
        self._account(response, puts=1)
        return RECORDED

    def fingerprints_of(self, event_id: str, etl_time: int, run_key: str = "") -> tuple[set[str], set[str]]:
        found: set[str] = set()
        later: set[str] = set()
        own = False
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
                if int(item[TTL]["N"]) <= etl_time:
                    continue
                if written < etl_time or others_entry(written, key, etl_time, run_key):
                    found.add(item[FINGERPRINT]["S"])
                elif later_runs_entry(written, key, etl_time, run_key):
                    later.add(item[FINGERPRINT]["S"])
                own = own or written == etl_time  # not another run key's of this second: that one is in `found`
            if "LastEvaluatedKey" not in response:
                return found, later_only(found, own, later)
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
