"""The Iglu resolver: embedded and HTTP registries, their order, "not found" as a value and an outage as an error,
caching, schemas_until, config.

No Spark, but for an outage through shred. HTTP registries are a loopback server per test; the embedded one is the
copy of Iglu Central schemas in iglu/embedded (the copy shipped with the jobs). A lookup that waits reads its time
from `waits` (a clock that moves on when waited on): no test sleeps through a deadline.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import urllib3
from pyspark.sql import SparkSession

from jobs.errors import InvalidConfigError
from jobs.iglu import http_repository as http_module
from jobs.iglu import resolver as resolver_module
from jobs.iglu.repositories import Fetched
from jobs.iglu.resolver import (
    Clock,
    Deadline,
    HttpRepository,
    InvalidSchema,
    LookupHistory,
    RegistryError,
    RegistryOutageError,
    ResolutionFailure,
    Resolver,
    SchemaKey,
    read_local,
)
from jobs.runtime.cli import main
from jobs.shred import rdb
from tests.pipeline.helpers import ID_A, ID_B, ID_C, IGLU_CENTRAL, RUN_ID, WEB_PAGE, contexts, event, read_lines

SNOWPLOW = "iglu:com.snowplowanalytics.snowplow"
APPLICATION_ERROR = SchemaKey.parse(f"{SNOWPLOW}/application_error/jsonschema/1-0-2")
GEOLOCATION = SchemaKey.parse(f"{SNOWPLOW}/geolocation_context/jsonschema/1-1-0")
THING = SchemaKey.parse("iglu:com.acme/thing/jsonschema/1-0-0")
LAST_ATTEMPT = "2024-05-01T10:00:00Z"
CONFIG_SCHEMA = "iglu:com.snowplowanalytics.iglu/resolver-config/jsonschema/1-0-3"
UNKNOWN = (
    "whether the schema exists is unknown, so the shred stopped and sealed nothing (no _SUCCESS, no "
    "shredding_complete.json, no loader message). Rerun the same run id once the registry answers"
)


@dataclass
class Waits:
    """A clock for lookups that waits without sleeping: a wait moves its time on, and is recorded."""

    now: float = 0.0
    waited: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.waited.append(round(seconds, 6))
        self.now += seconds


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> Waits:
    """Every resolver made in the test (the command line's too) reads its time from one `Waits`."""
    state = Waits()
    monkeypatch.setattr(resolver_module, "SYSTEM_CLOCK", Clock(lambda: state.now, state.sleep))
    return state


def outage(repository: str, key: SchemaKey, requests: int, last: str, limit: str = "60 s") -> str:
    """RegistryOutageError's line for `repository` (as `describe` names it)."""
    return (
        f"Iglu repository {repository} gave no answer for {key.uri} within the lookup's deadline ({limit}, "
        f"shred.iglu_lookup_deadline_seconds): {requests} request(s), the last: {last}; {UNKNOWN}"
    )


@dataclass
class Registry:
    """What the loopback Iglu server serves and what it was asked."""

    uri: str = ""
    schemas: dict[str, bytes] = field(default_factory=dict)  # request path -> body (200)
    statuses: dict[str, int] = field(default_factory=dict)  # request path -> status without a schema
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, apikey header)
    lock: threading.Lock = field(default_factory=threading.Lock)
    before_answer: Callable[[], None] = lambda: None  # run once a request is recorded, before it is answered

    def serve(self, path: str, schema: dict[str, Any] | bytes) -> None:
        self.schemas[path] = schema if isinstance(schema, bytes) else json.dumps(schema).encode()

    def paths(self) -> list[str]:
        with self.lock:
            return [path for path, _ in self.requests]


@pytest.fixture
def registry() -> Iterator[Registry]:
    """An Iglu server on 127.0.0.1, in a daemon thread, always shut down."""
    state = Registry()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with state.lock:
                state.requests.append((self.path, self.headers.get("apikey")))
            if self.path in state.statuses:
                body, status = b'{"message": "no"}', state.statuses[self.path]
            elif self.path in state.schemas:
                body, status = state.schemas[self.path], 200
            else:
                body, status = b'{"message": "The schema is not found"}', 404
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

    with serving(state, Handler) as served:
        yield served


