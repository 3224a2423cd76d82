"""The keyed state against the output's completed runs: no commit without its completed run, no completed run
without its commit.

A keyed run commits its keys to the state before it seals its run folder (`_SUCCESS` last). Two ways the two
can part, each found before a run writes anything:

- **A run stopped after its commit** (killed, crashed): its keys count as seen in the state, and are in no
  completed output. Each commit names its run folder and the arguments it ran with (`run`); a new run whose
  starting commit's folder holds no `_SUCCESS` stops (`UnfinishedCommitError`) with the command that redoes
  that run (which starts from the commit before it, so it decides as the first attempt did).
- **An older copy of the state put back** (a backup restored, a folder copied over): it lacks the commits of the
  runs completed since, and would deliver their keys again. Each run records in its `summary.json` the commit it
  produced (run id, depth, SHA-256) and the one it started from. A run first reads the summary of the newest
  completed run of its output that used the same state, and stops (`StaleStateError`) when the state does not
  hold that very commit. Redoing the runs completed since, oldest first, each with the arguments it recorded,
  rebuilds those commits (and their outputs, replaced by the redo): the redo of a completed run is let through
  when the state is at the commit that run started from. Runs completed before these records record none:
  nothing is checked against them.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from jobs.contract import LAST_COMPLETED, SUCCESS_MARKER, SUMMARY
from jobs.errors import DamagedFileError
from jobs.fs import store
from jobs.fs.paths import normalized
from jobs.fs.runs import RUN_ID_PATTERN, run_folder
from jobs.keyed.commits import CommitLog, sha256
from jobs.prog import local_prog

RUN_FOLDER = re.compile(f"run=({RUN_ID_PATTERN.pattern})")
SUMMARY_WAY_OUT = "restore it from a copy, or redo its run"


class UnfinishedCommitError(DamagedFileError):
    """The state's newest commit is a run's whose folder never completed (exit 1)."""


class StaleStateError(DamagedFileError):
    """The state lacks the commit a completed run of the output produced: an older copy (exit 1)."""


def redo_command(arguments: list[str]) -> str:
    """The command line that runs `keyed` with `arguments` again, pasteable into a shell from any folder."""
    return f"{local_prog()} keyed {shlex.join(arguments)}"


def identity(commit: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a summary records of the commit a run started from: enough to know the state is at it again."""
    return None if commit is None else {"run_id": commit["run_id"], "depth": commit["depth"]}


def record_completed(output_root: str, state_uri: str, run_id: str, digest: str) -> None:
    """After the run's `_SUCCESS`: `OUT/_LAST_COMPLETED.json` names its commit, so a run folder moved away once it
    completed (a loader's archive step) is not taken for one that stopped after its commit."""
    path = f"{output_root.rstrip('/')}/{LAST_COMPLETED}"
    document = store.read_json(path, "put its earlier copy back, or remove it")
    place = normalized(state_uri)
    states = [entry for entry in (document or {}).get("states", []) if entry.get("state") != place]
    states.append({"state": place, "run_id": run_id, "sha256": digest})
    store.write_bytes(path, (json.dumps({"states": states}, indent=1) + "\n").encode())


def _completed_here(log: CommitLog, output_root: str, run_id: str) -> bool:
    """Whether `OUT/_LAST_COMPLETED.json` names the state's commit of run `run_id`, as it is, as completed."""
    document = store.read_json(f"{output_root.rstrip('/')}/{LAST_COMPLETED}", "put its earlier copy back, or remove it")
    place = normalized(log.uri)
    entry = next((e for e in (document or {}).get("states", []) if e.get("state") == place), None)
    data = store.read_bytes(log.path(run_id)) if entry is not None and entry.get("run_id") == run_id else None
    return data is not None and entry is not None and sha256(data) == entry.get("sha256")


