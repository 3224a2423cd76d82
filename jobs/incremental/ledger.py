"""Incremental input: each input file is read by one run, and by the same run on every retry.

The ledger `OUT/_ledger/` lies beside the run folders of the job that consumes the input (dedup). It is a log
of numbered entries (`00000000000000000001.json`, …), one per incremental run, each listing the files that run
reads with their size, modification time and ETag. An entry is written, create-if-absent, before its run
writes anything; the run's `_SUCCESS` completes it. So:

- a retry or redo of a run finds its own entry and reads exactly those files again (same input, same output);
- a new run reads the files under the input root that no entry lists, inside its time window, oldest first,
  at most `max_files` / `max_bytes` (a backlog is worked off over several runs);
- a new run starts only when every earlier entry's run has completed and no other run holds a lease on the
  output: a failed run is redone (its entry reused) before any later one, so its files are never skipped or
  read twice; and its id must be later than every run in the ledger (the manifest's "earlier means earlier");
- two planners racing for the same entry number: one creates it, the other stops (nothing written);
- with nothing new, nothing is written: the caller says "nothing to do";
- an entry that is not as its run left it stops every run, named (`jobs.incremental.entries`).

The window and caps are `jobs.incremental.window`'s. The module needs no Spark: the deployed pipeline plans in a Lambda function before it
starts an EMR job run, and the job then finds its entry.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from jobs.contract import SUCCESS_MARKER, SUMMARY
from jobs.errors import WinnowError
from jobs.fs import store
from jobs.fs.runs import run_folder
from jobs.fs.store import StoredFile
from jobs.incremental.entries import LEDGER, PREVIOUS, READ_THREADS, Ledger, document_bytes, entry_digest, now_iso
from jobs.incremental.window import Window, file_time, window_note, within_caps

GONE = "gone: not listed under the input root when the run was redone"
"""The error recorded for a file of a run's entry gone before the run completed (`_reuse`)."""


class NothingToDo(Exception):
    """No input file is new: the run is not started and nothing is written (exit 0)."""


class IncrementalRunError(WinnowError):
    """An incremental run cannot start now (an earlier run is unfinished or writing, or a later one exists, or
    an input file changed after a run read it): exit 1, nothing written."""

    exit_code = 1


class InputChangedError(IncrementalRunError):
    """Files changed while the run read them (an upload still being written): the run stops before `_SUCCESS`,
    and its redo reads them again (exit 1)."""


@dataclass(frozen=True)
class SkippedFile:
    """A file of a run's entry skipped as unreadable: not read, so not recorded as read (a later run takes it)."""

    file: StoredFile
    error: str

    @classmethod
    def of(cls, recorded: dict[str, Any]) -> SkippedFile:
        """From its ledger record: the file's fields and `error`."""
        return cls(
            StoredFile(**{name: value for name, value in recorded.items() if name != "error"}), recorded["error"]
        )

    def record(self) -> dict[str, Any]:
        return {**asdict(self.file), "error": self.error}


@dataclass(frozen=True)
class Plan:
    """What one run reads: its ledger entry and files, and what is left for later runs."""

    run_id: str
    entry: int
    files: tuple[StoredFile, ...]
    reused: bool
    """True when the entry was written by an earlier attempt of this run (a retry or redo)."""
    backlog_files: int = 0
    backlog_bytes: int = 0
    changed: tuple[str, ...] = field(default=())
    """Files left out because they changed after an earlier run read them (`skip_changed`)."""
    skipped: tuple[SkippedFile, ...] = field(default=())
    """Files of the entry an attempt of the run skipped as unreadable: a redo skips them again."""
    input_root: str = ""
    """The input root the files were listed under (listed again by `record_read`)."""
    output: str = ""
    """Where the ledger lies: `OUT` of `OUT/_ledger/`."""
    in_progress: tuple[StoredFile, ...] = field(default=())
    """Uploads in progress under the input root (`store.in_progress`): not in the entry, taken once renamed."""
    previous: str | None = None
    """The entry's link to the entry before it (`jobs.incremental.entries.PREVIOUS`)."""
    completed: bool = False
    """The run completed before this attempt (a redo): its entry is final, what it read is in a completed output."""

    @property
    def paths(self) -> list[str]:
        return [file.path for file in self.files]

    @property
    def listing(self) -> store.Listing:
        """What the run reads, as `jobs.fs.input.open_input` takes it."""
        return store.Listing(self.files, self.in_progress)

    def summary(self) -> dict[str, Any]:
        """For `summary.json` `input_files.incremental`."""
        return {
            "ledger_entry": self.entry,
            "reused_entry": self.reused,
            "files": len(self.files),
            "bytes": sum(file.size for file in self.files),
            "backlog_files": self.backlog_files,
            "backlog_bytes": self.backlog_bytes,
            "changed_files_skipped": list(self.changed),
            "entry_digest": self.digest,
        }

    @property
    def digest(self) -> str:
        """The digest of the entry as this plan's run leaves it (`entry_digest`), recorded in its summary."""
        return entry_digest(
            {
                "entry": self.entry,
                "run_id": self.run_id,
                "input": self.input_root,
                "files": [asdict(file) for file in self.files],
                "skipped": [file.record() for file in self.skipped],
                PREVIOUS: self.previous,
            }
        )


