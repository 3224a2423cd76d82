"""One contract, both manifest backends: SQLite (a real file) and DynamoDB (moto, in-process)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from jobs.errors import InvalidArgumentError
from jobs.manifest import ManifestError, open_manifest
from jobs.manifest.base import RECORDED, SEEN_EARLIER, SEEN_LATER, IdResult
from jobs.manifest.dynamodb import DynamoDbManifest
from jobs.manifest.requests import RequestManifest
from jobs.manifest.sqlite import SqliteManifest

RUN_1, RUN_2, RUN_3 = 1_700_000_000, 1_700_086_400, 1_700_172_800
TTL_DAYS = 180
DAY = 86_400


def ttl(etl_time: int) -> int:
    return etl_time + TTL_DAYS * DAY


@pytest.fixture(params=["sqlite", "dynamodb"])
def manifest(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RequestManifest]:
    """A per-request backend (the lake is checked a batch at a time: tests/pipeline/test_lake_manifest.py)."""
    if request.param == "sqlite":
        sqlite_manifest = open_manifest(f"sqlite:{tmp_path / 'manifest.db'}")
        assert isinstance(sqlite_manifest, RequestManifest)
        sqlite_manifest.create()
        yield sqlite_manifest
    else:
        with mock_aws():
            dynamodb_manifest = open_manifest("dynamodb://events-manifest")
            assert isinstance(dynamodb_manifest, RequestManifest)
            dynamodb_manifest.create()
            yield dynamodb_manifest


def test_a_new_pair_is_accepted_once_per_run(manifest: RequestManifest) -> None:
    manifest.check()
    client = manifest.client()
    assert client.put("id-1", "fp-1", RUN_1, ttl(RUN_1)) == RECORDED
    # The same run again (a rerun, or Spark recomputing a task) passes its own write.
    assert client.put("id-1", "fp-1", RUN_1, ttl(RUN_1)) == RECORDED
    # A later run sees a cross-batch natural duplicate.
    assert client.put("id-1", "fp-1", RUN_2, ttl(RUN_2)) == SEEN_EARLIER
    # An earlier run does not (earlier means earlier: its decisions ignore later runs); the item now records it,
    # so RUN_1 itself is later than the item's delivery from then on.
    assert client.put("id-1", "fp-1", RUN_1 - DAY, ttl(RUN_1 - DAY)) == RECORDED
    assert client.put("id-1", "fp-1", RUN_1, ttl(RUN_1)) == SEEN_EARLIER
    # Another fingerprint, or another id, is another pair.
    assert client.put("id-1", "fp-2", RUN_2, ttl(RUN_2)) == RECORDED
    assert client.put("id-2", "fp-1", RUN_2, ttl(RUN_2)) == RECORDED
    assert client.earlier_fingerprints("id-1", RUN_2) == {"fp-1"}  # fp-2 is RUN_2's own
    assert client.earlier_fingerprints("id-1", RUN_1 - DAY) == set()  # nothing earlier than the earliest
    assert (client.stats.puts, client.stats.conditional_failures) == (7, 2)


def test_a_later_runs_pair_is_a_copy_for_an_earlier_run_and_stays_the_later_runs(manifest: RequestManifest) -> None:
    """A run with a run key never takes over what a later run with one delivered: that run's output has the event
    (a late batch, another pipeline's run with a later id). Without a key (populate-manifest) it is, as before."""
    client = manifest.client()
    assert client.put("id-1", "fp-1", RUN_2, ttl(RUN_2), "B") == RECORDED
    assert client.put("id-1", "fp-1", RUN_1, ttl(RUN_1), "A") == SEEN_LATER
    assert client.put("id-1", "fp-1", RUN_3, ttl(RUN_3), "C") == SEEN_EARLIER  # still run B's delivery
    assert client.put("id-1", "fp-1", RUN_2, ttl(RUN_2), "B") == RECORDED  # B's redo passes its own
    assert client.put("id-1", "fp-1", RUN_1, ttl(RUN_1)) == RECORDED  # no key: taken over
    assert client.put("id-1", "fp-1", RUN_1 - DAY, ttl(RUN_1 - DAY), "Z") == RECORDED  # a keyless entry: taken over

    # An id a later run delivered: every fingerprint of it is its copy, and none is recorded, so a redo of that
    # later run decides as it did.
    assert client.put("id-2", "fp-1", RUN_2, ttl(RUN_2), "B") == RECORDED
    late = list(client.check_ids([("id-2", ["fp-1", "fp-2"])], RUN_1, ttl(RUN_1), True, "A"))
    assert late == [("id-2", ["fp-1", "fp-2"], IdResult(earlier_other=True, later=frozenset({"fp-1"})))]
    assert client.fingerprints_of("id-2", RUN_2, "B") == (set(), set())  # B's redo finds nothing earlier
    assert client.fingerprints_of("id-2", RUN_1, "A") == (set(), {"fp-1"})
    # 93cc664: A took (id-1, fp-1) over from B, and recorded (id-2, fp-2), which B's redo then found as earlier

    # In order: B records its synthetic copy of A's id; A's redo still delivers the id as it did.
    assert client.put("id-3", "fp-1", RUN_1, ttl(RUN_1), "A") == RECORDED
    assert client.put("id-3", "fp-2", RUN_2, ttl(RUN_2), "B") == RECORDED
    assert client.fingerprints_of("id-3", RUN_1, "A") == (set(), set())
    assert client.fingerprints_of("id-3", RUN_2, "B") == ({"fp-1"}, set())


def test_an_expired_pair_counts_as_absent(manifest: RequestManifest) -> None:
    client = manifest.client()
    assert client.put("id-1", "fp-1", RUN_1, RUN_1 + DAY) == RECORDED
    assert client.put("id-1", "fp-1", RUN_1 + DAY - 1, RUN_2 + TTL_DAYS * DAY) == SEEN_EARLIER  # not yet expired
    assert client.put("id-1", "fp-1", RUN_1 + DAY, RUN_1 + DAY + TTL_DAYS * DAY) == RECORDED  # expired: recorded anew
    assert client.put("id-1", "fp-1", RUN_3, ttl(RUN_3)) == SEEN_EARLIER  # and remembered from then on


def test_earlier_fingerprints_exclude_this_run_and_expired_items(manifest: RequestManifest) -> None:
    client = manifest.client()
    client.put("id-1", "fp-1", RUN_1, ttl(RUN_1))
    client.put("id-1", "fp-old", RUN_1 - 400 * DAY, RUN_1 - 200 * DAY)  # expired before RUN_2
    client.put("id-1", "fp-2", RUN_2, ttl(RUN_2))
    assert client.earlier_fingerprints("id-1", RUN_2) == {"fp-1"}
    assert client.earlier_fingerprints("id-1", RUN_3) == {"fp-1", "fp-2"}
    assert client.earlier_fingerprints("id-9", RUN_3) == set()


def test_check_ids_reports_natural_and_synthetic_cross_batch_copies(manifest: RequestManifest) -> None:
    client = manifest.client()
    first = list(client.check_ids([("id-1", ["fp-1"]), ("id-2", ["fp-1", "fp-2"])], RUN_1, ttl(RUN_1), True))
    assert first == [("id-1", ["fp-1"], IdResult()), ("id-2", ["fp-1", "fp-2"], IdResult())]
    second = list(client.check_ids(
        [("id-1", ["fp-1"]), ("id-2", ["fp-3"]), ("id-3", ["fp-1"]), ("id-1", ["fp-2"])], RUN_2, ttl(RUN_2), True
    ))  # fmt: skip
    assert second == [
        ("id-1", ["fp-1"], IdResult(seen=frozenset({"fp-1"}))),
        ("id-2", ["fp-3"], IdResult(earlier_other=True)),
        ("id-3", ["fp-1"], IdResult()),
        ("id-1", ["fp-2"], IdResult(earlier_other=True)),
    ]
    # Rerunning the second run gives the same answers: its own writes are not "earlier".
    again = list(client.check_ids([("id-2", ["fp-3"]), ("id-3", ["fp-1"])], RUN_2, ttl(RUN_2), True))
    assert again == [("id-2", ["fp-3"], IdResult(earlier_other=True)), ("id-3", ["fp-1"], IdResult())]


def test_without_synthetic_detection_no_lookups_are_made(manifest: RequestManifest) -> None:
    client = manifest.client()
    list(client.check_ids([("id-1", ["fp-1"])], RUN_1, ttl(RUN_1), False))
    result = list(client.check_ids([("id-1", ["fp-2"])], RUN_2, ttl(RUN_2), False))
    assert result == [("id-1", ["fp-2"], IdResult())]
    assert (client.stats.queries, client.stats.puts, client.stats.requests) == (0, 2, 2)


def test_create_is_idempotent(manifest: RequestManifest) -> None:
    client = manifest.client()
    client.put("id-1", "fp-1", RUN_1, ttl(RUN_1))
    manifest.create()
    manifest.check()
    assert manifest.client().put("id-1", "fp-1", RUN_2, ttl(RUN_2)) == SEEN_EARLIER


def test_dynamodb_items_have_the_snowplow_layout() -> None:
    with mock_aws():
        manifest = open_manifest("dynamodb://events-manifest")
        assert isinstance(manifest, RequestManifest)
        manifest.create()
        manifest.client().put("id-1", "fp-1", RUN_1, ttl(RUN_1))
        (item,) = boto3.client("dynamodb").scan(TableName="events-manifest")["Items"]
        assert item == {"eventId": {"S": "id-1"}, "fingerprint": {"S": "fp-1"},
                        "etlTime": {"N": str(RUN_1)}, "ttl": {"N": str(ttl(RUN_1))}}  # fmt: skip
        # 64-bit: times after 2038 are stored and compared exactly.
        late = 4_102_444_800  # 2100-01-01
        assert manifest.client().put("id-2", "fp-1", late, ttl(late)) == RECORDED
        assert manifest.client().put("id-2", "fp-1", late + 1, ttl(late + 1)) == SEEN_EARLIER


def test_dynamodb_check_explains_a_missing_table() -> None:
    with mock_aws(), pytest.raises(ManifestError) as err:
        open_manifest("dynamodb://nope").check()
    assert str(err.value) == (
        "manifest dynamodb://nope: table nope does not exist in region eu-west-1; create it with the Storage stack "
        "(make deploy) or, for local/dev, rerun with --create"
    )


def test_dynamodb_check_explains_wrong_keys() -> None:
    with mock_aws():
        boto3.client("dynamodb").create_table(
            TableName="wrong", BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )  # fmt: skip
        with pytest.raises(
            ManifestError, match=r"table wrong has keys \[\('id', 'HASH', 'S'\)\]; an events manifest needs"
        ):
            open_manifest("dynamodb://wrong").check()


def test_dynamodb_check_explains_ttl_off() -> None:
    with mock_aws():
        boto3.client("dynamodb").create_table(
            TableName="no-ttl", BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "eventId", "AttributeType": "S"},
                                  {"AttributeName": "fingerprint", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "eventId", "KeyType": "HASH"},
                       {"AttributeName": "fingerprint", "KeyType": "RANGE"}],
        )  # fmt: skip
        with pytest.raises(
            ManifestError, match=r"TTL on table no-ttl is DISABLED .*update-time-to-live --table-name no-ttl"
        ):
            open_manifest("dynamodb://no-ttl").check()


