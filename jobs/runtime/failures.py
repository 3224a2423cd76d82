"""Failures known by their cause, whatever raised them (Spark's JVM, SQLite, the OS): one line naming the file, the
cause and the way out, for the failed run's line (`jobs.runtime.cli`).

Spark's failures reach Python as `Py4JJavaError`, whose text holds the JVM's chain of causes (`Caused by: …`) and,
for a task that failed on a file, the file (`[TASK_WRITE_FAILED] … writing rows to PATH`, `[FAILED_READ_FILE…]
… reading file PATH`); SQLite and the OS raise Python errors with their cause (and the OS, the file). Each is
matched here on those texts, never on the call that happened to run (`o1160.text`).
"""

from __future__ import annotations

import errno
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import PurePosixPath

from jobs.fs import store

SQLITE_DAMAGE = ("database disk image is malformed", "file is not a database")
# SQLite's words for a write its file's device refused: SQLITE_FULL, and SQLITE_IOERR (what a full disk gives while
# SQLite writes its journal).
SQLITE_WRITE = {
    "database or disk is full": "database or disk is full",
    "disk I/O error": "disk I/O error: most often a full disk, else a failing or vanished device",
}
# The file a failed Spark read names, in the texts of Spark 4 (FAILED_READ_FILE) and of Parquet's own errors.
READ_FILE = (
    re.compile(r"Encountered error while reading file (\S+?)\.?(?:\s|$)"),
    re.compile(r"Could not read footer for file: FileStatus\{path=([^;}]+)"),
    re.compile(r"(\S+) is not a Parquet file"),
    re.compile(r"in block -?\d+ in file (\S+)"),
)
WRITE_FILE = re.compile(r"writing rows to (\S+?)\.?(?:\s|$)")
CAUSE = re.compile(r"^(?:Caused by)?: ([\w.$]+)(?:: (.*))?$", re.MULTILINE)  # the JVM's error, then each cause
PARQUET = ("org.apache.parquet", "Parquet file", "ParquetDecodingException")
RERUN = "then rerun with the same run id (the failed attempt has no _SUCCESS; the rerun replaces it)"
TABLE_RERUN = "then run the same command again (a table change that fails commits nothing)"


def back_fill_again(command: str) -> str:
    """The way out of a failed populate-manifest: it writes no run folder, and what it recorded stays in the
    manifest, under its own run key, so the same command records the rest (what it recorded passes as its own)."""
    return (
        f"then run the same back-fill again: {command} (it writes no run folder and no _SUCCESS; the pairs it "
        "recorded before it stopped stay in the manifest and pass as its own, the rest is recorded then)"
    )


def explain(
    err: BaseException,
    output: str | None = None,
    manifest: str | None = None,
    scratch: str | None = None,
    rerun: str = RERUN,
) -> str | None:
    """The line for a failure known by its cause: a dangling symbolic link, a damaged SQLite manifest, a full
    disk, a file Spark could not read; None for any other.

    `output` and `manifest` are the run's (named when the failure does not name its file), `scratch` Spark's
    `spark.local.dir` if the config sets one; `rerun` how the job is run again (`TABLE_RERUN` for `table`).
    """
    explained = (
        dangling_link(err)
        or damaged_sqlite(err, manifest)
        or sqlite_not_written(err, manifest)
        or disk_full(err, output, scratch, manifest)
        or unreadable_file(err, manifest)
    )
    return explained.replace(RERUN, rerun) if explained else None


def chain(err: BaseException) -> Iterator[BaseException]:
    """`err` and the errors it was raised from (`raise … from`, or while handling)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _text(err: BaseException) -> str:
    return "\n".join(str(each) for each in chain(err))


def _local(path: str) -> str:
    """A path as the line names it: a local one without Spark's `file:` scheme (so it can be pasted)."""
    local = store.local_path(path)
    return re.sub("^/+", "/", local) if local is not None else path


def dangling_link(err: BaseException) -> str | None:
    """A file that is not there because it is a symbolic link to nothing (the OS's or Hadoop's "not found"), or to
    itself through a loop of links (the OS's "too many levels of symbolic links")."""
    named = [each.filename for each in chain(err) if isinstance(each, FileNotFoundError)]
    named += re.findall(r"FileNotFoundException: File (\S+) does not exist", _text(err))
    for named_path in (_local(name) for name in named if isinstance(name, str)):
        # The link itself, or a folder on the way (`--output` a link to an unmounted disk: OUT/_leases not found).
        for path in (named_path, *(str(parent) for parent in PurePosixPath(named_path).parents)):
            if os.path.islink(path) and not os.path.exists(path):
                return (
                    f"{path} is a symbolic link to {os.readlink(path)}, which does not exist. Remove the link or "
                    "restore what it points to, then run again"
                )
    looping = next((each.filename for each in chain(err) if isinstance(each, OSError) and each.errno == errno.ELOOP
                    and isinstance(each.filename, str)), None)  # fmt: skip
    if looping is None:
        return None
    if not os.path.islink(looping):  # the loop is a folder on its way
        return f"{looping} lies under a loop of symbolic links, which names no file. Remove the loop, then run again"
    return (
        f"{looping} is a loop of symbolic links (one that leads back to itself: {os.readlink(looping)}), which names "
        "no file. Remove the link or point it at a file, then run again"
    )