def plan_run(
    input_root: str, output: str, run_id: str, window: Window | None = None, completed_before: bool = False
) -> Plan:
    """The files run `run_id` reads: its own entry if it has one, else the new files, recorded in a new entry.

    `output` is where the consuming job writes its run folders (`OUT/run=ID/`); the ledger lies beside them.
    `completed_before`: the caller knows the run completed before (its manifest's register says so), whatever its
    folder holds now; an entry followed by another is a completed run's too (no run starts before the earlier ones
    completed).

    Raises:
        NothingToDo: no input file is new (nothing is written).
        IncrementalRunError: an earlier run is unfinished or writing, a later run is in the ledger, an input
            file changed after it was read (unless `window.skip_changed`), or another planner took the entry.
    """
    window = window or Window()
    ledger = Ledger(output)
    entries = ledger.entries()
    _check_whole(ledger, entries)
    ledger.check_chain(entries)
    own = [entry for entry in entries if entry["run_id"] == run_id]
    listing = store.list_input(input_root)  # a name Hadoop cannot read stops the run here, before the entry
    listed = listing.files
    if own:
        completed = completed_before or own[0] is not entries[-1] or ledger.completed_once(run_id)
        plan = _reuse(ledger, own[0], listed, completed, window.skip_unreadable)
        return dataclasses.replace(plan, in_progress=listing.in_progress)
    _check_can_start(ledger, entries, run_id)

    processed = {file["path"]: StoredFile(**file) for entry in entries for file in entry["files"]}
    changed = [
        file.path for file in listed if file.path in processed and not processed[file.path].same_content_as(file)
    ]
    if changed and not window.skip_changed:
        raise IncrementalRunError(
            f"--incremental: {len(changed)} input file(s) changed after an earlier run read them (size or "
            f"ETag/time differ from the ledger {ledger.path}): {', '.join(changed[:5])}. Restore them, or set "
            "input.skip_changed: true to leave them out (listed in summary.json); nothing was written"
        )
    new = [
        (time, file)
        for file in listed
        if file.path not in processed
        for time in [file_time(input_root, file)]
        if (window.since is None or time >= window.since) and (window.until is None or time < window.until)
    ]
    new.sort(key=lambda pair: (pair[0], pair[1].path))
    chosen = within_caps([file for _, file in new], window)
    if not chosen:
        raise NothingToDo(
            f"nothing to do: no new input files under {input_root} ({len(listed)} listed, "
            f"{len(processed)} read by earlier runs{window_note(window)}{listing.note()})"
        )
    number = (entries[-1]["entry"] if entries else 0) + 1
    backlog = [file for _, file in new[len(chosen) :]]
    previous = entry_digest(entries[-1]) if entries else None
    plan = Plan(run_id, number, tuple(chosen), False, len(backlog), sum(f.size for f in backlog), tuple(changed))
    plan = dataclasses.replace(
        plan, input_root=input_root, output=ledger.output, in_progress=listing.in_progress, previous=previous
    )
    document = {
        "entry": number,
        "run_id": run_id,
        "created_at": now_iso(),
        "input": input_root,
        "window": window.describe(),
        "files": [asdict(file) for file in chosen],
        PREVIOUS: previous,
    }
    if not ledger.create(number, document):
        raise IncrementalRunError(
            f"--incremental: another run took ledger entry {ledger.entry_path(number)} while run {run_id} was "
            "planning; nothing was written. Start this run again once that one is done"
        )
    return plan


