"""An incremental run's selection: the time window and caps, and a file's time.

A file's time, for the window, comes from its path: the Snowplow enriched archive's `run=YYYY-MM-DD-hh-mm-ss/`
folders or the date partitions `YYYY/MM/DD/HH/` (S3 loader, Firehose); a path with neither uses the file's
modification time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobs.config import InputConfig
from jobs.errors import InvalidArgumentError
from jobs.fs.store import StoredFile

_ARCHIVE_RUN = re.compile(r"(?:^|/)run=([0-9]{4})-([0-9]{2})-([0-9]{2})-([0-9]{2})-([0-9]{2})-([0-9]{2})(?:/|$)")
_DATE_HOUR = re.compile(r"(?:^|/)([0-9]{4})/([0-9]{2})/([0-9]{2})/([0-9]{2})/")


@dataclass(frozen=True)
class Window:
    """The time window and caps of one run's selection."""

    since: datetime | None = None
    """Files whose time is at or after this (UTC); None: no lower bound."""
    until: datetime | None = None
    """Files whose time is before this (UTC); None: no upper bound."""
    max_files: int | None = None
    """At most this many files per run; None: no cap."""
    max_bytes: int | None = None
    """At most this many bytes per run (at least one file is always taken); None: no cap."""
    skip_changed: bool = False
    """Leave out (and list) files that changed after a run read them, instead of stopping."""
    skip_unreadable: bool = False
    """A redo of a run that has not completed reads the files of its entry that are still there (those gone are
    listed as skipped), instead of stopping (`input.skip_unreadable`)."""

    def __post_init__(self) -> None:
        for name in ("max_files", "max_bytes"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InvalidArgumentError(f"{name}: given {value}; allowed: a whole number of 1 or more")
        if self.since and self.until and self.since >= self.until:
            raise InvalidArgumentError(
                f"since/until: given {self.since.isoformat()} to {self.until.isoformat()}; allowed: since before until"
            )

    def describe(self) -> dict[str, Any]:
        return {
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "max_files": self.max_files,
            "max_bytes": self.max_bytes,
        }


def parse_time(option: str, value: str) -> datetime:
    """`YYYY-MM-DD`, or an ISO 8601 date and time; UTC unless it names an offset.

    Raises:
        InvalidArgumentError: not such a time.
    """
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgumentError(
            f"{option}: given {value!r}; allowed: YYYY-MM-DD or YYYY-MM-DDTHH:MM[:SS][Z], UTC unless an offset is given"
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def window_from(
    config: InputConfig,
    *,
    since: str | None = None,
    until: str | None = None,
    max_files: int | None = None,
    max_bytes: int | None = None,
) -> Window:
    """The window of the config's `input` section, with the given options (command line) over it."""
    since, until = since or config.since, until or config.until
    return Window(
        since=parse_time("--since" if since != config.since else "input.since", since) if since else None,
        until=parse_time("--until" if until != config.until else "input.until", until) if until else None,
        max_files=max_files if max_files is not None else config.max_files,
        max_bytes=max_bytes if max_bytes is not None else config.max_bytes,
        skip_changed=config.skip_changed,
        skip_unreadable=config.skip_unreadable,
    )


def file_time(root: str, file: StoredFile) -> datetime:
    """The time of an input file: from `run=YYYY-MM-DD-hh-mm-ss/` or `YYYY/MM/DD/HH/` in its path below the
    root, else its modification time."""
    relative = file.path[len(root.rstrip("/")) :]
    for pattern in (_ARCHIVE_RUN, _DATE_HOUR):
        match = pattern.search(relative)
        if match:
            year, month, day, hour, minute, second = [int(part) for part in match.groups()] + [0] * (
                6 - len(match.groups())
            )
            try:
                return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
            except ValueError:
                continue  # digits that name no real time (month 13): not a partition
    return datetime.fromtimestamp(file.modified_ms / 1000, tz=UTC)


def within_caps(files: Sequence[StoredFile], window: Window) -> list[StoredFile]:
    """The first files within `max_files` and `max_bytes` (the first file always, so a big one still goes)."""
    chosen: list[StoredFile] = []
    total = 0
    for file in files:
        if window.max_files is not None and len(chosen) >= window.max_files:
            break
        if chosen and window.max_bytes is not None and total + file.size > window.max_bytes:
            break
        chosen.append(file)
        total += file.size
    return chosen


def window_note(window: Window) -> str:
    parts = [
        f"since {window.since.isoformat()}" if window.since else "",
        f"until {window.until.isoformat()}" if window.until else "",
    ]
    bounds = " ".join(part for part in parts if part)
    return f"; window {bounds}" if bounds else ""
