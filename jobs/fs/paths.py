"""Paths: local or URI, compared, kept apart, and the one way a path reaches Spark.

Every path handed to Spark goes through one of three functions here (tests/test_spark_paths.py checks the jobs):
- `exact` for a reader (`spark.read….parquet/text/csv/json/load`): the reader takes a Hadoop glob;
- `written` for a writer (`….write….parquet/text/csv/json/save`): a writer does not glob, and takes the name as is;
- `table_options` and `location` for SQL tables (`CREATE TABLE … OPTIONS (…) LOCATION '…'`): an unpartitioned
  table's location is globbed when the table is created and read, unless its options say not to.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse, urlsplit

from jobs.errors import InvalidArgumentError
from jobs.fs import store

_GLOB_CHARACTERS, _SCHEME = store.GLOB_CHARACTERS, store.SCHEME


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


class UnreadablePathError(InvalidArgumentError):
    """A path Spark's reader cannot name exactly: a name holding `:` on a path that also holds a glob character."""


def exact(path: str) -> str:
    """A path for Spark's reader that names this file or folder only: the reader takes a string for a Hadoop glob,
    so each glob character (`\\*?[]{}`) is escaped with a backslash (Hadoop's GlobPattern; no other character
    is special, and `%` is not decoded).

    Raises:
        UnreadablePathError: the path is not UTF-8 (Java cannot name it), or it needs escaping and a name in it holds
            `:`; Hadoop's globber reads each name of such a path as a path of its own, and `c:d` as the URI scheme `c`
            (a bare `URISyntaxException`).
    """
    if not store.utf8(path):
        raise UnreadablePathError(
            f"{store.printable(path)}: a name that is not UTF-8 cannot be named by Spark (Java); allowed: UTF-8 "
            "names. Rename or move it"
        )
    escaped = _GLOB_CHARACTERS.sub(r"\\\1", path)
    if escaped != path and ":" in _SCHEME.sub("", path):
        raise UnreadablePathError(
            f"{path}: a name holding ':' on a path that also holds one of \\*?[]{{}} cannot be read by Spark (Hadoop "
            "reads the name as a URI scheme); allowed: ':' or those characters, not both. Rename or move the folder"
        )
    return escaped


def check_readable(option: str, path: str) -> None:
    """Refuse, before anything is written, a path Spark's reader cannot name (a job reads back what it writes).

    Raises:
        UnreadablePathError: see `exact`, with the option named.
    """
    try:
        exact(path)
    except UnreadablePathError as err:
        raise UnreadablePathError(f"{option}: given {err}; nothing was written") from None


def written(path: str) -> str:
    """A path for Spark's writer: as given. A writer does not glob (measured on Spark 4.0: `[2]`, `{a}`, `*?`,
    `\\`, `%41`, `%20`, spaces, `#`, `:`, `,`, `=`, quotes, NFC/NFD names and leading `.`/`_` are written as
    named, and partition discovery looks only below the path read); `exact` of it would name another folder."""
    return path


def table_options(**options: str) -> str:
    """The `OPTIONS (…)` clause of a table Spark writes or reads at a `location`: `options` (SQL-quoted), plus
    Spark's own switch that takes the location as a name, not a glob (else `CREATE TABLE` of a bucketed table
    under `manifests [eu]` lists `manifests e` and `manifests u`, and fails)."""
    pairs = {**options, _NO_GLOB: "false"}
    return "OPTIONS (" + ", ".join(f"{_sql_string(key)} {_sql_string(value)}" for key, value in pairs.items()) + ")"


def location(path: str) -> str:
    """The `LOCATION '…'` clause naming folder `path` (a local path as a `file://` URI; `\\` and `'` escaped, as a
    Spark SQL string literal needs)."""
    return f"LOCATION {_sql_string(qualified(path))}"


_NO_GLOB = "__globPaths__"  # Spark's DataSource.GLOB_PATHS_KEY (its file stream source's switch; 3.1 to 4.1)


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def listed_name(name: str) -> str:
    """A file's name as Spark lists it (`inputFiles()`: a URI, `%`-encoded) decoded once, as java.net.URI's getPath
    decodes it: `file:///in/late%20batch.tsv` -> `file:///in/late batch.tsv`."""
    parts = urlsplit(name)
    return f"{parts.scheme}://{parts.netloc}{unquote(parts.path)}"


def qualified(path: str) -> str:
    """A path as `listed_name` gives it: a local path as an absolute `file://` URI, any other unchanged."""
    local = store.local_path(path)
    return path if local is None else f"file://{os.path.abspath(local)}"
