"""The lake manifest's state as a commit records it (`jobs.manifest.lake`): segments, runs, filters."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, get_type_hints

from jobs.manifest.base import SECONDS_PER_DAY, RegisteredRun, later_runs_entry, others_entry
from jobs.manifest.lake_filter import Filter

FORMAT = "winnow-lake-manifest"
VERSION = 3
"""Version 2: a commit's runs carry their run key (`RunEntries.run_key`, so two runs of one second can be recorded),
the newest commit is anchored (`LAKE_ANCHOR`) and each file's checksum recorded (`CHECKSUMS_KEY`). Version 3: a commit
also records the runs that committed and may not have completed (`OPEN_RUNS_KEY`). A lake of an earlier version is
read as before and becomes version 3 at its next commit. A Winnow of an earlier version refuses a descriptor of a
later one rather than misread its commits or write commits without what that version added."""
READABLE_VERSIONS = (1, 2, VERSION)
CHECKSUMS_KEY = "file_checksums"
"""The commit's record of each committed file's content: path under the manifest folder -> checksum
(`lake_integrity.checksum_of`)."""
OPEN_RUNS_KEY = "open_runs"
"""The commit's record of the runs that committed and may not have completed (`State.open_runs`)."""
FILTERS_KEY = "segment_filters_v2"
"""The commit's record of the filters (`lake_filter`); a version that does not know this layout reads every segment
whole, and drops the record from the commits it writes."""
FILTERS_KEY_V1 = "segment_filters"
"""The first filter layout's record: no longer written nor read (its segments are read whole until compacted)."""
RETAIN_AFTER_EXPIRY_DAYS = 7
"""Expired segments are kept this long after the newest run: a redo of a run up to this old still decides as it
first did (the per-request backends lose expired items at once, DynamoDB within about two days)."""


@dataclass(frozen=True)
class Segment:
    """One folder of entries, as a commit records it."""

    name: str
    runs: tuple[int, ...]
    """The etl_times of the entries in it (one run's, or a day's after compaction)."""
    files: int
    bytes: int
    keys: int
    max_ttl: int
    file_sizes: dict[str, int] | None = None
    """Its data files, by name in its folder, with their sizes (None: recorded by the first version, which
    counted them only). In the commit's `segment_files`, apart from the segment: the first version reads a
    segment's keys as its fields, so a commit of this one stays readable by it."""


@dataclass(frozen=True)
class RunEntries:
    """Which segment holds a run's current entries."""

    etl_time: int
    run_id: str
    ttl: int
    segment: str
    run_key: str | None = None
    """The run key (`base.run_key`) of the run; None: recorded before run keys, or by populate-manifest."""

    @property
    def key(self) -> int | str:
        """The run's key in `State.runs`: its run key, else (as before run keys) its etl_time."""
        return self.run_key or self.etl_time

    def owned_by(self, etl_time: int, run_key: str) -> bool:
        """Whether these are the entries of the run of `etl_time` and `run_key` (base.others_entry's rule)."""
        return self.etl_time == etl_time and not others_entry(self.etl_time, self.run_key, etl_time, run_key)