@contextmanager
def serving(state: Registry, handler: type[BaseHTTPRequestHandler]) -> Iterator[Registry]:
    """`handler` served on 127.0.0.1 in a daemon thread, always shut down; `state.uri` says where."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        state.uri = f"http://127.0.0.1:{server.server_address[1]}"
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


TRICKLE_INTERVAL = 0.05
# The most bytes one answer trickles: ends a request whose client never gives up, as a resolver without a lookup
# deadline; one byte short of the announced length, so even then the answer never completes.
TRICKLE_BYTES = 400


@pytest.fixture
def trickling() -> Iterator[Registry]:
    """An Iglu server on 127.0.0.1 that answers every GET 200 and then sends its body one byte at a time: every
    socket read gets a byte in time, the answer never completes. Each answer ends when the client hangs up, after
    TRICKLE_BYTES bytes, or when the test ends."""
    state = Registry()
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with state.lock:
                state.requests.append((self.path, self.headers.get("apikey")))
            state.before_answer()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(TRICKLE_BYTES + 1))
            self.end_headers()
            try:
                for _ in range(TRICKLE_BYTES):
                    if stop.wait(TRICKLE_INTERVAL):
                        return
                    self.wfile.write(b" ")
                    self.wfile.flush()
            except OSError:  # the client hung up (what a deadline does)
                pass

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

    with serving(state, Handler) as served:
        try:
            yield served
        finally:
            stop.set()  # before the server shuts down (it waits for its answers): no answer is left trickling


def embedded(name: str, path: str | Path, priority: int = 0, prefixes: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "name": name,
        "priority": priority,
        "vendorPrefixes": list(prefixes),
        "connection": {"embedded": {"path": str(path)}},
    }


def http(
    name: str, uri: str, priority: int = 0, prefixes: tuple[str, ...] = (), apikey: str | None = None
) -> dict[str, Any]:
    return {
        "name": name,
        "priority": priority,
        "vendorPrefixes": list(prefixes),
        "connection": {"http": {"uri": uri, "apikey": apikey}},
    }


def config(*repositories: dict[str, Any], schema: str = CONFIG_SCHEMA) -> str:
    return json.dumps(
        {"schema": schema, "data": {"cacheSize": 500, "cacheTtl": 600, "repositories": list(repositories)}}
    )


def resolver(*repositories: dict[str, Any]) -> Resolver:
    return Resolver.from_config(config(*repositories), "conf/resolver.json")


def central_schema(key: SchemaKey) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((IGLU_CENTRAL / "schemas" / key.path).read_text(encoding="utf-8"))
    return loaded


def thing_schema(description: str, version: str = "1-0-0") -> dict[str, Any]:
    return {
        "self": {"vendor": "com.acme", "name": "thing", "format": "jsonschema", "version": version},
        "description": description,
        "type": "object",
    }


def write_thing(folder: Path, description: str) -> Path:
    path = folder / "schemas" / THING.path
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(thing_schema(description)), encoding="utf-8")
    return folder


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# Schema keys


def test_schema_key_parses_and_sorts_by_version_numbers() -> None:
    key = SchemaKey.parse("iglu:com.acme/thing_2/jsonschema/1-10-2")
    assert (key.vendor, key.name, key.format, key.version) == ("com.acme", "thing_2", "jsonschema", "1-10-2")
    assert (key.model, key.revision, key.addition) == (1, 10, 2)
    assert key.uri == "iglu:com.acme/thing_2/jsonschema/1-10-2"
    assert key.path == "com.acme/thing_2/jsonschema/1-10-2"
    versions = ["1-0-10", "2-0-0", "1-0-9", "1-2-0", "10-0-0"]
    keys = sorted(SchemaKey("com.acme", "thing", "jsonschema", version) for version in versions)
    assert [k.version for k in keys] == ["1-0-9", "1-0-10", "1-2-0", "2-0-0", "10-0-0"]
    assert SchemaKey.parse("iglu:com.acme/a/jsonschema/1-0-0") < SchemaKey.parse("iglu:com.acme/b/jsonschema/1-0-0")
    assert key == SchemaKey("com.acme", "thing_2", "jsonschema", "1-10-2")
    assert len({key, SchemaKey("com.acme", "thing_2", "jsonschema", "1-10-2")}) == 1


@pytest.mark.parametrize(
    "uri",
    ["iglu:com.acme/thing/jsonschema/0-1-0", "iglu:com.acme/thing/jsonschema/1-01-0", "com.acme/thing/jsonschema/1-0-0",
     "iglu:com.acme/thing/1-0-0", "iglu:com.acme/th ing/jsonschema/1-0-0", "iglu:com.acme/thing/jsonschema/1-0"],
)  # fmt: skip
def test_schema_key_refuses_what_is_not_an_iglu_uri(uri: str) -> None:
    with pytest.raises(ValueError) as err:
        SchemaKey.parse(uri)
    assert str(err.value) == f'given "{uri}"; allowed: iglu:VENDOR/NAME/FORMAT/M-R-A'


# Embedded repositories


def test_embedded_lookup_reads_the_schema_file() -> None:
    res = resolver(embedded("local", IGLU_CENTRAL))
    assert res.lookup(APPLICATION_ERROR) == central_schema(APPLICATION_ERROR)
    assert res.lookup(APPLICATION_ERROR)["self"]["version"] == "1-0-2"  # type: ignore[index]
    assert [repo.describe() for repo in res.repositories] == [f"local (embedded {IGLU_CENTRAL})"]


def test_relative_embedded_path_is_relative_to_the_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_thing(tmp_path / "iglu", "relative copy")
    conf = tmp_path / "conf" / "resolver.json"
    conf.parent.mkdir()
    conf.write_text(config(embedded("local", "../iglu")), encoding="utf-8")
    monkeypatch.chdir(tmp_path / "conf")  # not the folder the path is relative to
    res = Resolver.from_config(conf.read_text(encoding="utf-8"), str(conf))
    assert res.repositories[0].describe() == f"local (embedded {tmp_path / 'iglu'})"
    assert res.lookup(THING) == thing_schema("relative copy")


def test_relative_embedded_path_under_an_s3_config_is_joined_with_slashes() -> None:
    asked: list[str] = []

    def read_s3(path: str) -> str | None:
        asked.append(path)
        return json.dumps(thing_schema("from s3"))

    repos = [embedded("mirror", "schemas-copy"), embedded("absolute", "s3://other/iglu", priority=1)]
    res = Resolver.from_config(config(*repos), "s3://bucket/iglu/resolver.json", read_s3)
    assert [repo.describe() for repo in res.repositories] == [
        "mirror (embedded s3://bucket/iglu/schemas-copy)",
        "absolute (embedded s3://other/iglu)",
    ]
    assert res.lookup(THING) == thing_schema("from s3")
    assert asked == ["s3://bucket/iglu/schemas-copy/schemas/com.acme/thing/jsonschema/1-0-0"]


def test_embedded_read_failure_is_an_outage_and_the_next_repository_is_asked(tmp_path: Path, waits: Waits) -> None:
    def read_text(path: str) -> str | None:
        if path.startswith("/nowhere/"):
            raise PermissionError(13, "Permission denied")
        return read_local(path)

    repos = [embedded("broken", "/nowhere"), embedded("local", write_thing(tmp_path, "second"), priority=1)]
    res = Resolver.from_config(config(*repos), "conf/resolver.json", read_text)
    assert res.lookup(THING) == thing_schema("second")
    # "local" has no 1-0-1, but "broken" might: unknown. Asked again (only "broken") after 0.5, 1, 2, 4, then 8 s
    # each: at 55.5 s the next wait would end past the 60 s deadline, so the lookup stops there.
    with pytest.raises(RegistryOutageError) as err:
        res.lookup(THING.with_version(1, 0, 1))
    assert str(err.value) == outage(
        "broken (embedded /nowhere)", THING.with_version(1, 0, 1), 11, "[Errno 13] Permission denied"
    )
    assert waits.waited == [0.5, 1, 2, 4, 8, 8, 8, 8, 8, 8]


def test_read_local_reads_paths_and_file_uris(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{}", encoding="utf-8")
    assert read_local(str(tmp_path / "a.json")) == "{}"
    assert read_local((tmp_path / "a.json").as_uri()) == "{}"
    assert read_local(str(tmp_path / "missing.json")) is None
    assert read_local(str(tmp_path / "a.json" / "below")) is None
    with pytest.raises(OSError, match="read_local reads local files and file: URIs; given s3://b/k"):
        read_local("s3://b/k")


# HTTP repositories


def test_http_lookup_sends_the_apikey(registry: Registry) -> None:
    registry.serve(f"/api/schemas/{THING.path}", thing_schema("served"))
    res = resolver(http("registry", f"{registry.uri}/api/", apikey="4ab5c3c5-secret"))
    assert res.lookup(THING) == thing_schema("served")
    assert registry.requests == [(f"/api/schemas/{THING.path}", "4ab5c3c5-secret")]
    assert res.repositories[0].describe() == f"registry (http {registry.uri}/api/)"


def test_http_lookup_without_apikey_sends_no_header(registry: Registry) -> None:
    registry.serve(f"/schemas/{THING.path}", thing_schema("served"))
    res = resolver(http("registry", registry.uri))
    assert res.lookup(THING) == thing_schema("served")
    assert registry.requests == [(f"/schemas/{THING.path}", None)]


def test_embedded_is_asked_before_http_whatever_the_priorities(tmp_path: Path, registry: Registry) -> None:
    registry.serve(f"/schemas/{THING.path}", thing_schema("http copy"))
    local = embedded("local", write_thing(tmp_path, "embedded copy"), priority=50)
    res = resolver(http("registry", registry.uri, priority=0), local)
    assert res.lookup(THING) == thing_schema("embedded copy")
    assert registry.requests == []


def test_vendor_prefix_puts_a_repository_first(tmp_path: Path, registry: Registry) -> None:
    registry.serve(f"/schemas/{THING.path}", thing_schema("http copy"))
    local = embedded("local", write_thing(tmp_path, "embedded copy"), priority=0)
    res = resolver(local, http("registry", registry.uri, priority=50, prefixes=("com.ac",)))
    assert res.lookup(THING) == thing_schema("http copy")
    # Another vendor: no prefix matches, so the embedded one comes first again.
    other = SchemaKey.parse("iglu:org.acme/thing/jsonschema/1-0-0")
    assert isinstance(res.lookup(other), ResolutionFailure)
    assert [h.repository for h in res.lookup(other).history] == ["local", "registry"]  # type: ignore[union-attr]


def test_priority_orders_repositories_of_one_kind(registry: Registry) -> None:
    registry.serve(f"/first/schemas/{THING.path}", thing_schema("first"))
    registry.serve(f"/second/schemas/{THING.path}", thing_schema("second"))
    res = resolver(http("one", f"{registry.uri}/first", priority=5), http("two", f"{registry.uri}/second", priority=1))
    assert res.lookup(THING) == thing_schema("second")
    assert registry.paths() == [f"/second/schemas/{THING.path}"]


def test_missing_schema_is_a_resolution_failure_listing_every_repository(tmp_path: Path, registry: Registry) -> None:
    res = resolver(http("registry", registry.uri), embedded("local", tmp_path))
    failure = res.lookup(THING)
    assert isinstance(failure, ResolutionFailure)
    assert failure.failure_json(LAST_ATTEMPT) == {
        "schemaKey": "iglu:com.acme/thing/jsonschema/1-0-0",
        "error": {
            "error": "ResolutionError",
            "lookupHistory": [
                {"repository": "local", "errors": [{"error": "NotFound"}], "attempts": 1, "lastAttempt": LAST_ATTEMPT},
                {"repository": "registry", "errors": [{"error": "NotFound"}], "attempts": 1, "lastAttempt": LAST_ATTEMPT},
            ],
        },
    }  # fmt: skip
    assert (
        failure.describe() == "iglu:com.acme/thing/jsonschema/1-0-0 not found in local (NotFound), registry (NotFound)"
    )
    assert registry.paths() == [f"/schemas/{THING.path}"]


@pytest.fixture
def silent() -> Iterator[str]:
    """A loopback port that takes connections and never answers (no accept: the kernel queues them)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(
    ("answer", "requests", "last"),
    [("500", 15, "Unexpected response code: 500"), ("503", 15, "Unexpected response code: 503"),
     ("429", 15, "Unexpected response code: 429"), ("401", 5, "Unexpected response code: 401"),
     ("refused", 15, "cannot connect: [Errno 111] Connection refused"), ("timeout", 15, "read timed out after 5.0 s")],
)  # fmt: skip
def test_an_answer_that_is_not_200_or_404_is_an_outage_asked_again_until_the_deadline(
    registry: Registry, silent: str, waits: Waits, monkeypatch: pytest.MonkeyPatch, answer: str, requests: int,
    last: str
) -> None:  # fmt: skip
    monkeypatch.setattr(http_module, "HTTP_READ_SECONDS", 0.05)  # the silent server's reads time out at once
    uri = {"refused": f"http://127.0.0.1:{unused_port()}", "timeout": silent}.get(answer, registry.uri)
    registry.statuses[f"/schemas/{THING.path}"] = int(answer) if answer.isdigit() else 200
    res = Resolver.from_config(config(http("ours", uri)), "conf/resolver.json", lookup_deadline_seconds=10)
    with pytest.raises(RegistryOutageError) as err:
        res.lookup(THING)
    assert str(err.value) == outage(f"ours (http {uri})", THING, requests, last, limit="10 s")
    assert err.value.exit_code == 1
    # urllib3 makes 3 requests 0.2 s apart (not for a 401), the lookup asks again after 0.5, 1, 2 and 4 s: at 8.5 s
    # the next wait (8 s) would end past the 10 s deadline.
    retried = [0.2] if requests == 15 else []
    assert waits.waited == [*retried, 0.5, *retried, 1, *retried, 2, *retried, 4, *retried]
    if answer.isdigit():
        assert registry.paths() == [f"/schemas/{THING.path}"] * requests
    with pytest.raises(RegistryOutageError):
        res.lookup(THING)  # an outage is not cached: asked again