def _reuse(
    ledger: Ledger, entry: dict[str, Any], listed: Sequence[StoredFile], completed: bool, skip_gone: bool
) -> Plan:
    """The plan of a retry or redo: the entry's files.

    A file replaced since is read as it is now only while the run has not completed (a truncated upload put
    right, the way to redo a run that stopped on it), and recorded again, so later runs do not take it as
    changed; a file gone since stops it, unless `skip_gone` (`input.skip_unreadable`): then it is moved to the
    entry's `skipped` (listed in summary.json; a later run takes it if it comes back). Once the run has completed,
    a redo must give its output again: a changed or gone file stops it, and its entry is never rewritten (an S3
    object uploaded again with the same content has the same ETag and a new time).

    Raises:
        IncrementalRunError: the run completed and a file it read has changed or gone since, or it has not and a
            file is gone (without `skip_gone`).
    """
    files = tuple(StoredFile(**file) for file in entry["files"])
    now = {file.path: file for file in listed}
    gone = [file for file in files if file.path not in now]
    current = tuple(now[file.path] for file in files if file.path in now)
    changed = [file.path for file in files if file.path in now and not file.same_content_as(now[file.path])]
    if (changed or gone) and completed:
        named = [*changed, *(f"{file.path} (gone)" for file in gone)]
        raise IncrementalRunError(
            f"--incremental: run {entry['run_id']} completed, and {len(named)} file(s) it read changed or went "
            f"away since (size or ETag/time differ from ledger entry {entry['entry']}, or not listed): "
            f"{', '.join(named[:5])}; a redo would not give its output again. Restore them; nothing was written"
        )
    if gone and not completed and not skip_gone:
        raise IncrementalRunError(
            f"--incremental: run {entry['run_id']} has not completed, and {len(gone)} file(s) of its ledger entry "
            f"{entry['entry']} went away since it listed them: {', '.join(file.path for file in gone[:5])}. Restore "
            "them, then run again; if they are gone for good, set input.skip_unreadable: true and run again: the "
            "redo reads the rest and lists them in summary.json (a later run takes them if they come back); nothing "
            "was written"
        )
    skipped = tuple(SkippedFile.of(recorded) for recorded in entry.get("skipped", []))
    if completed:
        current = files  # its entry is final (later entries link to it): the files as recorded, same content
    elif current != files:
        skipped = (*skipped, *(SkippedFile(file, GONE) for file in gone))
        revised = {**entry, "files": [asdict(file) for file in current], "revised_at": now_iso()}
        if gone:
            revised["skipped"] = [file.record() for file in skipped]
        store.write_bytes(ledger.entry_path(entry["entry"]), document_bytes(revised))
    return Plan(
        entry["run_id"],
        entry["entry"],
        current,
        True,
        skipped=skipped,
        input_root=entry["input"],
        output=ledger.output,
        previous=entry.get(PREVIOUS),
        completed=completed,
    )


def record_read(plan: Plan, unreadable: dict[str, str]) -> Plan:
    """After the run read its files, before `_SUCCESS`: the plan of what it read, its entry saying the same.

    Each file read must still be as its entry records it (a file that grew while it was read, an upload still being
    written, would leave an entry that disagrees with what the run read). The files skipped as `unreadable` (path ->
    error) are moved to the entry's `skipped`: not read, so a later run takes them once they read, and a redo of
    this run skips them again (so no two runs read them).

    Raises:
        InputChangedError: a file read changed or went away since it was listed, each named.
    """
    read = [file for file in plan.files if file.path not in unreadable]
    now = {file.path: file for file in store.list_files(plan.input_root)}
    changed = [file.path for file in read if file.path not in now or not file.same_content_as(now[file.path])]
    if changed:
        raise InputChangedError(
            f"--incremental: {len(changed)} input file(s) changed while run {plan.run_id} read them (size or "
            f"ETag/time differ from ledger entry {plan.entry}): {', '.join(changed[:5])}; nothing is sealed (no "
            f"_SUCCESS). Once the upload is done, redo the run (--run-id {plan.run_id} --incremental): it reads "
            "them again"
        )
    if not unreadable:
        return plan
    newly = [file.path for file in plan.files if file.path in unreadable]
    ledger = Ledger(plan.output)
    if newly and plan.completed:  # its entry is final: what it read is in a completed output
        raise InputChangedError(
            f"--incremental: run {plan.run_id} completed, and {len(newly)} file(s) it read cannot be read now: "
            f"{', '.join(newly[:5])}; a redo would not give its output again. Restore them, then redo the run "
            f"(--run-id {plan.run_id} --incremental); nothing is sealed (no _SUCCESS)"
        )
    skipped = (*plan.skipped, *(SkippedFile(file, unreadable[file.path]) for file in plan.files if file not in read))
    entry = json.loads(store.read_bytes(ledger.entry_path(plan.entry)) or b"{}")
    revised = {**entry, "files": [asdict(file) for file in read], "skipped": [file.record() for file in skipped]}
    store.write_bytes(ledger.entry_path(plan.entry), document_bytes({**revised, "revised_at": now_iso()}))
    return dataclasses.replace(plan, files=tuple(read), skipped=skipped)


