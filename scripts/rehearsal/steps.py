"""The rehearsal's steps: each prints one line with its time; a failure names its step and the log that tells more."""

from __future__ import annotations

import fcntl
import os
import re
import shlex
import subprocess
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

COMMAND_TIMEOUT = 900


class RehearsalError(Exception):
    """A step failed: what failed, and the log that tells more."""

    def __init__(self, message: str, log: Path | None = None) -> None:
        """The message says what was given and what was expected; the step is filled in by `Steps.step`."""
        super().__init__(message)
        self.log = log
        self.step = ""


@contextmanager
def holding(cache: Path) -> Iterator[None]:
    """This rehearsal as the one user of `cache`: a rehearsal clears its logs and rebuilds a venv it finds unfinished,
    which would be another rehearsal's work in progress. The lock goes with the process, however it ends.

    Raises:
        RehearsalError: another rehearsal holds `cache` (its pid named).
    """
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "a+", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "a process"
            error = RehearsalError(
                f"{cache} is in use by another rehearsal ({holder}); nothing was changed: run again once it has ended"
            )
            error.step = "cache"
            raise error from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}\n")
        lock.flush()
        yield


@dataclass
class Steps:
    """Runs named steps: one line each with its time; a failure names its step and log."""

    logs: Path

    @contextmanager
    def step(self, name: str) -> Iterator[list[str]]:
        """Yields a list the step may append details to (printed after its time).

        Raises:
            RehearsalError: the step failed; any other exception becomes one, its traceback in the step's log.
        """
        started, notes = time.monotonic(), list[str]()
        try:
            yield notes
        except RehearsalError as err:
            err.step = err.step or name
            raise
        except Exception as err:
            log = self.log(name)
            log.write_text(traceback.format_exc(), encoding="utf-8")
            failure = RehearsalError(f"{type(err).__name__}: {err}", log)
            failure.step = name
            raise failure from err
        detail = f" ({'; '.join(notes)})" if notes else ""
        print(f"rehearse: {name}: ok in {time.monotonic() - started:.1f} s{detail}", flush=True)

    def log(self, name: str) -> Path:
        """The log file of step `name` (`dedup` → logs/dedup.log), its folder created."""
        self.logs.mkdir(parents=True, exist_ok=True)
        return self.logs / (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ".log")


def run_logged(command: list[str], log: Path, *, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run a command, its output appended to `log`; the output (standard output, then standard error).

    Raises:
        RehearsalError: it exited non-zero or ran over COMMAND_TIMEOUT seconds.
    """
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {shlex.join(command)}\n")
        out.flush()
        try:
            # Apart, not merged: spark-submit copies the Python driver's output to its own in 1 KB pieces, and
            # merged with the JVM's log lines a probe's long answer line was cut by one of them.
            done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT,
                                  check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            raise RehearsalError(f"`{shlex.join(command[:3])} …` ran over {COMMAND_TIMEOUT} s", log) from None
        output = done.stdout + done.stderr
        out.write(output)
    if done.returncode != 0:
        errors = _ERROR_LINE.findall(output)
        cause = f" ({errors[-1].strip()})" if errors else ""
        raise RehearsalError(f"`{shlex.join(command[:3])} …` exited {done.returncode}{cause}; expected 0", log)
    return output


_ERROR_LINE = re.compile(r"^(?:[\w.]+(?:Error|Exception)|error): .*$", re.MULTILINE)
"""A Python exception's last line (`ModuleNotFoundError: No module named 'x'`) or a job's `error: …` line."""
