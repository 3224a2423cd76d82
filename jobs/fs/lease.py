"""One writer at a time: an exclusive lease file, created only if absent.

A job that writes a run folder (or any other single-writer target) first creates its lease file. The create
is atomic and exclusive where the store allows it: a temporary file linked into place on local paths, S3's conditional write
(`If-None-Match: *`) on `s3://`, a temporary file renamed into place elsewhere (atomic on HDFS); the document is
whole or absent. The lease holds
who wrote it (job, run id, host, pid, start time) and a random token; a second writer finds it and fails
fast, naming the holder. The holder removes the lease when it ends, whether it completed or failed. A writer
that was killed (`kill -9`, a lost executor host) leaves its lease behind: the error names the lease file, and
removing it, once you know that writer is gone, lets the next run start (README "Reruns and concurrent runs").
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import uuid
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from pyspark.sql import SparkSession

from jobs.errors import WinnowError
from jobs.fs import store
from jobs.fs.hadoop import FileSystem


class LeaseNotReleasedError(WinnowError):
    """A completed run's lease could not be removed: the next run would find it held (exit 1)."""

    exit_code = 1


class LeaseHeldError(WinnowError):
    """Another writer holds the lease: the run stops before writing anything (exit 1)."""

    exit_code = 1


@dataclass(frozen=True)
class Holder:
    """Who holds a lease."""

    job: str
    run_id: str
    host: str
    pid: int
    started_at: str
    token: str

    @staticmethod
    def me(job: str, run_id: str) -> Holder:
        return Holder(job=job, run_id=run_id, host=socket.gethostname(), pid=os.getpid(),
                      started_at=datetime.now(UTC).isoformat(timespec="seconds"), token=uuid.uuid4().hex)  # fmt: skip

    def describe(self) -> str:
        return f"{self.job} run {self.run_id} (host {self.host}, pid {self.pid}, since {self.started_at})"


def create_if_absent(spark: SparkSession, path: str, data: bytes) -> bool:
    """Create `path` holding `data` unless it exists: True when this call created it, False when it existed.

    Exclusive against concurrent callers on local paths and S3 (`jobs.fs.store.create_if_absent`); on other
    file systems as exclusive as Hadoop's rename (atomic on HDFS). Written whole or not at all everywhere.
    """
    if store.supported(path):
        return store.create_if_absent(path, data)
    # Elsewhere (HDFS): written whole beside, then renamed, which fails when the name exists.
    fs = FileSystem(spark)
    hadoop_fs, hpath = fs.resolve(path)
    parent, _, name = path.rpartition("/")
    _, htemporary = fs.resolve(f"{parent}/.{name}.{uuid.uuid4().hex}.tmp")
    stream = hadoop_fs.create(htemporary, False)
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()
    created = bool(hadoop_fs.rename(htemporary, hpath))
    if not created:
        hadoop_fs.delete(htemporary, False)
    return created


def read_bytes(spark: SparkSession, path: str) -> bytes | None:
    """The content of `path`, or None when it does not exist."""
    if store.supported(path):
        return store.read_bytes(path)
    fs = FileSystem(spark)
    hadoop_fs, hpath = fs.resolve(path)
    if not hadoop_fs.exists(hpath):
        return None
    stream = hadoop_fs.open(hpath)
    try:
        return bytes(stream.readAllBytes())
    finally:
        stream.close()


def delete_file(spark: SparkSession, path: str) -> None:
    if store.supported(path):
        store.delete(path)
    else:
        FileSystem(spark).delete(path)


class Lease(ABC):
    """An exclusive lease on one target (a run folder, a manifest), held by this process while it writes.

    Use as a context manager: `with lease:` takes it (or raises LeaseHeldError) and always releases it.
    Subclasses say where the lease document lives: create it only if absent, read it, delete it.
    """

    def __init__(self, target: str, job: str, run_id: str) -> None:
        self.target = target
        self.holder = Holder.me(job, run_id)

    @abstractmethod
    def _create(self, document: bytes) -> bool:
        """Create the lease document unless one exists; True when this call created it."""

    @abstractmethod
    def _read(self) -> bytes | None:
        """The lease document, or None when there is none."""

    @abstractmethod
    def _delete(self) -> None:
        """Remove the lease document."""

    @abstractmethod
    def removal(self) -> str:
        """How a person removes a stale lease (for the message)."""

    def acquire(self) -> None:
        """Raises: LeaseHeldError: another writer holds it (named in the message, with the way out)."""
        if not self._create(json.dumps(asdict(self.holder), indent=2).encode("utf-8")):
            raise LeaseHeldError(
                f"{self.target} is being written by {self.current_holder()}; nothing was written. If that run is no "
                f"longer running (killed or crashed), {self.removal()} and run again"
            )

    def current_holder(self) -> str:
        """The holder as the lease document says, for messages."""
        data = self._read()
        if data is None:
            return "another writer (its lease is gone now: run again)"
        try:
            return Holder(**json.loads(data)).describe()
        except (ValueError, TypeError):
            return "an unknown writer (unreadable lease)"

    def release(self) -> None:
        """Remove the lease if it is still ours (a lease someone removed and another writer took is left alone)."""
        data = self._read()
        if data is not None and _token(data) == self.holder.token:
            self._delete()

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        """Release the lease. When the store that holds it is down, the way out must say so: a stopped run's error
        gets a note (its one line names the lease and how to remove it); a completed run stops here."""
        try:
            self.release()
        except Exception as err:
            cause = f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}"
            if error is None:
                raise LeaseNotReleasedError(
                    f"{self.target}: the run completed, and its lease could not be released ({cause}); once the store "
                    f"answers, {self.removal()} before the next run"
                ) from err
            error.add_note(  # the cause in short: its way out (rerun) is not this lease's
                f"Its lease on {self.target} could not be released as it stopped ({type(err).__name__}): before "
                f"running again, {self.removal()}"
            )


def _token(document: bytes) -> str | None:
    """The lease document's token; None for a document that is not one (cut, or another writer's in some other form)."""
    try:
        token = json.loads(document).get("token")
    except (ValueError, AttributeError):
        return None
    return token if isinstance(token, str) else None


class FileLease(Lease):
    """A lease file (local, `s3://`, or any Hadoop file system)."""

    def __init__(self, spark: SparkSession, path: str, target: str, job: str, run_id: str) -> None:
        super().__init__(target, job, run_id)
        self.spark = spark
        self.path = path

    def _create(self, document: bytes) -> bool:
        return create_if_absent(self.spark, self.path, document)

    def _read(self) -> bytes | None:
        return read_bytes(self.spark, self.path)

    def _delete(self) -> None:
        delete_file(self.spark, self.path)

    def removal(self) -> str:
        return f"remove its lease {shlex.quote(self.path)}"  # pasteable after `rm`
