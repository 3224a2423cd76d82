"""Which runs completed with a manifest: the record an older copy of the manifest put back lacks.

A dedup run with a manifest, once its run folder is sealed, records its completion in the manifest (its run key
and the id of this attempt) and then names it in its output's `_LAST_COMPLETED.json` (`jobs.dedup.stale`). The
next run of that output first looks that completion up: a manifest that lacks it, or holds an earlier attempt's, is
an older copy (taken before that run completed: it lacks pairs of that run, or of runs between), whatever other
outputs did with it since and whatever the ids' order. Runs are serialized by the manifest's writer lease, so a
copy that holds the newest completion holds every earlier one.

The manifest also has an identity, made by its first run, that copies keep: a DynamoDB table restored under another
name, or a SQLite file or lake folder copied to another place, is still found as that manifest.

Where they live: SQLite, tables `winnow_completed` and `winnow_identity` in the same file; DynamoDB, items under the
partition keys `winnow:completed` (the run key as sort key, with the run's `ttl`) and `winnow:identity` (no `ttl`);
the lake, one JSON document per run in `PATH/_completed/`, and `PATH/_identity.json`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import urllib.parse
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.contract import DYNAMODB_PARTITION_KEY, DYNAMODB_SORT_KEY, DYNAMODB_TTL
from jobs.errors import DamagedFileError
from jobs.fs import store
from jobs.fs.paths import normalized
from jobs.manifest.base import Manifest

if TYPE_CHECKING:
    from jobs.manifest.dynamodb_client import DynamoDbClient

SQLITE_COMPLETED = "winnow_completed"
SQLITE_IDENTITY = "winnow_identity"
SQLITE_OUTPUTS = "winnow_outputs"
LAKE_IDENTITY = "_identity.json"
DYNAMODB_COMPLETED_KEY = "winnow:completed"
DYNAMODB_OUTPUTS_KEY = "winnow:outputs"
DYNAMODB_IDENTITY_KEY = "winnow:identity"
LAKE_COMPLETED = "_completed"
LAKE_OUTPUTS = "_outputs"


@dataclass(frozen=True)
class ManifestUsed:
    """The manifest a run uses, as `_LAST_COMPLETED.json` names it: its URI, its place (one way for each spelling
    of the URI) and its identity (kept by copies; None: its kind keeps none)."""

    uri: str
    place: str
    identity: str | None

    def names(self, entry: dict[str, Any]) -> bool:
        """Whether `entry` of a `_LAST_COMPLETED.json` is of this manifest (a copy under another name included)."""
        same_identity = self.identity is not None and entry.get("identity") == self.identity
        return same_identity or entry.get("place") == self.place


class CompletedRuns(ABC):
    """The completion records and identity of one manifest (see the module docstring)."""

    @abstractmethod
    def record(self, key: str, attempt: str, ttl: int, output: str) -> None:
        """Record that attempt `attempt` of the run of run key `key` completed (replacing an earlier attempt's), and
        `output` (its dedup output root) among the outputs of the manifest."""

    @abstractmethod
    def outputs(self) -> list[str]:
        """The dedup output roots whose runs completed with the manifest (each checked by every run)."""

    @abstractmethod
    def attempt(self, key: str) -> str | None:
        """The attempt of run key `key` recorded as completed; None: none is."""

    @abstractmethod
    def of_run_id(self, run_id: str) -> dict[str, str]:
        """The attempt recorded as completed of every run key of run id `run_id` (every output's run of that id)."""

    def identity(self, make: bool = True) -> str | None:
        """The manifest's identity, made on first use (with `make`; else None when it has none yet)."""
        return None


class SqliteCompletedRuns(CompletedRuns):
    def __init__(self, path: str) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=120, isolation_level=None)
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {SQLITE_COMPLETED} "
            "(run_key TEXT PRIMARY KEY, attempt TEXT NOT NULL, ttl INTEGER NOT NULL)"
        )
        db.execute(f"CREATE TABLE IF NOT EXISTS {SQLITE_OUTPUTS} (output TEXT PRIMARY KEY)")
        return db

    def record(self, key: str, attempt: str, ttl: int, output: str) -> None:
        with contextlib.closing(self._connect()) as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute(f"INSERT OR REPLACE INTO {SQLITE_COMPLETED} VALUES (?, ?, ?)", (key, attempt, ttl))
            db.execute(f"INSERT OR IGNORE INTO {SQLITE_OUTPUTS} VALUES (?)", (output,))
            db.execute("COMMIT")

    def outputs(self) -> list[str]:
        with contextlib.closing(self._connect()) as db:
            return [str(row[0]) for row in db.execute(f"SELECT output FROM {SQLITE_OUTPUTS} ORDER BY output")]

    def attempt(self, key: str) -> str | None:
        with contextlib.closing(self._connect()) as db:
            row = db.execute(f"SELECT attempt FROM {SQLITE_COMPLETED} WHERE run_key = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    def of_run_id(self, run_id: str) -> dict[str, str]:
        with contextlib.closing(self._connect()) as db:  # a run id holds digits and `-` only: no LIKE wildcard
            rows = db.execute(f"SELECT run_key, attempt FROM {SQLITE_COMPLETED} WHERE run_key LIKE ?", (f"{run_id}~%",))
            return {str(key): str(attempt) for key, attempt in rows}

    def identity(self, make: bool = True) -> str | None:
        if not make:  # a look that writes nothing (not even the tables `_connect` makes)
            read_only = f"file:{urllib.parse.quote(os.path.abspath(self.path))}?mode=ro"  # `#`, `?`, `%`: a name's
            with contextlib.closing(sqlite3.connect(read_only, uri=True)) as db:
                try:
                    row = db.execute(f"SELECT manifest FROM {SQLITE_IDENTITY}").fetchone()
                except sqlite3.OperationalError:  # no such table
                    return None
                return str(row[0]) if row else None
        with contextlib.closing(self._connect()) as db:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {SQLITE_IDENTITY} (id INTEGER PRIMARY KEY CHECK (id = 0), manifest TEXT NOT NULL)"
            )
            db.execute(f"INSERT OR IGNORE INTO {SQLITE_IDENTITY} VALUES (0, ?)", (uuid.uuid4().hex,))
            return str(db.execute(f"SELECT manifest FROM {SQLITE_IDENTITY}").fetchone()[0])