def test_sqlite_check_explains_a_missing_file_and_a_foreign_database(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=re.escape("does not exist; run once with --create")):
        open_manifest(f"sqlite:{tmp_path / 'none.db'}").check()
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE events_manifest (id TEXT)").connection.commit()
    with pytest.raises(ManifestError, match="has no table events_manifest"):
        open_manifest(f"sqlite:{foreign}").check()


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("sqlite:///abs/m.db", SqliteManifest(uri="sqlite:///abs/m.db", path="/abs/m.db")),
        ("sqlite:rel/m.db", SqliteManifest(uri="sqlite:rel/m.db", path=str(Path("rel/m.db").absolute()))),
    ],
)
def test_sqlite_uris(uri: str, expected: SqliteManifest) -> None:
    assert open_manifest(uri) == expected


def test_dynamodb_uri_takes_region_and_endpoint_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-2")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9999")
    manifest = open_manifest("dynamodb://t1", concurrency=4, max_attempts=3)
    assert manifest == DynamoDbManifest(uri="dynamodb://t1", table="t1", region="us-east-2",
                                        endpoint_url="http://127.0.0.1:9999", concurrency=4, max_attempts=3)  # fmt: skip


@pytest.mark.parametrize(
    "uri", ["sqlite://host/m.db", "sqlite:", "dynamodb://", "dynamodb://t/extra", "s3://bucket/m", "m.db"]
)
def test_bad_uris_are_usage_errors(uri: str) -> None:
    with pytest.raises(
        InvalidArgumentError,
        match=re.escape(
            "allowed: sqlite:///abs/path.db, sqlite:relative/path.db, dynamodb://TABLE or lake:PATH (a folder or "
            "s3://bucket/prefix)"
        ),
    ):
        open_manifest(uri)
