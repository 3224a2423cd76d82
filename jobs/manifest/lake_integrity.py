"""The lake manifest's files as its commits record them: verified before a check reads them; leftovers removed.

A commit records each segment's data files with their sizes (`segment_files`; a commit of the first version
records the file count only) and, since version 2, each file's content checksum (`file_checksums`): on S3 the ETag
the listing returns (no request more), locally a CRC32 of the file, computed when its commit is written and again
before each check (CRC32 reads 100 to 800 MB/s). Before a run's check reads anything, every committed segment folder is listed
and compared with that record: a lost, truncated, replaced or stray file would change decisions without a sign,
so it stops the run instead, before anything is written. After a commit, segment folders that no kept commit names
(a run or compaction killed before its commit, or before deleting what its commit replaced) are removed.
"""

from __future__ import annotations

import re
import zlib
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
    """What a commit records of one segment: its file count, (since `segment_files`) each file's size, and (since
    version 2) each file's checksum, by its name in the folder."""

    name: str
    folder: str
    files: int
    sizes: Mapping[str, int] | None
    checksums: Mapping[str, str] | None = None


def checksum_of(file: store.StoredFile) -> str:
    """The checksum a commit records of a listed file's content: `etag:…` on S3 (the listing's), `crc32:…` locally
    (the file read whole: a swap keeps the size and, copied with `cp -p`, the time)."""
    if file.etag is not None:
        return f"etag:{file.etag.strip(chr(34))}"
    local = store.local_path(file.path)
    assert local is not None, file.path
    crc = 0
    with open(local, "rb") as handle:
        while chunk := handle.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return f"crc32:{crc:08x}"


def comparable(recorded: str, file: store.StoredFile) -> bool:
    """Whether a recorded checksum is of the kind `checksum_of` gives for `file`: a lake copied between S3 and a local
    folder has the other kind until its next commit records its files again."""
    return recorded.startswith("etag:") == (file.etag is not None)


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
        files = {file.path.removeprefix(f"{segment.folder}/"): file for file in store.list_files(segment.folder)}
        listed += len(files)
        found = {name: file.size for name, file in files.items()}
        problems += differences(segment, found, commit) or content_differences(segment, files, commit)
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


def content_differences(segment: Recorded, files: Mapping[str, store.StoredFile], commit: int) -> list[tuple[str, str]]:
    """The files of a segment (all of them present, of the sizes recorded) whose content is not what its commit
    records: (what, how to fix it) for each; none for files recorded without a checksum."""
    problems = []
    for name, recorded in sorted((segment.checksums or {}).items()):
        file = files.get(name)
        if file is not None and comparable(recorded, file) and (found := checksum_of(file)) != recorded:
            what = f"{segment.name}: file {file.path} has checksum {found}, commit {commit} records {recorded} (replaced or damaged)"
            problems.append((what, RESTORE_FILE))
    return problems


def leftovers(names: Iterable[str], named: Callable[[], set[str] | None]) -> list[str]:
    """The folders among `names` (segment folders the current commit does not name) that are named as segments
    are and that no kept commit names: `named()`, read only when there is such a folder (most commits leave
    none); None from it (a commit it could not read) keeps them all."""
    candidates = sorted(name for name in names if SEGMENT_NAME.fullmatch(name))
    kept = named() if candidates else set()
    return [] if kept is None else [name for name in candidates if name not in kept]
