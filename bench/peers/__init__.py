"""Peer implementations for the benchmark harness: the same work as Winnow's jobs, on other engines."""

from __future__ import annotations

from pathlib import Path


class UsageError(Exception):
    """A command-line argument is unusable (exit 2)."""


def input_files(path: Path) -> list[Path]:
    """The file, or every file under the folder (recursive, `_` / `.` names skipped as Spark does), sorted.

    Raises:
        UsageError: the path does not exist or holds no file.
    """
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise UsageError(f"--input: {path} does not exist")
    files = sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts)
    )
    if not files:
        raise UsageError(f"--input: {path} holds no files")
    return files
