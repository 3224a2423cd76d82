"""A table's commit log: `T/_log/<commit number, 20 digits>.json`, each a full snapshot of the table.

Layout of a table folder:

    T/_log/00000000000000000000.json   commit 0: the table's settings (create)
    T/_log/00000000000000000001.json   commit 1: settings, schema, the parts, applied tokens, recent inserts
    T/parts/p00000000000000000001/     the Parquet files of the part written by commit 1

A change writes its part first, then the next commit file, created exclusively and atomically (written under
a temporary name and renamed). Readers take the newest commit, so they see the table before or after a
change, never half of it; a failed change leaves an orphan part folder that the next commit overwrites.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pyspark.sql import SparkSession

from jobs.errors import InputNotFoundError, InvalidArgumentError
from jobs.keyed.storage import Storage

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

    def head(self) -> dict[str, Any]:
        """The newest commit.

        Raises:
            TableNotFoundError: no commit log at the path.
        """
        numbers = [int(n.removesuffix(".json")) for n in self.fs.list_names(f"{self.path}/_log") if n.endswith(".json")]
        if not numbers:
            raise TableNotFoundError(f"--table: {self.path} is not a table (no _log/); create it with `table create`")
        document: dict[str, Any] = json.loads(self.fs.read_text(self.commit_path(max(numbers))))
        return document

    def exists(self) -> bool:
        return bool(self.fs.list_names(f"{self.path}/_log"))

    def write(self, document: dict[str, Any]) -> None:
        """Commit `document` (its `commit` number must be the next one), atomically and exclusively."""
        self.fs.create_exclusive(self.commit_path(document["commit"]), json.dumps(document, indent=2) + "\n")
