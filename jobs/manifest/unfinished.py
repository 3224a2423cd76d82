"""Which runs have recorded events in a manifest and not completed: the manifest's run register.

A dedup run records its pairs in the manifest before its run folder is sealed (SQLite and DynamoDB while they
are answered, the lake at its commit). Pairs of a run that never completes would count as "delivered earlier"
for every later run, and its events would be in no completed `good/`. So a run registers itself (with its run
folder and the command that redoes it) before its first manifest write, and removes its entry once its
`_SUCCESS` is written: the register holds the runs that are writing or were stopped. A later run first reads
it: an entry whose `_SUCCESS` exists (a run killed between the two writes) is removed; any other stops the later
run before it writes anything, with the command that redoes the unfinished run. So no run ever decides on an
unfinished run's pairs, whatever happened to the ledger or the run folders.

Where the register lives: SQLite, a table `winnow_runs` in the same file (the `.db` stays the whole manifest);
DynamoDB, items of the manifest table under the partition key `winnow:runs` (no event id: no query of the jobs
meets them), with the events' `ttl`; lake, one JSON document per run in `PATH/_runs/`.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, astuple, dataclass
from typing import TYPE_CHECKING, Any

from jobs.contract import DYNAMODB_ETL_TIME, DYNAMODB_PARTITION_KEY, DYNAMODB_SORT_KEY, DYNAMODB_TTL, SUCCESS_MARKER
from jobs.fs import store
from jobs.manifest.base import Manifest, ManifestError

if TYPE_CHECKING:
    from jobs.manifest.dynamodb import DynamoDbClient

SQLITE_TABLE = "winnow_runs"
DYNAMODB_RUNS_KEY = "winnow:runs"
LAKE_RUNS = "_runs"


class UnfinishedRunError(ManifestError):
    """An earlier run recorded events in the manifest and has not completed: this run stops before writing (exit 1)."""

    exit_code = 1


@dataclass(frozen=True)
class RegisteredRun:
    """One run in the register."""

    run_id: str
    etl_time: int
    ttl: int
    folder: str
    """The run folder whose `_SUCCESS` completes the run."""
    redo: str
    """The command that redoes the run (for the message that stops a later run)."""


class RunRegister(ABC):
    """The register of one manifest (see the module docstring)."""

    @abstractmethod
    def begin(self, run: RegisteredRun) -> None:
        """Register `run` (replacing an entry of an earlier attempt): before its first manifest write."""

    @abstractmethod
    def complete(self, run_id: str) -> None:
        """Remove the run's entry: after its `_SUCCESS` is written (nothing happens when there is none)."""

    @abstractmethod
    def unfinished(self) -> list[RegisteredRun]:
        """Every registered run, in run id order: writing now, or stopped before its `_SUCCESS`."""

    def require_no_unfinished(self, run_id: str, manifest_uri: str, sealed: Callable[[str], bool]) -> None:
        """Stop unless every registered run other than `run_id` has completed.

        `sealed(path)` says whether a file exists; a registered run whose `_SUCCESS` exists was killed after sealing
        its folder: its entry is removed here.

        Raises:
            UnfinishedRunError: another run recorded events and has not completed (named, with its redo command).
        """
        for run in self.unfinished():
            if run.run_id == run_id:
                continue  # a redo of this very run: its own pairs are its own
            if sealed(f"{run.folder}/{SUCCESS_MARKER}"):
                self.complete(run.run_id)
                continue
            raise UnfinishedRunError(
                f"manifest {manifest_uri}: run {run.run_id} recorded its events and has not completed (no "
                f"{run.folder}/{SUCCESS_MARKER}), so no later run may decide against them; nothing was written. "
                f"Redo it first: {run.redo}"
            )


