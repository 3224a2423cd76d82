"""A table's commit log: `T/_log/<commit number, 20 digits>.json`, each a full snapshot of the table.

Layout of a table folder:

    T/_log/00000000000000000000.json   commit 0: the table's settings (create)
    T/_log/00000000000000000001.json   commit 1: settings, schema, the parts (each with its rows and its files'
                                       sizes and checksums, `parts`), applied tokens, recent inserts
    T/parts/p00000000000000000001-9f2c…/   the Parquet files of the part written by commit 1

A change writes its part first, into a folder of its own (`p<commit number>-<random>`), then the next commit
file, created only if absent (O_EXCL locally, a conditional write on S3). Readers take the newest commit and
read only the parts it names, so they see the table before or after a change, never half of it, and never
the part of a change that did not commit. Of two concurrent changes one commits; the other removes its own
part and stops (exit 1). Parts no commit names (a writer killed between its part and its commit) are removed
by the next `optimize`.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pyspark.sql import SparkSession

from jobs.errors import DamagedFileError, InputNotFoundError, InvalidArgumentError
from jobs.keyed.storage import ConcurrentCommitError, Storage

Engine = Literal["replacing", "collapsing", "versioned-collapsing"]
ENGINES: tuple[str, ...] = get_args(Engine)
LOG_FORMAT = 1


class TableNotFoundError(InputNotFoundError):
    """The table folder holds no commit log (never created)."""


class TableExistsError(InvalidArgumentError):
    """`create` on a folder that already holds a table."""


@dataclass(frozen=True)
class TableSettings:
    """What `create` fixed: the engine, the sorting key and the role columns."""

    engine: Engine
    key: tuple[str, ...]
    version: str | None = None
    sign: str | None = None
    is_deleted: str | None = None
    dedup_window: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"engine": self.engine, "key": list(self.key), "version": self.version, "sign": self.sign,
                "is_deleted": self.is_deleted, "dedup_window": self.dedup_window}  # fmt: skip

    @staticmethod
    def from_json(data: dict[str, Any]) -> TableSettings:
        return TableSettings(**{**data, "key": tuple(data["key"])})

    def role_columns(self) -> list[str]:
        return [name for name in (self.version, self.sign, self.is_deleted) if name is not None]


def validate_settings(settings: TableSettings) -> None:
    """Raises: InvalidArgumentError: an engine/role combination ClickHouse does not allow either."""
    engine = settings.engine
    if engine not in ENGINES:
        raise InvalidArgumentError(f"--engine: given {engine!r}; allowed: {', '.join(ENGINES)}")
    if engine == "replacing" and settings.sign is not None:
        raise InvalidArgumentError("--sign: only for the collapsing and versioned-collapsing engines")
    if engine != "replacing" and settings.sign is None:
        raise InvalidArgumentError(f"--sign: required by the {engine} engine")
    if engine == "versioned-collapsing" and settings.version is None:
        raise InvalidArgumentError("--version: required by the versioned-collapsing engine")
    if engine == "collapsing" and settings.version is not None:
        raise InvalidArgumentError("--version: not used by the collapsing engine; use versioned-collapsing")
    if settings.is_deleted is not None and (engine != "replacing" or settings.version is None):
        raise InvalidArgumentError("--is-deleted: only for the replacing engine, together with --version")
    if settings.dedup_window < 0:
        raise InvalidArgumentError(f"--dedup-window: given {settings.dedup_window}; allowed: 0 (off) or more")
    roles = settings.role_columns()
    clash = sorted({name for name in roles if name in settings.key} | {n for n in roles if roles.count(n) > 1})
    if clash:
        raise InvalidArgumentError(f"role columns {clash} are used twice (in --key or as two roles)")


class TableLog:
    """The commit log of the table at `path`."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self.path = path.rstrip("/")
        self.fs = Storage(spark)

    def commit_path(self, number: int) -> str:
        return f"{self.path}/_log/{number:020d}.json"

    def part_path(self, part: str) -> str:
        return f"{self.path}/parts/{part}"

    @staticmethod
    def new_part(number: int) -> str:
        """A part folder name no other writer can choose: the commit number it is meant for, then random hex."""
        return f"p{number:020d}-{uuid.uuid4().hex[:16]}"

    def orphan_parts(self, up_to: int, named: set[str]) -> list[str]:
        """Part folders meant for a commit number <= `up_to` that `named` does not hold.

        Parts meant for a later number are left alone: their writer may still be about to commit them.
        """
        orphans = []
        for name in self.fs.list_names(f"{self.path}/parts"):
            meant_for = re.match(r"p(\d{20})", name)
            if meant_for and int(meant_for.group(1)) <= up_to and name not in named:
                orphans.append(name)
        return orphans

    def head(self) -> dict[str, Any]:
        """The newest commit.

        Raises:
            TableNotFoundError: no commit log at the path.
            DamagedFileError: the newest commit is not whole JSON.
        """
        names = [n for n in self.fs.list_names(f"{self.path}/_log") if n.endswith(".json")]
        strays = [n for n in names if not n.removesuffix(".json").isdigit()]
        if strays:  # a commit is named by its number: any other name is no run's
            raise DamagedFileError(
                f"--table: {self.path}/_log holds {', '.join(sorted(strays)[:3])}, which is no commit (a commit is "
                f"named by its number, NUMBER.json); nothing was changed. Move it out of {self.path}/_log, then run "
                "again"
            )
        numbers = [int(n.removesuffix(".json")) for n in names]
        if not numbers:
            raise TableNotFoundError(f"--table: {self.path} is not a table (no _log/); create it with `table create`")
        newest = self.commit_path(max(numbers))
        way_out = (
            f"nothing was changed. Restore it from a backup, or remove it: the table is then as of commit "
            f"{max(numbers) - 1} (that commit's change is undone: make it again)"
        )
        try:
            document: dict[str, Any] = json.loads(self.fs.read_text(newest))
        except ValueError as err:  # cut or overwritten: named, never read as another table state
            raise DamagedFileError(f"--table: commit {newest} is damaged (not JSON: {err}); {way_out}") from None
        if not isinstance(document, dict) or document.get("commit") != max(numbers):
            given = document.get("commit") if isinstance(document, dict) else None
            raise DamagedFileError(
                f"--table: commit {newest} is damaged (it records commit {given}: another commit's file, an older "
                f"copy put in its place); {way_out}"
            )
        return document

    def exists(self) -> bool:
        return bool(self.fs.list_names(f"{self.path}/_log"))

    def write(self, document: dict[str, Any], part: str | None = None) -> None:
        """Commit `document` (its `commit` number must be the next one), atomically and exclusively.

        Raises:
            ConcurrentCommitError: another change took that commit number first; this change's own `part`
                folder is removed first, so nothing of it is left.
        """
        number = document["commit"]
        document = {**document, "commit_id": uuid.uuid4().hex}  # unique, so a retried write can know its own
        try:
            self.fs.create_exclusive(self.commit_path(number), json.dumps(document, indent=2) + "\n")
        except ConcurrentCommitError:
            if part is not None:
                self.fs.delete(self.part_path(part))
            winner = json.loads(self.fs.read_text(self.commit_path(number)))
            raise ConcurrentCommitError(
                f"{document['operation']} on {self.path} not committed: commit {number} was taken first by "
                f"{winner.get('operation')} (committed at {winner.get('committed_at')}); nothing of this "
                f"{document['operation']} is in the table, so running it again is safe"
            ) from None