def test_not_found_is_a_verdict_asked_once(registry: Registry, waits: Waits) -> None:
    failure = resolver(http("ours", registry.uri)).lookup(THING)
    assert failure == ResolutionFailure(THING, (LookupHistory("ours", (RegistryError("NotFound"),), 1),))
    assert (registry.paths(), waits.waited) == ([f"/schemas/{THING.path}"], [])


def test_an_outage_with_no_repository_finding_the_schema_is_an_outage(
    tmp_path: Path, registry: Registry, waits: Waits
) -> None:
    registry.statuses[f"/down/schemas/{THING.path}"] = 502
    res = resolver(http("down", f"{registry.uri}/down"), http("empty", f"{registry.uri}/empty", priority=1))
    with pytest.raises(RegistryOutageError) as err:
        res.lookup(THING)
    assert str(err.value).startswith(f"Iglu repository down (http {registry.uri}/down) gave no answer for {THING.uri}")
    # "empty" said 404 once: only "down" is asked again.
    assert registry.paths().count(f"/empty/schemas/{THING.path}") == 1


def test_an_outage_that_ends_before_the_deadline_gives_the_schema(tmp_path: Path, waits: Waits) -> None:
    folder = write_thing(tmp_path, "after a restart")
    failures = [OSError("S3 is slow down"), OSError("S3 is slow down")]

    def read_text(path: str) -> str | None:
        if failures:
            raise failures.pop()
        return read_local(path)

    res = Resolver.from_config(config(embedded("bucket", folder)), "conf/resolver.json", read_text)
    assert res.lookup(THING) == thing_schema("after a restart")
    assert waits.waited == [0.5, 1]


