"""HTTP Iglu repositories (an Iglu Server, Iglu Central or a static registry): one request per key through urllib3,
its retries and timeouts cut to the lookup's deadline, and its waits on the deadline's clock."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit

import urllib3
from urllib3.connectionpool import ConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    MaxRetryError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

from jobs.iglu.repositories import (
    HTTP_CLASS_PRIORITY,
    Deadline,
    Fetched,
    RegistryError,
    Repository,
    SchemaKey,
    reject_constant,
    short,
)

# Upstream (`Resolver.allIgluCentral`): an HTTP registry whose host says "iglucentral" is Iglu Central or a mirror.
_IGLU_CENTRAL_HOST = re.compile(r"\biglucentral\b")

HTTP_CONNECT_SECONDS = 2.0
HTTP_READ_SECONDS = 5.0
HTTP_TIMEOUT = urllib3.Timeout(connect=HTTP_CONNECT_SECONDS, read=HTTP_READ_SECONDS)
_BODY_CHUNK_BYTES = 64 * 1024
_SHORTEST_WAIT = 0.001  # urllib3 refuses a zero timeout; a request this close to its deadline fails at once
# Statuses that say "try again" at once: after the retries a RepoFailure (the registry failed). Any status but 200
# and 404 is an outage, which the resolver asks again after a wait.
_TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


class _RetriesExhausted(MaxRetryError):
    """urllib3 gave up: carries how many requests it made, which `MaxRetryError` does not."""

    def __init__(self, cause: MaxRetryError, attempts: int) -> None:
        super().__init__(cause.pool, cause.url, cause.reason)
        self.attempts = attempts


class _CountingRetry(Retry):
    """`Retry` that tells, when it gives up, how many requests were made (the lookup history's `attempts`), and
    that gives up once its deadline has passed."""

    deadline: Deadline | None = None

    def until(self, deadline: Deadline) -> Self:
        """This retry policy, for requests that must be over by `deadline`."""
        retry = self.new()
        retry.deadline = deadline
        return retry

    def new(self, **kw: Any) -> Self:
        retry = super().new(**kw)
        retry.deadline = self.deadline  # urllib3 makes a new Retry per request: the deadline goes along
        return retry

    def sleep(self, response: BaseHTTPResponse | None = None) -> None:
        """The backoff between requests, waited on the deadline's clock (never past the deadline)."""
        if self.deadline is None:
            super().sleep(response)
        else:
            self.deadline.wait(self.get_backoff_time())

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        # Past the deadline, no request more: urllib3 gives up as with no retries left.
        current = self.new(total=0) if self.deadline is not None and self.deadline.left() <= 0 else self
        try:
            return super(_CountingRetry, current).increment(method, url, response, error, _pool, _stacktrace)
        except MaxRetryError as err:
            raise _RetriesExhausted(err, len(self.history) + 1) from err


class _TimeoutUntil(urllib3.Timeout):
    """HTTP_TIMEOUT cut to what is left before a deadline. urllib3 clones the timeout for each request (retries
    and redirects too), so each one waits at most what is left when it starts."""

    def __init__(self, deadline: Deadline) -> None:
        super().__init__(connect=HTTP_CONNECT_SECONDS, read=HTTP_READ_SECONDS)
        self.deadline = deadline

    def clone(self) -> urllib3.Timeout:
        left = max(self.deadline.left(), _SHORTEST_WAIT)
        return urllib3.Timeout(total=left, connect=min(HTTP_CONNECT_SECONDS, left), read=min(HTTP_READ_SECONDS, left))


# Connect errors, read timeouts, 429 and 5xx: 3 requests in all, 0 s then 0.2 s apart. Retry-After is not obeyed,
# so that one registry cannot hold a run for as long as it likes. Redirects are followed (http to https), and the
# apikey is not sent on to another host.
HTTP_RETRY = _CountingRetry(
    total=5,
    connect=2,
    read=2,
    status=2,
    other=0,
    redirect=3,
    backoff_factor=0.1,
    status_forcelist=_TRANSIENT_STATUSES,
    allowed_methods=frozenset({"GET"}),
    raise_on_status=False,
    raise_on_redirect=False,
    respect_retry_after_header=False,
    remove_headers_on_redirect=Retry.DEFAULT_REMOVE_HEADERS_ON_REDIRECT | {"apikey"},
)


@dataclass(frozen=True, kw_only=True)
class HttpRepository(Repository):
    """An Iglu Server or Iglu Central: `GET {uri}/schemas/VENDOR/NAME/FORMAT/M-R-A`, with an `apikey` header."""

    class_priority: ClassVar[int] = HTTP_CLASS_PRIORITY
    uri: str
    apikey: str | None = field(default=None, repr=False)
    pool: urllib3.PoolManager = field(repr=False, compare=False)

    def describe(self) -> str:
        return f"{self.name} (http {self.uri})"

    @property
    def is_iglu_central(self) -> bool:
        """Iglu Central or a mirror, whose errors upstream's `isNotFound` weighs apart from the others'."""
        host = urlsplit(self.uri).hostname or ""
        return _IGLU_CENTRAL_HOST.search(host) is not None

    def fetch(self, key: SchemaKey, deadline: Deadline) -> Fetched:
        if deadline.left() <= 0:
            return Fetched(None, deadline.not_asked(), 0)
        url = f"{self.uri.removesuffix('/')}/schemas/{key.path}"
        headers = {} if self.apikey is None else {"apikey": self.apikey}
        try:
            response = self.pool.request(
                "GET",
                url,
                headers=headers,
                retries=HTTP_RETRY.until(deadline),
                timeout=_TimeoutUntil(deadline),
                preload_content=False,  # read by `_read_body`, within the deadline
            )
        except _RetriesExhausted as err:
            return Fetched(None, _request_failure(err.reason, deadline), err.attempts)
        except (HTTPError, OSError) as err:
            return Fetched(None, _request_failure(err, deadline), 1)
        attempts = 1 if response.retries is None else len(response.retries.history) + 1
        status = response.status
        body, failure = _read_body(response, deadline)  # whatever the status: the connection is then reusable
        if 200 <= status < 300:
            return Fetched(body, failure or _not_a_schema(body, status), attempts)
        if status == 404:
            return Fetched(None, RegistryError("NotFound"), attempts)
        # Upstream's Http4s lookup says the same, status only ("Remove entropy from client failures").
        message = f"Unexpected response code: {status}"
        if status >= 500 or status in _TRANSIENT_STATUSES:
            return Fetched(None, RegistryError("RepoFailure", message), attempts)
        return Fetched(None, RegistryError("ClientFailure", message), attempts)


def _not_a_schema(body: bytes | None, status: int) -> RegistryError | None:
    """An answer of 2xx whose body is no self-describing schema (an Iglu server serves each schema with its `self`
    block): a gateway's or proxy's page, an empty body, a maintenance message. An outage, asked again until the
    deadline, never a verdict on the events (which would make them bad rows, or shred them with no columns)."""
    try:
        document = json.loads(body or b"", parse_constant=reject_constant)
    except (RecursionError, ValueError):
        document = None
    if isinstance(document, dict) and isinstance(document.get("self"), dict):
        return None
    shown = (body or b"")[:80].decode("utf-8", "replace").replace("\n", " ")
    return RegistryError("RepoFailure", f"answered {status} with no self-describing schema: {shown!r}")


def _read_body(response: BaseHTTPResponse, deadline: Deadline) -> tuple[bytes | None, RegistryError | None]:
    """The whole body, or why not: it must be in by `deadline`, however the registry spaces its bytes."""
    chunks: list[bytes] = []
    try:
        while (left := deadline.left()) > 0:
            sock = getattr(response.connection, "sock", None)
            if sock is not None:  # one read waits no longer than the deadline allows
                sock.settimeout(min(HTTP_READ_SECONDS, left))
            chunk = response.read1(_BODY_CHUNK_BYTES)
            if not chunk:
                response.release_conn()
                return b"".join(chunks), None
            chunks.append(chunk)
        failure = deadline.missed()
    except (HTTPError, OSError) as err:
        failure = _request_failure(err, deadline)
    response.close()  # a half-read answer leaves its connection unusable
    response.release_conn()
    return None, failure


def _request_failure(err: BaseException | None, deadline: Deadline) -> RegistryError:
    """A request that got no (whole) answer: the deadline's failure once it has passed (each wait was cut to it)."""
    if deadline.left() <= 0:
        return deadline.missed()
    return RegistryError("RepoFailure", _connection_failure(err))


def _connection_failure(err: BaseException | None) -> str:
    """A short message for a request that got no answer: no host, port or URL, so that failures group."""
    if isinstance(err, NewConnectionError):  # before ConnectTimeoutError, which urllib3 makes it a kind of
        return f"cannot connect: {short(err.__cause__ or err)}"
    if isinstance(err, ConnectTimeoutError):
        return f"connect timed out after {HTTP_TIMEOUT.connect_timeout} s"
    if isinstance(err, ReadTimeoutError):
        return f"read timed out after {HTTP_TIMEOUT.read_timeout} s"
    if isinstance(err, ProtocolError):
        return f"connection broken: {short(err.args[-1] if err.args else err)}"
    return short(err) if err is not None else "no answer"
