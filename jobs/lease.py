"""One writer at a time: an exclusive lease file, created only if absent.

A job that writes a run folder (or any other single-writer target) first creates its lease file. The create
is atomic and exclusive where the store allows it: a temporary file linked into place on local paths, S3's conditional write
(`If-None-Match: *`) on `s3://`, Hadoop's create-without-overwrite elsewhere (atomic on HDFS). The lease holds
who wrote it (job, run id, host, pid, start time) and a random token; a second writer finds it and fails
fast, naming the holder. The holder removes the lease when it ends, whether it completed or failed. A writer
that was killed (`kill -9`, a lost executor host) leaves its lease behind: the error names the lease file, and
removing it, once you know that writer is gone, lets the next run start (README "Reruns and concurrent runs").
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from jobs.errors import WinnowError
from jobs.lake import FileSystem

S3_SCHEMES = ("s3", "s3a", "s3n")
# Tests only: with this variable set to a folder, a writer that took its lease (or is about to commit a table
# change) creates `held` there and waits (at most BARRIER_SECONDS) for `go`, so a test can start a second
# writer at exactly that point.
BARRIER_VARIABLE = "WINNOW_TEST_LEASE_BARRIER"
BARRIER_SECONDS = 300


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


def _local_path(path: str) -> str | None:
    parsed = urlparse(path)
    return path.removeprefix("file:") if parsed.scheme in ("", "file") else None


def _s3_location(path: str) -> tuple[str, str] | None:
    parsed = urlparse(path)
    return (parsed.netloc, parsed.path.lstrip("/")) if parsed.scheme in S3_SCHEMES else None


def _s3_client() -> Any:
    import boto3

    return boto3.client("s3")


def create_if_absent(spark: SparkSession, path: str, data: bytes) -> bool:
    """Create `path` holding `data` unless it exists: True when this call created it, False when it existed.

    Exclusive against concurrent callers on local paths (link(), which fails if the name exists) and on S3
    (conditional write); elsewhere as
    exclusive as the file system's create-without-overwrite.
    """
    local = _local_path(path)
    if local is not None:
        # Written whole under a temporary name, then linked into place: link() is atomic and fails if the name
        # exists, so a reader never sees a half-written file and only one writer wins.
        folder = os.path.dirname(local) or "."
        os.makedirs(folder, exist_ok=True)
        temporary = os.path.join(folder, f".{os.path.basename(local)}.{uuid.uuid4().hex}.tmp")
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, local)
        except FileExistsError:
            return False
        finally:
            os.remove(temporary)
        return True
    s3 = _s3_location(path)
    if s3 is not None:
        client = _s3_client()
        try:
            client.put_object(Bucket=s3[0], Key=s3[1], Body=data, IfNoneMatch="*")
        except client.exceptions.ClientError as err:
            # 412: the object exists; 409: a concurrent conditional write to the same key is in progress.
            if err.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise
            # A retry of our own write whose first answer was lost also gets 412: the object is then ours (the
            # documents written here are unique: they carry a random token or id).
            return read_bytes(spark, path) == data
        return True
    fs = FileSystem(spark)
    hadoop_fs, hpath = fs._resolve(path)
    if hadoop_fs.exists(hpath):
        return False
    try:
        stream = hadoop_fs.create(hpath, False)
    except Exception as err:  # py4j wraps FileAlreadyExistsException
        if "FileAlreadyExistsException" in str(err):
            return False
        raise
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()
    return True


def read_bytes(spark: SparkSession, path: str) -> bytes | None:
    """The content of `path`, or None when it does not exist."""
    local = _local_path(path)
    if local is not None:
        try:
            with open(local, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
    s3 = _s3_location(path)
    if s3 is not None:
        client = _s3_client()
        try:
            body: bytes = client.get_object(Bucket=s3[0], Key=s3[1])["Body"].read()
        except client.exceptions.NoSuchKey:
            return None
        return body
    fs = FileSystem(spark)
    hadoop_fs, hpath = fs._resolve(path)
    if not hadoop_fs.exists(hpath):
        return None
    stream = hadoop_fs.open(hpath)
    try:
        return bytes(stream.readAllBytes())
    finally:
        stream.close()


def delete_file(spark: SparkSession, path: str) -> None:
    local = _local_path(path)
    if local is not None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(local)
        return
    s3 = _s3_location(path)
    if s3 is not None:
        _s3_client().delete_object(Bucket=s3[0], Key=s3[1])
        return
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
        wait_at_test_barrier()

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
        if data is not None and json.loads(data).get("token") == self.holder.token:
            self._delete()

    def __enter__(self) -> Lease:
        self.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


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
        return f"remove its lease {self.path}"


def wait_at_test_barrier() -> None:
    """Tests only (see BARRIER_VARIABLE): a point where a second writer can be started deterministically."""
    folder = os.environ.get(BARRIER_VARIABLE)
    if not folder:
        return
    with open(os.path.join(folder, "held"), "w"):
        pass
    deadline = time.monotonic() + BARRIER_SECONDS
    while not os.path.exists(os.path.join(folder, "go")):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{BARRIER_VARIABLE}: no {folder}/go within {BARRIER_SECONDS} s")
        time.sleep(0.05)