def test_a_failing_repository_does_not_hide_the_next_one(registry: Registry, waits: Waits) -> None:
    registry.statuses[f"/broken/schemas/{THING.path}"] = 503
    registry.serve(f"/good/schemas/{THING.path}", thing_schema("good"))
    res = resolver(http("broken", f"{registry.uri}/broken"), http("good", f"{registry.uri}/good", priority=1))
    assert res.lookup(THING) == thing_schema("good")
    assert registry.paths() == [f"/broken/schemas/{THING.path}"] * 3 + [f"/good/schemas/{THING.path}"]


@pytest.mark.timeout(60)
def test_a_registry_that_never_finishes_its_answer_is_an_outage_at_the_lookup_deadline(trickling: Registry) -> None:
    # Every socket read gets its byte in time: only a deadline on the whole lookup ends it (short, for a quick test).
    res = Resolver.from_config(
        config(http("slow", f"{trickling.uri}/api")), "conf/resolver.json", lookup_deadline_seconds=1
    )
    with pytest.raises(RegistryOutageError) as err:
        res.lookup(THING)
    missed = "no complete answer within the lookup's deadline (1 s, shred.iglu_lookup_deadline_seconds)"
    assert str(err.value) == outage(f"slow (http {trickling.uri}/api)", THING, 1, missed, limit="1 s")
    assert trickling.paths() == [f"/api/schemas/{THING.path}"]  # no request after the deadline


