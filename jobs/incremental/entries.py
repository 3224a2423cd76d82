"""The ledger's numbered entries `OUT/_ledger/NNN.json`, one per incremental run, and the checks that each is as its
run left it.

Each entry records the digest of the entry before it (`previous`) when it is created; by then that entry's run has
completed, so the entry is final. A run's `summary.json` records the digest of its own entry as the run sealed. So
every entry but the newest is checked against the next one, and the newest against its run's summary: an entry
replaced by another valid one (two entries' files swapped, an older copy restored) stops the next run, named,
instead of sending the files it names to another run.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from jobs.contract import COMPLETED_BEFORE, SUCCESS_MARKER, SUMMARY
from jobs.errors import DamagedFileError
from jobs.fs import store
from jobs.fs.runs import LEASES, run_folder

LEDGER = "_ledger"
ENTRY_DIGITS = 20
READ_THREADS = 16
PREVIOUS = "previous"
"""An entry's field: the digest of the entry before it, as it was when this entry was created."""
_CONTENT = ("entry", "run_id", "input", "files", "skipped", PREVIOUS)
_RESTORE = "restore the version its run wrote (an earlier version of the bucket's object, or a backup)"


class Ledger:
    """The numbered entries under `OUT/_ledger/` (see `jobs.incremental.ledger`)."""

    def __init__(self, output: str) -> None:
        self.output = output.rstrip("/")
        self.path = f"{self.output}/{LEDGER}"

    def entry_path(self, number: int) -> str:
        return f"{self.path}/{number:0{ENTRY_DIGITS}d}.json"

    def entries(self) -> list[dict[str, Any]]:
        """Every entry, in number order (read in parallel: one small file per run)."""
        names = [
            file.path
            for file in store.list_files(self.path)
            if re.fullmatch(rf"[0-9]{{{ENTRY_DIGITS}}}\.json", file.path.rsplit("/", 1)[1])
        ]
        with ThreadPoolExecutor(READ_THREADS) as pool:
            documents = list(pool.map(_read_entry, names))
        return sorted((entry for entry in documents if entry is not None), key=lambda entry: entry["entry"])

    def complete(self, run_id: str) -> bool:
        return store.exists(f"{run_folder(self.output, run_id)}/{SUCCESS_MARKER}")

    def completed_once(self, run_id: str) -> bool:
        """The run completed, even if a redo of it is under way (`COMPLETED_BEFORE`)."""
        folder = run_folder(self.output, run_id)
        return self.complete(run_id) or store.exists(f"{folder}/{COMPLETED_BEFORE}")

    def leases(self) -> list[dict[str, Any]]:
        """The leases held on run folders of this output (see `jobs.fs.lease`), each with its `file`."""
        held = []
        for file in store.list_files(f"{self.output}/{LEASES}"):
            document = store.read_bytes(file.path)
            if document is not None:
                held.append({**json.loads(document), "file": file.path})
        return held

    def create(self, number: int, document: dict[str, Any]) -> bool:
        return store.create_if_absent(self.entry_path(number), document_bytes(document))

    def check_chain(self, entries: Sequence[dict[str, Any]]) -> None:
        """Each entry (numbered without gaps) is as its run left it: as the next entry, or its run's summary, recorded.

        Raises:
            DamagedFileError: an entry's content differs from the digest recorded of it, named with the way out.
        """
        linked = False
        for entry, following in itertools.pairwise(entries):
            recorded = following.get(PREVIOUS)
            if recorded is None and linked:
                raise DamagedFileError(
                    f"{self.entry_path(following['entry'])} is damaged (it lacks `{PREVIOUS}`, which every entry after "
                    f"{entries[0]['entry']} records); {_RESTORE}, or move it out of {LEDGER}/ if no run wrote it; then "
                    "run again; nothing was written"
                )
            linked = linked or recorded is not None
            if recorded is not None and recorded != entry_digest(entry):
                first, second = self.entry_path(entry["entry"]), self.entry_path(following["entry"])
                raise _disagree(f"{first} and {second}", "the second recorded the first as it was when its run started")
        newest = entries[-1] if entries else None
        if newest is not None:
            path, recorded = self._sealed_digest(newest["run_id"])
            if recorded is not None and recorded != entry_digest(newest):
                entry_path = self.entry_path(newest["entry"])
                raise _disagree(
                    f"{entry_path} and {path}", f"the summary recorded the entry as run {newest['run_id']} sealed"
                )
        _check_apart(self, entries)  # after the digests: a replaced entry is named with what recorded it

    def _sealed_digest(self, run_id: str) -> tuple[str, str | None]:
        """Where the run recorded its entry's digest as it sealed, and that digest: its summary.json, or the copy a
        stopped redo of it left in `COMPLETED_BEFORE` (None: not sealed, or sealed before digests were recorded)."""
        folder = run_folder(self.output, run_id)
        if self.complete(run_id):
            path = f"{folder}/{SUMMARY}"
            return path, _recorded_digest(store.read_json(path, f"{_RESTORE}, then run again"))
        path = f"{folder}/{COMPLETED_BEFORE}"
        try:  # empty when an earlier version wrote it
            return path, _recorded_digest(json.loads(store.read_bytes(path) or b"null"))
        except ValueError:
            return path, None