@dataclass(frozen=True)
class State:
    """The manifest as one commit leaves it."""

    commit: int
    buckets: int
    segments: dict[str, Segment] = field(default_factory=dict)
    runs: dict[int | str, RunEntries] = field(default_factory=dict)
    """By `RunEntries.key`."""
    filters: dict[str, Filter] = field(default_factory=dict)
    """Per segment of a past day, or of a run of at least a row a bucket: its filter (`lake_filter`); a segment
    without one is read whole."""
    checksums: dict[str, str] = field(default_factory=dict)
    """The content checksum of each segment's and filter's data file, by path under the manifest folder (a file
    committed by version 1 has none until the next commit records it)."""
    open_runs: tuple[RegisteredRun, ...] = ()
    """The register entries of the runs that committed entries and may not
    have sealed their run folder yet: the register of unfinished runs kept in the commit too, so a `_runs/` removed
    or lost hides no unfinished run (`unfinished.LakeRunRegister`)."""
    generation: int = 0
    """At least this generation (`RunRegister.generation`: the lake's is its commit number, or this when higher):
    raised by a back-fill of the runs an older copy lacked (`advance_generation`), carried by every later commit."""

    def live_for(self, etl_time: int, run_key: str = "") -> dict[str, tuple[int, ...]]:
        """Segments holding entries that count at `etl_time` for the run of `run_key`, each with the runs whose
        rows are stale in it (a rerun's commit moved them to another segment); with `same_second`'s."""
        live = {
            entries.segment
            for entries in self.runs.values()
            if entries.etl_time < etl_time < entries.ttl and entries.segment in self.segments
        }
        return {name: self.stale_in(name) for name in sorted(live | self.same_second(etl_time, run_key))}

    def later_for(self, etl_time: int, run_key: str) -> dict[str, tuple[int, ...]]:
        """Segments holding unexpired entries of later runs with a run key (`base.later_runs_entry`), each with the
        etl_times of those runs: what a run with `run_key` may not take over. Empty for a run without one."""
        later: dict[str, set[int]] = {}
        for entries in self.runs.values():
            if (
                entries.ttl > etl_time
                and entries.segment in self.segments
                and later_runs_entry(entries.etl_time, entries.run_key, etl_time, run_key)
            ):
                later.setdefault(entries.segment, set()).add(entries.etl_time)
        return {name: tuple(sorted(times)) for name, times in sorted(later.items())}

    def same_second(self, etl_time: int, run_key: str) -> set[str]:
        """The segments of other runs of `etl_time` (another run key: another pipeline's run of the same id), whose
        entries of that second count too; only segments holding none of this run's own (a past day's merged one
        may hold both: there they do not count)."""
        others = {e.segment for e in self.runs.values() if others_entry(e.etl_time, e.run_key, etl_time, run_key)}
        own = {e.segment for e in self.runs.values() if e.owned_by(etl_time, run_key)}
        return {name for name in others - own if name in self.segments}

    def stale_in(self, name: str) -> tuple[int, ...]:
        """The runs with rows in segment `name` that no longer count there (a later commit moved them)."""
        placed = {entries.etl_time for entries in self.runs.values() if entries.segment == name}
        return tuple(t for t in self.segments[name].runs if t not in placed)

    def document(self, job: str, run_id: str) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "commit": self.commit,
            "committed_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "by": {"job": job, "run_id": run_id},
            "buckets": self.buckets,
            "segments": [
                {key: value for key, value in asdict(segment).items() if key != "file_sizes"}
                for segment in self.segments.values()
            ],
            "runs": [
                {key: value for key, value in asdict(entries).items() if value is not None}
                for entries in sorted(self.runs.values(), key=lambda e: (e.etl_time, e.run_key or ""))
            ],
            "segment_files": {s.name: s.file_sizes for s in self.segments.values() if s.file_sizes is not None},
            # Apart from the segments, as `segment_files`: a version without filters reads every segment whole.
            FILTERS_KEY: {name: f.document() for name, f in sorted(self.filters.items())},
            CHECKSUMS_KEY: dict(sorted(self.checksums.items())),
            OPEN_RUNS_KEY: [asdict(run) for run in self.open_runs],
            "generation": self.generation,
        }

    @staticmethod
    def parse(document: dict[str, Any]) -> State:
        sizes = document.get("segment_files", {})  # absent from the first version's commits
        segments = {
            s["name"]: Segment(**{**s, "runs": tuple(s["runs"]), "file_sizes": sizes.get(s["name"])})
            for s in document["segments"]
        }
        runs = {entries.key: entries for entries in (RunEntries(**r) for r in document["runs"])}
        filters = {name: Filter.parse(f) for name, f in document.get(FILTERS_KEY, {}).items()}
        checksums = dict(document.get(CHECKSUMS_KEY, {}))  # absent from version 1's commits
        open_runs = tuple(_open_run(entry) for entry in document.get(OPEN_RUNS_KEY, []))  # absent before version 3
        generation = document.get("generation", 0)  # absent before generations were kept
        return State(document["commit"], document["buckets"], segments, runs, filters, checksums, open_runs, generation)


def _open_run(entry: Any) -> RegisteredRun:
    """An entry of a commit's `open_runs`, checked.

    Raises:
        TypeError: not an entry of the register of unfinished runs (a damaged commit).
    """
    if not isinstance(entry, dict):
        raise TypeError(f"an entry of {OPEN_RUNS_KEY} is not a run's entry: {entry!r}")
    run = RegisteredRun(**entry)  # TypeError: a field missing or unknown
    for name, kind in get_type_hints(RegisteredRun).items():
        if not isinstance(getattr(run, name), kind):
            raise TypeError(f"an entry of {OPEN_RUNS_KEY} has {name} {entry[name]!r}: not a {kind.__name__}")
    return run


def expired_dropped(state: State) -> State:
    """`state` without the segments whose entries all expired more than RETAIN_AFTER_EXPIRY_DAYS before its newest
    run, and without those runs."""
    if not state.runs:
        return state
    cutoff = max(r.etl_time for r in state.runs.values()) - RETAIN_AFTER_EXPIRY_DAYS * SECONDS_PER_DAY
    segments = {name: s for name, s in state.segments.items() if s.max_ttl > cutoff}
    runs = {t: r for t, r in state.runs.items() if r.segment in segments}
    return replace(state, segments=segments, runs=runs)  # their filters go at the commit
