"""The keyed state's commit log: `commits/ID.json`, the anchor `_latest`, and which commit a run starts from.

A commit is written whole (beside, then renamed; on S3 one PUT), then the anchor `_latest` is written whole,
naming it, its SHA-256 and its parent. The anchored commit is the newest, or the one after it, or its redo's
(a run, or a redo, stopped between the two writes). Each commit records its depth (how many commits its chain holds, itself included), so
one listing of `commits/` shows a stray or a lost commit without reading the others. A state written before
anchors (commits of format 1) has none: its newest commit is current, and its next run writes the anchor.

A run stops before it writes (`DamagedFileError`, exit 1) on a stray file in `commits/`, a commit or anchor cut
or not a document of its kind, the newest commit missing or replaced, commits beyond the anchored one, or a
commit of the chain missing; each message names the file and the way out.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jobs.contract import SUCCESS_MARKER
from jobs.errors import DamagedFileError, InvalidArgumentError
from jobs.fs import store
from jobs.fs.runs import RUN_ID_PATTERN
from jobs.keyed.storage import Storage

ANCHOR = "_latest"
FORMAT = 2
"""Commits of format 2 record their depth and their bucket files; format 1 (before anchors) did not."""
COMMIT_NAME = re.compile(rf"(?:{RUN_ID_PATTERN.pattern})\.json")
REQUIRED = ("format", "run_id", "parent", "settings", "latest_point", "buckets", "retired")
RESTORE = "Restore it from a backup (or its earlier version, in a versioned bucket) and run again"
MOVE_OUT = "Move it out of commits/ and run again"
NOTHING = "nothing was written"
HOW_TO_ANCHOR = 'docs/operations.md ("A keyed state is damaged") says how to write it again'


@dataclass(frozen=True)
class Head:
    """The current commit: its run id, its SHA-256 when the anchor names it, and its parent when that is known
    without reading it (`parent_known`)."""

    run_id: str
    sha256: str | None
    parent: str | None
    parent_known: bool


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def commit_ids(uri: str, names: list[str]) -> list[str]:
    """The run ids of the commit files among the visible `names` of `commits/`, sorted.

    Raises:
        DamagedFileError: a name is no `RUN-ID.json` (no run of this state wrote it).
    """
    strays = [name for name in names if not COMMIT_NAME.fullmatch(name)]
    if strays:
        raise DamagedFileError(
            f"state {uri}: {uri}/commits/{strays[0]} is no commit of this state (a commit is named RUN-ID.json, "
            f"RUN-ID as YYYY-MM-DD-HH-MM-SS){_more(strays)}; {NOTHING}. {MOVE_OUT}"
        )
    return sorted(name.removesuffix(".json") for name in names)


class NotText(ValueError):
    """A file of the state that is no UTF-8 text: zeroed, or another kind of file in its place."""


def text_of(data: bytes) -> str:
    """`data` as UTF-8 text (not json's guess at UTF-16/32, which names a codec instead of the damage).

    Raises:
        NotText: `data` is all zero bytes, or not UTF-8.
    """
    if data and not data.strip(b"\0"):
        raise NotText("all zero bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise NotText(f"not UTF-8 text: byte {data[err.start]:#04x} at offset {err.start}") from None


def describe(err: Exception) -> str:
    """What is wrong with a document, in the words of a cut or damaged file."""
    return str(err) if isinstance(err, NotText) else f"{type(err).__name__}: {err}"


def parse_commit(path: str, data: bytes, run_id: str, way_out: str = RESTORE) -> dict[str, Any]:
    """The commit document `data` of `path`, which must be run `run_id`'s.

    Raises:
        DamagedFileError: not JSON, not a commit document (`shape_error`), or another run's.
    """
    try:
        document = json.loads(text_of(data))
    except ValueError as err:  # not JSON, or not UTF-8
        damage = "empty" if not data.strip() else f"not JSON: {describe(err)}"
        raise DamagedFileError(
            f"commit {path} is damaged ({len(data)} bytes, {damage}); {NOTHING}. {way_out}"
        ) from None
    cause = shape_error(document)
    if cause is not None:
        raise DamagedFileError(f"commit {path} is damaged (no commit document: {cause}); {NOTHING}. {way_out}")
    if document["run_id"] != run_id:
        raise DamagedFileError(
            f"commit {path} is damaged (it records run {document['run_id']}: another commit's file put in its place); "
            f"{NOTHING}. {way_out}"
        )
    return dict(document)


def shape_error(document: Any) -> str | None:
    """Why `document` is no commit document, or None when it is one."""
    if not isinstance(document, dict):
        return f"a JSON {type(document).__name__}, not an object"
    missing = [key for key in REQUIRED if key not in document]
    if missing:
        return f"{', '.join(missing)} missing"
    buckets = document["buckets"]
    if not isinstance(buckets, dict) or not all(isinstance(runs, list) for runs in buckets.values()):
        return "buckets is no object of run lists"
    if not isinstance(document["settings"], dict) or not isinstance(document["retired"], dict):
        return "settings or retired is no object"
    if document["format"] == 1:
        return None
    if document["format"] != FORMAT or not isinstance(document.get("depth"), int):
        return f"format {document['format']!r} with depth {document.get('depth')!r}; allowed: format 1, or {FORMAT}"
    files = document.get("files")
    folders = {f"run={run}/bucket={bucket}" for bucket, runs in buckets.items() for run in runs}
    if not isinstance(files, dict) or not folders <= set(files):
        return "files does not record every live bucket folder"
    return None


def parse_anchor(path: str, data: bytes) -> Head:
    """The commit anchor `data` names (its parent known when the anchor records it).

    Raises:
        DamagedFileError: the anchor is no anchor document (cut or damaged).
    """
    try:
        document = json.loads(text_of(data))
        run_id, digest, parent = str(document["run_id"]), str(document["sha256"]), document.get("parent")
        if not RUN_ID_PATTERN.fullmatch(run_id) or not (parent is None or isinstance(parent, str)):
            raise ValueError(f"run_id {run_id!r}, parent {parent!r}")
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise DamagedFileError(
            f"anchor {path} is damaged ({len(data)} bytes, names no commit: {describe(err)}); {NOTHING}. "
            f"{RESTORE} ({HOW_TO_ANCHOR})"
        ) from None
    return Head(run_id, digest, parent, "parent" in document)


def refuse_later(uri: str, run_id: str, later: list[str]) -> None:
    """Raises: InvalidArgumentError: runs after `run_id` have committed (a rerun of an older run, or a late one)."""
    if later:
        raise InvalidArgumentError(
            f"--run-id: given {run_id}, but state {uri} holds later runs ({', '.join(later[:3])}"
            f"{', …' if len(later) > 3 else ''}), which decided against the state before them; allowed: a run "
            f"id after {later[-1]} (a late or changed batch is a new run: give it a new id). Nothing was written"
        )


def chain_problem(
    uri: str, parent: str, ids: list[str], load: Callable[[str], dict[str, Any] | None]
) -> tuple[str, str]:
    """How the commits up to `parent` in `commits/` (`ids`) differ from `parent`'s chain, read back through the
    `parent` links with `load` (None for a missing commit): a stray commit or a lost one, and the way out."""
    chain: set[str] = set()
    run: str | None = parent
    while run is not None:
        chain.add(run)
        document = load(run)
        if document is None:
            return f"commit {uri}/commits/{run}.json of run {parent}'s chain is missing", RESTORE
        run = document["parent"]
    strays = sorted(set(ids) - chain)
    if strays:
        return f"{uri}/commits/{strays[0]}.json is no commit of run {parent}'s chain{_more(strays)}", MOVE_OUT
    return f"commit {uri}/commits/{parent}.json records another depth than its chain's", RESTORE


def _more(items: list[str], shown: int = 1) -> str:
    return f" (and {len(items) - shown} more)" if len(items) > shown else ""


class CommitLog:
    """The commits and the anchor of the state at `uri`."""

    def __init__(self, fs: Storage, uri: str) -> None:
        self.fs, self.uri = fs, uri
        self.anchor = f"{uri}/{ANCHOR}"

    def path(self, run_id: str) -> str:
        return f"{self.uri}/commits/{run_id}.json"

    def parent(self, run_id: str) -> dict[str, Any] | None:
        """The commit run `run_id` starts from (its `depth` filled in for a commit of format 1), or None.

        Raises:
            InvalidArgumentError: a later run has committed (`refuse_later`).
            DamagedFileError: the log is damaged (see the module's docstring).
        """
        ids = commit_ids(self.uri, self.fs.list_names(f"{self.uri}/commits"))
        head = self._head(ids)
        if head is None:
            return None
        refuse_later(self.uri, run_id, sorted({other for other in [*ids, head.run_id] if other > run_id}))
        if run_id > head.run_id:
            return self._start(head.run_id, head.sha256, ids, "the newest")
        parent = head.parent if head.parent_known else self._required(head.run_id, head.sha256, "the newest")["parent"]
        return None if parent is None else self._start(parent, None, ids, f"the parent of {head.run_id}, the newest")

    def write(self, document: dict[str, Any]) -> str:
        """Write the commit whole, then the anchor naming it (a run stopped between the two leaves a commit the
        next run takes as the one after the anchored); return the commit's SHA-256."""
        text = json.dumps(document, indent=2) + "\n"
        self.fs.write_atomic(self.path(document["run_id"]), text)
        digest = sha256(text.encode("utf-8"))
        anchor = {"run_id": document["run_id"], "sha256": digest, "parent": document["parent"]}
        self.fs.write_atomic(self.anchor, json.dumps(anchor) + "\n")
        return digest

    def _load(self, run_id: str, digest: str | None = None, way_out: str = RESTORE) -> dict[str, Any] | None:
        """The commit of `run_id` (checked against `digest` when given), or None when it is missing."""
        path = self.path(run_id)
        data = store.read_bytes(path)
        if data is None:
            return None
        if digest is not None and sha256(data) != digest:
            raise DamagedFileError(
                f"state {self.uri} is damaged: commit {path} ({len(data)} bytes) is not the one {self.anchor} names "
                f"(its SHA-256 differs: cut or replaced); {NOTHING}. {RESTORE}"
            )
        return parse_commit(path, data, run_id, way_out)

    def _required(self, run_id: str, digest: str | None, role: str) -> dict[str, Any]:
        document = self._load(run_id, digest)
        if document is None:
            raise DamagedFileError(
                f"state {self.uri} is damaged: commit {self.path(run_id)}, {role}, is missing (the keys of the runs "
                f"it records would be forgotten and delivered again); {NOTHING}. {RESTORE}"
            )
        return document

    def _start(self, run_id: str, digest: str | None, ids: list[str], role: str) -> dict[str, Any]:
        """The commit a run starts from, once `commits/` holds exactly its chain up to it."""
        document = self._required(run_id, digest, role)
        count = len([other for other in ids if other <= run_id])
        if document["format"] == 1:
            return {**document, "depth": count}  # a state from before depths: what is listed is its chain
        if document["depth"] != count:
            what, way_out = chain_problem(self.uri, run_id, [i for i in ids if i <= run_id], self._load)
            raise DamagedFileError(f"state {self.uri} is damaged: {what}; {NOTHING}. {way_out}")
        return document

    def _head(self, ids: list[str]) -> Head | None:
        """The current commit: the anchored one, or the one after it; None before the first commit."""
        data = store.read_bytes(self.anchor)
        if data is None:
            return self._unanchored(ids)
        anchored = parse_anchor(self.anchor, data)
        after = [other for other in ids if other > anchored.run_id]
        if not after:
            return self._redone(anchored)
        stray = f"If {self.anchor} was restored from an older copy, restore its newest version; else move it out of commits/"
        if len(after) == 1:  # a run stopped between its commit and its anchor?
            document = self._load(after[0], None, f"{stray}; then run again")
            if document is not None and document["parent"] == anchored.run_id:
                return Head(after[0], None, anchored.run_id, True)
        raise DamagedFileError(
            f"state {self.uri} is damaged: {self.path(after[0])}{_more(after)} sorts after {anchored.run_id}, the "
            f"newest commit, which {self.anchor} names, and is not the commit after it; {NOTHING}. {stray}; then "
            "run again"
        )

    def _redone(self, anchored: Head) -> Head:
        """The anchored commit, or the commit a redo of its run wrote in its place before it was stopped short of
        its anchor: a commit of the same run from the same parent whose run folder is unsealed (anything else, such
        as another state's commit of that run put in its place, is damage, found on reading: attack 59's 07)."""
        data = store.read_bytes(self.path(anchored.run_id))
        if data is None or not anchored.parent_known or sha256(data) == anchored.sha256:
            return anchored
        try:
            document = parse_commit(self.path(anchored.run_id), data, anchored.run_id)
        except DamagedFileError:
            return anchored
        run = document.get("run")
        folder = run.get("folder") if isinstance(run, dict) else None
        if (
            document.get("format") == FORMAT
            and document["parent"] == anchored.parent
            and isinstance(folder, str)
            and not store.exists(f"{folder}/{SUCCESS_MARKER}")  # a redo clears its folder's seal before it commits
        ):
            return Head(anchored.run_id, None, anchored.parent, True)
        return anchored

    def _unanchored(self, ids: list[str]) -> Head | None:
        """The current commit of a state without an anchor: one from before anchors, or one whose first run since
        stopped before its anchor."""
        if not ids:
            return None
        newest = self._required(ids[-1], None, "the newest")
        parent = newest["parent"]
        if newest["format"] == 1 or parent is None or (self._load(parent) or {}).get("format") == 1:
            return Head(ids[-1], None, parent, True)
        raise DamagedFileError(
            f"state {self.uri} is damaged: anchor {self.anchor} is missing, and the newest commit is "
            f"{self.path(ids[-1])}; {NOTHING}. {RESTORE} ({HOW_TO_ANCHOR})"
        )