def _check_apart(ledger: Ledger, entries: Sequence[dict[str, Any]]) -> None:
    """Each file is read by one run: no two entries list it (a stray entry naming files another entry names would
    have them read again, by a redo of its run).

    Raises:
        DamagedFileError: two entries list one file, both named.
    """
    read_by: dict[str, int] = {}
    for entry in entries:
        for file in entry["files"]:
            first = read_by.setdefault(file["path"], entry["entry"])
            if first != entry["entry"]:
                raise _disagree(
                    f"{ledger.entry_path(first)} and {ledger.entry_path(entry['entry'])}",
                    f"each file is read by one run, and both list {file['path']}",
                )


def _disagree(files: str, how: str) -> DamagedFileError:
    return DamagedFileError(
        f"ledger files disagree: {files} ({how}, and it is not so now: one was replaced, two entries' files swapped, "
        "an older copy restored, or a stray entry added); reading them could give files to the wrong run. Restore "
        f"both as their runs wrote them (an earlier version of the bucket's objects, or a backup), or move out of "
        f"{LEDGER}/ an entry no run wrote; then run again; nothing was written"
    )


def entry_digest(entry: dict[str, Any]) -> str:
    """The SHA-256 of what an entry says its run read (number, run id, input, files, skipped) and of its link."""
    content = {name: entry.get(name) for name in _CONTENT}
    content["skipped"] = entry.get("skipped") or []
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _recorded_digest(summary: Any) -> str | None:
    """`input_files.incremental.entry_digest` of a run's summary (None for runs sealed before it was recorded)."""
    incremental = summary.get("input_files", {}).get("incremental") if isinstance(summary, dict) else None
    digest = incremental.get("entry_digest") if isinstance(incremental, dict) else None
    return digest if isinstance(digest, str) else None


def _read_entry(path: str) -> dict[str, Any] | None:
    """The ledger entry at `path` (None when it is gone).

    Raises:
        DamagedFileError: the file is not whole JSON, or not the entry its name numbers (a stray file).
    """
    way_out = (
        f"restore it from a copy (an entry names the files its run read: without it they would be read again), or "
        f"move it out of {LEDGER}/ if no run wrote it; then run again"
    )
    entry = store.read_json(path, way_out)
    if entry is None:
        return None
    number = int(path.rsplit("/", 1)[1].removesuffix(".json"))
    files = entry.get("files") if isinstance(entry, dict) else None
    if (
        not isinstance(entry, dict)
        or entry.get("entry") != number
        or not isinstance(entry.get("run_id"), str)
        or not isinstance(entry.get("input"), str)
        or not isinstance(files, list)
        or not all(isinstance(file, dict) and {"path", "size"} <= file.keys() for file in files)
    ):
        raise DamagedFileError(
            f"{path} is damaged (not ledger entry {number}: an entry, its run id, input and files expected); {way_out}"
        )
    return entry


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def document_bytes(entry: dict[str, Any]) -> bytes:
    return (json.dumps(entry, indent=1) + "\n").encode()
