"""Hadoop FileSystem calls beyond `jobs.fs.hadoop.FileSystem`: listing, reading, atomic and exclusive writes.

Everything goes through the Spark JVM's Hadoop FileSystem, so local folders and `s3://` prefixes behave the
same. Atomicity: a small file is written under a temporary name and renamed into place, so a reader sees
either nothing or the whole file. On S3 the rename is a copy; a single-object PUT is still all-or-nothing,
and an exclusive create is S3's conditional write (`jobs.fs.lease.create_if_absent`).
"""

from __future__ import annotations

import uuid

from jobs.errors import WinnowError
from jobs.fs.hadoop import FileSystem


class ConcurrentCommitError(WinnowError):
    """A commit file that should be new already exists: another writer committed first (exit 1, like any
    second writer)."""

    exit_code = 1


class Storage(FileSystem):
    """`FileSystem` plus visible-name listing / read / atomic write / exclusive create."""

    def list_names(self, path: str) -> list[str]:
        """Names of the entries directly under `path`, sorted; hidden (`.` / `_`) names skipped; [] if missing."""
        return [name for name in self.children(path) if not name.startswith((".", "_"))]

    def _write_temporary(self, path: str, text: str) -> str:
        parent, _, name = path.rpartition("/")
        temporary = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
        self.write_bytes(temporary, text.encode("utf-8"))
        return temporary

    def write_atomic(self, path: str, text: str) -> None:
        """Replace `path` with `text` so that a reader never sees a partial file."""
        temporary = self._write_temporary(path, text)
        fs, hpath = self.resolve(path)
        _, htemp = self.resolve(temporary)
        if fs.exists(hpath):
            fs.delete(hpath, False)
        if not fs.rename(htemp, hpath):
            fs.delete(htemp, False)
            raise OSError(f"could not rename {temporary} to {path}")

    def create_exclusive(self, path: str, text: str) -> None:
        """Write `path` only if it does not exist yet: O_EXCL locally, a conditional write on S3.

        Raises:
            ConcurrentCommitError: the file exists already.
        """
        from jobs.fs.lease import create_if_absent

        if not create_if_absent(self._spark, path, text.encode("utf-8")):
            raise ConcurrentCommitError(f"{path} exists already: another writer committed first")
