"""The bucket files a keyed commit records, and their check before a run reads them.

A commit records, per live bucket folder `runs/run=ID/bucket=B`, each file's size and content checksum: on S3
the ETag the listing returns (no request more), locally a CRC32 of the file (`lake_integrity.checksum_of`, the
lake manifest's). Before a run reads its parent's buckets, each folder is listed and compared with that record:
a file lost, cut, swapped or added would change which keys count as seen without a sign, so it stops the run
instead (`DamagedFileError`, exit 1), naming the first difference. A commit of format 1 records no files, only its
folders: they must hold files, and a file Hadoop wrote locally must still be beside its checksum file `.NAME.crc`
(the one trace a file removed by hand leaves; on S3 there is none, and a lost file of a folder that still holds
others goes unseen). The next commit records the files as listed.
"""

from __future__ import annotations

from typing import Any

from jobs.errors import DamagedFileError
from jobs.fs import store
from jobs.manifest.lake_integrity import checksum_of, comparable

Records = dict[str, dict[str, dict[str, Any]]]
"""Folder under `runs/` (`run=ID/bucket=B`) → file name in it → {"size": bytes, "checksum": "crc32:…"/"etag:…"}."""
RESTORE = "Restore it from a backup (or its earlier version, in a versioned bucket) and run again"
RESTORE_FOLDER = "Restore its files from a backup (or their earlier versions, in a versioned bucket) and run again"
MOVE_OUT = "Move it out of the state's runs/ and run again"


def folder_of(run_id: str, bucket: str) -> str:
    return f"run={run_id}/bucket={bucket}"


def listed(folder: str) -> dict[str, store.StoredFile]:
    """The visible files under `folder` (what Spark reads of it), by their path in it."""
    prefix = (store.local_path(folder) or folder).rstrip("/") + "/"
    return {file.path.removeprefix(prefix): file for file in store.list_files(folder)}


def record(file: store.StoredFile) -> dict[str, Any]:
    return {"size": file.size, "checksum": checksum_of(file)}


def written(runs: str, run_id: str) -> Records:
    """The records of the files run `run_id` wrote under `runs/run=ID/` (one listing)."""
    records: Records = {}
    for name, file in listed(f"{runs}/run={run_id}").items():
        bucket, _, rest = name.partition("/")
        if bucket.startswith("bucket=") and rest:
            records.setdefault(f"run={run_id}/{bucket}", {})[rest] = record(file)
    return records


def check(uri: str, commit: str, folders: list[str], recorded: Records | None) -> Records:
    """Compare each of `folders` (under `uri`/runs) with what `commit` records of it (None: a commit of format 1);
    the records for the next commit.

    Raises:
        DamagedFileError: a folder is missing or empty, a file is missing, of another size or content, or in no
            commit; the message names the first, and how many more differences there are.
    """
    records: Records = {}
    problems: list[tuple[str, str]] = []
    for folder in folders:
        path = f"{uri}/runs/{folder}"
        files = listed(path)
        expected = None if recorded is None else recorded[folder]
        problems += differences(path, files, expected, commit)
        records[folder] = {
            name: known if expected and (known := expected.get(name)) and comparable(known["checksum"], file)
            else record(file)
            for name, file in files.items()
        }  # fmt: skip
    if problems:
        what, way_out = problems[0]
        more = f" (and {len(problems) - 1} more difference(s))" if len(problems) > 1 else ""
        raise DamagedFileError(f"state {uri} is damaged: {what}{more}; nothing was written. {way_out}")
    return records


def differences(
    path: str, files: dict[str, store.StoredFile], expected: dict[str, dict[str, Any]] | None, commit: str
) -> list[tuple[str, str]]:
    """How the `files` of bucket folder `path` differ from what `commit` records (`expected`): (what, way out)."""
    if not files:
        count = "" if expected is None else f" (its {len(expected)} file(s))"
        return [(f"bucket folder {path}, which commit {commit} lists{count}, is missing or empty", RESTORE_FOLDER)]
    if expected is None:
        return orphaned_checksums(path, files, commit)
    problems = []
    for name, known in sorted(expected.items()):
        file = files.get(name)
        if file is None:
            what = f"file {path}/{name} ({known['size']} bytes), which commit {commit} records, is missing"
        elif file.size != known["size"]:
            what = f"file {path}/{name} holds {file.size} bytes, commit {commit} records {known['size']}"
        elif comparable(known["checksum"], file) and (found := checksum_of(file)) != known["checksum"]:
            what = f"file {path}/{name} has checksum {found}, commit {commit} records {known['checksum']} (replaced)"
        else:
            continue
        problems.append((what, RESTORE))
    for name in sorted(set(files) - set(expected)):  # Spark reads every visible file of the folder
        problems.append((f"file {path}/{name} is in no commit, and this run would read it", MOVE_OUT))
    return problems


def orphaned_checksums(path: str, files: dict[str, store.StoredFile], commit: str) -> list[tuple[str, str]]:
    """The files of bucket folder `path` (of a format-1 `commit`, which records none) whose checksum file is there
    without them: Hadoop writes `.NAME.crc` beside each file it writes locally, and a file removed by hand leaves it."""
    problems = []
    for name in store.children(path):
        lost = name[1:].removesuffix(".crc")
        if name.startswith(".") and name.endswith(".crc") and not lost.startswith((".", "_")) and lost not in files:
            what = (
                f"file {path}/{lost}, whose checksum file {name} is there, is missing (commit {commit}, written "
                "before commits recorded their files, lists its folder)"
            )
            problems.append((what, RESTORE))
    return problems
