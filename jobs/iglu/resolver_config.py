"""Reading an Iglu resolver config (resolver-config 1-0-0 to 1-0-3) into its repositories, and the JSON helpers that
its errors and the schema checks share."""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import urllib3

from jobs.errors import InvalidConfigError
from jobs.iglu.http_repository import HTTP_RETRY, HTTP_TIMEOUT, HttpRepository
from jobs.iglu.repositories import URI_SCHEME, EmbeddedRepository, Repository, reject_constant

CONFIG_SCHEMA_PREFIX = "iglu:com.snowplowanalytics.iglu/resolver-config/jsonschema/"
_CONFIG_SCHEMA = re.compile(re.escape(CONFIG_SCHEMA_PREFIX) + r"1-0-[0-3]")
_ALLOWED_CONFIG_SCHEMAS = f"{CONFIG_SCHEMA_PREFIX}1-0-0 to 1-0-3"
_ALLOWED_CONNECTIONS = '{"embedded": {"path": …}} or {"http": {"uri": …, "apikey": …}}'
_REPOSITORY_KEYS = ("name", "priority", "vendorPrefixes", "connection")
_GIVEN_LIMIT = 120


def json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def given(value: object) -> str:
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


class ResolverConfigParser:
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
            document = json.loads(text, parse_constant=reject_constant)
        except RecursionError:
            raise self.fail("", "JSON that nests too deeply", "a resolver config") from None
        except ValueError as err:
            raise self.fail("", f"text that is not JSON ({err})", "a resolver config, a JSON object") from None
        root = self.mapping(document, "", ("schema", "data"), required=("schema", "data"))
        schema = root["schema"]
        if not isinstance(schema, str) or _CONFIG_SCHEMA.fullmatch(schema) is None:
            raise self.fail("schema", given(schema), _ALLOWED_CONFIG_SCHEMAS)
        data = self.mapping(
            root["data"], "data", ("cacheSize", "cacheTtl", "repositories"), required=("cacheSize", "repositories")
        )
        # Accepted for upstream's sake and ignored: the cache lives for one run, and every key is asked once.
        cache_size = data["cacheSize"]
        if not _is_number(cache_size) or cache_size < 0:
            raise self.fail("data.cacheSize", given(cache_size), "a number of 0 or more")
        cache_ttl = data.get("cacheTtl")
        if cache_ttl is not None and (not _is_whole(cache_ttl) or cache_ttl < 0):
            raise self.fail("data.cacheTtl", given(cache_ttl), "a whole number of seconds, 0 or more, or null")
        entries = data["repositories"]
        if not isinstance(entries, list) or not entries:
            raise self.fail("data.repositories", given(entries), "a non-empty array of repositories")
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
            raise self.fail(path, given(value), allowed)
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
            raise self.fail(f"{path}.name", given(name), "a non-empty string")
        if not _is_whole(priority):
            raise self.fail(f"{path}.priority", given(priority), "a whole number (lower is asked first)")
        if not isinstance(prefixes, list) or not all(isinstance(prefix, str) for prefix in prefixes):
            raise self.fail(f"{path}.vendorPrefixes", given(prefixes), "an array of strings")
        common: dict[str, Any] = {"name": name, "priority": int(priority), "vendor_prefixes": tuple(prefixes)}
        connection = repo["connection"]
        if (
            not isinstance(connection, dict)
            or len(connection) != 1
            or next(iter(connection)) not in ("embedded", "http")
        ):
            raise self.fail(f"{path}.connection", given(connection), _ALLOWED_CONNECTIONS)
        if "embedded" in connection:
            embedded = self.mapping(connection["embedded"], f"{path}.connection.embedded", ("path",), ("path",))
            folder = embedded["path"]
            if not isinstance(folder, str) or not folder:
                raise self.fail(f"{path}.connection.embedded.path", given(folder), "a folder holding schemas/…")
            return EmbeddedRepository(**common, path=self.resolve_path(folder), read_text=self.read_text)
        http = self.mapping(connection["http"], f"{path}.connection.http", ("uri", "apikey"), ("uri",))
        uri, apikey = http["uri"], http.get("apikey")
        parts = urlsplit(uri) if isinstance(uri, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise self.fail(f"{path}.connection.http.uri", given(uri), "an http:// or https:// URI")
        if apikey is not None and not isinstance(apikey, str):
            raise self.fail(f"{path}.connection.http.apikey", given(apikey), "a string or null")
        return HttpRepository(**common, uri=uri, apikey=apikey, pool=self.pool())

    def resolve_path(self, folder: str) -> str:
        """An embedded folder as given when absolute or a URI; else relative to the config file's folder."""
        if folder.startswith("/") or URI_SCHEME.match(folder):
            return folder
        if URI_SCHEME.match(self.source):
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
