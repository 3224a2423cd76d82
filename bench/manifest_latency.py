"""Manifest throughput against a local DynamoDB endpoint with an injected per-request latency.

The endpoint, in its own process (as DynamoDB is not in the Spark worker's): moto's ThreadedMotoServer on
127.0.0.1 behind a threaded proxy on 127.0.0.1 that sleeps `--latency-ms` before forwarding each request,
like a DynamoDB round trip, so requests in flight can hide the latency. With `--capacity R` the proxy
answers PutItem/Query beyond R requests per second (a token bucket holding a tenth of a second's worth) with
ProvisionedThroughputExceededException, to show how the client's adaptive retry mode copes.

The benchmark drives the real client as a Spark task does (`open_manifest(...).client().check_ids(...)`) over
N fresh event ids (one fingerprint each), with cross-batch synthetic detection off (one PutItem per id) and
on (a Query plus a PutItem per id), at each concurrency; then a second pass over the same ids as a later run,
where every put fails its condition (duplicates). First come rows at latency 0 (put only, fresh ids, no
capacity limit): moto's own service time and throughput, which bound everything else, since moto is
single-process Python (about 3 ms of CPU a request here, so about 250 requests per second at most), and
its Query scans the whole table (O(items)), so synthetic-on rows slow down as the table fills: a moto artifact.
The default run (400 ids, 20 passes) takes about 1.5 minutes on 2 cores; 4000 ids take well over ten times as long.

    .venv/bin/python -m bench.manifest_latency [--ids N] [--latency-ms 5] [--concurrency 1 4 16 64]
        [--capacity R] [--max-attempts 10] [--json]

Prints a Markdown table on stdout; with --json, one JSON document (a list of rows) on stdout instead and the
table on stderr. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import multiprocessing
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from typing import Any

from jobs.manifest import ManifestStats, open_manifest
from jobs.manifest.base import SECONDS_PER_DAY
from jobs.manifest.requests import RequestManifest

# The body DynamoDB (and tests/pipeline/manifest_server.py) sends with a throttled request.
THROTTLED = (
    b'{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"Rate exceeded"}'
)
METERED_TARGETS = ("DynamoDB_20120810.PutItem", "DynamoDB_20120810.Query")
ETL_TIME = 1_700_000_000  # the run that delivers the ids first
LATER_ETL_TIME = ETL_TIME + 3_600  # the run that sees them again: every put fails its condition
TTL_DAYS = 180


# --- the endpoint (runs in its own process) -------------------------------------------------------------


class TokenBucket:
    """`rate` requests per second, bursts of up to a tenth of a second's worth (so the rate shows, not the burst)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.size = max(rate / 10, 1.0)
        self.tokens = self.size
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.size, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens < 1.0:
                return False
            self.tokens -= 1.0
            return True


@dataclass
class Endpoint:
    """What the proxy does (set per run) and what it saw (read back, and zeroed, per pass)."""

    latency_s: float = 0.0
    bucket: TokenBucket | None = None
    forwarded: int = 0
    throttled: int = 0
    backend_s: float = 0.0
    moto_errors: int = 0  # 5xx answers (moto's in-memory tables are not thread-safe) or no answer at all
    error_sample: str | None = None
    cpu_stamp: float = field(default_factory=time.process_time)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def configure(self, latency_ms: float, capacity: float | None) -> None:
        self.latency_s = latency_ms / 1000
        self.bucket = TokenBucket(capacity) if capacity else None

    def start(self) -> None:
        with self.lock:
            self.forwarded = self.throttled = self.moto_errors = 0
            self.backend_s = 0.0
            self.error_sample = None
            self.cpu_stamp = time.process_time()
            if self.bucket is not None:
                self.bucket = TokenBucket(self.bucket.rate)

    def admit(self, target: str) -> bool:
        admitted = self.bucket is None or target not in METERED_TARGETS or self.bucket.take()
        if not admitted:
            with self.lock:
                self.throttled += 1
        return admitted

    def record(self, seconds: float, status: int, body: bytes) -> None:
        with self.lock:
            self.forwarded += 1
            self.backend_s += seconds
            if status >= 500:
                self.moto_errors += 1
                self.error_sample = self.error_sample or f"{status} {body[:300].decode(errors='replace')}"

    def counters(self) -> dict[str, Any]:
        with self.lock:
            return {
                "forwarded": self.forwarded,
                "throttled": self.throttled,
                "backend_s": self.backend_s,
                "moto_errors": self.moto_errors,
                "error_sample": self.error_sample,
                "cpu_s": time.process_time() - self.cpu_stamp,
            }


