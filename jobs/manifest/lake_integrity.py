"""The lake manifest's files as its commits record them: verified before a check reads them; leftovers removed.

A commit records each segment's data files with their sizes (`segment_files`; a commit of the first version
records the file count only). Before a run's check reads anything, every committed segment folder is listed
and compared with that record: a lost, truncated or stray file would change decisions without a sign, so it
stops the run instead, before anything is written. After a commit, segment folders that no kept commit names
(a run or compaction killed before its commit, or before deleting what its commit replaced) are removed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from jobs.fs import store
from jobs.manifest.base import ManifestError

DATA_SUFFIX = ".parquet"
"""What Spark writes into a segment folder (besides hidden markers and checksums, which no reader reads)."""
SEGMENT_NAME = re.compile(
    r"(?:dynamodb-export-)?[0-9]{4}(?:-[0-9]{2}){5}\.[0-9a-f]{8}|day-[0-9]{4}-[0-9]{2}-[0-9]{2}\.[0-9a-f]{8}"
)
"""The names a run (`RUN-ID.xxxxxxxx`), a compaction (`day-YYYY-MM-DD.xxxxxxxx`) or a DynamoDB import gives a
segment: only folders so named are ever removed as leftovers."""
RESTORE_FILE = "Restore it from a backup (or its earlier version, in a versioned bucket) and run again"
RESTORE_FILES = (
    "Restore the segment's files from a backup (or their earlier versions, in a versioned bucket) and run again"
)
MOVE_OUT = "Move it out of the manifest folder and run again"


class ManifestDamagedError(ManifestError):
    """A committed segment's files are not those its commit records (exit 1): the run stopped before it wrote."""

    exit_code = 1


@dataclass(frozen=True)
class Recorded:
    """What a commit records of one segment: its file count, and (since `segment_files`) each file's size."""

    name: str
    folder: str
    files: int
    sizes: Mapping[str, int] | None


def data_files(folder: str, listed: Iterable[store.StoredFile]) -> dict[str, int]:
    """The data files of a listed segment folder, as a commit records them: name in the folder → bytes."""
    return {file.path.removeprefix(f"{folder}/"): file.size for file in listed if file.path.endswith(DATA_SUFFIX)}


def verify_segments(uri: str, commit: int, segments: Iterable[Recorded]) -> int:
    """List every segment folder once and compare it with its commit's record; the files listed.

    Raises:
        ManifestDamagedError: a file is missing, has another size, or is in no commit (or, for a commit of the
            first version, the count differs); the message names the first, and how many more there are.
    """
    listed, problems = 0, []
    for segment in segments:
        found = {file.path.removeprefix(f"{segment.folder}/"): file.size for file in store.list_files(segment.folder)}
        listed += len(found)
        problems += differences(segment, found, commit)
    if problems:
        problem, remedy = problems[0]
        more = f" (and {len(problems) - 1} more difference(s))" if len(problems) > 1 else ""
        raise ManifestDamagedError(f"manifest {uri} is damaged: segment {problem}{more}; nothing was written. {remedy}")
    return listed


def differences(segment: Recorded, found: Mapping[str, int], commit: int) -> list[tuple[str, str]]:
    """How the files `found` in a segment's folder differ from its record: (what, how to fix it) for each."""
    name, folder = segment.name, segment.folder
    data = {file: size for file, size in found.items() if file.endswith(DATA_SUFFIX)}
    if segment.sizes is None:  # a commit of the first version: the count is all there is to compare
        if len(data) == segment.files:
            return []
        return [
            (f"{name}: {folder} holds {len(data)} data files, commit {commit} records {segment.files}", RESTORE_FILES)
        ]
    if segment.sizes and not found:
        what = f"{name}: its folder {folder} holds none of the {len(segment.sizes)} files commit {commit} records"
        return [(what, RESTORE_FILES)]
    problems = []
    for file, size in sorted(segment.sizes.items()):
        if file not in found:
            problems.append(
                (f"{name}: file {file} of commit {commit} ({size} bytes) is missing from {folder}", RESTORE_FILE)
            )
        elif found[file] != size:
            what = f"{name}: file {folder}/{file} holds {found[file]} bytes, commit {commit} records {size}"
            problems.append((what, RESTORE_FILE))
    # Spark reads every file of the folder that is not hidden, whatever its name.
    for file in sorted(set(found) - set(segment.sizes)):
        problems.append(
            (f"{name}: file {folder}/{file} is not in commit {commit}, and the check would read it", MOVE_OUT)
        )
    return problems


def leftovers(names: Iterable[str], named: Callable[[], set[str] | None]) -> list[str]:
    """The folders among `names` (segment folders the current commit does not name) that are named as segments
    are and that no kept commit names: `named()`, read only when there is such a folder (most commits leave
    none); None from it (a commit it could not read) keeps them all."""
    candidates = sorted(name for name in names if SEGMENT_NAME.fullmatch(name))
    kept = named() if candidates else set()
    return [] if kept is None else [name for name in candidates if name not in kept]