@pytest.mark.timeout(120)
def test_once_the_runs_lookup_budget_is_spent_registries_are_not_asked(
    trickling: Registry, waits: Waits, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The time is the lookups' clock (`waits`), not the machine's: the registry's first answer starts only once the
    # whole lookup deadline has passed on it, and never completes, so the first lookup spends the run's budget
    # however busy the machine is. The sockets' own timeouts, in real seconds, are made longer than the test may
    # take: a request the loopback server is slow to take up waits for it, and is recorded.
    monkeypatch.setattr(resolver_module, "RUN_LOOKUP_BUDGET_SECONDS", 60.0)  # the first lookup spends it all
    monkeypatch.setattr(http_module, "HTTP_CONNECT_SECONDS", 120.0)
    monkeypatch.setattr(http_module, "HTTP_READ_SECONDS", 120.0)

    def take_the_deadline() -> None:
        waits.now += 60

    trickling.before_answer = take_the_deadline
    res = Resolver.from_config(config(http("slow", trickling.uri)), "conf/resolver.json", lookup_deadline_seconds=60)
    with pytest.raises(RegistryOutageError) as first:
        res.lookup(THING)
    missed = "no complete answer within the lookup's deadline (60 s, shred.iglu_lookup_deadline_seconds)"
    assert str(first.value) == outage(f"slow (http {trickling.uri})", THING, 1, missed)
    with pytest.raises(RegistryOutageError) as err:
        res.lookup(THING.with_version(1, 0, 1))
    assert "within the run's budget for Iglu lookups (60 s): 0 request(s), the last: not asked: past" in str(err.value)
    assert trickling.paths() == [f"/schemas/{THING.path}"]
    assert (waits.now, waits.waited) == (60, [])


@pytest.mark.timeout(300)  # a Spark session may start in this test, on a busy machine
def test_a_registry_outage_stops_the_shred_sealing_nothing_and_its_rerun_shreds_every_event(
    spark: SparkSession, tmp_path: Path, registry: Registry, waits: Waits, capsys: pytest.CaptureFixture[str]
) -> None:
    web_page = SchemaKey.parse("iglu:org.schema/WebPage/jsonschema/1-0-0")
    source = tmp_path / "in" / "part-0.tsv"
    source.parent.mkdir()
    source.write_text("".join(f"{event(i, contexts=contexts(WEB_PAGE))}\n" for i in (ID_A, ID_B)) + event(ID_C) + "\n")
    conf = tmp_path / "resolver.json"
    argv = ["shred", "--input", str(source.parent), "--output", str(tmp_path / "out"), "--run-id", RUN_ID,
            "--format", "shred-tsv", "--iglu-config", str(conf)]  # fmt: skip
    run = tmp_path / "out" / f"run={RUN_ID}"
    registry.statuses[f"/schemas/{web_page.path}"] = 500
    # 3 requests a pass (urllib3's retries), 11 passes: at 57.7 s the next wait (8 s) would pass the 60 s deadline.
    # One kind of outage is enough here: the shred stops the same way whatever the registry's failure was (a refused
    # connection, a timeout and each status are told apart by the resolver test above, without Spark).
    conf.write_text(config(http("ours", registry.uri)), encoding="utf-8")
    assert main(argv) == 1
    assert capsys.readouterr().err.splitlines()[-1] == "error: " + outage(
        f"ours (http {registry.uri})", web_page, 33, "Unexpected response code: 500"
    )
    for name in ("_SUCCESS", "summary.json", "shredding_complete.json"):
        assert not (run / name).exists()

    del registry.statuses[f"/schemas/{web_page.path}"]  # the registry answers again
    registry.serve(f"/schemas/{web_page.path}", central_schema(web_page))
    assert main(argv) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["counts"], summary["bad_rows"]) == (
        {"input": 3, "good": 3, "bad": 0}, {"loader_parsing_error": 0, "loader_iglu_error": 0}
    )  # fmt: skip
    assert len(read_lines(run / rdb.GOOD / rdb.ATOMIC_PATH)) == 3
    assert summary["shredded_types"] == {"org.schema/WebPage/jsonschema/1-0-0": 2}
    message = json.loads((run / "shredding_complete.json").read_text())
    assert message["data"]["count"] == {"good": 3, "bad": 0}
    assert (run / "_SUCCESS").exists()


