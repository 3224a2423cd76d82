"""`python -m tests.pipeline.barrier JOB …`: the command line with a barrier, so a test starts a second writer at
exactly the point it means.

With BARRIER_VARIABLE set to a folder, a writer that took its lease creates `held` there and waits (at most
BARRIER_SECONDS) for `go`. Production code has no such hook: this module wraps `Lease.acquire` before it runs the
command line. (Two table inserts racing for one commit are raced in-process: `tests/pipeline/test_table.py`.)
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from jobs.fs.lease import Lease
from jobs.runtime.cli import main

BARRIER_VARIABLE = "WINNOW_TEST_LEASE_BARRIER"
BARRIER_SECONDS = 300


def wait_at_barrier() -> None:
    folder = Path(os.environ[BARRIER_VARIABLE])
    (folder / "held").touch()
    deadline = time.monotonic() + BARRIER_SECONDS
    while not (folder / "go").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{BARRIER_VARIABLE}: no {folder}/go within {BARRIER_SECONDS} s")
        time.sleep(0.05)


def with_barrier_after(method: Any) -> Any:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = method(*args, **kwargs)
        wait_at_barrier()
        return result

    return wrapped


if __name__ == "__main__":
    Lease.acquire = with_barrier_after(Lease.acquire)  # type: ignore[method-assign]
    raise SystemExit(main())