def post_upstream(local: threading.local, upstream: tuple[str, int], path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, str]:  # fmt: skip
    """POST to moto over this thread's keep-alive connection; one reconnect if moto closed it while idle."""
    for attempt in (1, 2):
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = http.client.HTTPConnection(*upstream, timeout=60)
        try:
            connection.request("POST", path, body, headers)
            response = connection.getresponse()
            return response.status, response.read(), response.getheader("Content-Type", "")
        except (http.client.RemoteDisconnected, ConnectionError):
            connection.close()
            local.connection = None
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def proxy_handler(endpoint: Endpoint, upstream: tuple[str, int]) -> type[BaseHTTPRequestHandler]:
    local = threading.local()
    skipped = {"host", "content-length", "connection"}

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as botocore's connection pool expects
        disable_nagle_algorithm = True  # else headers and body, written apart, wait out a delayed ACK (40 ms)

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            time.sleep(endpoint.latency_s)  # the round trip; sleeping threads overlap
            if not endpoint.admit(self.headers.get("X-Amz-Target", "")):
                self._answer(400, THROTTLED, "application/x-amz-json-1.0")
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in skipped}
            started = time.perf_counter()
            try:
                status, data, content_type = post_upstream(local, upstream, self.path, body, headers)
            except OSError as err:  # botocore retries a 502 as it would a lost connection
                status, data, content_type = 502, f"proxy: {err!r}".encode(), "text/plain"
            endpoint.record(time.perf_counter() - started, status, data)
            self._answer(status, data, content_type)

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Proxy


class ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # 64 clients connect at once; the default backlog is 5


def reset_moto(upstream: tuple[str, int]) -> None:
    connection = http.client.HTTPConnection(*upstream, timeout=60)
    try:
        connection.request("POST", "/moto-api/reset")
        connection.getresponse().read()
    finally:
        connection.close()


def answer_commands(conn: Connection, endpoint: Endpoint, upstream: tuple[str, int]) -> None:
    """Serve the benchmark's commands until it says stop (or goes away)."""
    while True:
        try:
            command, *args = conn.recv()
        except EOFError:
            return
        if command == "stop":
            return
        if command == "setup":  # a new run: empty moto, this latency and capacity
            reset_moto(upstream)
            endpoint.configure(*args)
            conn.send(None)
        elif command == "start":  # a new pass: zero the counters, fill the bucket
            endpoint.start()
            conn.send(None)
        elif command == "counters":
            conn.send(endpoint.counters())
        else:
            conn.send(ValueError(f"unknown command {command!r}"))


def serve(conn: Connection) -> None:
    """The endpoint process: moto and the proxy on 127.0.0.1; sends the proxy's URL, then obeys `conn`."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    try:
        upstream = moto.get_host_and_port()
        endpoint = Endpoint()
        proxy = ProxyServer(("127.0.0.1", 0), proxy_handler(endpoint, upstream))
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        try:
            conn.send(f"http://127.0.0.1:{proxy.server_address[1]}")
            answer_commands(conn, endpoint, upstream)
        finally:
            proxy.shutdown()
            proxy.server_close()
    finally:
        moto.stop()


@dataclass
class EndpointControl:
    """The benchmark's handle on the endpoint process."""

    url: str
    conn: Connection

    def call(self, command: str, *args: Any) -> Any:
        self.conn.send((command, *args))
        answer = self.conn.recv()
        if isinstance(answer, Exception):
            raise answer
        return answer


@contextmanager
def local_endpoint() -> Iterator[EndpointControl]:
    """Start the endpoint process; yield its control; stop it (terminate it if it does not stop)."""
    context = multiprocessing.get_context("spawn")
    conn, child_conn = context.Pipe()
    process = context.Process(target=serve, args=(child_conn,), name="manifest-endpoint", daemon=True)
    process.start()
    child_conn.close()
    try:
        if not conn.poll(120):
            raise RuntimeError("the endpoint process did not start within 120 s")
        yield EndpointControl(url=conn.recv(), conn=conn)
    finally:
        with suppress(OSError):
            conn.send(("stop",))
        process.join(15)
        if process.is_alive():
            process.terminate()
            process.join(5)
        conn.close()


