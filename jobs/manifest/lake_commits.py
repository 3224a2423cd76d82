"""The lake manifest's location (`jobs.manifest.lake`): its descriptor, its commits and the folders they name.

A commit `_commits/NNNNNNNNNN.json` holds the whole state (`lake_state.State`) and is created only if absent; then
the anchor `_latest` is written whole, naming it and its SHA-256. The anchored commit is current, or the one after
it (a run stopped between the two writes); a newest commit missing, cut or replaced, or commits beyond that one,
stop the run naming it (a lake of version 1 has no anchor: its highest commit is current). Committing deletes what the new state no longer names; folders no kept commit names
(a run or compaction killed before its commit) are removed by the next commit; before a check reads anything, the
committed segments' and filters' files are compared with the commit (`lake_integrity`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import replace
from typing import Any

from jobs.contract import LAKE_ANCHOR, LAKE_COMMITS, LAKE_DESCRIPTOR, LAKE_FILTERS, LAKE_FILTERS_V1, LAKE_SEGMENTS
from jobs.fs import store
from jobs.manifest.base import ManifestError
from jobs.manifest.lake_integrity import (
    RESTORE_FILE,
    ManifestDamagedError,
    Recorded,
    checksum_of,
    leftovers,
    verify_segments,
)  # fmt: skip
from jobs.manifest.lake_state import FILTERS_KEY, FILTERS_KEY_V1, FORMAT, READABLE_VERSIONS, VERSION, State

COMMITS_KEPT = 100
"""Older commit objects are deleted (each commit holds the whole state; the old ones are history only)."""


class LakeLocation:
    """The descriptor, commits and folders of the lake manifest at `root` (`uri` in messages): the part of
    `LakeManifest` that reads and writes no entries."""

    uri: str
    root: str

    # -- the descriptor ----------------------------------------------------------------------------------------

    def descriptor(self) -> dict[str, Any] | None:
        data = store.read_bytes(f"{self.root}/{LAKE_DESCRIPTOR}")
        if data is None:
            return None
        try:
            document: dict[str, Any] = json.loads(data)
        except ValueError:
            document = {}
        if document.get("format") != FORMAT or document.get("version") not in READABLE_VERSIONS:
            *earlier, latest = (str(version) for version in READABLE_VERSIONS)
            readable = f"{', '.join(earlier)} or {latest}"
            raise ManifestError(
                f"manifest {self.uri}: {self.root}/{LAKE_DESCRIPTOR} is no {FORMAT} version {readable} descriptor; "
                "point --manifest at a Winnow lake manifest, or at a new folder with --create"
            )
        return document

    def buckets(self) -> int:
        return self._described("buckets")

    def descriptor_version(self) -> int:
        return self._described("version")

    def _described(self, key: str) -> int:
        descriptor = self.descriptor()
        assert descriptor is not None, "check() first"
        return int(descriptor[key])

    # -- commits -----------------------------------------------------------------------------------------------

    def state(self) -> State:
        """The state the current commit records (empty before the first): the anchored one or the one after it; in
        a lake of version 1 without an anchor, the highest.

        Raises:
            ManifestDamagedError: the anchor or the current commit is missing, cut or replaced, or there are
                commits beyond the one after the anchored one (exit 1); nothing is read or written.
        """
        commits = self._commit_numbers()
        anchor = self._anchor()
        newest = commits[-1] if commits else 0
        if anchor is not None or self.descriptor_version() != 1:
            anchored = anchor[0] if anchor is not None else 0  # a lake of version 2 before its first anchor
            self._refuse_unanchored(anchored, commits, anchor is not None)
        if not commits:
            return State(commit=0, buckets=self.buckets())
        path = self._commit_path(newest)
        data = store.read_bytes(path)
        if data is None:
            raise ManifestDamagedError(
                f"manifest {self.uri} is damaged: commit {path} was listed but cannot be read; nothing was written. "
                f"{RESTORE_FILE}"
            )
        if anchor is not None and anchor[0] == newest and hashlib.sha256(data).hexdigest() != anchor[1]:
            raise ManifestDamagedError(
                f"manifest {self.uri} is damaged: commit {path} ({len(data)} bytes) is not the one "
                f"{self._anchor_path()} names (its SHA-256 differs: cut or replaced); nothing was written. {RESTORE_FILE}"
            )
        try:
            state = State.parse(json.loads(data))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise ManifestDamagedError(
                f"manifest {self.uri} is damaged: commit {path} ({len(data)} bytes) is no commit document "
                f"({type(err).__name__}: {err}; cut or damaged); nothing was written. {RESTORE_FILE}"
            ) from None
        if state.commit != newest:
            raise ManifestDamagedError(
                f"manifest {self.uri} is damaged: commit {path} says it is commit {state.commit}; nothing was "
                f"written. {RESTORE_FILE}"
            )
        return state

    def _anchor_path(self) -> str:
        return f"{self.root}/{LAKE_ANCHOR}"

    def _anchor(self) -> tuple[int, str] | None:
        """The anchored commit's number and SHA-256; None when there is no anchor.

        Raises:
            ManifestDamagedError: the anchor is no anchor document (cut or damaged).
        """
        data = store.read_bytes(self._anchor_path())
        if data is None:
            return None
        try:
            document = json.loads(data)
            return int(document["commit"]), str(document["sha256"])
        except (ValueError, KeyError, TypeError) as err:
            raise ManifestDamagedError(
                f"manifest {self.uri} is damaged: {self._anchor_path()} ({len(data)} bytes) names no commit "
                f"({type(err).__name__}: {err}); nothing was written. {RESTORE_FILE}"
            ) from None

    def _refuse_unanchored(self, anchored: int, commits: list[int], present: bool) -> None:
        """Raises: ManifestDamagedError: the newest commit is not the anchored one or the one after it."""
        newest = commits[-1] if commits else 0
        if anchored <= newest <= anchored + 1:
            return
        anchor = self._anchor_path()
        if not present:
            what = f"{anchor} is missing, and the newest commit is {self._commit_path(newest)}"
        elif newest < anchored:
            found = f"the newest found is commit {newest}" if commits else "no commit is left"
            what = (
                f"commit {self._commit_path(anchored)}, the newest, which {anchor} names, is missing ({found}: the "
                "runs committed after it would be forgotten)"
            )
        else:
            what = (
                f"commits after {self._commit_path(anchored + 1)} exist, but {anchor} names commit {anchored} (written "
                "by another Winnow, or an older anchor restored)"
            )
        raise ManifestDamagedError(
            f"manifest {self.uri} is damaged: {what}; nothing was written. {RESTORE_FILE}; docs/operations.md "
            '("A lake manifest is damaged") says how to go on without it'
        )

    def _write_anchor(self, number: int, document: bytes) -> None:
        """Anchor commit `number` (its content `document`); a lake of an earlier version becomes the current one
        (after the anchor: a lake of version 2 or later with commits and no anchor would stop)."""
        anchor = {"commit": number, "sha256": hashlib.sha256(document).hexdigest()}
        store.write_bytes(self._anchor_path(), json.dumps(anchor).encode("utf-8"))
        descriptor = self.descriptor()
        if descriptor is not None and descriptor.get("version") != VERSION:
            upgraded = {**descriptor, "version": VERSION}
            store.write_bytes(f"{self.root}/{LAKE_DESCRIPTOR}", json.dumps(upgraded, indent=2).encode("utf-8"))

    def _commit_numbers(self) -> list[int]:
        names = [file.path.rsplit("/", 1)[-1] for file in store.list_files(f"{self.root}/{LAKE_COMMITS}")]
        return sorted(int(name.removesuffix(".json")) for name in names if name.removesuffix(".json").isdigit())

    def _commit_path(self, number: int) -> str:
        return f"{self.root}/{LAKE_COMMITS}/{number:010d}.json"

    def commit(self, state: State, base: State, job: str, run_id: str) -> State:
        """Write `state`, derived from the commit `base`, as the commit after it; then delete the segments (and
        filters) `base` had and `state` has not, and the commits older than the COMMITS_KEPT newest. A filter goes
        with its segment: a redo's replaced one, a compacted day's runs', an expired one.

        Raises:
            ManifestError: the commit after `base` exists: another writer committed since `base` was read (only
                possible when someone removed the writer lease of a live run); nothing is written or deleted.
        """
        filters = {name: made for name, made in state.filters.items() if name in state.segments}
        new = replace(state, commit=base.commit + 1, filters=filters, generation=max(base.generation, state.generation))
        new = replace(new, checksums=self._checksums(new))
        document = json.dumps(new.document(job, run_id), indent=1).encode("utf-8")
        if not store.create_if_absent(self._commit_path(new.commit), document):
            raise ManifestError(
                f"manifest {self.uri}: commit {new.commit} was written by another writer while {job} run {run_id} "
                "held the manifest's lease; nothing of this run was committed: run it again"
            )
        self._write_anchor(new.commit, document)
        for name in sorted(set(base.segments) - set(new.segments)):
            store.delete_folder(self._segment_path(name))
        for name in sorted(set(base.filters) - set(new.filters)):
            store.delete_folder(self._filter_path(name))
        for number in self._commit_numbers()[:-COMMITS_KEPT]:
            store.delete(self._commit_path(number))
        self._remove_leftovers(new)
        return new

    def generation(self) -> int:
        """The lake's generation (`jobs.dedup.stale`): its commit number, or the one a back-fill raised it to."""
        state = self.state()
        return max(state.commit, state.generation)

    def advance_generation(self, at_least: int) -> None:
        """Raise the generation to `at_least` with a commit that changes nothing else (under the writer lease)."""
        state = self.state()
        if max(state.commit, state.generation) < at_least:
            self.commit(replace(state, generation=at_least), state, "populate-manifest", "generation")

    def verify(self, state: State) -> int:
        """Compare every segment `state` names with its files (`lake_integrity.verify_segments`); the files listed.

        Raises:
            ManifestDamagedError: a file is missing, differs or is in no commit (exit 1).
        """
        recorded = [
            Recorded(name, folder, files, sizes, self._checksums_in(state, folder))
            for name, folder, files, sizes in self._folders(state)
        ]
        return verify_segments(self.uri, state.commit, recorded)

    def _folders(self, state: State) -> list[tuple[str, str, int, dict[str, int] | None]]:
        """Each committed folder of `state`: (what it is, its path, its file count, its files' sizes)."""
        folders = [
            (name, self._segment_path(name), segment.files, segment.file_sizes)
            for name, segment in sorted(state.segments.items())
        ]
        folders += [
            (f"{name}'s filter", self._filter_path(name), f.files, dict(f.file_sizes))
            for name, f in sorted(state.filters.items())
        ]
        return folders

    def _checksums_in(self, state: State, folder: str) -> dict[str, str]:
        """The checksums `state` records of the files in `folder`, by name in it."""
        prefix = f"{folder.removeprefix(self.root + '/')}/"
        return {path.removeprefix(prefix): c for path, c in state.checksums.items() if path.startswith(prefix)}

    def _checksums(self, state: State) -> dict[str, str]:
        """The checksum of each data file `state` names: those it records, and those of the files it records none of
        the kind here (written for this commit, committed by version 1, or copied from S3 to a local folder or back),
        as listed now (a listing per such folder)."""
        kind = "crc32:" if store.local_path(self.root) is not None else "etag:"
        checksums = {}
        for _, folder, _, sizes in self._folders(state):
            known = {name: c for name, c in self._checksums_in(state, folder).items() if c.startswith(kind)}
            if sizes and set(sizes) - set(known):
                listed = {file.path.removeprefix(f"{folder}/"): file for file in store.list_files(folder)}
                known |= {name: checksum_of(listed[name]) for name in set(sizes) - set(known) if name in listed}
            prefix = f"{folder.removeprefix(self.root + '/')}/"
            checksums.update({prefix + name: checksum for name, checksum in known.items() if name in (sizes or {})})
        return checksums

    def _remove_leftovers(self, current: State) -> None:
        """Remove the segment and filter folders no kept commit names (a run or compaction killed before its commit,
        or before it deleted what its commit replaced). The lease makes this run the only writer and its own segments are
        committed by now, so such a folder is no one's work in progress. Nothing is removed unless `current` is the
        anchored commit: a folder a lost newer commit names stays, to be named when that commit is restored."""
        anchor = self._anchor()
        if anchor is None or anchor[0] != current.commit:
            return
        unnamed = set(self._segment_names("")) - set(current.segments)
        for name in leftovers(unnamed, lambda: self._named_by_kept_commits("segments")):
            store.delete_folder(self._segment_path(name))
        # The first filter layout's folders are named by no current commit: they go once no kept commit names them.
        for under, key, named in ((LAKE_FILTERS, FILTERS_KEY, current.filters), (LAKE_FILTERS_V1, FILTERS_KEY_V1, {})):
            unnamed = set(self._segment_names("", under)) - set(named)
            for name in leftovers(unnamed, functools.partial(self._named_by_kept_commits, key)):
                store.delete_folder(self._filter_path(name, under))

    def _named_by_kept_commits(self, key: str) -> set[str] | None:
        """The segments (`key` "segments") or segments' filters (FILTERS_KEY, or the first layout's) any kept commit
        names; None when one cannot be read (then nothing is removed)."""
        named: set[str] = set()
        for number in self._commit_numbers():
            data = store.read_bytes(self._commit_path(number))
            try:
                listed = json.loads(data or b"").get(key, [])
                named.update(item["name"] if isinstance(item, dict) else item for item in listed)
            except (ValueError, KeyError, TypeError, AttributeError):
                return None
        return named

    # -- segments ----------------------------------------------------------------------------------------------

    def _segment_path(self, name: str) -> str:
        return f"{self.root}/{LAKE_SEGMENTS}/segment={name}"

    def _filter_path(self, name: str, under: str = LAKE_FILTERS) -> str:
        return f"{self.root}/{under}/segment={name}"

    def _segment_names(self, prefix: str, under: str = LAKE_SEGMENTS) -> list[str]:
        """Names of the segment folders (committed or not; of filters with `under` LAKE_FILTERS) whose name starts
        with `prefix`."""
        folder = f"{self.root}/{under}"
        local = store.local_path(folder)
        marker = f"segment={prefix}"
        if local is not None:
            names = os.listdir(local) if os.path.isdir(local) else []
        else:
            bucket, key = store.s3_location(folder) or ("", "")
            pages = (
                store.s3_client()
                .get_paginator("list_objects_v2")
                .paginate(Bucket=bucket, Prefix=f"{key}/{marker}", Delimiter="/")
            )
            names = [
                item["Prefix"].rstrip("/").rsplit("/", 1)[-1]
                for page in pages
                for item in page.get("CommonPrefixes", [])
            ]
        return [name.removeprefix("segment=") for name in names if name.startswith(marker)]