class DynamoDbCompletedRuns(CompletedRuns):
    def __init__(self, client: DynamoDbClient) -> None:
        self.call, self.partition = client.call, client.partition
        self.table = client.table

    @staticmethod
    def _key(partition: str, sort: str) -> dict[str, Any]:
        return {DYNAMODB_PARTITION_KEY: {"S": partition}, DYNAMODB_SORT_KEY: {"S": sort}}

    def record(self, key: str, attempt: str, ttl: int, output: str) -> None:
        item = {**self._key(DYNAMODB_COMPLETED_KEY, key), "attempt": {"S": attempt}, DYNAMODB_TTL: {"N": str(ttl)}}
        self.call("put_item", None, TableName=self.table, Item=item)
        self.call("put_item", None, TableName=self.table, Item=self._key(DYNAMODB_OUTPUTS_KEY, output))  # no ttl

    def outputs(self) -> list[str]:
        return sorted(item[DYNAMODB_SORT_KEY]["S"] for item in self.partition(DYNAMODB_OUTPUTS_KEY))

    def attempt(self, key: str) -> str | None:
        found = self.call(
            "get_item", None, TableName=self.table, Key=self._key(DYNAMODB_COMPLETED_KEY, key), ConsistentRead=True
        ).get("Item")
        return found["attempt"]["S"] if found else None

    def of_run_id(self, run_id: str) -> dict[str, str]:
        items = self.partition(DYNAMODB_COMPLETED_KEY, f"{run_id}~")
        return {item[DYNAMODB_SORT_KEY]["S"]: item["attempt"]["S"] for item in items}

    def identity(self, make: bool = True) -> str | None:
        key = self._key(DYNAMODB_IDENTITY_KEY, DYNAMODB_IDENTITY_KEY)
        if not make:
            found = self.call("get_item", None, TableName=self.table, Key=key, ConsistentRead=True).get("Item")
            return found["manifest"]["S"] if found and "manifest" in found else None
        made = self.call(
            "update_item", None, TableName=self.table, Key=key, UpdateExpression="SET manifest = if_not_exists(manifest, :new)",
            ExpressionAttributeValues={":new": {"S": uuid.uuid4().hex}}, ReturnValues="ALL_NEW",
        )  # fmt: skip
        return str(made["Attributes"]["manifest"]["S"])


