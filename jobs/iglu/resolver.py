"""An Iglu resolver: finds JSON Schemas by key in the registries a resolver config lists.

A port of the lookup semantics of snowplow/iglu-scala-client 4.0.x (`Resolver`, `Registry`, `RegistryLookup`), so
that a schema resolves here from the same registry, in the same order, as it does for Snowplow's own loaders:

- registries are tried in upstream's `prioritize` order (vendor-prefix match first, then the kind of registry,
  then the configured priority); the first that has the schema wins;
- a schema is "not found" only when every repository that could hold it answered so (HTTP 404, no such file in an
  embedded folder; upstream's `isNotFound` weighs Iglu Central and its mirrors as one): that, or a schema that is
  not usable, is a returned `Failure`, which the job turns into `loader_iglu_error` bad rows;
- any other answer (connection refused or reset, a timeout, a DNS failure, 5xx, 429, another 4xx, an unreadable
  embedded file) says nothing about the schema: an outage. The lookup asks again, with backoff, until its deadline,
  then raises `RegistryOutageError` (exit 1): an outage never becomes a verdict, so never a bad row;
- a bad resolver config raises `InvalidConfigError`;
- `schemas_until` is upstream's `lookupSchemasUntilResult`: every schema of a model up to a key, which is what
  column types and TSV columns are derived from.

Each key is asked once per `Resolver` (hits and failures alike are cached): one run sees one answer per key, so
every event of that key is shredded the same way. Each lookup has a deadline (`shred.iglu_lookup_deadline_seconds`)
and a run's lookups together a budget (`RUN_LOOKUP_BUDGET_SECONDS`): past them an HTTP registry is an outage, as one
that never answers. The time and the waits come from a `Clock`, so that tests wait without sleeping.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Literal, Self, TypeAlias
from urllib.parse import urlsplit, urlunsplit
from urllib.request import url2pathname

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

from jobs.errors import InvalidConfigError, WinnowError

logger = logging.getLogger(__name__)

CONFIG_SCHEMA_PREFIX = "iglu:com.snowplowanalytics.iglu/resolver-config/jsonschema/"
_CONFIG_SCHEMA = re.compile(re.escape(CONFIG_SCHEMA_PREFIX) + r"1-0-[0-3]")
_ALLOWED_CONFIG_SCHEMAS = f"{CONFIG_SCHEMA_PREFIX}1-0-0 to 1-0-3"
_ALLOWED_CONNECTIONS = '{"embedded": {"path": …}} or {"http": {"uri": …, "apikey": …}}'
_REPOSITORY_KEYS = ("name", "priority", "vendorPrefixes", "connection")

# iglu-core's SchemaKey grammar (`SchemaKey.fromUri`): SchemaVer models start at 1, no leading zeros.
_VENDOR = r"[a-zA-Z0-9_.-]+"
_PART = r"[a-zA-Z0-9_-]+"
_VERSION = re.compile(r"([1-9][0-9]*)-(0|[1-9][0-9]*)-(0|[1-9][0-9]*)")
_IGLU_URI = re.compile(rf"iglu:({_VENDOR})/({_PART})/({_PART})/([0-9-]+)")
_ALLOWED_KEY = "iglu:VENDOR/NAME/FORMAT/M-R-A"
# A URI scheme followed by "/" (s3://, file:/, http://): such a path is never relative to the config's folder.
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/")
# Upstream (`Resolver.allIgluCentral`): an HTTP registry whose host says "iglucentral" is Iglu Central or a mirror.
_IGLU_CENTRAL_HOST = re.compile(r"\biglucentral\b")

# Kinds of registry, as upstream's `Registry.classPriority`: embedded (local) before HTTP (network).
EMBEDDED_CLASS_PRIORITY = 2
HTTP_CLASS_PRIORITY = 100

HTTP_CONNECT_SECONDS = 2.0
HTTP_READ_SECONDS = 5.0
HTTP_TIMEOUT = urllib3.Timeout(connect=HTTP_CONNECT_SECONDS, read=HTTP_READ_SECONDS)
# A socket timeout bounds one wait, not an answer: a registry that sends a byte now and then never trips it. So a
# lookup (every registry asked for one key) has a deadline that the requests HTTP_RETRY allows fit in, and all the
# lookups of a run a budget, after which HTTP registries are no longer asked: neither can hold a run for long.
LOOKUP_DEADLINE_SECONDS = 60  # shred.iglu_lookup_deadline_seconds's default: a registry's restart fits in it
RUN_LOOKUP_BUDGET_SECONDS = 300.0
DEADLINE_KEY = "shred.iglu_lookup_deadline_seconds"
# Waits between the passes over the repositories that had an outage: 0.5 s, doubling, at most 8 s.
FIRST_RETRY_WAIT_SECONDS = 0.5
LONGEST_RETRY_WAIT_SECONDS = 8.0
_BODY_CHUNK_BYTES = 64 * 1024
_SHORTEST_WAIT = 0.001  # urllib3 refuses a zero timeout; a request this close to its deadline fails at once
# Statuses that say "try again": after the retries they are a RepoFailure (the registry failed), never a
# ClientFailure, which `schemas_until` would take for "not found" and skip a revision's schemas on.
_TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
HISTORY_MESSAGE_LIMIT = 256
_GIVEN_LIMIT = 120

ErrorKind = Literal["NotFound", "RepoFailure", "ClientFailure"]


@dataclass(frozen=True, order=True)
class SchemaKey:
    """An Iglu schema key; sorts by vendor, name, format, then the version's numbers (1-0-10 after 1-0-9)."""

    vendor: str
    name: str
    format: str
    version: str = field(compare=False)
    """SchemaVer `MODEL-REVISION-ADDITION`, e.g. "1-0-2"."""
    _numbers: tuple[int, int, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        version = _VERSION.fullmatch(self.version)
        if (
            version is None
            or re.fullmatch(_VENDOR, self.vendor) is None
            or re.fullmatch(_PART, self.name) is None
            or re.fullmatch(_PART, self.format) is None
        ):
            raise ValueError(f"given {json.dumps(self.uri)}; allowed: {_ALLOWED_KEY}")
        model, revision, addition = (int(number) for number in version.groups())
        object.__setattr__(self, "_numbers", (model, revision, addition))

    @classmethod
    def parse(cls, uri: str) -> SchemaKey:
        """`iglu:VENDOR/NAME/FORMAT/M-R-A` as a key.

        Raises:
            ValueError: `uri` is not an Iglu URI; says what was given and what is allowed.
        """
        match = _IGLU_URI.fullmatch(uri)
        if match is None:
            raise ValueError(f"given {json.dumps(uri)}; allowed: {_ALLOWED_KEY}")
        return cls(*match.groups())

    @property
    def uri(self) -> str:
        return f"iglu:{self.path}"

    @property
    def path(self) -> str:
        """`VENDOR/NAME/FORMAT/M-R-A`: where registries keep the schema, under their `schemas/` folder."""
        return f"{self.vendor}/{self.name}/{self.format}/{self.version}"

    @property
    def model(self) -> int:
        return self._numbers[0]

    @property
    def revision(self) -> int:
        return self._numbers[1]

    @property
    def addition(self) -> int:
        return self._numbers[2]

    def with_version(self, model: int, revision: int, addition: int) -> SchemaKey:
        """The same schema at another version."""
        return SchemaKey(self.vendor, self.name, self.format, f"{model}-{revision}-{addition}")


@dataclass(frozen=True)
class RegistryError:
    """Why one registry did not give a schema; upstream's `RegistryError` (NotFound, RepoFailure, ClientFailure)."""

    kind: ErrorKind
    message: str | None = None

    def as_json(self) -> dict[str, str]:
        """Upstream's encoding; the message is cut so that one bad answer cannot bloat every bad row."""
        if self.message is None:
            return {"error": self.kind}
        return {"error": self.kind, "message": self.message[:HISTORY_MESSAGE_LIMIT]}

    def describe(self) -> str:
        return self.kind if self.message is None else f"{self.kind}: {self.message}"


@dataclass(frozen=True)
class Clock:
    """Where lookups read the time and wait: the system's monotonic clock, or a test's (that waits without sleeping)."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


SYSTEM_CLOCK = Clock()


@dataclass(frozen=True)
class Deadline:
    """When a lookup must be over (an instant of `clock`), and the limit that set it, named in failures."""

    at: float
    limit: str
    """What set it, with its length: the lookup's deadline, or the run's budget when less is left of it."""
    clock: Clock = SYSTEM_CLOCK

    def left(self) -> float:
        return self.at - self.clock.now()

    def wait(self, seconds: float) -> None:
        """Wait `seconds`, or until the deadline when that comes first."""
        seconds = min(seconds, self.left())
        if seconds > 0:
            self.clock.sleep(seconds)

    def missed(self) -> RegistryError:
        return RegistryError("RepoFailure", f"no complete answer within {self.limit}")

    def not_asked(self) -> RegistryError:
        return RegistryError("RepoFailure", f"not asked: past {self.limit}")


@dataclass(frozen=True)
class LookupHistory:
    """One repository's failed attempts for one key."""

    repository: str
    errors: tuple[RegistryError, ...]
    attempts: int
    """Requests made to that repository for that key (retries included; 1 for an embedded repository)."""

    def as_json(self, last_attempt: str) -> dict[str, Any]:
        """Upstream's `LookupHistory` with its repository, as bad rows carry it; `last_attempt` is an ISO instant."""
        return {
            "repository": self.repository,
            "errors": [error.as_json() for error in self.errors],
            "attempts": self.attempts,
            "lastAttempt": last_attempt,
        }

    def describe(self) -> str:
        return f"{self.repository} ({'; '.join(error.describe() for error in self.errors)})"


@dataclass(frozen=True)
class ResolutionFailure:
    """No repository gave the schema: each one tried, in the order tried, with why."""

    key: SchemaKey
    history: tuple[LookupHistory, ...]

    def failure_json(self, last_attempt: str) -> dict[str, Any]:
        """Upstream's `ResolutionError` for this key, as a loader's bad row carries it."""
        return {
            "schemaKey": self.key.uri,
            "error": {
                "error": "ResolutionError",
                "lookupHistory": [history.as_json(last_attempt) for history in self.history],
            },
        }

    def describe(self) -> str:
        return f"{self.key.uri} not found in {', '.join(history.describe() for history in self.history)}"


class RegistryOutageError(WinnowError):
    """A registry did not answer for a schema by the lookup's deadline (exit 1): whether the schema exists is
    unknown, so the run stops before it seals anything; its rerun with the same run id asks again."""

    exit_code = 1

    def __init__(self, key: SchemaKey, repositories: Sequence[tuple[Repository, LookupHistory]], limit: str) -> None:
        (repo, history), *others = repositories
        also = f" (also {', '.join(other.describe() for other, _ in others)})" if others else ""
        last = history.errors[-1].message or history.errors[-1].kind
        super().__init__(
            f"Iglu repository {repo.describe()}{also} gave no answer for {key.uri} within {limit}: {history.attempts} "
            f"request(s), the last: {last}; whether the schema exists is unknown, so the shred stopped and sealed "
            "nothing (no _SUCCESS, no shredding_complete.json, no loader message). Rerun the same run id once the "
            "registry answers"
        )
        self.key = key


@dataclass(frozen=True)
class InvalidSchema:
    """A repository gave something for the key that is not a usable JSON Schema."""

    key: SchemaKey
    message: str

    def failure_json(self, last_attempt: str) -> dict[str, Any]:
        """`last_attempt` is unused; taken so that every `Failure` is encoded the same way."""
        return {"schemaKey": self.key.uri, "message": self.message}

    def describe(self) -> str:
        return f"{self.key.uri} is not a usable schema: {self.message}"


Failure: TypeAlias = ResolutionFailure | InvalidSchema


@dataclass(frozen=True)
class _Fetched:
    """One repository's answer for one key: the schema's text, or why not, and the requests it took."""

    body: str | bytes | None
    error: RegistryError | None
    attempts: int


@dataclass(frozen=True, kw_only=True)
class Repository(ABC):
    """One registry of the resolver config."""

    name: str
    priority: int
    vendor_prefixes: tuple[str, ...]
    class_priority: ClassVar[int]

    def vendor_matched(self, vendor: str) -> bool:
        """Upstream's `Config.vendorMatched`: a registry is asked first for the vendors it names."""
        return any(vendor.startswith(prefix) for prefix in self.vendor_prefixes)

    @abstractmethod
    def describe(self) -> str:
        """`NAME (KIND LOCATION)`, for logs and error messages."""

    @abstractmethod
    def fetch(self, key: SchemaKey, deadline: Deadline) -> _Fetched:
        """The schema's text, or why not, by `deadline`; never raises for a schema that cannot be fetched."""


@dataclass(frozen=True, kw_only=True)
class EmbeddedRepository(Repository):
    """A folder holding `schemas/VENDOR/NAME/FORMAT/M-R-A` files (the Scala client's embedded layout)."""

    class_priority: ClassVar[int] = EMBEDDED_CLASS_PRIORITY
    path: str
    """The folder: a local path, `file:` URI or `s3://` URI, read through `read_text`."""
    read_text: Callable[[str], str | None] = field(repr=False, compare=False)

    def describe(self) -> str:
        return f"{self.name} (embedded {self.path})"

    def fetch(self, key: SchemaKey, deadline: Deadline) -> _Fetched:
        """`deadline` does not apply: always asked (its reads are the job's own, with their timeouts), so that a
        slow registry never hides a schema shipped with the jobs."""
        location = f"{self.path.removesuffix('/')}/schemas/{key.path}"
        try:
            text = self.read_text(location)
        except (OSError, UnicodeError) as err:
            return _Fetched(None, RegistryError("RepoFailure", _short(err)), 1)
        if text is None:
            return _Fetched(None, RegistryError("NotFound"), 1)
        return _Fetched(text, None, 1)


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

    def fetch(self, key: SchemaKey, deadline: Deadline) -> _Fetched:
        if deadline.left() <= 0:
            return _Fetched(None, deadline.not_asked(), 0)
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
            return _Fetched(None, _request_failure(err.reason, deadline), err.attempts)
        except (HTTPError, OSError) as err:
            return _Fetched(None, _request_failure(err, deadline), 1)
        attempts = 1 if response.retries is None else len(response.retries.history) + 1
        status = response.status
        body, failure = _read_body(response, deadline)  # whatever the status: the connection is then reusable
        if 200 <= status < 300:
            return _Fetched(body, failure, attempts)
        if status == 404:
            return _Fetched(None, RegistryError("NotFound"), attempts)
        # Upstream's Http4s lookup says the same, status only ("Remove entropy from client failures").
        message = f"Unexpected response code: {status}"
        if status >= 500 or status in _TRANSIENT_STATUSES:
            return _Fetched(None, RegistryError("RepoFailure", message), attempts)
        return _Fetched(None, RegistryError("ClientFailure", message), attempts)


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
        return f"cannot connect: {_short(err.__cause__ or err)}"
    if isinstance(err, ConnectTimeoutError):
        return f"connect timed out after {HTTP_TIMEOUT.connect_timeout} s"
    if isinstance(err, ReadTimeoutError):
        return f"read timed out after {HTTP_TIMEOUT.read_timeout} s"
    if isinstance(err, ProtocolError):
        return f"connection broken: {_short(err.args[-1] if err.args else err)}"
    return _short(err) if err is not None else "no answer"


def _short(err: object) -> str:
    return (str(err) or type(err).__name__)[:HISTORY_MESSAGE_LIMIT]


def prioritize(vendor: str, repositories: Sequence[Repository]) -> list[Repository]:
    """Upstream's `Resolver.prioritize`: vendor-prefix matches first, then embedded before HTTP, then `priority`
    (lowest first); a stable sort, so ties keep the config's order."""
    return sorted(repositories, key=lambda repo: (not repo.vendor_matched(vendor), repo.class_priority, repo.priority))


def read_local(path: str) -> str | None:
    """A local file's text (a path or a `file:` URI); None when it does not exist.

    Raises:
        OSError: the file exists but cannot be read, or `path` is a URI of another scheme (s3:// needs its own
            reader, given to `Resolver.from_config`).
    """
    local = path
    if _URI_SCHEME.match(path):
        parts = urlsplit(path)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            raise OSError(f"read_local reads local files and file: URIs; given {path}")
        local = url2pathname(parts.path)
    try:
        return Path(local).read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None


class Resolver:
    """The registries of one resolver config, and the answers they gave during this run."""

    def __init__(
        self,
        repositories: Sequence[Repository],
        *,
        lookup_deadline_seconds: float = LOOKUP_DEADLINE_SECONDS,
        clock: Clock | None = None,
    ) -> None:
        """`clock`: None is `SYSTEM_CLOCK` (read when called, so that a test may replace it)."""
        self.repositories: list[Repository] = list(repositories)
        self.lookup_deadline_seconds = lookup_deadline_seconds
        self._clock = clock or SYSTEM_CLOCK
        self._iglu_central = {
            repo.name for repo in self.repositories if isinstance(repo, HttpRepository) and repo.is_iglu_central
        }
        self._cache: dict[SchemaKey, dict[str, Any] | Failure] = {}
        # One lookup at a time: a key asked from two threads is still fetched once.
        self._lock = threading.Lock()
        self._spent = 0.0  # seconds this resolver's lookups took together, against RUN_LOOKUP_BUDGET_SECONDS

    @classmethod
    def from_config(
        cls,
        text: str,
        source: str,
        read_text: Callable[[str], str | None] = read_local,
        *,
        label: str = "--iglu-config",
        lookup_deadline_seconds: float = LOOKUP_DEADLINE_SECONDS,
    ) -> Resolver:
        """The resolver a self-describing resolver config (resolver-config 1-0-0 to 1-0-3) describes.

        Args:
            text: the config's JSON text.
            source: where it was read (a path or s3:// URI): named in errors, and the folder of a relative
                embedded `path`.
            read_text: reads an embedded schema file: its text, None when absent, OSError on other failures.
            label: what the config is to the user, named before `source` in errors.
            lookup_deadline_seconds: how long one lookup keeps asking registries that have an outage.

        Raises:
            InvalidConfigError: the config is not JSON, not a resolver config, or has a wrong value; one line
                naming the source, the JSON path, what was given and what is allowed.
        """
        repositories = _ConfigParser(f"{label} {source}", source, read_text).parse(text)
        return cls(repositories, lookup_deadline_seconds=lookup_deadline_seconds)

    def lookup(self, key: SchemaKey) -> dict[str, Any] | Failure:
        """The schema of `key`, or why not. The same object comes back for the same key: do not change it.

        Raises:
            RegistryOutageError: no repository gave the schema, and one that might hold it had an outage until the
                lookup's deadline (nothing is cached: a later lookup asks again).
        """
        with self._lock:
            cached = self._cache.get(key)
            if cached is None:
                cached = self._cache[key] = self._resolve(key)
            return cached

    def schemas_until(self, key: SchemaKey) -> list[tuple[SchemaKey, dict[str, Any]]] | Failure:
        """Every schema of `key`'s model up to `key`, oldest first: upstream's `lookupSchemasUntilResult`.

        M-0-0, M-0-1, … in turn; an addition that is not found (by upstream's `isNotFound`) below `key`'s
        revision ends that revision and the next one starts at addition 0. Any other failure (including a
        missing M-R-0, or a missing addition of `key`'s own revision) is returned, for the key that failed.
        """
        found: list[tuple[SchemaKey, dict[str, Any]]] = []
        revision, addition = 0, 0
        while True:
            current = key.with_version(key.model, revision, addition)
            result = self.lookup(current)
            if isinstance(result, dict):
                found.append((current, result))
                if revision < key.revision or addition < key.addition:
                    addition += 1
                    continue
                return found
            if addition > 0 and revision < key.revision and self._is_not_found(result):
                revision, addition = revision + 1, 0
                continue
            return result

    def _is_not_found(self, failure: Failure) -> bool:
        """Upstream's `isNotFound`, for the failures `lookup` returns: a ResolutionFailure is "not found" (an
        outage raised instead), an InvalidSchema is not."""
        return isinstance(failure, ResolutionFailure)

    def _outages(self, history: Sequence[LookupHistory]) -> list[LookupHistory]:
        """The answers that keep `history` from saying "not found" (empty when it does): a repository that did not
        say NotFound, but among Iglu Central and its mirrors (copies of one registry) one NotFound answers for all."""

        def not_found(answer: LookupHistory) -> bool:
            return all(error.kind == "NotFound" for error in answer.errors)

        central = [answer for answer in history if answer.repository in self._iglu_central]
        settled = not central or any(not_found(answer) for answer in central)
        return [
            answer
            for answer in history
            if not not_found(answer) and not (settled and answer.repository in self._iglu_central)
        ]

    def _deadline(self, started: float) -> Deadline:
        """A lookup's deadline: `lookup_deadline_seconds` from `started`, or sooner when less is left of the run's
        budget (never less than one lookup's deadline)."""
        seconds = self.lookup_deadline_seconds
        budget = max(RUN_LOOKUP_BUDGET_SECONDS, seconds)
        if budget - self._spent < seconds:
            limit = f"the run's budget for Iglu lookups ({budget:g} s)"
            return Deadline(started + budget - self._spent, limit, self._clock)
        return Deadline(started + seconds, f"the lookup's deadline ({seconds:g} s, {DEADLINE_KEY})", self._clock)

    def _resolve(self, key: SchemaKey) -> dict[str, Any] | Failure:
        """Every repository in priority order; those with an outage again after a wait, until one gives the schema,
        all that might hold it said "not found", or the deadline passed (RegistryOutageError)."""
        started = self._clock.now()
        deadline = self._deadline(started)
        ordered = prioritize(key.vendor, self.repositories)
        answers: dict[str, LookupHistory] = {}  # per repository its latest answer, with the requests of all passes
        asking, wait = ordered, FIRST_RETRY_WAIT_SECONDS
        try:
            while True:
                for repo in asking:
                    fetched = repo.fetch(key, deadline)
                    if fetched.error is None:
                        return _found(key, repo, fetched)
                    earlier = answers[repo.name].attempts if repo.name in answers else 0
                    answers[repo.name] = LookupHistory(repo.name, (fetched.error,), earlier + fetched.attempts)
                history = tuple(answers[repo.name] for repo in ordered)
                outages = self._outages(history)
                if not outages:
                    failure = ResolutionFailure(key, history)
                    logger.warning("%s", failure.describe())
                    return failure
                if deadline.left() < wait:  # no pass more before the deadline: waiting would only delay the stop
                    named = {repo.name: repo for repo in ordered}
                    raise RegistryOutageError(key, [(named[h.repository], h) for h in outages], deadline.limit)
                deadline.wait(wait)
                logger.info("%s: %s; asking again", key.uri, ", ".join(answer.describe() for answer in outages))
                wait = min(wait * 2, LONGEST_RETRY_WAIT_SECONDS)
                asking = [repo for repo in ordered if answers[repo.name] in outages]
        finally:
            self._spent += self._clock.now() - started


def _found(key: SchemaKey, repo: Repository, fetched: _Fetched) -> dict[str, Any] | InvalidSchema:
    schema = _schema(key, repo, fetched.body)
    if isinstance(schema, InvalidSchema):
        logger.warning("%s", schema.describe())
    else:
        logger.info("%s: found in %s (%d requests)", key.uri, repo.describe(), fetched.attempts)
    return schema


def _schema(key: SchemaKey, repo: Repository, body: str | bytes | None) -> dict[str, Any] | InvalidSchema:
    """The schema in a repository's answer, if it is a JSON object whose `self` (when it has one) is `key`.

    The first repository that answers for a key decides it: one whose answer is not usable gives InvalidSchema,
    and the repositories after it are not asked.
    """
    try:
        schema = json.loads(body or b"", parse_constant=_reject_constant)
    except RecursionError:
        return InvalidSchema(key, f"{repo.name}: nests too deeply to be a schema")
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
        return InvalidSchema(key, f"{repo.name}: not valid JSON: {_short(err)}")
    if not isinstance(schema, dict):
        return InvalidSchema(key, f"{repo.name}: not a JSON object; given {_json_type(schema)}")
    if "self" in schema:
        self_block = schema["self"]
        names = (
            tuple(self_block.get(part) for part in ("vendor", "name", "format", "version"))
            if isinstance(self_block, dict)
            else None
        )
        if names != (key.vendor, key.name, key.format, key.version):
            return InvalidSchema(key, f"{repo.name}: its self block names {_given(self_block)}, not {key.uri}")
    return schema


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def _given(value: object) -> str:
    """A value as an error message shows it: JSON, with nested objects and arrays elided, cut to a line."""

    def brief(item: object) -> str:
        if isinstance(item, dict | list) and item:
            return "…"
        return json.dumps(item, ensure_ascii=False)

    if isinstance(value, dict):
        text = (
            "{"
            + ", ".join(f"{json.dumps(key, ensure_ascii=False)}: {brief(item)}" for key, item in value.items())
            + "}"
        )
    elif isinstance(value, list):
        text = "[" + ", ".join(brief(item) for item in value) + "]"
    else:
        text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _GIVEN_LIMIT else text[: _GIVEN_LIMIT - 1] + "…"


class _ConfigParser:
    """Checks a resolver config against the resolver-config 1-0-x schemas and builds its repositories.

    Stricter than upstream's decoder, which ignores unknown keys and takes "embedded" when a connection names
    both kinds: a config that upstream would read differently from what its author meant is an error here.
    """

    def __init__(self, where: str, source: str, read_text: Callable[[str], str | None]) -> None:
        self.where = where
        self.source = source
        self.read_text = read_text
        self._pool: urllib3.PoolManager | None = None

    def fail(self, path: str, given: str, allowed: str) -> InvalidConfigError:
        prefix = f"{self.where}: {path}: " if path else f"{self.where}: "
        return InvalidConfigError(f"{prefix}given {given}; allowed: {allowed}")

    def parse(self, text: str) -> list[Repository]:
        try:
            document = json.loads(text, parse_constant=_reject_constant)
        except RecursionError:
            raise self.fail("", "JSON that nests too deeply", "a resolver config") from None
        except ValueError as err:
            raise self.fail("", f"text that is not JSON ({err})", "a resolver config, a JSON object") from None
        root = self.mapping(document, "", ("schema", "data"), required=("schema", "data"))
        schema = root["schema"]
        if not isinstance(schema, str) or _CONFIG_SCHEMA.fullmatch(schema) is None:
            raise self.fail("schema", _given(schema), _ALLOWED_CONFIG_SCHEMAS)
        data = self.mapping(
            root["data"], "data", ("cacheSize", "cacheTtl", "repositories"), required=("cacheSize", "repositories")
        )
        # Accepted for upstream's sake and ignored: the cache lives for one run, and every key is asked once.
        cache_size = data["cacheSize"]
        if not _is_number(cache_size) or cache_size < 0:
            raise self.fail("data.cacheSize", _given(cache_size), "a number of 0 or more")
        cache_ttl = data.get("cacheTtl")
        if cache_ttl is not None and (not _is_whole(cache_ttl) or cache_ttl < 0):
            raise self.fail("data.cacheTtl", _given(cache_ttl), "a whole number of seconds, 0 or more, or null")
        entries = data["repositories"]
        if not isinstance(entries, list) or not entries:
            raise self.fail("data.repositories", _given(entries), "a non-empty array of repositories")
        repositories: list[Repository] = []
        named: dict[str, str] = {}
        for index, entry in enumerate(entries):
            path = f"data.repositories[{index}]"
            repo = self.repository(entry, path)
            if repo.name in named:
                raise self.fail(
                    f"{path}.name",
                    f"{json.dumps(repo.name, ensure_ascii=False)}, the name of {named[repo.name]}",
                    "a name no other repository has",
                )
            named[repo.name] = path
            repositories.append(repo)
        return repositories

    def mapping(self, value: object, path: str, keys: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Any]:
        """`value` as an object with only `keys`, holding all of `required`."""
        allowed = "an object with " + ", ".join(keys)
        if not isinstance(value, dict):
            raise self.fail(path, _given(value), allowed)
        for key in value:
            if key not in keys:
                raise self.fail(_join(path, key), "a key that is not allowed", allowed + " only")
        for key in required:
            if key not in value:
                raise self.fail(_join(path, key), "nothing", f"{allowed} ({', '.join(required)} required)")
        return value

    def repository(self, entry: object, path: str) -> Repository:
        repo = self.mapping(entry, path, _REPOSITORY_KEYS, required=_REPOSITORY_KEYS)
        name, priority, prefixes = repo["name"], repo["priority"], repo["vendorPrefixes"]
        if not isinstance(name, str) or not name:
            raise self.fail(f"{path}.name", _given(name), "a non-empty string")
        if not _is_whole(priority):
            raise self.fail(f"{path}.priority", _given(priority), "a whole number (lower is asked first)")
        if not isinstance(prefixes, list) or not all(isinstance(prefix, str) for prefix in prefixes):
            raise self.fail(f"{path}.vendorPrefixes", _given(prefixes), "an array of strings")
        common: dict[str, Any] = {"name": name, "priority": int(priority), "vendor_prefixes": tuple(prefixes)}
        connection = repo["connection"]
        if (
            not isinstance(connection, dict)
            or len(connection) != 1
            or next(iter(connection)) not in ("embedded", "http")
        ):
            raise self.fail(f"{path}.connection", _given(connection), _ALLOWED_CONNECTIONS)
        if "embedded" in connection:
            embedded = self.mapping(connection["embedded"], f"{path}.connection.embedded", ("path",), ("path",))
            folder = embedded["path"]
            if not isinstance(folder, str) or not folder:
                raise self.fail(f"{path}.connection.embedded.path", _given(folder), "a folder holding schemas/…")
            return EmbeddedRepository(**common, path=self.resolve_path(folder), read_text=self.read_text)
        http = self.mapping(connection["http"], f"{path}.connection.http", ("uri", "apikey"), ("uri",))
        uri, apikey = http["uri"], http.get("apikey")
        parts = urlsplit(uri) if isinstance(uri, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise self.fail(f"{path}.connection.http.uri", _given(uri), "an http:// or https:// URI")
        if apikey is not None and not isinstance(apikey, str):
            raise self.fail(f"{path}.connection.http.apikey", _given(apikey), "a string or null")
        return HttpRepository(**common, uri=uri, apikey=apikey, pool=self.pool())

    def resolve_path(self, folder: str) -> str:
        """An embedded folder as given when absolute or a URI; else relative to the config file's folder."""
        if folder.startswith("/") or _URI_SCHEME.match(folder):
            return folder
        if _URI_SCHEME.match(self.source):
            parts = urlsplit(self.source)
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(parts.path) or "/", folder))
            return urlunsplit((parts.scheme, parts.netloc, joined, "", ""))
        return posixpath.normpath(posixpath.join(posixpath.dirname(self.source), folder))

    def pool(self) -> urllib3.PoolManager:
        """One connection pool for all the HTTP repositories of a resolver."""
        if self._pool is None:
            self._pool = urllib3.PoolManager(retries=HTTP_RETRY, timeout=HTTP_TIMEOUT)
        return self._pool


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_whole(value: object) -> bool:
    """An integer, or a float that is one (upstream's circe reads 1.0 as an Int)."""
    if isinstance(value, float):
        return value.is_integer()
    return isinstance(value, int) and not isinstance(value, bool)
