"""Hadoop FileSystem calls beyond `jobs.fs.hadoop.FileSystem`: listing, reading, atomic and exclusive writes.

Everything goes through the Spark JVM's Hadoop FileSystem, so local folders and `s3://` prefixes behave the
same. Atomicity: a small file is written whole or not at all (`FileSystem.write_bytes`: beside, then renamed into
place; on S3 one PUT), so a reader sees the old file or the whole new one; an exclusive create is a link locally
and S3's conditional write (`jobs.fs.lease.create_if_absent`).
"""

from __future__ import annotations

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

    def write_atomic(self, path: str, text: str) -> None:
        """Replace `path` with `text` so that a reader never sees a partial file (`FileSystem.write_bytes`)."""
        self.write_bytes(path, text.encode("utf-8"))

    def create_exclusive(self, path: str, text: str) -> None:
        """Write `path` only if it does not exist yet: O_EXCL locally, a conditional write on S3.

        Raises:
            ConcurrentCommitError: the file exists already.
        """
        from jobs.fs.lease import create_if_absent

        if not create_if_absent(self._spark, path, text.encode("utf-8")):
            raise ConcurrentCommitError(f"{path} exists already: another writer committed first")