class LakeCompletedRuns(CompletedRuns):
    """`PATH/_completed/run=KEY.json`, written whole; `PATH/_outputs/SHA.json` names an output (SHA: of its root)."""

    def __init__(self, root: str) -> None:
        self.folder = f"{root.rstrip('/')}/{LAKE_COMPLETED}"
        self.outputs_folder = f"{root.rstrip('/')}/{LAKE_OUTPUTS}"
        self.identity_file = f"{root.rstrip('/')}/{LAKE_IDENTITY}"

    def identity(self, make: bool = True) -> str | None:
        way_out = "a cut file: put its earlier copy back, or remove it"
        document = store.read_json(self.identity_file, way_out)
        if document is None and not make:
            return None
        if document is None:  # the first run since: one write, then every run reads it
            store.create_if_absent(self.identity_file, (json.dumps({"manifest": uuid.uuid4().hex}) + "\n").encode())
            document = store.read_json(self.identity_file, way_out)
        if not isinstance(document, dict) or not isinstance(document.get("manifest"), str):
            raise DamagedFileError(
                f'{self.identity_file} is damaged (no {{"manifest": ID}} document); nothing was written. Put its '
                "earlier copy back (or its earlier version, in a versioned bucket), or remove it, and run again"
            )
        return str(document["manifest"])

    def record(self, key: str, attempt: str, ttl: int, output: str) -> None:
        self._write_completion(key, attempt, ttl)
        self._name_output(output)

    def carry(self, identity: str | None, completed: list[tuple[str, str, int]], outputs: list[str]) -> None:
        """Take over another manifest's records (a DynamoDB export loaded into this lake): its identity, so outputs
        that name it check this lake as that manifest, its completions (run key, attempt, ttl) and its outputs."""
        if identity is not None:
            store.write_bytes(self.identity_file, (json.dumps({"manifest": identity}) + "\n").encode())
        for key, attempt, ttl in completed:
            self._write_completion(key, attempt, ttl)
        for output in outputs:
            self._name_output(output)

    def _write_completion(self, key: str, attempt: str, ttl: int) -> None:
        store.write_bytes(
            f"{self.folder}/run={key}.json", (json.dumps({"attempt": attempt, "ttl": ttl}) + "\n").encode()
        )

    def _name_output(self, output: str) -> None:
        name = hashlib.sha256(output.encode("utf-8")).hexdigest()[:16]
        store.create_if_absent(f"{self.outputs_folder}/{name}.json", (json.dumps({"output": output}) + "\n").encode())

    def outputs(self) -> list[str]:
        found = []
        for file in store.list_files(self.outputs_folder):
            document = store.read_json(
                file.path, "a cut or stray file: remove it (the next run of its output names it again)"
            )
            if isinstance(document, dict) and isinstance(document.get("output"), str):
                found.append(document["output"])
        return sorted(found)

    def of_run_id(self, run_id: str) -> dict[str, str]:
        prefix = f"{self.folder}/run={run_id}~"
        keys = [file.path.removeprefix(f"{self.folder}/run=").removesuffix(".json") for file in store.list_files(self.folder)
                if file.path.startswith(prefix) and file.path.endswith(".json")]  # fmt: skip
        return {key: attempt for key in keys if (attempt := self.attempt(key)) is not None}

    def attempt(self, key: str) -> str | None:
        path = f"{self.folder}/run={key}.json"
        document = store.read_json(path, f"a cut record: remove {path} and follow the line the next run prints")
        return str(document.get("attempt")) if isinstance(document, dict) else None


def completed_runs(manifest: Manifest) -> CompletedRuns:
    """The completion records of `manifest`."""
    from jobs.manifest.dynamodb import DynamoDbManifest
    from jobs.manifest.lake import LakeManifest
    from jobs.manifest.sqlite import SqliteManifest

    if isinstance(manifest, SqliteManifest):
        return SqliteCompletedRuns(manifest.path)
    if isinstance(manifest, LakeManifest):
        return LakeCompletedRuns(manifest.root)
    if isinstance(manifest, DynamoDbManifest):
        return DynamoDbCompletedRuns(manifest.dynamodb_client())
    raise TypeError(f"no completion records for {type(manifest).__name__}")


def manifest_place(manifest: Manifest) -> str:
    """Where `manifest` is, one way for each spelling of its URI (`sqlite:P` and `sqlite:///P`, relative paths)."""
    from jobs.manifest.dynamodb import DynamoDbManifest
    from jobs.manifest.lake import LakeManifest
    from jobs.manifest.sqlite import SqliteManifest

    if isinstance(manifest, SqliteManifest):
        return f"sqlite:{normalized(manifest.path)}"
    if isinstance(manifest, LakeManifest):
        return f"lake:{normalized(manifest.root)}"
    if isinstance(manifest, DynamoDbManifest):
        return f"dynamodb:{manifest.table}"
    return manifest.uri
