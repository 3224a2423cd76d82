"""Iglu repositories: schema keys, a repository's answer for a key (the schema's text, or why not), the deadline a
lookup's requests share, and the embedded repository (a folder of schema files). HTTP repositories: jobs/iglu/http_repository.py.
"""

from __future__ import annotations

import json
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit
from urllib.request import url2pathname

# iglu-core's SchemaKey grammar (`SchemaKey.fromUri`): SchemaVer models start at 1, no leading zeros.
_VENDOR = r"[a-zA-Z0-9_.-]+"
_PART = r"[a-zA-Z0-9_-]+"
_VERSION = re.compile(r"([1-9][0-9]*)-(0|[1-9][0-9]*)-(0|[1-9][0-9]*)")
_IGLU_URI = re.compile(rf"iglu:({_VENDOR})/({_PART})/({_PART})/([0-9-]+)")
_ALLOWED_KEY = "iglu:VENDOR/NAME/FORMAT/M-R-A"
# A URI scheme followed by "/" (s3://, file:/, http://): such a path is never relative to the config's folder.
URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/")

# Kinds of registry, as upstream's `Registry.classPriority`: embedded (local) before HTTP (network).
EMBEDDED_CLASS_PRIORITY = 2
HTTP_CLASS_PRIORITY = 100
HISTORY_MESSAGE_LIMIT = 256

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
class Fetched:
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
    def fetch(self, key: SchemaKey, deadline: Deadline) -> Fetched:
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

    def fetch(self, key: SchemaKey, deadline: Deadline) -> Fetched:
        """`deadline` does not apply: always asked (its reads are the job's own, with their timeouts), so that a
        slow registry never hides a schema shipped with the jobs."""
        location = f"{self.path.removesuffix('/')}/schemas/{key.path}"
        try:
            text = self.read_text(location)
        except (OSError, UnicodeError) as err:
            return Fetched(None, RegistryError("RepoFailure", short(err)), 1)
        if text is None:
            return Fetched(None, RegistryError("NotFound"), 1)
        return Fetched(text, None, 1)


def reject_constant(name: str) -> Any:
    """For `json.loads`: NaN and Infinity are not JSON."""
    raise ValueError(f"{name} is not JSON")


def short(err: object) -> str:
    return (str(err) or type(err).__name__)[:HISTORY_MESSAGE_LIMIT]


def read_local(path: str) -> str | None:
    """A local file's text (a path or a `file:` URI); None when it does not exist.

    Raises:
        OSError: the file exists but cannot be read, or `path` is a URI of another scheme (s3:// needs its own
            reader, given to `Resolver.from_config`).
    """
    local = path
    if URI_SCHEME.match(path):
        parts = urlsplit(path)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            raise OSError(f"read_local reads local files and file: URIs; given {path}")
        local = url2pathname(parts.path)
    try:
        return Path(local).read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
