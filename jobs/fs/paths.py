"""Paths: local or URI, compared, kept apart, and named exactly for Spark's reader (which takes a Hadoop glob)."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlparse, urlsplit

from jobs.errors import InvalidArgumentError
from jobs.fs import store

_GLOB_CHARACTERS = re.compile(r"([\\*?\[\]{}])")


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


def normalized(path: str) -> str:
    """`path` as one place is always named (`_normalized`): for keys derived from a path, such as a run's."""
    return _normalized(path)


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