# --- the benchmark ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    latency_ms: float
    capacity: float | None
    concurrency: int
    synthetic: bool


@dataclass
class PassResult:
    stats: ManifestStats
    ids_done: int
    seconds: float
    client_cpu_s: float
    endpoint: dict[str, Any]  # Endpoint.counters()
    error: str | None


@dataclass
class Row:
    latency_ms: float
    capacity: float | None
    concurrency: int
    synthetic: bool
    pass_: str  # "fresh" or "duplicate"
    ids: int
    ids_done: int
    seconds: float
    ids_per_second: float
    requests: int  # manifest calls (PutItem/Query), a retried call counted once
    requests_per_second: float
    requests_per_id: float
    http_requests: int  # what reached the proxy: calls plus retries
    puts: int
    queries: int
    conditional_failures: int
    throttles: int
    retries: int
    throttles_per_request: float
    retries_per_request: float
    moto_errors: int
    moto_ms_per_request: float  # the proxy's wait for moto: service time, plus queueing when moto is busy
    client_cpu_ms_per_request: float
    endpoint_cpu_ms_per_request: float
    error: str | None

    def to_json(self) -> dict[str, Any]:
        row = asdict(self)
        row["pass"] = row.pop("pass_")
        return row


def fresh_ids(count: int) -> list[tuple[str, list[str]]]:
    return [(str(uuid.uuid4()), [uuid.uuid4().hex]) for _ in range(count)]


def per(numerator: float, denominator: float, scale: float = 1.0) -> float:
    return numerator * scale / denominator if denominator else 0.0


def run_pass(
    control: EndpointControl,
    manifest: RequestManifest,
    ids: list[tuple[str, list[str]]],
    etl_time: int,
    synthetic: bool,
) -> PassResult:
    """One Spark task's worth: a new client (as a new worker has), `check_ids` over all ids."""
    client = manifest.client()
    control.call("start")
    done, error = 0, None
    cpu, started = time.process_time(), time.perf_counter()
    try:
        for _ in client.check_ids(ids, etl_time, etl_time + TTL_DAYS * SECONDS_PER_DAY, synthetic):
            done += 1
    except Exception as err:  # e.g. still throttled after max_attempts: reported in the row, not raised
        error = f"{type(err).__name__}: {err}"
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    endpoint = control.call("counters")
    client.close()
    return PassResult(client.stats, done, seconds, cpu, endpoint, error)


def make_row(setting: Setting, pass_: str, ids: int, result: PassResult) -> Row:
    stats, done, seconds, endpoint = result.stats, result.ids_done, result.seconds, result.endpoint
    http_requests = int(endpoint["forwarded"] + endpoint["throttled"])
    return Row(
        **asdict(setting), pass_=pass_, ids=ids, ids_done=done, seconds=round(seconds, 3),
        ids_per_second=round(per(done, seconds)), requests=stats.requests,
        requests_per_second=round(per(stats.requests, seconds)), requests_per_id=round(per(stats.requests, done), 3),
        http_requests=http_requests, puts=stats.puts, queries=stats.queries,
        conditional_failures=stats.conditional_failures, throttles=stats.throttles, retries=stats.retries,
        throttles_per_request=round(per(stats.throttles, stats.requests), 3),
        retries_per_request=round(per(stats.retries, stats.requests), 3), moto_errors=endpoint["moto_errors"],
        moto_ms_per_request=round(per(endpoint["backend_s"], endpoint["forwarded"], 1000), 2),
        client_cpu_ms_per_request=round(per(result.client_cpu_s, http_requests, 1000), 2),
        endpoint_cpu_ms_per_request=round(per(endpoint["cpu_s"], http_requests, 1000), 2),
        error=result.error,
    )  # fmt: skip


def run_setting(
    control: EndpointControl, setting: Setting, passes: tuple[str, ...], ids: int, max_attempts: int
) -> Iterator[Row]:
    """A new table; fresh ids as one run delivers them, then (if asked) the same ids as a later run sees them."""
    control.call("setup", setting.latency_ms, setting.capacity)
    manifest = open_manifest(f"dynamodb://winnow-bench-{uuid.uuid4().hex[:8]}", setting.concurrency, max_attempts)
    assert isinstance(manifest, RequestManifest)
    manifest.create()
    manifest.check()
    batch = fresh_ids(ids)
    for pass_ in passes:
        etl_time = ETL_TIME if pass_ == "fresh" else LATER_ETL_TIME
        result = run_pass(control, manifest, batch, etl_time, setting.synthetic)
        row = make_row(setting, pass_, ids, result)
        print(summary_line(row, result.endpoint["error_sample"]), file=sys.stderr, flush=True)
        yield row