# Cache


def test_each_key_is_asked_once_found_or_not(registry: Registry) -> None:
    registry.serve(f"/schemas/{THING.path}", thing_schema("served"))
    res = resolver(http("registry", registry.uri))
    first = res.lookup(THING)
    assert res.lookup(THING) is first
    missing = THING.with_version(1, 0, 1)
    failure = res.lookup(missing)
    assert isinstance(failure, ResolutionFailure)
    assert res.lookup(missing) is failure
    assert registry.paths() == [f"/schemas/{THING.path}", f"/schemas/{missing.path}"]


# Unusable schemas


def test_self_naming_another_key_is_an_invalid_schema(registry: Registry) -> None:
    registry.serve(f"/schemas/{THING.path}", thing_schema("wrong self", version="1-0-1"))
    invalid = resolver(http("registry", registry.uri)).lookup(THING)
    assert invalid == InvalidSchema(
        THING,
        'registry: its self block names {"vendor": "com.acme", "name": "thing", "format": "jsonschema", '
        '"version": "1-0-1"}, not iglu:com.acme/thing/jsonschema/1-0-0',
    )
    assert isinstance(invalid, InvalidSchema)
    assert invalid.failure_json(LAST_ATTEMPT) == {"schemaKey": THING.uri, "message": invalid.message}
    assert invalid.describe() == f"{THING.uri} is not a usable schema: {invalid.message}"


@pytest.mark.parametrize(
    "body",
    [b"<html>moved</html>", b"", b'["not", "an", "object"]', b'{"message": "service unavailable"}',
     b'{"self": "iglu:com.acme/thing/jsonschema/1-0-0"}', b'{"type": "object"}'],
)  # fmt: skip
def test_an_http_answer_of_200_that_is_no_self_describing_schema_is_an_outage(
    registry: Registry, waits: Waits, body: bytes
) -> None:
    """FAULTS 6 (attack 9): a gateway's page, an empty body or a maintenance message answered with 200. Before: an
    HTML or empty body made every event of the type a `loader_iglu_error` bad row, and a JSON object without `self`
    was taken as a schema of no columns: the entities were shredded with none of their data; both sealed, exit 0.
    An Iglu server serves every schema with its `self` block: anything else is asked again, then stops the run."""
    registry.serve(f"/schemas/{THING.path}", body)
    res = Resolver.from_config(config(http("ours", registry.uri)), "conf/resolver.json", lookup_deadline_seconds=10)
    with pytest.raises(RegistryOutageError) as err:
        res.lookup(THING)
    shown = body[:80].decode()
    last = f"answered 200 with no self-describing schema: {shown!r}"
    assert str(err.value) == outage(f"ours (http {registry.uri})", THING, 5, last, limit="10 s")


def test_a_schema_file_without_self_in_an_embedded_repository_is_taken_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "repo" / "schemas" / THING.path
    path.parent.mkdir(parents=True)
    path.write_text('{"type": "object"}')
    assert resolver(embedded("files", tmp_path / "repo")).lookup(THING) == {"type": "object"}


def test_history_messages_are_cut_to_256_characters() -> None:
    history = LookupHistory("r", (RegistryError("RepoFailure", "x" * 300), RegistryError("NotFound")), 2)
    assert history.as_json("t") == {
        "repository": "r",
        "errors": [{"error": "RepoFailure", "message": "x" * 256}, {"error": "NotFound"}],
        "attempts": 2,
        "lastAttempt": "t",
    }


# schemas_until


def test_schemas_until_walks_the_additions_of_a_revision() -> None:
    asked: list[str] = []

    def reading(path: str) -> str | None:
        asked.append(path.rsplit("/", 1)[1])
        return read_local(path)

    res = Resolver.from_config(config(embedded("local", IGLU_CENTRAL)), "conf/resolver.json", reading)
    schemas = res.schemas_until(APPLICATION_ERROR)
    assert isinstance(schemas, list)
    assert [key.uri for key, _ in schemas] == [f"{SNOWPLOW}/application_error/jsonschema/1-0-{n}" for n in range(3)]
    assert [schema for _, schema in schemas] == [central_schema(key) for key, _ in schemas]
    assert asked == ["1-0-0", "1-0-1", "1-0-2"]


