"""Peer implementations for the benchmark harness: the same work as Winnow's jobs, on other engines."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


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


def peer_main(
    prog: str, threads: int | None, work: Callable[[], dict[str, Any]], failures: tuple[type[Exception], ...]
) -> int:
    """A peer's command line after parsing: check `--threads`, run `work`, print its result as one JSON line.

    Returns 0, 2 for a usage error, 1 when the work raised one of `failures` (each said in one line).
    """
    try:
        if threads is not None and threads < 1:
            raise UsageError(f"--threads: given {threads}; allowed: a whole number >= 1")
        result = work()
    except UsageError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    except failures as error:
        print(f"{prog}: failed: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0
