"""The lake manifest's location (`jobs.manifest.lake`): its descriptor, its commits and the folders they name.

A commit `_commits/NNNNNNNNNN.json` holds the whole state (`lake_state.State`) and is created only if absent: the
highest number is current. Committing deletes what the new state no longer names; folders no kept commit names
(a run or compaction killed before its commit) are removed by the next commit; before a check reads anything, the
committed segments' and filters' files are compared with the commit (`lake_integrity`).
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import replace
from typing import Any

from jobs.contract import LAKE_COMMITS, LAKE_DESCRIPTOR, LAKE_FILTERS, LAKE_FILTERS_V1, LAKE_SEGMENTS
from jobs.fs import store
from jobs.manifest.base import ManifestError
from jobs.manifest.lake_integrity import Recorded, leftovers, verify_segments
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
            raise ManifestError(
                f"manifest {self.uri}: {self.root}/{LAKE_DESCRIPTOR} is no {FORMAT} version {VERSION} descriptor; "
                "point --manifest at a Winnow lake manifest, or at a new folder with --create"
            )
        return document

    def buckets(self) -> int:
        descriptor = self.descriptor()
        assert descriptor is not None, "check() first"
        return int(descriptor["buckets"])

    # -- commits -----------------------------------------------------------------------------------------------

    def state(self) -> State:
        """The state the highest commit records (empty before the first)."""
        commits = self._commit_numbers()
        if not commits:
            return State(commit=0, buckets=self.buckets())
        data = store.read_bytes(self._commit_path(commits[-1]))
        if data is None:
            raise ManifestError(f"manifest {self.uri}: commit {commits[-1]} was listed but cannot be read")
        return State.parse(json.loads(data))

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
        new = replace(state, commit=base.commit + 1, filters=filters)
        self._upgrade_descriptor()
        document = json.dumps(new.document(job, run_id), indent=1).encode("utf-8")
        if not store.create_if_absent(self._commit_path(new.commit), document):
            raise ManifestError(
                f"manifest {self.uri}: commit {new.commit} was written by another writer while {job} run {run_id} "
                "held the manifest's lease; nothing of this run was committed: run it again"
            )
        for name in sorted(set(base.segments) - set(new.segments)):
            store.delete_folder(self._segment_path(name))
        for name in sorted(set(base.filters) - set(new.filters)):
            store.delete_folder(self._filter_path(name))
        for number in self._commit_numbers()[:-COMMITS_KEPT]:
            store.delete(self._commit_path(number))
        self._remove_leftovers(new)
        return new

    def _upgrade_descriptor(self) -> None:
        """A lake of an earlier version says VERSION from its first commit by this one on: an older Winnow then
        refuses it (`descriptor`) instead of misreading a commit it does not know."""
        descriptor = self.descriptor()
        if descriptor is not None and descriptor.get("version") != VERSION:
            store.write_bytes(
                f"{self.root}/{LAKE_DESCRIPTOR}", json.dumps({**descriptor, "version": VERSION}, indent=2).encode()
            )

    def verify(self, state: State) -> int:
        """Compare every segment `state` names with its files (`lake_integrity.verify_segments`); the files listed.

        Raises:
            ManifestDamagedError: a file is missing, differs or is in no commit (exit 1).
        """
        recorded = [
            Recorded(name, self._segment_path(name), segment.files, segment.file_sizes)
            for name, segment in sorted(state.segments.items())
        ]
        recorded += [
            Recorded(f"{name}'s filter", self._filter_path(name), f.files, f.file_sizes)
            for name, f in sorted(state.filters.items())
        ]
        return verify_segments(self.uri, state.commit, recorded)

    def _remove_leftovers(self, current: State) -> None:
        """Remove the segment and filter folders no kept commit names (a run or compaction killed before its commit,
        or before it deleted what its commit replaced). The lease makes this run the only writer and its own segments are
        committed by now, so such a folder is no one's work in progress."""
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