def _check_whole(ledger: Ledger, entries: Sequence[dict[str, Any]]) -> None:
    """Raises: IncrementalRunError: an entry is missing (a gap in the numbers, or a completed incremental run folder
    whose entry is not in the ledger: deleted, or an older ledger restored); its files would be read again."""
    numbers = {entry["entry"] for entry in entries}
    missing: list[tuple[int | None, str | None]] = [
        (number, None) for number in sorted(set(range(1, max(numbers, default=0) + 1)) - numbers)
    ]
    known = {entry["run_id"] for entry in entries}
    for name in store.children(ledger.output):  # only the run folders no entry names are looked into
        run_id = name.removeprefix("run=")
        if name.startswith("run=") and run_id not in known:
            summary = store.read_json(f"{ledger.output}/{name}/{SUMMARY}", "restore it from a copy, then run again")
            incremental = (
                (summary or {}).get("input_files", {}).get("incremental") if isinstance(summary, dict) else None
            )
            if isinstance(incremental, dict) and ledger.complete(run_id):
                missing.append((incremental.get("ledger_entry"), run_id))
    if missing:
        number, lost_run = missing[0]
        of = f" (completed run {lost_run} read its files, as its summary.json says)" if lost_run else ""
        raise IncrementalRunError(
            f"--incremental: the ledger {ledger.path} lacks entry {number}{of}; without it the files it named would be "
            f"read again and their events delivered twice. Restore {ledger.entry_path(number or 0)} from a copy (an "
            f"earlier version of the bucket's object), then run again{_or_strays(ledger, entries, number)}; nothing "
            "was written"
        )


def _or_strays(ledger: Ledger, entries: Sequence[dict[str, Any]], gap: int | None) -> str:
    """The other way out of a gap in the numbers, when every entry after it names a run that wrote no run folder:
    they may be stray files (an entry after a lost one whose run wrote its folder is a run's: no way out but the
    lost entry)."""
    after = [entry for entry in entries if gap is not None and entry["entry"] > gap]
    if not after or any(store.exists(run_folder(ledger.output, entry["run_id"])) for entry in after):
        return ""
    named = ", ".join(ledger.entry_path(entry["entry"]) for entry in after[:3]) + (" …" if len(after) > 3 else "")
    runs = ", ".join(entry["run_id"] for entry in after[:3])
    them = "it" if len(after) == 1 else "them"
    return f". If no run wrote {named} (run {runs}: no run folder), move {them} out of {LEDGER}/ instead"


def _check_can_start(ledger: Ledger, entries: Sequence[dict[str, Any]], run_id: str) -> None:
    later = [entry["run_id"] for entry in entries if entry["run_id"] > run_id]
    if later:
        raise IncrementalRunError(
            f"--incremental: run {run_id} is earlier than run {max(later)} in the ledger {ledger.path}; allowed: a "
            f"run id after {max(later)}, or the id of a run in the ledger to redo it; nothing was written"
        )
    others = [lease for lease in ledger.leases() if lease.get("run_id") != run_id]
    if others:
        holder = others[0]
        raise IncrementalRunError(
            f"--incremental: {holder.get('job')} run {holder.get('run_id')} is writing {ledger.output} (host "
            f"{holder.get('host')}, pid {holder.get('pid')}, since {holder.get('started_at')}; lease {holder['file']}); "
            "a run starts when it has ended. If that run is gone, remove the lease file"
        )
    with ThreadPoolExecutor(READ_THREADS) as pool:
        completed = list(pool.map(ledger.complete, [entry["run_id"] for entry in entries]))
    unfinished = [entry for entry, done in zip(entries, completed, strict=True) if not done]
    if unfinished:
        entry = unfinished[0]
        raise IncrementalRunError(
            f"--incremental: run {entry['run_id']} (ledger entry {entry['entry']}, {len(entry['files'])} files) "
            f"has not completed: no {run_folder(ledger.output, entry['run_id'])}/{SUCCESS_MARKER}. Redo it first "
            f"(--run-id {entry['run_id']} --incremental reads the same files); nothing was written"
        )
