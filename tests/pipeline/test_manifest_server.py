"""The loopback DynamoDB stand-in hands moto one request at a time: moto's backend is not thread-safe."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto.dynamodb.models.table import Table

from tests.pipeline.manifest_server import Faults, dynamodb_on_loopback

CLIENTS = 8


def test_moto_serves_concurrent_requests_one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    inside, most = 0, 0
    count_lock, overlap = threading.Lock(), threading.Event()
    query = Table.query

    def probed_query(self: Table, *args: Any, **kwargs: Any) -> Any:
        nonlocal inside, most
        with count_lock:
            inside += 1
            most = max(most, inside)
            if inside > 1:
                overlap.set()
        try:
            # The first query holds on until another comes in beside it, which serialized requests never do.
            if not overlap.wait(timeout=2.0):
                overlap.set()  # the later queries need not wait
            return query(self, *args, **kwargs)
        finally:
            with count_lock:
                inside -= 1

    monkeypatch.setattr(Table, "query", probed_query)
    with dynamodb_on_loopback(Faults()) as url:
        config = Config(retries={"mode": "standard", "total_max_attempts": 1}, max_pool_connections=CLIENTS)
        client = boto3.client("dynamodb", endpoint_url=url, config=config)
        client.create_table(
            TableName="t",
            AttributeDefinitions=[{"AttributeName": "eventId", "AttributeType": "S"},
                                  {"AttributeName": "fingerprint", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "eventId", "KeyType": "HASH"}, {"AttributeName": "fingerprint", "KeyType": "RANGE"}],
            BillingMode="PAY_PER_REQUEST",
        )  # fmt: skip
        start = threading.Barrier(CLIENTS)

        def put_then_query(n: int) -> list[dict[str, Any]]:
            start.wait()
            client.put_item(TableName="t", Item={"eventId": {"S": f"id-{n}"}, "fingerprint": {"S": f"fp-{n}"}})
            answer = client.query(
                TableName="t",
                KeyConditionExpression="eventId = :id",
                ExpressionAttributeValues={":id": {"S": f"id-{n}"}},
            )
            items: list[dict[str, Any]] = answer["Items"]
            return items

        with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            answers = list(pool.map(put_then_query, range(CLIENTS)))

    assert answers == [[{"eventId": {"S": f"id-{n}"}, "fingerprint": {"S": f"fp-{n}"}}] for n in range(CLIENTS)]
    assert most == 1