def damaged_sqlite(err: BaseException, manifest: str | None) -> str | None:
    """SQLite's own words for a file that is not (or no longer) a whole database: a cut or overwritten manifest."""
    text = _text(err)
    cause = next((words for words in SQLITE_DAMAGE if words in text), None)
    path = _sqlite_path(manifest)
    if cause is None or path is None:
        return None
    return (
        f"manifest {manifest}: the SQLite file {path} is damaged ({cause}). Restore it from a copy (remove "
        f"{path}-wal and {path}-shm beside it first, if there), {RERUN}"
    )


def _sqlite_path(manifest: str | None) -> str | None:
    """The file of a `sqlite:` manifest; None for another manifest or none."""
    if manifest is None or not manifest.startswith("sqlite:"):
        return None
    return manifest.removeprefix("sqlite://") if manifest.startswith("sqlite:///") else manifest.removeprefix("sqlite:")


def sqlite_not_written(err: BaseException, manifest: str | None) -> str | None:
    """SQLite's own words for a write of the manifest's file that its device refused (in a Spark task's traceback
    too): the manifest's device is the one to name, not the output's."""
    text = _text(err)
    cause = next((meaning for words, meaning in SQLITE_WRITE.items() if words in text), None)
    path = _sqlite_path(manifest)
    if cause is None or path is None:
        return None
    return (
        f"manifest {manifest}: SQLite could not write {path} ({cause}). Free space on the device holding {path} "
        f"(df {shlex.quote(os.path.dirname(os.path.abspath(path)))}), {RERUN}"
    )


def disk_full(err: BaseException, output: str | None, scratch: str | None, manifest: str | None = None) -> str | None:
    """No space left on a device (ENOSPC): named by the file a Spark task was writing, the OS's file, or else the
    places a run writes to."""
    text = _text(err)
    oserrors = [each for each in chain(err) if isinstance(each, OSError) and each.errno == errno.ENOSPC]
    if not oserrors and "No space left on device" not in text:
        return None
    written = WRITE_FILE.search(text)
    if written:  # the task's file, under its temporary folders: the folder the run writes is the one to name
        path = re.split(r"/_staging\b|/_temporary\b", _local(written.group(1)))[0]
        where = f"the device holding {path}"
    elif oserrors and isinstance(oserrors[0].filename, str):
        where = f"the device holding {_local(oserrors[0].filename)}"
    else:
        database = _sqlite_path(manifest)
        places = [output or "the output", *([database] if database else [])]
        where = f"the device holding {' or '.join(places)} or Spark's scratch folder ({scratch or '/tmp'})"
    return f"no space left on {where} (No space left on device). Free space there, {RERUN}"


def unreadable_file(err: BaseException, manifest: str | None) -> str | None:
    """A file Spark failed to read (a damaged Parquet file: a zeroed page, a cut footer), named with its cause."""
    text = _text(err)
    found = next((match.group(1) for pattern in READ_FILE for match in [pattern.search(text)] if match), None)
    if found is None:
        return None
    path = _local(found)
    causes = [message or name for name, message in CAUSE.findall(text)]
    parquet = [cause for cause in causes if any(marker in cause for marker in PARQUET)]
    cause = _short((parquet or causes[-1:] or ["unreadable"])[0])  # Parquet's words, else the root cause
    lake = manifest.removeprefix("lake:").rstrip("/") if manifest and manifest.startswith("lake:") else None
    if lake is not None and path.startswith(_local(lake) + "/"):
        return (
            f"manifest {manifest}: its file {path} is damaged ({cause}). Restore it from a backup (or its earlier "
            f"version, in a versioned bucket), {RERUN}"
        )
    return f"{path} cannot be read ({cause}). Restore or replace it, {RERUN}"


def _short(cause: str, limit: int = 160) -> str:
    """A cause's first sentence, within `limit` characters (the JVM's messages can run on with object dumps)."""
    cause = re.split(r"(?<=[!.])\s+(?=[A-Z])", cause.strip())[0]
    return cause if len(cause) <= limit else cause[: limit - 1].rsplit(" ", 1)[0] + "…"