def warm_up(control: EndpointControl, max_attempts: int) -> None:
    """Unmeasured: moto and botocore load code and models on first use (the first pass would pay for it)."""
    control.call("setup", 0.0, None)
    manifest = open_manifest(f"dynamodb://winnow-bench-{uuid.uuid4().hex[:8]}", 4, max_attempts)
    assert isinstance(manifest, RequestManifest)
    manifest.create()
    run_pass(control, manifest, fresh_ids(100), ETL_TIME, synthetic=True)


def settings(
    latency_ms: float, concurrencies: list[int], capacity: float | None
) -> Iterator[tuple[Setting, tuple[str, ...]]]:
    """First moto's own speed (latency 0, put only, fresh ids, never capacity-limited), then the full matrix."""
    if latency_ms:
        for concurrency in concurrencies:
            yield Setting(0.0, None, concurrency, synthetic=False), ("fresh",)
    for synthetic in (False, True):
        for concurrency in concurrencies:
            yield Setting(latency_ms, capacity, concurrency, synthetic), ("fresh", "duplicate")


COLUMNS = [
    ("latency ms", "latency_ms"), ("capacity/s", "capacity"), ("conc.", "concurrency"), ("synthetic", "synthetic"),
    ("pass", "pass"), ("ids", "ids_done"), ("s", "seconds"), ("ids/s", "ids_per_second"),
    ("req/s", "requests_per_second"), ("req/id", "requests_per_id"), ("cond. fail", "conditional_failures"),
    ("throttles", "throttles"), ("retries", "retries"), ("moto 5xx", "moto_errors"), ("moto ms/req", "moto_ms_per_request"),
    ("client CPU ms/req", "client_cpu_ms_per_request"), ("endpoint CPU ms/req", "endpoint_cpu_ms_per_request"),
    ("error", "error"),
]  # fmt: skip


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(title for title, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        values = row.to_json()
        lines.append("| " + " | ".join(cell(values[key]) for _, key in COLUMNS) + " |")
    return "\n".join(lines)


def summary_line(row: Row, moto_error: str | None) -> str:
    return (
        f"latency {row.latency_ms:g} ms, concurrency {row.concurrency}, synthetic {cell(row.synthetic)}, "
        f"{row.pass_}: {row.ids_per_second:g} ids/s, {row.requests_per_second:g} req/s, "
        f"{row.throttles} throttles, {row.retries} retries, {row.moto_errors} moto 5xx"
        + (f" (first: {moto_error})" if moto_error else "")
        + (f", error {row.error}" if row.error else "")
    )


def use_endpoint(url: str) -> None:
    """Point boto3 (and so open_manifest) at the local endpoint with dummy credentials."""
    os.environ.update(
        AWS_ENDPOINT_URL_DYNAMODB=url, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
        AWS_SESSION_TOKEN="testing", AWS_DEFAULT_REGION="us-east-1", AWS_REGION="us-east-1",
    )  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ids", type=int, default=400, help="fresh event ids per run (default 400)")
    parser.add_argument("--latency-ms", type=float, default=5.0, help="injected per-request latency (default 5)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64], help="requests in flight")
    parser.add_argument("--capacity", type=float, help="PutItem/Query per second beyond which the proxy throttles")
    parser.add_argument("--max-attempts", type=int, default=10, help="botocore max_attempts (default 10)")
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout; the table on stderr")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows: list[Row] = []
    with local_endpoint() as control:
        use_endpoint(control.url)
        warm_up(control, args.max_attempts)
        for setting, passes in settings(args.latency_ms, args.concurrency, args.capacity):
            rows.extend(run_setting(control, setting, passes, args.ids, args.max_attempts))
    table = markdown(rows)
    if args.json:
        print(table, file=sys.stderr)
        json.dump([row.to_json() for row in rows], sys.stdout, indent=1)
        print()
    else:
        print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
