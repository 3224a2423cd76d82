"""`OUT/run=ID/`: a run's folder, written by one writer at a time and complete only when `_SUCCESS` is in it (written
last)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

from pyspark.sql import DataFrame, SparkSession

from jobs.contract import COMPLETED_BEFORE, SUCCESS_MARKER, SUMMARY, Progress
from jobs.errors import DamagedFileError, InvalidArgumentError
from jobs.fs import store
from jobs.fs.hadoop import FileSystem
from jobs.fs.lease import FileLease
from jobs.fs.paths import written
from jobs.fs.runs import run_folder, run_lease

STAGING = "_staging"


class RunFolder:
    """`OUT/run=ID/`: one writer at a time (a lease), checked before it is replaced, sealed with `_SUCCESS` last.

    Use `with folder.writing():` around the whole run: it takes the lease `OUT/_leases/run=ID.json` (or fails
    fast naming the holder), checks that what is already in the folder is an earlier attempt of the same job
    (nothing else is ever replaced), and releases the lease when the run ends, completed or failed. Inside,
    `clear()` removes the earlier attempt (`_SUCCESS` first, so a reader never sees `_SUCCESS` without the rest).
    """

    def __init__(self, spark: SparkSession, output: str, run_id: str, job: str, entries: Sequence[str]) -> None:
        """`entries`: the names a run of `job` writes directly in its folder (besides `_SUCCESS`, `_staging`)."""
        self.path = run_folder(output, run_id)
        self.run_id = run_id
        self.job = job
        self.entries = frozenset([*entries, SUMMARY, SUCCESS_MARKER, STAGING, COMPLETED_BEFORE])
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
        unnamable = _not_utf8_names(self.path)
        if unnamable:
            raise InvalidArgumentError(
                f"--output: {self.path} holds {', '.join(unnamable[:3])}: a name that is not UTF-8, which Spark "
                "can neither see nor remove; it is not replaced. Remove or rename it, or choose another --output"
            )
        names = [name for name in self._fs.children(self.path) if not name.startswith(".")]  # `.crc` checksums
        if SUMMARY in names:
            job = summary_job(self._fs, self.path, sealed=SUCCESS_MARKER in names)
            if job is not None and job != self.job:
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

    @property
    def sealed(self) -> bool:
        """The folder holds a completed run (`_SUCCESS`)."""
        return self._fs.exists(f"{self.path}/{SUCCESS_MARKER}")

    @property
    def completed_before(self) -> bool:
        """The folder holds a completed run, or held one and a redo of it has not sealed yet (`COMPLETED_BEFORE`)."""
        return self.sealed or self._fs.exists(f"{self.path}/{COMPLETED_BEFORE}")

    def completed_summary(self) -> dict[str, Any] | None:
        """The summary.json of the run this folder completed: its own while sealed, else the copy `clear` left in
        `COMPLETED_BEFORE` (None: it never completed, or its summary cannot be read)."""
        path = f"{self.path}/{SUMMARY if self.sealed else COMPLETED_BEFORE}"
        if not self._fs.exists(path):
            return None
        text = self._fs.read_text(path)
        try:
            document = json.loads(text or "null")
        except ValueError:  # a sealed folder's damaged summary is named by `_check_replaceable`
            document = None
        if not self.sealed and text and not isinstance(document, dict):  # cut: the run did complete (an empty one
            # is an older Winnow's marker, which held nothing)
            raise DamagedFileError(
                f"{path} is damaged (not a whole JSON document): it is the summary.json of run {self.run_id}, which completed, kept while "
                "a redo of it has not sealed; without it the redo could not be held to the manifest and input the run "
                "completed with. Restore it from a copy (or put the run's summary.json from a backup in its place), "
                "then run again; nothing was written"
            )
        return document if isinstance(document, dict) else None

    def clear(self) -> None:
        """Remove what an earlier attempt of this run wrote: `_SUCCESS` first, so no reader takes the rest as whole.
        A completed run's folder gets `COMPLETED_BEFORE` (a copy of its summary.json) before its `_SUCCESS` goes, and
        keeps it until `seal`."""
        marker = f"{self.path}/{COMPLETED_BEFORE}"
        if self.sealed:
            summary = f"{self.path}/{SUMMARY}"
            self._fs.write_bytes(marker, self._fs.read_text(summary).encode() if self._fs.exists(summary) else b"")
        self._fs.delete(f"{self.path}/{SUCCESS_MARKER}")
        if not self._fs.exists(marker):
            self._fs.delete(self.path)
            return
        for name in self._fs.children(self.path):
            if name != COMPLETED_BEFORE:
                self._fs.delete(f"{self.path}/{name}")

    def write_text(self, name: str, lines: DataFrame, compression: str) -> str:
        """Write a one-column DataFrame as text files under `name/`."""
        target = f"{self.path}/{name}"
        lines.write.mode("overwrite").option("compression", compression).text(written(target))
        self._fs.mkdirs(target)  # an empty output is still a folder, so readers need no special case
        return target

    @property
    def staging(self) -> str:
        """Where a job writes partitioned output before `move_staged` puts each partition in its place."""
        return f"{self.path}/{STAGING}"

    def write_text_split(
        self,
        lines: DataFrame,
        folders: Sequence[str],
        compression: str,
        folder_column: str,
        progress: Progress = lambda message: None,
    ) -> None:
        """Write a (`folder_column`, text) DataFrame in one pass, each line under the run-folder path it names.

        One write instead of one per output (each of which would read the input again): Spark writes the lines
        partitioned by their folder into the staging folder, then `move_staged` moves them to their paths.
        (Concurrent writers instead of Spark's sort by folder, planned-write sort off: no faster for dedup beyond
        this machine's noise; not adopted.)
        """
        lines.write.mode("overwrite").option("compression", compression).partitionBy(folder_column).text(
            written(self.staging)
        )
        progress(f"moving the written files from {self.staging} into place")
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
        self._fs.delete(f"{self.path}/{COMPLETED_BEFORE}")


def _not_utf8_names(path: str) -> list[str]:
    """The paths under a local folder whose names are not UTF-8 (shown as `store.printable`); [] on S3 (keys are
    UTF-8) or when there is no such folder."""
    local = store.local_path(path)
    if local is None or not os.path.isdir(local):
        return []
    found = []
    for folder, subfolders, names in os.walk(local):
        found += [store.printable(os.path.join(folder, name)) for name in [*subfolders, *names] if not store.utf8(name)]
    return sorted(found)


def summary_job(fs: FileSystem, folder: str, sealed: bool) -> str | None:
    """The job a run folder's `summary.json` names; None when it is damaged (empty, cut, not a summary) in a folder
    that is not `sealed` (no `_SUCCESS`).

    The summary is written whole (`FileSystem.write_bytes`), after every output and before `_SUCCESS`; a damaged one
    in an unsealed folder is an attempt that died while writing it (a version that wrote it in place): an
    incomplete attempt like any unsealed folder, whose job its other names tell (`RunFolder._check_replaceable`).

    Raises:
        DamagedFileError: the summary of a sealed folder is damaged (named: it is never read as a run of no kind).
    """
    path = f"{folder}/{SUMMARY}"
    try:
        document = json.loads(fs.read_text(path) or "null")
    except ValueError as err:  # not JSON, or not UTF-8
        document, damage = None, f"not JSON: {err}"
    else:
        damage = "empty" if document is None else "names no job"
    job = document.get("job") if isinstance(document, dict) else None
    if isinstance(job, str):
        return job
    if sealed:
        raise DamagedFileError(
            f"{path} is damaged ({damage}) in a completed run folder ({SUCCESS_MARKER}); nothing was replaced. "
            "Restore it from a copy and run again, or choose another --output"
        )
    return None