def require_sealed(log: CommitLog, output_root: str, start: dict[str, Any] | None) -> None:
    """Stop when `start` (the commit this run starts from) is a run's that did not complete: no `_SUCCESS` in the
    folder the commit names, nor in that run's folder under `output_root` (an output moved since, with its folders),
    and `output_root`'s `_LAST_COMPLETED.json` does not name that commit (a run folder archived once completed).

    Raises:
        UnfinishedCommitError: named, with the command that redoes that run (nothing was written).
    """
    uri = log.uri
    run = (start or {}).get("run")
    if not isinstance(run, dict):
        return  # a commit from before runs were named in it: nothing to check
    assert start is not None
    folders = (run["folder"], run_folder(output_root, start["run_id"]))
    if any(store.exists(f"{folder}/{SUCCESS_MARKER}") for folder in folders):
        return
    if _completed_here(log, output_root, start["run_id"]):
        return
    raise UnfinishedCommitError(
        f"state {uri}: its newest commit {uri}/commits/{start['run_id']}.json is run {start['run_id']}'s, whose run "
        f"folder {run['folder']} holds no {SUCCESS_MARKER} (stopped after its commit: the keys it recorded as seen are "
        f"in no completed output); nothing was written. Redo that run first ({redo_command(run['arguments'])}), "
        "then run again"
    )


def require_current(log: CommitLog, output_root: str, run_id: str, start: dict[str, Any] | None) -> None:
    """Stop when the state lacks the commit the newest completed run of `output_root` that used it produced.

    Raises:
        StaleStateError: named, with the ways on (nothing was written).
    """
    newest = _newest_completed(output_root, log.uri)
    if newest is None:
        return
    path, summary = newest
    commit = summary["state"]["commit"]
    data = store.read_bytes(log.path(commit["run_id"]))
    if data is not None and sha256(data) == commit["sha256"]:
        return
    own = _completed_summary(output_root, run_id, log.uri)
    if own is not None and own["state"].get("parent_commit") == identity(start):
        return  # a redo of a completed run from the commit it started from: it rebuilds its commit
    at = "no commit" if start is None else f"commit {start['run_id']} (depth {start['depth']})"
    redo = _redo_from(output_root, log.uri, start)
    rebuild = (
        ""
        if redo is None
        else f"; or, if there is none, redo the runs completed since, oldest first, each as it ran (the first: "
        f"{redo_command(redo)}; a run stopped here names the next)"
    )
    raise StaleStateError(
        f"state {log.uri} is an older copy: {path} records its commit {commit['run_id']} (depth {commit['depth']}), "
        f"which it does not hold (it is at {at}), so the keys of the runs completed after the copy was taken would "
        f"be delivered again; nothing was written. Put the newest copy back{rebuild}, then run again"
    )


def _run_ids(output_root: str) -> list[str]:
    """The run ids of the run folders directly under `output_root`, newest first."""
    names = (RUN_FOLDER.fullmatch(name) for name in store.subfolders(output_root.rstrip("/")))
    return sorted((match.group(1) for match in names if match), reverse=True)


def _completed_summary(output_root: str, run_id: str, uri: str) -> dict[str, Any] | None:
    """The summary of run `run_id`'s folder when it completed on the state `uri` and recorded its commit."""
    folder = run_folder(output_root, run_id)
    if not store.exists(f"{folder}/{SUCCESS_MARKER}"):
        return None
    summary = store.read_json(f"{folder}/{SUMMARY}", SUMMARY_WAY_OUT)
    state = summary.get("state") if isinstance(summary, dict) else None
    recorded = state.get("uri") if isinstance(state, dict) else None
    if not isinstance(recorded, str) or normalized(recorded) != normalized(uri):  # one state, however it was named
        return None
    if not isinstance(state, dict) or not isinstance(state.get("commit"), dict):
        return None
    return dict(summary)


def _newest_completed(output_root: str, uri: str) -> tuple[str, dict[str, Any]] | None:
    """The summary (path, document) of the newest completed run of `output_root` that recorded a commit of `uri`.
    Run ids on one state grow with its commits (`commits.refuse_later`), so the newest id is the newest commit."""
    for run_id in _run_ids(output_root):
        summary = _completed_summary(output_root, run_id, uri)
        if summary is not None:
            return f"{run_folder(output_root, run_id)}/{SUMMARY}", summary
    return None


def _redo_from(output_root: str, uri: str, start: dict[str, Any] | None) -> list[str] | None:
    """The arguments of the completed run that started from `start`, the first to redo; None when none did."""
    for run_id in _run_ids(output_root):
        summary = _completed_summary(output_root, run_id, uri)
        if summary is not None and summary["state"].get("parent_commit") == identity(start):
            arguments = summary.get("arguments")
            return arguments if isinstance(arguments, list) else None
    return None
