"""Reading a run's input: the files listed once, read whole before the run writes anything, unreadable ones named."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from jobs.errors import InputNotFoundError, WinnowError
from jobs.frames import local_frame
from jobs.fs import store
from jobs.fs.hadoop import FileSystem
from jobs.fs.paths import exact, listed_name, qualified
from jobs.fs.store import StoredFile

T = TypeVar("T")


def require_input(spark: SparkSession, path: str) -> None:
    """Raises: InputNotFoundError: the path does not exist."""
    if not FileSystem(spark).exists(path):
        raise InputNotFoundError(f"--input: {path} does not exist")


def read_lines(spark: SparkSession, path: str) -> DataFrame:
    """All lines of a file, or of every file under a folder (plain or gzip, by file extension), as `list_input`
    lists them (names starting with `_` or `.`, and uploads in progress, are skipped).

    Raises:
        InputNotFoundError: the path does not exist.
    """
    require_input(spark, path)
    return text_lines(spark, store.list_input(path).paths)


def text_lines(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """The lines (column `value`) of exactly these files, each read by its exact name: the one reader of text input.

    A line ends at `\n`; one `\r` before it (CRLF) is left out, and any other `\r` is data. Spark's default
    splits at a bare `\r` too, which cut a field holding one into two bad lines.
    """
    with _listing_tasks(spark):  # Spark lists the files as it builds the reader, not later
        lines = spark.read.option("lineSep", "\n").option("recursiveFileLookup", "true").text([exact(p) for p in paths])
    return lines.select(without_crlf_cr(F.col("value")).alias("value"))


def without_crlf_cr(line: Column) -> Column:
    """A line read up to `\n` (`lineSep`) without the `\r` of a CRLF ending; any other `\r` is data. A file's last
    line ending in `\r` loses it too (Spark does not say which line had no `\n`): read as a CRLF file cut before its
    last `\n`, as csv readers read it."""
    return F.when(line.endswith("\r"), F.substring(line, F.lit(1), F.length(line) - 1)).otherwise(line)


@contextlib.contextmanager
def _listing_tasks(spark: SparkSession) -> Iterator[None]:
    """Spark looks each named file up, in a job of one task per file past 32 files (10,000 files: 10,000 tasks,
    94-146 s on 2 cores against 7-10 s on the driver): at most two tasks per core here."""
    key = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
    before = spark.conf.get(key, None)
    spark.conf.set(key, str(max(2 * spark.sparkContext.defaultParallelism, 1)))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


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
    """The input of a run: the files listed under `path` once, those skipped as unreadable, and the uploads in
    progress left for a later run."""

    path: str
    files: tuple[str, ...]
    unreadable: tuple[UnreadableFile, ...] = ()
    frame: DataFrame | None = field(default=None, compare=False, repr=False)
    """The lines of `files` as listed (Spark keeps the listing in the plan): every read of the run uses it, so a
    file that arrives after the listing is neither read nor counted."""
    in_progress: tuple[StoredFile, ...] = ()

    def lines(self, spark: SparkSession) -> DataFrame:
        """The lines of the readable files (column `value`)."""
        return self.frame if self.frame is not None else text_lines(spark, self.files)

    def without(self, unreadable: Sequence[UnreadableFile]) -> Input:
        """This input less the files found unreadable (read by name from now on)."""
        skipped = {file.path for file in unreadable}
        kept = tuple(name for name in self.files if name not in skipped)
        return Input(self.path, kept, (*self.unreadable, *unreadable), in_progress=self.in_progress)

    def skipped_of(self, paths: Sequence[str]) -> dict[str, str]:
        """Those of `paths` (as `store` lists them) skipped as unreadable, each with its error."""
        errors = {file.path: file.error for file in self.unreadable}
        return {path: errors[qualified(path)] for path in paths if qualified(path) in errors}

    def summary(self) -> dict[str, Any]:
        """For `summary.json`: how many files were read, each file skipped with its size and error, and each upload
        in progress left for a later run with its size."""
        return {
            "files": len(self.files),
            "unreadable": [asdict(skipped) for skipped in self.unreadable],
            "in_progress": uploads_in_progress(self.in_progress),
        }


def listing_summary(listing: store.Listing) -> dict[str, Any]:
    """For a summary (`keyed`, `table insert`): how many files were read, and each upload in progress left for a
    later run with its size."""
    return {"files": len(listing.files), "in_progress": uploads_in_progress(listing.in_progress)}


def uploads_in_progress(files: Sequence[StoredFile]) -> list[dict[str, Any]]:
    return [{"path": qualified(file.path), "size": file.size} for file in files]


class InputListingError(WinnowError):
    """Spark lists other files than the ones it was handed (a name its reader skips): the run stops, unwritten."""

    exit_code = 1


def open_input(
    spark: SparkSession,
    path: str,
    listing: store.Listing | None = None,
    skipped: Sequence[UnreadableFile] = (),
    empty_allowed: bool = False,
) -> Input:
    """List the input files once: `store.list_input(path)`, or `listing` (an incremental run's ledger entry), each
    read by its exact name (`skipped`: those an earlier attempt of the run skipped as unreadable, not read again).

    Nothing is read yet: `read_whole` runs the job's first pass and stops the run on files that do not read whole.
    `empty_allowed`: a folder of no file is an input of no line (a completed dedup run's `good/` may hold none).

    Raises:
        InputNotFoundError: the path does not exist or holds no input files.
        InvalidArgumentError: a file's name cannot be read (`store.unreadable_names`).
        InputListingError: Spark lists other files than those handed to it.
    """
    if listing is None:
        require_input(spark, path)
        listing = store.list_input(path)
    files = tuple(sorted(qualified(name) for name in listing.paths))
    if not files and empty_allowed:
        return Input(path, (), tuple(skipped), frame=local_frame(spark, [], "value string", slices=1))
    if not files:
        raise listing.nothing_to_read("--input", path)
    store.refuse_unreadable_names(qualified(path), files)
    lines = text_lines(spark, listing.paths)
    _check_listed(path, files, lines)
    return Input(path, files, tuple(skipped), frame=lines, in_progress=listing.in_progress)


def read_listed(
    spark: SparkSession,
    root: str,
    paths: Sequence[str],
    fmt: str,
    schema: StructType | None = None,
    **options: str,
) -> DataFrame:
    """The files `paths` under `root` read in format `fmt` (`csv`, `text`, `json`, `parquet`) with the reader's
    `options` (and `schema`, when given), each by its exact name.

    Raises:
        InputListingError: Spark lists other files than those handed to it.
    """
    with _listing_tasks(spark):
        if schema is None:
            frame = spark.read.options(**options).format(fmt).load([exact(path) for path in paths])
        else:
            frame = spark.read.options(**options).schema(schema).format(fmt).load([exact(path) for path in paths])
    _check_listed(root, sorted(qualified(path) for path in paths), frame)
    return frame


def _check_listed(path: str, files: Sequence[str], lines: DataFrame) -> None:
    """Raises: InputListingError: Spark's listing of the files it was handed differs from them (the run would read
    other files than its plan and its ledger say)."""
    listed = {listed_name(name) for name in lines.inputFiles()}
    missing, extra = sorted(set(files) - listed), sorted(listed - set(files))
    if missing or extra:
        named = ", ".join([*missing[:3], *extra[:3]])
        raise InputListingError(
            f"--input: Spark lists {len(listed)} of the {len(files)} file(s) listed under {path} "
            f"({len(missing)} left out, {len(extra)} added: {named}); nothing was written. Rename the files it "
            "leaves out (a name Spark's reader skips) and run again"
        )


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
            text_lines(spark, [name]).count()
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
