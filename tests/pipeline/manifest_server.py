"""moto's DynamoDB on 127.0.0.1 for Spark executors, behind a proxy that can inject throttling and failures.

moto's backend is not thread-safe (a Query iterating a table while a PutItem adds to it raised "dictionary changed
size during iteration" and answered 500): the server (scripts/rehearsal/moto_server.py, which `make rehearse` runs
too) hands it one request at a time.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from scripts.rehearsal.moto_server import moto_server, serving

THROTTLED = (
    b'{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"Rate exceeded"}'
)
BROKEN = b'{"__type":"com.amazon.coral.validate#ValidationException","message":"injected failure"}'
JSON = "application/x-amz-json-1.0"
# Transient server errors, by name: status, body, content type.
SERVER_ERRORS = {
    "InternalServerError": (
        500,
        b'{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"Internal server error"}',
        JSON,
    ),
    "ServiceUnavailable": (
        503,
        b'{"__type":"com.amazonaws.dynamodb.v20120810#ServiceUnavailable","message":"Service unavailable"}',
        JSON,
    ),
    # What moto's server answered when its backend failed: no DynamoDB error code at all.
    "bare 500": (500, b"<h1>Internal Server Error</h1>", "text/html"),
}
Answer = tuple[int, bytes, str]


@dataclass
class Faults:
    """What the proxy does to PutItem and Query requests (counted across all executors)."""

    throttle_every: int = 0  # every Nth PutItem is answered with throttling (0: none)
    fail_after: int = 0  # the PutItem after this many succeed gets a non-retryable error, once (0: never)
    max_per_second: int = 0  # PutItems and Queries above this many in the last second are throttled (0: no limit)
    server_errors: int = 0  # the next this many PutItems and Queries get a server error (-1: all, for good)
    server_error_kinds: tuple[str, ...] = tuple(SERVER_ERRORS)  # taken in turn
    lease_down: bool = False  # the writer lease's reads and removals get a server error (its creation does not)
    puts: int = 0
    throttled: int = 0
    failed: int = 0
    server_errored: int = 0
    served: list[float] = field(default_factory=list)  # when each request within the limit was let through
    lock: threading.Lock = field(default_factory=threading.Lock)

    def decide(self, operation: str, body: bytes) -> Answer | None:
        if b'"winnow:' in body:
            # The job's own items (partition keys `winnow:…`: the writer lease, the run register) are spared:
            # faults hit the events, whose calls summary.json counts.
            return None
        with self.lock:
            if self.max_per_second:
                now = time.monotonic()
                recent = [moment for moment in self.served[-self.max_per_second :] if moment > now - 1.0]
                if len(recent) >= self.max_per_second:
                    self.throttled += 1
                    return 400, THROTTLED, JSON
                self.served.append(now)
            if self.server_errors and (self.server_errors < 0 or self.server_errored < self.server_errors):
                kind = self.server_error_kinds[self.server_errored % len(self.server_error_kinds)]
                self.server_errored += 1
                return SERVER_ERRORS[kind]
            if operation != "PutItem":
                return None
            self.puts += 1
            if self.fail_after and not self.failed and self.puts > self.fail_after:
                self.failed += 1
                return 400, BROKEN, JSON
            if self.throttle_every and self.puts % self.throttle_every == 0:
                self.throttled += 1
                return 400, THROTTLED, JSON
            return None


@contextmanager
def dynamodb_on_loopback(faults: Faults) -> Iterator[str]:
    """Start moto and the proxy on 127.0.0.1; yield the proxy's URL; stop both."""
    with moto_server() as upstream:
        # moto's backends live in this process, shared by every server it starts: begin with an empty one.
        urllib.request.urlopen(urllib.request.Request(upstream + "/moto-api/reset", method="POST"), timeout=30).close()
        with _proxy(upstream, faults) as url:
            yield url


@contextmanager
def _proxy(upstream: str, faults: Faults) -> Iterator[str]:
    """A proxy to `upstream` on 127.0.0.1 that lets `faults` answer PutItem and Query first; yields its URL."""

    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            operation = self.headers.get("X-Amz-Target", "").rpartition(".")[2]
            injected = faults.decide(operation, body) if operation in ("PutItem", "Query") else None
            if faults.lease_down and operation in ("GetItem", "DeleteItem") and b"winnow:writer-lease" in body:
                injected = SERVER_ERRORS["InternalServerError"]
            if injected is not None:
                self._answer(*injected)
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            request = urllib.request.Request(upstream + self.path, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    self._answer(response.status, response.read(), response.headers.get("Content-Type", ""))
            except urllib.error.HTTPError as err:
                self._answer(err.code, err.read(), err.headers.get("Content-Type", ""))

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        # Spark tasks open many connections at once: a deeper accept queue than socketserver's 5, so a burst on a
        # loaded machine is queued rather than reset.
        request_queue_size = 128
        daemon_threads = True

    with serving(Server(("127.0.0.1", 0), Proxy)) as url:
        yield url
