"""Reading a run's input: the files listed once, read whole before the run writes anything, unreadable ones named."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from pyspark.sql import DataFrame, SparkSession

from jobs.errors import InputNotFoundError, WinnowError
from jobs.fs import store
from jobs.fs.hadoop import FileSystem
from jobs.fs.paths import exact, listed_name, qualified

T = TypeVar("T")


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
