"""A table's parts as its commits record them: checked before a command reads them, then read file by file.

Each part a commit adds is recorded with its data files: `{"id", "rows", "commit", "files": {NAME: {"size": BYTES,
"checksum": "crc32:…" | "etag:…"}}}` (`recorded_files`, the checksum as `lake_integrity.checksum_of` gives it). Every
command that reads the table (insert, select, optimize) first lists `T/parts/` once and compares each part the newest
commit names with that record: a part folder missing, or a file missing, of another size or checksum, or not
recorded, stops the command (`DamagedPartError`, exit 1) before it writes anything; a damaged table is never read as
a smaller one, nor carried into a new commit. Spark then reads exactly the recorded files (`paths.exact`), never a
folder, so a file put in a part folder later is not read.

Cost, per command: on S3 one listing of `parts/` (a request per 1,000 files; the checksum is the listing's ETag, so
no file is read); locally the listing plus a CRC32 of every part file: the table's bytes read once more (CRC32 reads
100 to 800 MB/s), no Spark job.

Parts committed before files were recorded carry `id`, `rows` and `commit` only: their folder must hold data files,
and those files must hold the recorded row count (one Spark job over their Parquet footers, no data read). A file
swapped for another of the same row count is not noticed for them; the next insert or optimize records their files
as listed then (checked by that count), and from then on they are checked as above. A table copied between S3 and a
local folder holds checksums of the other kind: its files are checked by size until its next change records them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs.errors import DamagedFileError
from jobs.fs import store
from jobs.fs.paths import exact
from jobs.manifest.lake_integrity import checksum_of, comparable

RESTORE = (
    "nothing was changed. Restore it from a copy of the table (on S3: its earlier version, in a versioned bucket), "
    "then run again"
)
MOVE_OUT = "nothing was changed. Move it out of the part's folder (no commit names it), then run again"
PART_ID = r".*/parts/(p[0-9]{20}-[0-9a-f]+)/"
"""A part's folder name in a file's path, as Spark names the file (the last `/parts/p…/` of it)."""

Listed = Mapping[str, store.StoredFile]
"""The files found in one part folder, by their name in it."""


class DamagedPartError(DamagedFileError):
    """A part the newest commit names is not what the commit records (exit 1): nothing was read or written."""


@dataclass(frozen=True)
class CheckedParts:
    """The newest commit's parts once checked: its entries (each with its files recorded) and the files to read."""

    entries: list[dict[str, Any]]
    paths: list[str]


def recorded_files(folder: str) -> dict[str, dict[str, Any]]:
    """The data files of a part folder just written, as its commit records them: name -> size and checksum (locally
    the new part is read once more for its CRC32)."""
    return _record({file.path.removeprefix(f"{folder}/"): file for file in store.list_files(folder)})


def _record(files: Listed) -> dict[str, dict[str, Any]]:
    return {name: {"size": file.size, "checksum": checksum_of(file)} for name, file in sorted(files.items())}


def _by_part(folder: str, files: Sequence[store.StoredFile]) -> dict[str, dict[str, store.StoredFile]]:
    """The files listed under `folder` (`T/parts`), grouped by the part folder they are in, by their name in it."""
    grouped: dict[str, dict[str, store.StoredFile]] = {}
    for file in files:
        part, _, name = file.path.removeprefix(f"{folder}/").partition("/")
        grouped.setdefault(part, {})[name] = file
    return grouped


