"""I/O at the edges: reading input lines and writing a run's folder.

Paths go through Hadoop's FileSystem in the Spark JVM, so the same code serves local folders and `s3://`
prefixes on EMR. A run folder is complete only when `_SUCCESS` is in it; it is written last.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse, urlsplit

from pyspark.sql import DataFrame, SparkSession

from jobs import store
from jobs.contract import SUCCESS_MARKER, SUMMARY
from jobs.errors import InputNotFoundError, InvalidArgumentError, WinnowError
from jobs.runs import run_folder, run_lease

STAGING = "_staging"
_GLOB_CHARACTERS = re.compile(r"([\\*?\[\]{}])")

T = TypeVar("T")


def absolute(path: str) -> str:
    """A local path made absolute (messages and summaries then say where things are); URIs unchanged."""
    return path if urlparse(path).scheme not in ("", "file") else os.path.abspath(path.removeprefix("file:"))


def _normalized(path: str) -> str:
    """A path for comparison: local paths absolute and resolved, `s3a:`/`s3n:` as `s3:`, no trailing `/`."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return os.path.realpath(absolute(path))  # symlinks resolved: a link to the input is the input
    scheme = "s3" if parsed.scheme in ("s3a", "s3n") else parsed.scheme
    return f"{scheme}://{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/")


def overlapping(first: str, second: str) -> bool:
    """True when the two paths are the same, or one is inside the other."""
    a, b = _normalized(first), _normalized(second)
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def check_apart(option: str, path: str, others: dict[str, str]) -> None:
    """Refuse a path to write that is, holds, or lies inside a path the command reads or keeps.

    Raises:
        InvalidArgumentError: `path` overlaps one of `others` (option name -> path).
    """
    for other_option, other in others.items():
        if overlapping(path, other):
            raise InvalidArgumentError(
                f"{option}: given {path}, which is, holds or lies inside {other_option} {other}; "
                f"allowed: a folder apart from {other_option} (neither inside the other)"
            )