def test_schemas_until_jumps_to_the_next_revision_after_the_last_addition() -> None:
    asked: list[str] = []

    def reading(path: str) -> str | None:
        asked.append(path.rsplit("/", 1)[1])
        return read_local(path)

    res = Resolver.from_config(config(embedded("local", IGLU_CENTRAL)), "conf/resolver.json", reading)
    schemas = res.schemas_until(GEOLOCATION)
    assert isinstance(schemas, list)
    assert [key.version for key, _ in schemas] == ["1-0-0", "1-1-0"]
    assert schemas[1][1] == central_schema(GEOLOCATION)
    assert asked == ["1-0-0", "1-0-1", "1-1-0"]


def test_schemas_until_fails_on_a_missing_addition_of_the_last_revision() -> None:
    res = resolver(embedded("local", IGLU_CENTRAL))
    failure = res.schemas_until(APPLICATION_ERROR.with_version(1, 0, 3))
    assert failure == ResolutionFailure(
        APPLICATION_ERROR.with_version(1, 0, 3), (LookupHistory("local", (RegistryError("NotFound"),), 1),)
    )
    first_missing = res.schemas_until(THING.with_version(2, 1, 0))
    assert isinstance(first_missing, ResolutionFailure)
    assert first_missing.key == THING.with_version(2, 0, 0)


def test_schemas_until_does_not_skip_an_addition_a_registry_failed_to_give(registry: Registry, waits: Waits) -> None:
    key = SchemaKey.parse("iglu:com.acme/thing/jsonschema/1-1-0")
    registry.serve(f"/schemas/{THING.path}", thing_schema("1-0-0"))
    registry.statuses[f"/schemas/{THING.with_version(1, 0, 1).path}"] = 502
    registry.serve(f"/schemas/{key.path}", thing_schema("1-1-0", version="1-1-0"))
    with pytest.raises(RegistryOutageError) as err:
        resolver(http("registry", registry.uri)).schemas_until(key)
    assert str(err.value) == outage(
        f"registry (http {registry.uri})", THING.with_version(1, 0, 1), 33, "Unexpected response code: 502"
    )


@dataclass(frozen=True, kw_only=True)
class ScriptedHttp(HttpRepository):
    """An HTTP repository whose answers are given (no network): for Iglu Central's hosts, which tests cannot serve."""

    answers: dict[str, dict[str, Any] | RegistryError] = field(default_factory=dict, compare=False)

    def fetch(self, key: SchemaKey, deadline: Deadline) -> Fetched:
        answer = self.answers.get(key.version, RegistryError("NotFound"))
        if isinstance(answer, RegistryError):
            return Fetched(None, answer, 1)
        return Fetched(json.dumps(answer), None, 1)


def scripted(name: str, uri: str, **answers: dict[str, Any] | RegistryError) -> ScriptedHttp:
    versions = {version.replace("_", "-"): answer for version, answer in answers.items()}
    return ScriptedHttp(
        name=name, priority=0, vendor_prefixes=(), uri=uri, pool=urllib3.PoolManager(), answers=versions
    )


@pytest.mark.parametrize(
    ("mirror_says", "walks_on"),
    [(RegistryError("NotFound"), True), (RegistryError("ClientFailure", "Unexpected response code: 403"), False),
     (RegistryError("RepoFailure", "Unexpected response code: 500"), False)],
)  # fmt: skip
def test_schemas_until_weighs_iglu_central_failures_as_upstream(
    mirror_says: RegistryError, walks_on: bool, waits: Waits
) -> None:
    # Upstream's isNotFound: among the registries whose host says "iglucentral", one NotFound outweighs another's
    # failure; a registry that is not Iglu Central must have said NotFound. Unlike upstream, a 403 is no NotFound.
    key = THING.with_version(1, 1, 0)
    schemas = {"1_0_0": thing_schema("1-0-0"), "1_1_0": thing_schema("1-1-0", version="1-1-0")}
    down = RegistryError("RepoFailure", "cannot connect: [Errno 111] Connection refused")
    res = Resolver(
        [
            scripted("Iglu Central", "http://iglucentral.com", **schemas, **{"1_0_1": down}),
            scripted("Iglu Central mirror", "https://mirror01.iglucentral-dev.com/", **{"1_0_1": mirror_says}),
        ]
    )
    try:
        result: Any = res.schemas_until(key)
    except RegistryOutageError as err:
        result = err
    if walks_on:
        assert isinstance(result, list)
        assert [k.version for k, _ in result] == ["1-0-0", "1-1-0"]
    else:
        assert isinstance(result, RegistryOutageError)


def test_schemas_until_stops_when_a_registry_that_is_not_iglu_central_failed(waits: Waits) -> None:
    key = THING.with_version(1, 1, 0)
    schemas = {"1_0_0": thing_schema("1-0-0"), "1_1_0": thing_schema("1-1-0", version="1-1-0")}
    down = RegistryError("RepoFailure", "read timed out after 5.0 s")
    res = Resolver(
        [
            scripted("Iglu Central", "http://iglucentral.com", **schemas),
            scripted("ours", "http://iglu.acme.com", **{"1_0_1": down}),
        ]
    )
    with pytest.raises(RegistryOutageError) as err:
        res.schemas_until(key)
    assert str(err.value) == outage(
        "ours (http http://iglu.acme.com)", THING.with_version(1, 0, 1), 11, "read timed out after 5.0 s"
    )