def check_parts(spark: SparkSession, root: str, head: dict[str, Any]) -> CheckedParts:
    """Compare every part `head` names with the files in its folder (one listing of `root/parts`).

    Raises:
        DamagedPartError: a part folder is missing, a file is missing, cut, replaced or not recorded (or, for a
            part recorded without its files, the row count differs); names the first, and how many more.
    """
    entries: list[dict[str, Any]] = head["parts"]
    if not entries:
        return CheckedParts([], [])
    listed = _by_part(f"{root}/parts", store.list_files(f"{root}/parts"))
    commit = head["commit"]
    problems = [
        problem
        for entry in entries
        for problem in differences(entry, f"{root}/parts/{entry['id']}", listed.get(entry["id"], {}), commit)
    ]
    legacy = [entry for entry in entries if "files" not in entry]
    if not problems and legacy:
        problems = _row_differences(spark, root, legacy, listed, commit)
    if problems:
        what, way_out = problems[0]
        more = f" (and {len(problems) - 1} more difference(s))" if len(problems) > 1 else ""
        raise DamagedPartError(f"--table: {what}{more}; {way_out}")
    recorded = [entry if _current(entry, listed[entry["id"]]) else {**entry, "files": _record(listed[entry["id"]])}
                for entry in entries]  # fmt: skip
    paths = [f"{root}/parts/{entry['id']}/{name}" for entry in recorded for name in entry["files"]]
    return CheckedParts(recorded, paths)


def _current(entry: dict[str, Any], found: Listed) -> bool:
    """Whether a checked part's record holds a checksum of the kind here for each file: not for a part recorded
    before files were, nor for a table copied between S3 and a local folder (its files are recorded again)."""
    return "files" in entry and all(comparable(r["checksum"], found[name]) for name, r in entry["files"].items())


def differences(
    entry: dict[str, Any],
    folder: str,
    found: Listed,
    commit: int,
    checksum: Callable[[store.StoredFile], str] = checksum_of,
) -> list[tuple[str, str]]:
    """How a part's folder (its files `found`) differs from what commit `commit` records of it: (what, way out) for
    each difference; a file's `checksum` is taken only when its size is right."""
    files: dict[str, dict[str, Any]] | None = entry.get("files")
    if not found:  # the folder removed, or every file in it
        shown = ", ".join(sorted(files or {})[:2]) + (", …" if len(files or {}) > 2 else "")
        named = f"{len(files)} file(s): {shown}; " if files else ""
        return [(f"part folder {folder} is missing or holds none of its files (commit {commit} records {named}"
                 f"{entry['rows']} rows in it)", RESTORE)]  # fmt: skip
    if files is None:  # recorded before files were: its rows are counted instead (`_row_differences`)
        return []
    problems = []
    for name, record in sorted(files.items()):
        file = found.get(name)
        if file is None:
            problems.append((f"part file {folder}/{name} is missing (commit {commit} records it, {record['size']} "
                             "bytes)", RESTORE))  # fmt: skip
        elif file.size != record["size"]:
            problems.append((f"part file {file.path} holds {file.size} bytes, commit {commit} records {record['size']} "
                             "(cut or replaced)", RESTORE))  # fmt: skip
        elif comparable(record["checksum"], file) and (now := checksum(file)) != record["checksum"]:
            problems.append((f"part file {file.path} has checksum {now}, commit {commit} records "
                             f"{record['checksum']} (replaced or damaged)", RESTORE))  # fmt: skip
    for name in sorted(set(found) - set(files)):
        problems.append((f"{found[name].path} is in part {entry['id']}, and commit {commit} records no such file",
                         MOVE_OUT))  # fmt: skip
    return problems


def _row_differences(
    spark: SparkSession, root: str, legacy: list[dict[str, Any]], listed: Mapping[str, Listed], commit: int
) -> list[tuple[str, str]]:
    """The parts recorded without their files whose files hold another row count than recorded: one Spark job
    counting rows from the Parquet footers (no column is read)."""
    paths = [file.path for entry in legacy for file in listed[entry["id"]].values()]
    frame = spark.read.parquet(*(exact(path) for path in paths))
    part = F.regexp_extract(F.input_file_name(), PART_ID, 1).alias("part")
    counted = {row["part"]: row["count"] for row in frame.groupBy(part).count().collect()}
    return [(_count_problem(f"{root}/parts/{entry['id']}", counted.get(entry["id"], 0), entry["rows"], commit), RESTORE)
            for entry in legacy if counted.get(entry["id"], 0) != entry["rows"]]  # fmt: skip


def _count_problem(folder: str, found: int, rows: int, commit: int) -> str:
    return (f"part {folder} holds {found} rows, commit {commit} records {rows} (a file lost, cut or added; a commit "
            "of a table written before part files were recorded names no file)")  # fmt: skip