class SqliteRunRegister(RunRegister):
    def __init__(self, path: str) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=120, isolation_level=None)
        db.execute(
            f"CREATE TABLE IF NOT EXISTS {SQLITE_TABLE} (run_id TEXT PRIMARY KEY, etl_time INTEGER NOT NULL, "
            "ttl INTEGER NOT NULL, folder TEXT NOT NULL, redo TEXT NOT NULL)"
        )
        return db

    def begin(self, run: RegisteredRun) -> None:
        with contextlib.closing(self._connect()) as db:
            db.execute(f"INSERT OR REPLACE INTO {SQLITE_TABLE} VALUES (?, ?, ?, ?, ?)", astuple(run))

    def complete(self, run_id: str) -> None:
        with contextlib.closing(self._connect()) as db:
            db.execute(f"DELETE FROM {SQLITE_TABLE} WHERE run_id = ?", (run_id,))

    def unfinished(self) -> list[RegisteredRun]:
        with contextlib.closing(self._connect()) as db:
            rows = db.execute(f"SELECT * FROM {SQLITE_TABLE} ORDER BY run_id").fetchall()
        return [RegisteredRun(*row) for row in rows]


class DynamoDbRunRegister(RunRegister):
    """Items `eventId` = `winnow:runs`, `fingerprint` = the run id, through the manifest's own client (paced by
    nothing, waited out when throttled, like the writer lease)."""

    def __init__(self, client: DynamoDbClient) -> None:
        self.call = client.call
        self.table = client.table

    def _key(self, run_id: str) -> dict[str, Any]:
        return {DYNAMODB_PARTITION_KEY: {"S": DYNAMODB_RUNS_KEY}, DYNAMODB_SORT_KEY: {"S": run_id}}

    def begin(self, run: RegisteredRun) -> None:
        item = {
            **self._key(run.run_id),
            DYNAMODB_ETL_TIME: {"N": str(run.etl_time)},
            DYNAMODB_TTL: {"N": str(run.ttl)},
            "folder": {"S": run.folder},
            "redo": {"S": run.redo},
        }
        self.call("put_item", None, TableName=self.table, Item=item)

    def complete(self, run_id: str) -> None:
        self.call("delete_item", None, TableName=self.table, Key=self._key(run_id))

    def unfinished(self) -> list[RegisteredRun]:
        runs: list[RegisteredRun] = []
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#id = :runs",
            "ExpressionAttributeNames": {"#id": DYNAMODB_PARTITION_KEY},
            "ExpressionAttributeValues": {":runs": {"S": DYNAMODB_RUNS_KEY}},
            "ConsistentRead": True,
        }
        while True:
            page = self.call("query", None, **request)
            runs.extend(
                RegisteredRun(
                    run_id=item[DYNAMODB_SORT_KEY]["S"],
                    etl_time=int(item[DYNAMODB_ETL_TIME]["N"]),
                    ttl=int(item[DYNAMODB_TTL]["N"]),
                    folder=item["folder"]["S"],
                    redo=item["redo"]["S"],
                )
                for item in page.get("Items", [])
            )
            if "LastEvaluatedKey" not in page:
                return sorted(runs, key=lambda run: run.run_id)
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


class FileRunRegister(RunRegister):
    """One document per run, `FOLDER/run=ID.json` (local or `s3://`), written whole."""

    def __init__(self, folder: str) -> None:
        self.folder = folder.rstrip("/")

    def _path(self, run_id: str) -> str:
        return f"{self.folder}/run={run_id}.json"

    def begin(self, run: RegisteredRun) -> None:
        store.write_bytes(self._path(run.run_id), (json.dumps(asdict(run), indent=1) + "\n").encode())

    def complete(self, run_id: str) -> None:
        store.delete(self._path(run_id))

    def unfinished(self) -> list[RegisteredRun]:
        documents = [store.read_bytes(file.path) for file in store.list_files(self.folder)]
        runs = [RegisteredRun(**json.loads(data)) for data in documents if data is not None]
        return sorted(runs, key=lambda run: run.run_id)


def run_register(manifest: Manifest) -> RunRegister:
    """The register of `manifest`."""
    from jobs.manifest.dynamodb import DynamoDbManifest
    from jobs.manifest.lake import LakeManifest
    from jobs.manifest.sqlite import SqliteManifest

    if isinstance(manifest, SqliteManifest):
        return SqliteRunRegister(manifest.path)
    if isinstance(manifest, LakeManifest):
        return FileRunRegister(f"{manifest.root}/{LAKE_RUNS}")
    if isinstance(manifest, DynamoDbManifest):
        return DynamoDbRunRegister(manifest.dynamodb_client())
    raise TypeError(f"no run register for {type(manifest).__name__}")