class FileSystem:
    """The few Hadoop FileSystem calls the jobs need, on any path Spark can reach."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._jvm: Any = spark.sparkContext._jvm
        self._conf: Any = spark.sparkContext._jsc.hadoopConfiguration()

    def _resolve(self, path: str) -> tuple[Any, Any]:
        hpath = self._jvm.org.apache.hadoop.fs.Path(path)
        return hpath.getFileSystem(self._conf), hpath

    def exists(self, path: str) -> bool:
        fs, hpath = self._resolve(path)
        return bool(fs.exists(hpath))

    def delete(self, path: str) -> None:
        fs, hpath = self._resolve(path)
        fs.delete(hpath, True)

    def mkdirs(self, path: str) -> None:
        fs, hpath = self._resolve(path)
        fs.mkdirs(hpath)

    def children(self, path: str) -> list[str]:
        """Names of all the entries directly under `path`, sorted; [] if it does not exist."""
        fs, hpath = self._resolve(path)
        if not fs.exists(hpath):
            return []
        return sorted(str(status.getPath().getName()) for status in fs.listStatus(hpath))

    def rename(self, source: str, target: str) -> None:
        """Move `source` to `target` (a folder move; on S3 a copy then a delete)."""
        fs, hsource = self._resolve(source)
        _, htarget = self._resolve(target)
        if not fs.rename(hsource, htarget):
            raise OSError(f"could not rename {source} to {target}")

    def read_text(self, path: str) -> str:
        fs, hpath = self._resolve(path)
        stream = fs.open(hpath)
        try:
            data: bytes = stream.readAllBytes()
        finally:
            stream.close()
        return data.decode("utf-8")

    def size(self, path: str) -> int:
        fs, hpath = self._resolve(path)
        return int(fs.getFileStatus(hpath).getLen())

    def write_bytes(self, path: str, data: bytes) -> None:
        fs, hpath = self._resolve(path)
        stream = fs.create(hpath, True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()


def exact(path: str) -> str:
    """A path for Spark's reader that names this file or folder only: the reader takes a string for a Hadoop glob,
    so each glob character (`\\*?[]{}`) is escaped with a backslash (Hadoop's GlobPattern; no other character
    is special, and `%` is not decoded)."""
    return _GLOB_CHARACTERS.sub(r"\\\1", path)


def listed_name(name: str) -> str:
    """A file's name as Spark lists it (`inputFiles()`: a URI, `%`-encoded) decoded once, as java.net.URI's getPath
    decodes it: `file:///in/late%20batch.tsv` -> `file:///in/late batch.tsv`."""
    parts = urlsplit(name)
    return f"{parts.scheme}://{parts.netloc}{unquote(parts.path)}"


def qualified(path: str) -> str:
    """A path as `listed_name` gives it: a local path as an absolute `file://` URI, any other unchanged."""
    local = store.local_path(path)
    return path if local is None else f"file://{os.path.abspath(local)}"


def require_input(spark: SparkSession, path: str) -> None:
    """Raises: InputNotFoundError: the path does not exist."""
    if not FileSystem(spark).exists(path):
        raise InputNotFoundError(f"--input: {path} does not exist")


def read_lines(spark: SparkSession, path: str) -> DataFrame:
    """All lines of a file, or of every file under a folder (plain or gzip, by file extension).

    Files whose names start with `_` or `.` are skipped, as Spark does (markers, checksums).

    Raises:
        InputNotFoundError: the path does not exist.
    """
    require_input(spark, path)
    return spark.read.option("recursiveFileLookup", "true").text(exact(path))


class UnreadableInputError(WinnowError):
    """Input files that cannot be read whole (corrupt gzip, unreadable, gone): the run stops before writing."""

    exit_code = 1


@dataclass(frozen=True)
class UnreadableFile:
    path: str
    size: int | None
    error: str

    def describe(self) -> str:
        size = "size unknown" if self.size is None else f"{self.size:,} bytes"
        return f"{self.path} ({size}): {self.error}"


@dataclass(frozen=True)
class Input:
    """The input of a run: the files listed under `path` once, and those skipped as unreadable."""

    path: str
    files: tuple[str, ...]
    unreadable: tuple[UnreadableFile, ...] = ()
    frame: DataFrame | None = field(default=None, compare=False, repr=False)
    """The lines of `files` as listed (Spark keeps the listing in the plan): every read of the run uses it, so a
    file that arrives after the listing is neither read nor counted."""

    def lines(self, spark: SparkSession) -> DataFrame:
        """The lines of the readable files (column `value`)."""
        return self.frame if self.frame is not None else spark.read.text([exact(name) for name in self.files])

    def without(self, unreadable: Sequence[UnreadableFile]) -> Input:
        """This input less the files found unreadable (read by name from now on)."""
        skipped = {file.path for file in unreadable}
        kept = tuple(name for name in self.files if name not in skipped)
        return Input(self.path, kept, (*self.unreadable, *unreadable))

    def skipped_of(self, paths: Sequence[str]) -> dict[str, str]:
        """Those of `paths` (as `store` lists them) skipped as unreadable, each with its error."""
        errors = {file.path: file.error for file in self.unreadable}
        return {path: errors[qualified(path)] for path in paths if qualified(path) in errors}

    def summary(self) -> dict[str, Any]:
        """For `summary.json`: how many files were read, and each file skipped with its size and error."""
        return {"files": len(self.files), "unreadable": [asdict(skipped) for skipped in self.unreadable]}


def open_input(
    spark: SparkSession,
    path: str,
    selected: Sequence[str] | None = None,
    skipped: Sequence[UnreadableFile] = (),
) -> Input:
    """List the input files once: every file under `path`, or only `selected` (an incremental run's, each read by
    its exact name; `skipped`: those an earlier attempt of the run skipped as unreadable, not read again).

    Nothing is read yet: `read_whole` runs the job's first pass and stops the run on files that do not read whole.

    Raises:
        InputNotFoundError: the path does not exist or holds no input files.
        InvalidArgumentError: a file's name cannot be read (`store.unreadable_names`; s3:// is first listed here).
    """
    lines = read_lines(spark, path) if selected is None else spark.read.text([exact(name) for name in selected])
    files = tuple(sorted(listed_name(name) for name in lines.inputFiles()))
    if not files:
        raise InputNotFoundError(
            f"--input: {path} holds no input files (names starting with _ or . are skipped); nothing to do"
        )
    store.refuse_unreadable_names(qualified(path), files)
    return Input(path, files, tuple(skipped), frame=lines)


def read_whole(
    spark: SparkSession, source: Input, skip_unreadable: bool, first_pass: Callable[[DataFrame], T]
) -> tuple[Input, T]:
    """Run the job's first pass over the input's lines: an action that reads every file whole, before the run writes
    or asks anything. Returns the input as read (less the files skipped) and what the pass returned.

    A truncated gzip or an unreadable file would otherwise fail the run halfway, after the manifest was written;
    here, when the pass fails and some files fail when read alone, it stops the run naming them (or, with
    `skip_unreadable`, leaves them out, lists them, and runs the pass again over the rest). The files are read
    one by one only after a failure, so a run over readable input reads them once.

    Raises:
        UnreadableInputError: files that do not read whole, each named (unless `skip_unreadable`).
    """
    try:
        return source, first_pass(source.lines(spark))
    except Exception:
        unreadable = _unreadable_files(spark, source.files)
        if not unreadable:
            raise  # no file fails on its own: not an input problem
    if not skip_unreadable or len(unreadable) == len(source.files):
        remedy = "Replace or remove them" + (
            "" if skip_unreadable else ", or set input.skip_unreadable: true to skip them (listed in summary.json)"
        )
        raise UnreadableInputError(
            f"--input: {len(unreadable)} of {len(source.files)} file(s) cannot be read, nothing was written: "
            + "; ".join(file.describe() for file in unreadable)
            + f". {remedy}"
        )
    readable = source.without(unreadable)
    return readable, first_pass(readable.lines(spark))


def count_lines(lines: DataFrame) -> int:
    """The simplest first pass (`read_whole`): every line counted."""
    return lines.count()


def _unreadable_files(spark: SparkSession, files: Sequence[str]) -> list[UnreadableFile]:
    """Each file read alone: the ones that fail, with their size and the root cause (only after a failed read)."""
    fs = FileSystem(spark)
    failed = []
    for name in files:
        try:
            spark.read.text(exact(name)).count()
        except Exception as err:
            try:
                size: int | None = fs.size(name)
            except Exception:
                size = None  # gone since it was listed
            failed.append(UnreadableFile(name, size, root_cause(err)))
    return failed


def root_cause(err: BaseException) -> str:
    """`Class: message` of the innermost cause of a JVM error (e.g. `java.io.EOFException: Unexpected end of
    input stream`), or of the Python error itself."""
    cause = getattr(err, "java_exception", None)
    if cause is None:
        return f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
    while cause.getCause() is not None:
        cause = cause.getCause()
    return f"{cause.getClass().getName()}: {cause.getMessage()}"


class RunFolder:
    """`OUT/run=ID/`: one writer at a time (a lease), checked before it is replaced, sealed with `_SUCCESS` last.

    Use `with folder.writing():` around the whole run: it takes the lease `OUT/_leases/run=ID.json` (or fails
    fast naming the holder), checks that what is already in the folder is an earlier attempt of the same job
    (nothing else is ever replaced), and releases the lease when the run ends, completed or failed. Inside,
    `clear()` removes the earlier attempt (`_SUCCESS` first, so a reader never sees `_SUCCESS` without the rest).
    """

    def __init__(self, spark: SparkSession, output: str, run_id: str, job: str, entries: Sequence[str]) -> None:
        """`entries`: the names a run of `job` writes directly in its folder (besides `_SUCCESS`, `_staging`)."""
        from jobs.lease import FileLease  # jobs.lease builds on this module

        self.path = run_folder(output, run_id)
        self.run_id = run_id
        self.job = job
        self.entries = frozenset([*entries, SUMMARY, SUCCESS_MARKER, STAGING])
        self._fs = FileSystem(spark)
        self.lease = FileLease(spark, run_lease(output, run_id), self.path, job, run_id)
        # Only the run folder gets a _SUCCESS marker, not each output inside it.
        spark.sparkContext._jsc.hadoopConfiguration().set("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")

    @contextmanager
    def writing(self) -> Iterator[RunFolder]:
        """Hold the lease while the run writes; the folder is checked first (the run calls `clear` when it is
        ready to write, so a run that stops on bad input leaves an earlier complete attempt in place).

        Raises:
            LeaseHeldError: another writer holds the lease (nothing is touched).
            InvalidArgumentError: the folder holds something a run of this job does not write.
        """
        with self.lease:
            self._check_replaceable()
            yield self

    def _check_replaceable(self) -> None:
        names = [name for name in self._fs.children(self.path) if not name.startswith(".")]  # `.crc` checksums
        if SUMMARY in names:
            job = json.loads(self._fs.read_text(f"{self.path}/{SUMMARY}") or "{}").get("job")
            if job != self.job:
                raise InvalidArgumentError(
                    f"--output: {self.path} holds a {job} run, not a {self.job} run; it is not replaced. "
                    "Choose another --output"
                )
        foreign = [name for name in names if name not in self.entries]
        if foreign:
            raise InvalidArgumentError(
                f"--output: {self.path} holds {', '.join(foreign[:5])}, which a {self.job} run does not write; "
                f"it is not replaced. Allowed: a folder of earlier {self.job} attempts only; choose another --output"
            )

    def clear(self) -> None:
        """Remove what an earlier attempt of this run wrote: `_SUCCESS` first, so no reader takes the rest as whole."""
        self._fs.delete(f"{self.path}/{SUCCESS_MARKER}")
        self._fs.delete(self.path)

    def write_text(self, name: str, lines: DataFrame, compression: str) -> str:
        """Write a one-column DataFrame as text files under `name/`."""
        target = f"{self.path}/{name}"
        lines.write.mode("overwrite").option("compression", compression).text(target)
        self._fs.mkdirs(target)  # an empty output is still a folder, so readers need no special case
        return target

    @property
    def staging(self) -> str:
        """Where a job writes partitioned output before `move_staged` puts each partition in its place."""
        return f"{self.path}/{STAGING}"

    def write_text_split(self, lines: DataFrame, folders: Sequence[str], compression: str, folder_column: str) -> None:
        """Write a (`folder_column`, text) DataFrame in one pass, each line under the run-folder path it names.

        One write instead of one per output (each of which would read the input again): Spark writes the lines
        partitioned by their folder into the staging folder, then `move_staged` moves them to their paths.
        (Concurrent writers instead of Spark's sort by folder, planned-write sort off: dedup of 1M events 15.6 vs
        17.4 s, inside this machine's noise; not adopted.)
        """
        lines.write.mode("overwrite").option("compression", compression).partitionBy(folder_column).text(self.staging)
        self.move_staged(folder_column, folders)

    def move_staged(self, column: str, folders: Sequence[str]) -> None:
        """Move every `column=VALUE/` partition under the staging folder to the run-folder path VALUE.

        Then the staging folder is removed, and each of `folders` exists even when nothing was written there.
        """
        prefix = f"{column}="
        for name in self._fs.children(self.staging):
            if name.startswith(prefix):
                target = f"{self.path}/{unquote(name.removeprefix(prefix))}"
                self._fs.mkdirs(target.rsplit("/", 1)[0])
                self._fs.rename(f"{self.staging}/{name}", target)
        self._fs.delete(self.staging)
        for folder in folders:
            self._fs.mkdirs(f"{self.path}/{folder}")

    def write_json(self, name: str, document: dict[str, Any]) -> str:
        return self.write_text_file(name, json.dumps(document, indent=2) + "\n")

    def write_text_file(self, name: str, text: str) -> str:
        """One small file in the run folder, written whole (UTF-8)."""
        target = f"{self.path}/{name}"
        self._fs.write_bytes(target, text.encode("utf-8"))
        return target

    def seal(self) -> None:
        """Mark the run complete. Written last, so its presence means every output is whole."""
        self._fs.write_bytes(f"{self.path}/{SUCCESS_MARKER}", b"")
