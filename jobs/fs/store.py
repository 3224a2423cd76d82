"""Files on local paths and on S3 (`s3://`, `s3a://`, `s3n://`), without Spark.

The few operations that must work outside a Spark driver too (the incremental planner runs in a Lambda
function before any EMR job starts): list a folder recursively with each file's size, modification time and
ETag; read, create-if-absent and delete one small file. Local paths use the OS, S3 paths boto3.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any
from urllib.parse import urlparse

from jobs.errors import DamagedFileError, InputNotFoundError, InvalidArgumentError

S3_SCHEMES = ("s3", "s3a", "s3n")


@dataclass(frozen=True)
class StoredFile:
    """One file as listed: its full path (the root's scheme kept), size, modification time and ETag."""

    path: str
    size: int
    modified_ms: int
    """Modification time, milliseconds since the epoch (UTC)."""
    etag: str | None = None
    """The S3 ETag (None on local paths)."""

    def same_content_as(self, other: StoredFile) -> bool:
        """True when nothing shows the file changed: same size and ETag on S3, same size and time elsewhere."""
        if self.size != other.size:
            return False
        if self.etag is not None and other.etag is not None:
            return self.etag == other.etag
        return self.modified_ms == other.modified_ms


def local_path(path: str) -> str | None:
    """The OS path of a local path or `file:` URI; None for any other scheme."""
    parsed = urlparse(path)
    return path.removeprefix("file://").removeprefix("file:") if parsed.scheme in ("", "file") else None


def s3_location(path: str) -> tuple[str, str] | None:
    """(bucket, key) of an S3 URI; None for any other path."""
    parsed = urlparse(path)
    return (parsed.netloc, parsed.path.lstrip("/")) if parsed.scheme in S3_SCHEMES else None


def supported(path: str) -> bool:
    return local_path(path) is not None or s3_location(path) is not None


def s3_client() -> Any:
    import boto3

    return boto3.client("s3")


def _s3_or_refuse(path: str) -> tuple[str, str]:
    """(bucket, key) of a path that is not local.

    Raises:
        InvalidArgumentError: the path is no S3 URI either.
    """
    location = s3_location(path)
    if location is None:
        raise InvalidArgumentError(f"given {path}; allowed here: a local path or an s3:// URI")
    return location


def hidden(relative: str) -> bool:
    """True when a segment of a path relative to a listed root starts with `_` or `.` (markers, checksums,
    temporary folders of writers in progress), which Spark also skips. Such files are never read, nor listed."""
    return any(part.startswith(HIDDEN_PREFIXES) for part in relative.split("/") if part)


HIDDEN_PREFIXES = ("_", ".")
GLOB_CHARACTERS = re.compile(r"([\\*?\[\]{}])")
"""The characters Hadoop's GlobPattern reads as a pattern (`paths.exact` escapes them)."""
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(?=/)")
GLOB_ON_COLON = " (nor one of \\*?[]{} on a path that holds ':')"
_GLOB_CAUSE = "one of \\*?[]{} in a path that also holds ':', which Hadoop reads as a URI scheme"
IN_PROGRESS_SUFFIXES = ("._COPYING_", ".tmp", ".filepart")
"""Names of uploads still being written, renamed when done: Hadoop's `fs -put`/`distcp`, most writers that
rename into place, WinSCP. Hadoop's reader skips `._COPYING_` too."""


def in_progress(path: str) -> bool:
    """True when a file's name says it is an upload in progress (`IN_PROGRESS_SUFFIXES`): visible, not read yet."""
    return path.rsplit("/", 1)[-1].endswith(IN_PROGRESS_SUFFIXES)


@dataclass(frozen=True)
class Listing:
    """The files of an input root a run may read, and the visible ones it leaves for a later run."""

    files: tuple[StoredFile, ...]
    in_progress: tuple[StoredFile, ...] = ()
    """Uploads in progress (`in_progress`): not read, not recorded as read; listed in `summary.json`."""

    @property
    def paths(self) -> list[str]:
        return [file.path for file in self.files]

    def nothing_to_read(self, option: str, root: str) -> InputNotFoundError:
        """The error of an input that holds no file to read (the uploads in progress named)."""
        return InputNotFoundError(
            f"{option}: {root} holds no input files (names starting with _ or . are skipped){self.note()}; "
            "nothing to do"
        )

    def note(self) -> str:
        """`; N upload(s) in progress left for a later run: …` when there are any, else ``."""
        if not self.in_progress:
            return ""
        names = ", ".join(file.path for file in self.in_progress[:5])
        return f"; {len(self.in_progress)} upload(s) in progress left for a later run: {names}"


def unreadable_names(root: str, paths: Sequence[str]) -> dict[str, str]:
    """The paths Hadoop cannot read by name, each with why: a `:` in a name below `root` (or in the root file's own
    name), which Hadoop takes for a URI scheme when it joins the name to its folder (e.g. the `.NAME.crc` checksum
    path); a glob character (`\\*?[]{}`) in a path under a root that holds `:` (Spark is handed it escaped, and
    Hadoop's globber then reads each name of the path on its own, see `paths.exact`); a name that is not UTF-8,
    which Java cannot name (its local listing leaves such a file out without a word)."""
    base = root.rstrip("/")
    colon_root = ":" in SCHEME.sub("", base)
    refused = {}
    for path in paths:
        relative = path[len(base) :] if path.startswith(base + "/") else path.rsplit("/", 1)[-1]
        if not utf8(path):
            refused[path] = "a name that is not UTF-8, which Java cannot name"
        elif ":" in relative:
            refused[path] = "':' in a name under the input folder, which Hadoop reads as a URI scheme"
        elif colon_root and GLOB_CHARACTERS.search(SCHEME.sub("", path)):
            refused[path] = _GLOB_CAUSE
    return refused


def utf8(path: str) -> bool:
    """True when `path` is UTF-8 text (Python holds a name of other bytes as lone surrogates: `os.fsdecode`)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(path: str) -> str:
    """`path` for a message: a byte that is not UTF-8 shown as `\\xNN`, the rest as is."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def refuse_unreadable_names(root: str, paths: Sequence[str], option: str = "--input") -> None:
    """Raises: InvalidArgumentError: a path of `unreadable_names`, each named (the run writes nothing)."""
    refused = unreadable_names(root, paths)
    if refused:
        causes = [
            f"{', '.join(printable(path) for path in named[:5])} ({why})"
            for why in dict.fromkeys(refused.values())
            for named in [[path for path, cause in refused.items() if cause == why]]
        ]
        raise InvalidArgumentError(
            f"{option}: {len(refused)} file name(s) cannot be read: {'; '.join(causes)}; allowed: UTF-8 names "
            f"without ':'{GLOB_ON_COLON if _GLOB_CAUSE in refused.values() else ''}. Rename or move them; nothing "
            "was written"
        )


def list_input(root: str, option: str = "--input") -> Listing:
    """The input files under `root` (`list_files`; a root that is a file: itself), every one of which can be read
    by its name, apart from the uploads in progress. The one listing of every mode: plain and incremental runs
    and the checks before Spark read exactly these files (see docs/incremental.md, "Which files are input").

    Raises:
        InvalidArgumentError: `root` is neither local nor S3, or a file's name cannot be read (see `unreadable_names`).
    """
    files = [file for file in list_files(root) if not hidden(file.path.rsplit("/", 1)[-1])]  # the root's own name
    listing = Listing(
        tuple(file for file in files if not in_progress(file.path)),
        tuple(file for file in files if in_progress(file.path)),
    )
    refuse_unreadable_names(root, listing.paths, option)
    return listing


def list_files(root: str) -> list[StoredFile]:
    """Every file under `root` (recursively), hidden ones left out, sorted by path; [] when there is none.

    Raises:
        InvalidArgumentError: `root` is neither local nor S3.
    """
    return sorted(_files(root), key=lambda file: file.path)


def larger_than(root: str, limit: int) -> bool:
    """True when the input files under `root` (`list_input`'s: uploads in progress left out) hold more than `limit`
    bytes, a compressed file (`COMPRESSED_SUFFIXES`) counted at COMPRESSION_RATIO times its size; listed only until
    the sum passes `limit`. A missing root holds nothing.

    Raises:
        InvalidArgumentError: `root` is neither local nor S3.
    """
    total = 0
    for file in _files(root):
        if in_progress(file.path) or hidden(file.path.rsplit("/", 1)[-1]):
            continue
        total += file.size * (COMPRESSION_RATIO if file.path.endswith(COMPRESSED_SUFFIXES) else 1)
        if total > limit:
            return True
    return False


COMPRESSED_SUFFIXES = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst")
"""The suffixes of the files Hadoop's codecs unpack as they are read."""
COMPRESSION_RATIO = 10
"""About how much an enriched TSV file grows when unpacked."""


def _files(root: str) -> Iterator[StoredFile]:
    """The files under `root` (or `root`, a file), hidden ones left out, in no set order, listed as they are read."""
    local = local_path(root)
    if local is not None:
        if os.path.isfile(local):
            stat = os.stat(local)
            yield StoredFile(root, stat.st_size, stat.st_mtime_ns // 1_000_000)
        elif os.path.isdir(local):
            for full in _walk(local):
                stat = os.stat(full)
                yield StoredFile(full, stat.st_size, stat.st_mtime_ns // 1_000_000)
        return
    bucket, key = _s3_or_refuse(root)
    scheme = urlparse(root).scheme
    prefix = key if key.endswith("/") or not key else key + "/"
    found = False
    for page in s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if item["Key"].endswith("/") or hidden(item["Key"][len(prefix) :]):
                continue  # folder markers, hidden files
            modified = int(item["LastModified"].astimezone(UTC).timestamp() * 1000)
            found = True
            yield StoredFile(f"{scheme}://{bucket}/{item['Key']}", item["Size"], modified, item["ETag"])
    if not found and key and not key.endswith("/"):  # a single object
        head = _head(bucket, key)
        if head is not None:
            modified = int(head["LastModified"].astimezone(UTC).timestamp() * 1000)
            yield StoredFile(root, head["ContentLength"], modified, head["ETag"])


def _walk(local: str) -> Iterator[str]:
    """The paths of the files under a local folder, hidden names left out. Symlinked folders are followed, as
    Hadoop's local file system (Spark) follows them; a link back to a folder above it is not (it would repeat its
    files forever). A folder that cannot be listed raises, rather than leaving its files out unsaid."""
    above = {local: frozenset({os.path.realpath(local)})}
    for folder, subfolders, names in os.walk(local, onerror=_raise, followlinks=True):
        seen = above.pop(folder)
        kept = []
        for name in subfolders:
            real = os.path.realpath(os.path.join(folder, name))
            if not name.startswith(HIDDEN_PREFIXES) and real not in seen:
                kept.append(name)
                above[os.path.join(folder, name)] = seen | {real}
        subfolders[:] = kept
        yield from (os.path.join(folder, name) for name in names if not name.startswith(HIDDEN_PREFIXES))


def _raise(err: OSError) -> None:
    raise err


def children(folder: str) -> list[str]:
    """The names directly under `folder` (files and folders), sorted; [] when there is none.

    Raises:
        InvalidArgumentError: `folder` is neither local nor S3.
    """
    local = local_path(folder)
    if local is not None:
        return sorted(os.listdir(local)) if os.path.isdir(local) else []
    bucket, key = _s3_or_refuse(folder)
    prefix = key.rstrip("/") + "/" if key else ""
    names: set[str] = set()
    for page in s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
        names.update(common["Prefix"][len(prefix) :].rstrip("/") for common in page.get("CommonPrefixes", []))
        names.update(item["Key"][len(prefix) :] for item in page.get("Contents", []))
    return sorted(name for name in names if name)


def subfolders(folder: str) -> list[str]:
    """The names of the folders directly under `folder`, hidden ones too, sorted; [] when there is none (on S3: the
    prefixes directly under it that hold an object, whatever its name).

    Raises:
        InvalidArgumentError: `folder` is neither local nor S3.
    """
    local = local_path(folder)
    if local is not None:
        return [name for name in children(folder) if os.path.isdir(os.path.join(local, name))]
    bucket, key = _s3_or_refuse(folder)
    prefix = key.rstrip("/") + "/" if key else ""
    names: set[str] = set()
    for page in s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/"):
        names.update(common["Prefix"][len(prefix) :].rstrip("/") for common in page.get("CommonPrefixes", []))
    return sorted(name for name in names if name)


def _head(bucket: str, key: str) -> dict[str, Any] | None:
    """HeadObject's answer, or None when the object does not exist (any other error is raised: access denied
    must not pass for an empty input)."""
    client = s3_client()
    try:
        head: dict[str, Any] = client.head_object(Bucket=bucket, Key=key)
    except client.exceptions.ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        raise
    return head


def read_bytes(path: str) -> bytes | None:
    """The content of `path`, or None when it does not exist."""
    local = local_path(path)
    if local is not None:
        try:
            with open(local, "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
    location = _s3_or_refuse(path)
    client = s3_client()
    try:
        body: bytes = client.get_object(Bucket=location[0], Key=location[1])["Body"].read()
    except client.exceptions.NoSuchKey:
        return None
    return body


def read_json(path: str, way_out: str) -> Any:
    """The JSON document at `path`, or None when there is none.

    Raises:
        DamagedFileError: the file is there and not whole JSON (emptied, cut, a stray file of another kind): named
            with its cause and `way_out` (never read as an empty document).
    """
    data = read_bytes(path)
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError as err:  # not JSON, or not UTF-8
        damage = "empty" if not data.strip() else f"not JSON: {err}"
        raise DamagedFileError(f"{path} is damaged ({damage}); {way_out}") from None


def exists(path: str) -> bool:
    local = local_path(path)
    if local is not None:
        return os.path.exists(local)
    return _head(*_s3_or_refuse(path)) is not None


def _written_beside(local: str, data: bytes) -> str:
    """`data` written whole and synced to a hidden temporary file in `local`'s folder (created if need be), to
    be moved or linked into place; its path."""
    folder = os.path.dirname(local) or "."
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(folder, f".{os.path.basename(local)}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:  # a full disk, say: the file in place stays as it was, and nothing is left beside it
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise
    return temporary


def create_if_absent(path: str, data: bytes) -> bool:
    """Create `path` holding `data` unless it exists: True when this call created it, False when it existed.

    Exclusive against concurrent callers: on local paths the file is written whole under a temporary name and
    linked into place (link() is atomic and fails if the name exists); on S3 a conditional write
    (`If-None-Match: *`).
    """
    local = local_path(path)
    if local is not None:
        temporary = _written_beside(local, data)
        try:
            os.link(temporary, local)
        except FileExistsError:
            return False
        finally:
            os.remove(temporary)
        return True
    location = _s3_or_refuse(path)
    client = s3_client()
    try:
        client.put_object(Bucket=location[0], Key=location[1], Body=data, IfNoneMatch="*")
    except client.exceptions.ClientError as err:
        # 412: the object exists; 409: a concurrent conditional write to the same key is in progress.
        if err.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "ConditionalRequestConflict"):
            raise
        # A retry of our own write whose first answer was lost also gets 412: the object is then ours (the
        # documents written here are unique: they carry a random token or id).
        return read_bytes(path) == data
    return True


def write_bytes(path: str, data: bytes) -> None:
    """Write `path` whole (replacing it): on local paths a temporary file moved into place."""
    local = local_path(path)
    if local is not None:
        os.replace(_written_beside(local, data), local)
        return
    location = _s3_or_refuse(path)
    s3_client().put_object(Bucket=location[0], Key=location[1], Body=data)


def delete(path: str) -> None:
    """Delete one file; nothing happens when it does not exist."""
    local = local_path(path)
    if local is not None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(local)
        return
    location = _s3_or_refuse(path)
    s3_client().delete_object(Bucket=location[0], Key=location[1])


def delete_folder(path: str) -> None:
    """Delete a folder and everything in it, hidden files included; nothing happens when it does not exist."""
    local = local_path(path)
    if local is not None:
        if os.path.isdir(local):
            shutil.rmtree(local)
        return
    bucket, key = _s3_or_refuse(path)
    prefix = key.rstrip("/") + "/"
    client = s3_client()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
        if keys:  # a page holds at most 1,000 keys, as many as one DeleteObjects call takes
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
