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

Each key is asked once per `Resolver` (hits and failures are cached; an outage raises): one run sees one answer per
key, so every event of that key is shredded the same way. Each lookup has a deadline
(`shred.iglu_lookup_deadline_seconds`) and a run's lookups together a budget (`RUN_LOOKUP_BUDGET_SECONDS`): past them
an HTTP registry is an outage, as one that never answers. The time and the waits come from a `Clock`, so that tests wait without sleeping.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from jobs.errors import WinnowError
from jobs.iglu.http_repository import HttpRepository as HttpRepository
from jobs.iglu.repositories import SYSTEM_CLOCK as SYSTEM_CLOCK
from jobs.iglu.repositories import Clock as Clock
from jobs.iglu.repositories import Deadline as Deadline
from jobs.iglu.repositories import EmbeddedRepository as EmbeddedRepository
from jobs.iglu.repositories import Fetched, reject_constant, short
from jobs.iglu.repositories import RegistryError as RegistryError
from jobs.iglu.repositories import Repository as Repository
from jobs.iglu.repositories import SchemaKey as SchemaKey
from jobs.iglu.repositories import read_local as read_local
from jobs.iglu.resolver_config import ResolverConfigParser, given, json_type

logger = logging.getLogger(__name__)

# A socket timeout bounds one wait, not an answer: a registry that sends a byte now and then never trips it. So a
# lookup (every registry asked for one key) has a deadline that the requests HTTP_RETRY allows fit in, and all the
# lookups of a run a budget, after which HTTP registries are no longer asked: neither can hold a run for long.
LOOKUP_DEADLINE_SECONDS = 60  # shred.iglu_lookup_deadline_seconds's default: a registry's restart fits in it
RUN_LOOKUP_BUDGET_SECONDS = 300.0
DEADLINE_KEY = "shred.iglu_lookup_deadline_seconds"
# Waits between the passes over the repositories that had an outage: 0.5 s, doubling, at most 8 s.
FIRST_RETRY_WAIT_SECONDS = 0.5
LONGEST_RETRY_WAIT_SECONDS = 8.0


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


def prioritize(vendor: str, repositories: Sequence[Repository]) -> list[Repository]:
    """Upstream's `Resolver.prioritize`: vendor-prefix matches first, then embedded before HTTP, then `priority`
    (lowest first); a stable sort, so ties keep the config's order."""
    return sorted(repositories, key=lambda repo: (not repo.vendor_matched(vendor), repo.class_priority, repo.priority))


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
        repositories = ResolverConfigParser(f"{label} {source}", source, read_text).parse(text)
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


def _found(key: SchemaKey, repo: Repository, fetched: Fetched) -> dict[str, Any] | InvalidSchema:
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
        schema = json.loads(body or b"", parse_constant=reject_constant)
    except RecursionError:
        return InvalidSchema(key, f"{repo.name}: nests too deeply to be a schema")
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
        return InvalidSchema(key, f"{repo.name}: not valid JSON: {short(err)}")
    if not isinstance(schema, dict):
        return InvalidSchema(key, f"{repo.name}: not a JSON object; given {json_type(schema)}")
    if "self" in schema:
        self_block = schema["self"]
        names = (
            tuple(self_block.get(part) for part in ("vendor", "name", "format", "version"))
            if isinstance(self_block, dict)
            else None
        )
        if names != (key.vendor, key.name, key.format, key.version):
            return InvalidSchema(key, f"{repo.name}: its self block names {given(self_block)}, not {key.uri}")
    return schema
