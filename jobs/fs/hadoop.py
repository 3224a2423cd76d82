"""The few Hadoop FileSystem calls the jobs need, through the Spark JVM: the same code serves local folders and
`s3://` prefixes on EMR."""

from __future__ import annotations

import uuid
from typing import Any

from pyspark.sql import SparkSession

from jobs.errors import WinnowError
from jobs.fs import store


class UndeletableError(WinnowError):
    """A file or folder a job must remove is still there after Hadoop's delete."""

    exit_code = 1


class FileSystem:
    """The few Hadoop FileSystem calls the jobs need, on any path Spark can reach."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._jvm: Any = spark.sparkContext._jvm
        self._conf: Any = spark.sparkContext._jsc.hadoopConfiguration()

    def resolve(self, path: str) -> tuple[Any, Any]:
        hpath = self._jvm.org.apache.hadoop.fs.Path(path)
        return hpath.getFileSystem(self._conf), hpath

    def exists(self, path: str) -> bool:
        fs, hpath = self.resolve(path)
        return bool(fs.exists(hpath))

    def delete(self, path: str) -> None:
        """Remove a file or folder (and all in it); nothing happens when it does not exist.

        Raises:
            UndeletableError: it is still there (Hadoop's local delete skips what Java cannot name or may not
                remove, and says only `false`).
        """
        fs, hpath = self.resolve(path)
        if not fs.delete(hpath, True) and fs.exists(hpath):
            raise UndeletableError(
                f"{path} could not be removed: something in it cannot be (no permission, or a name that is not "
                "UTF-8, which Java cannot name). Remove it yourself, then run again"
            )

    def mkdirs(self, path: str) -> None:
        fs, hpath = self.resolve(path)
        fs.mkdirs(hpath)

    def children(self, path: str) -> list[str]:
        """Names of all the entries directly under `path`, sorted; [] if it does not exist."""
        fs, hpath = self.resolve(path)
        if not fs.exists(hpath):
            return []
        return sorted(str(status.getPath().getName()) for status in fs.listStatus(hpath))

    def rename(self, source: str, target: str) -> None:
        """Move `source` to `target` (a folder move; on S3 a copy then a delete)."""
        fs, hsource = self.resolve(source)
        _, htarget = self.resolve(target)
        if not fs.rename(hsource, htarget):
            raise OSError(f"could not rename {source} to {target}")

    def read_text(self, path: str) -> str:
        fs, hpath = self.resolve(path)
        stream = fs.open(hpath)
        try:
            data: bytes = stream.readAllBytes()
        finally:
            stream.close()
        return data.decode("utf-8")

    def size(self, path: str) -> int:
        fs, hpath = self.resolve(path)
        return int(fs.getFileStatus(hpath).getLen())

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write `path` whole or not at all, replacing it: a reader, or a run killed during the write, finds the old
        file, no file, or the new one, never part of it.

        Locally the data goes to a temporary file beside, then `os.replace` (`store.write_bytes`); Hadoop's
        `.NAME.crc` is removed first, so Hadoop's reader takes the new file unchecked rather than failing on a stale
        checksum. On S3 Hadoop's create is one PUT at `close()`, whole already. Elsewhere (HDFS) beside, then rename.
        """
        if store.local_path(path) is not None:
            parent, _, name = path.rpartition("/")
            store.delete(f"{parent}/.{name}.crc" if parent else f".{name}.crc")
            store.write_bytes(path, data)
            return
        fs, hpath = self.resolve(path)
        if store.s3_location(path) is not None:
            self._create(fs, hpath, data)
            return
        parent, _, name = path.rpartition("/")
        _, htemporary = self.resolve(f"{parent}/.{name}.{uuid.uuid4().hex}.tmp")
        self._create(fs, htemporary, data)
        fs.delete(hpath, False)  # HDFS's rename does not replace a file
        if not fs.rename(htemporary, hpath):
            fs.delete(htemporary, False)
            raise OSError(f"could not rename {htemporary} to {path}")

    @staticmethod
    def _create(fs: Any, hpath: Any, data: bytes) -> None:
        stream = fs.create(hpath, True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()