# Config


def config_error(text: str, source: str = "conf/resolver.json") -> str:
    with pytest.raises(InvalidConfigError) as err:
        Resolver.from_config(text, source)
    return str(err.value)


def test_config_that_is_not_json() -> None:
    assert config_error("{not json") == (
        "--iglu-config conf/resolver.json: given text that is not JSON (Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1)); allowed: a resolver config, a JSON object"
    )


def test_config_with_another_schema() -> None:
    assert config_error(config(embedded("local", "/x"), schema="iglu:com.snowplowanalytics.iglu/resolver-config/jsonschema/2-0-0")) == (
        '--iglu-config conf/resolver.json: schema: given "iglu:com.snowplowanalytics.iglu/resolver-config/jsonschema/2-0-0"; '
        "allowed: iglu:com.snowplowanalytics.iglu/resolver-config/jsonschema/1-0-0 to 1-0-3"
    )  # fmt: skip


def test_config_repository_without_connection() -> None:
    repo = embedded("local", "/x")
    del repo["connection"]
    assert config_error(config(repo), "s3://bucket/resolver.json") == (
        "--iglu-config s3://bucket/resolver.json: data.repositories[0].connection: given nothing; "
        "allowed: an object with name, priority, vendorPrefixes, connection "
        "(name, priority, vendorPrefixes, connection required)"
    )


def test_config_connection_with_two_kinds() -> None:
    repo = embedded("local", "/x")
    repo["connection"]["http"] = {"uri": "http://iglucentral.com"}
    assert config_error(config(http("central", "http://iglucentral.com"), repo)) == (
        '--iglu-config conf/resolver.json: data.repositories[1].connection: given {"embedded": …, "http": …}; '
        'allowed: {"embedded": {"path": …}} or {"http": {"uri": …, "apikey": …}}'
    )


def test_config_connection_of_another_kind() -> None:
    repo = embedded("local", "/x")
    repo["connection"] = {"ftp": {"host": "example.com"}}
    assert config_error(config(http("central", "http://iglucentral.com"), repo)) == (
        '--iglu-config conf/resolver.json: data.repositories[1].connection: given {"ftp": …}; '
        'allowed: {"embedded": {"path": …}} or {"http": {"uri": …, "apikey": …}}'
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["data"].update(repositories=[]), "data.repositories: given []; allowed: a non-empty array of repositories"),
        (lambda c: c["data"].pop("cacheSize"), "data.cacheSize: given nothing; allowed: an object with cacheSize, cacheTtl, repositories (cacheSize, repositories required)"),
        (lambda c: c["data"].update(cacheTtl="1h"), 'data.cacheTtl: given "1h"; allowed: a whole number of seconds, 0 or more, or null'),
        (lambda c: c["data"]["repositories"][0].update(extra=1), "data.repositories[0].extra: given a key that is not allowed; allowed: an object with name, priority, vendorPrefixes, connection only"),
        (lambda c: c["data"]["repositories"][0].update(priority="high"), 'data.repositories[0].priority: given "high"; allowed: a whole number (lower is asked first)'),
        (lambda c: c["data"]["repositories"][0].update(vendorPrefixes="com.acme"), 'data.repositories[0].vendorPrefixes: given "com.acme"; allowed: an array of strings'),
        (lambda c: c["data"]["repositories"][1]["connection"]["http"].update(uri="iglucentral.com"), 'data.repositories[1].connection.http.uri: given "iglucentral.com"; allowed: an http:// or https:// URI'),
        (lambda c: c["data"]["repositories"][1]["connection"]["http"].update(apikey=42), "data.repositories[1].connection.http.apikey: given 42; allowed: a string or null"),
        (lambda c: c["data"]["repositories"][1].update(name="local"), 'data.repositories[1].name: given "local", the name of data.repositories[0]; allowed: a name no other repository has'),
    ],
)  # fmt: skip
def test_config_values_are_checked(change: Any, message: str) -> None:
    document = json.loads(config(embedded("local", "/x"), http("central", "http://iglucentral.com")))
    change(document)
    assert config_error(json.dumps(document)) == f"--iglu-config conf/resolver.json: {message}"


def test_config_of_every_1_0_x_schema_is_read_and_cache_settings_are_ignored() -> None:
    repo = http("central", "http://iglucentral.com")
    repo["priority"] = 3.0  # resolver-config 1-0-2 on says "number"; upstream reads a whole one as an Int
    for addition in range(4):
        schema = f"iglu:com.snowplowanalytics.iglu/resolver-config/jsonschema/1-0-{addition}"
        document = {"schema": schema, "data": {"cacheSize": 0, "repositories": [repo]}}
        res = Resolver.from_config(json.dumps(document), "resolver.json")
        assert [(r.name, r.priority, r.vendor_prefixes) for r in res.repositories] == [("central", 3, ())]
        assert res.repositories[0].describe() == "central (http http://iglucentral.com)"
