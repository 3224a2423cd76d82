"""The events manifest: what every backend offers, and the figures it reports.

The manifest remembers every (event_id, fingerprint) a run has delivered, with the time of the earliest run
that delivered it (`etl_time`, epoch seconds of the run id) and an expiry (`ttl` = etl_time + ttl_days *
86400). "Earlier means earlier": a run's decisions depend on runs with a smaller etl_time, and never change what
a later run delivered. A put by run R succeeds when the pair is new, was written by R itself (a rerun passes its
own earlier writes) or by a later run without a run key (an older populate-manifest's; the item then takes R's time), or
has expired (ttl <= R's time); it fails when an earlier run delivered the pair and it has not expired: a
cross-batch natural duplicate. A pair a later run with a run key delivered (`later_runs_entry`: a late batch,
another pipeline's run with a later id; it completed before R started, or the register would have stopped R) is
a copy too, and stays that run's: taking it over would deliver it twice, and R's abandon or shrunk redo would
then remove that run's entry. The synthetic look-up returns fingerprints of earlier runs, and of later ones: an id
a later run delivered is recorded by none of R's fingerprints. populate-manifest records a completed run folder's
`good/` at that run's time under `back_filled_key` of its run key (other files at its --run-id's time, under the
key of the input root): a later run's delivery to earlier runs, an earlier one to later runs, and the run's own to
a redo of that run only. So redoing any run, in any order, gives the same decisions. Limit: one item per pair, so once an expired pair is delivered again (more than ttl_days later),
redoing a run from before that is not guaranteed to give its first output.
"""

from __future__ import annotations

import hashlib
import shlex
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from pyspark.sql import DataFrame

from jobs.errors import WinnowError
from jobs.fs.paths import normalized
from jobs.prog import local_prog

SECONDS_PER_DAY = 86_400

# The manifest's answer for an (event_key, fingerprint) of a batch, in the `cross_batch` column of the answers:
SEEN_EARLIER = "natural"  # an earlier run delivered this (event_id, fingerprint)
ID_SEEN_EARLIER = "synthetic"  # an earlier run delivered this event_id with another fingerprint
SEEN_LATER = "later"
"""`put`: a later run with a run key delivered this pair, and completed before this run started (the register of
unfinished runs sees to it): its output has the event, so taking the entry over would deliver it twice. The pair
is a cross-batch natural copy (answered SEEN_EARLIER), and the entry stays the later run's."""
RECORDED = "recorded"  # `put`: the pair is this run's now
ANSWERS_SCHEMA = "event_key string, fingerprint string, cross_batch string"


class ManifestError(WinnowError):
    """The manifest is missing, misconfigured or unreachable: says what is wrong and how to fix it."""


@dataclass
class ManifestStats:
    """What the manifest calls cost: summed over all executors into `summary.json`."""

    requests: int = 0
    puts: int = 0
    queries: int = 0
    conditional_failures: int = 0
    retries: int = 0
    throttles: int = 0
    throttle_waits: int = 0
    """Throttled requests botocore gave up on, waited out and sent again (DynamoDB)."""
    server_error_waits: int = 0
    """Requests botocore gave up on after a transient server error (a 500 or 503, a closed connection), waited
    out and sent again (DynamoDB)."""
    consumed_capacity: float = 0.0
    files_read: int = 0
    """Lake: Parquet files the check read (each costs an S3 GET or a few)."""
    bytes_read: int = 0
    keys_read: int = 0
    """Lake: entries the check read whole: every entry of the segments it reads whole, and every filter entry of
    the segments it reads through their filters."""
    live_keys: int = 0
    """Lake: entries of the segments that count for the run (what reading every one of them would read)."""
    filter_matches: int = 0
    """Lake: (id, segment) pairs where the segment's filter could not rule the batch's id out (each a look-up in
    that segment's bucket file of the id)."""
    lookup_files_read: int = 0
    """Lake: bucket files of filtered segments read for those look-ups (in `files_read` and `bytes_read`)."""
    files_written: int = 0
    bytes_written: int = 0

    def add(self, other: ManifestStats) -> ManifestStats:
        return ManifestStats(**{name: getattr(self, name) + getattr(other, name) for name in self.__dataclass_fields__})


@dataclass(frozen=True)
class IdResult:
    """The manifest's answer for one event id of a batch.

    `seen`: the fingerprints of this batch an earlier run already delivered (cross-batch natural copies).
    `earlier_other`: an earlier run delivered this id with a fingerprint this batch does not have
    (only looked up when cross-batch synthetic detection is on).
    """

    seen: frozenset[str] = field(default_factory=frozenset)
    earlier_other: bool = False
    later: frozenset[str] = field(default_factory=frozenset)
    """The fingerprints of this batch a later run delivered (`SEEN_LATER`): copies, not recorded. With synthetic
    detection, an id a later run delivered is recorded by none of its fingerprints (`earlier_other`: the others are
    synthetic copies), so a redo of that later run still decides as it did."""


@dataclass
class ManifestCheck:
    """A run's check against the manifest: the answers, and what is left to do with them.

    `answers` (ANSWERS_SCHEMA) has a row for every pair an earlier run delivered (`cross_batch` SEEN_EARLIER or,
    with cross-batch synthetic detection, ID_SEEN_EARLIER); pairs without an answer are new. It is persisted:
    `release()` frees it (and whatever else the check holds). `record()` makes the run's pairs part of the manifest where the backend does that
    after the run's output is written (the lake commits then; the per-request backends recorded them while
    answering). `stats()` gives the summed figures, complete once `record()` returned.
    """

    answers: DataFrame
    stats: Callable[[], ManifestStats]
    record: Callable[[], None]
    release: Callable[[], None]


def run_key(folder: str, run_id: str) -> str:
    """The identity of a run: its run folder (output root + run id), as `RUN_ID~HASH` (HASH 16 hex digits of the
    normalized folder path; the run id for people). Two pipelines running one run id on one manifest have two
    keys; the same folder named two ways (a trailing `/`, `s3a://`, a relative path) has one."""
    digest = hashlib.sha256(normalized(folder).encode("utf-8")).hexdigest()[:16]
    return f"{run_id}~{digest}"


@dataclass(frozen=True)
class RegisteredRun:
    """One run in the register."""

    run_id: str
    etl_time: int
    ttl: int
    folder: str
    """The run folder whose `_SUCCESS` completes the run."""
    redo: str
    """The command that redoes the run (for the message that stops a later run)."""
    completed_before: bool = False
    """The run had completed (`_SUCCESS`) before this attempt, a redo: later runs decided against its events, so it
    is redone with the input it completed with, never abandoned. Kept here as well as in its folder's
    `COMPLETED_BEFORE`, so a removed marker does not make it look like a run that never completed."""

    @property
    def key(self) -> str:
        """The run key (`base.run_key`) of its run folder: what the register is keyed by."""
        return run_key(self.folder, self.run_id)

    def abandon_command(self, manifest_uri: str) -> str:
        """The command that abandons the run (`manifest abandon`), for a run whose input is gone for good."""
        output = self.folder.rstrip("/").rsplit("/", 1)[0]
        return (
            f"{local_prog()} manifest abandon --manifest {shlex.quote(manifest_uri)} --output {shlex.quote(output)} "
            f"--run-id {self.run_id}"
        )


@dataclass(frozen=True)
class ManifestRun:
    """The run that checks and records: its id, its `etl_time` and the `ttl` its entries get (epoch seconds).

    `run_key` (`run_key()`) is stored with each entry the run records and decides which entries are the run's own:
    an entry of the same `etl_time` with another run key was delivered by another run (another pipeline's run of
    the same second); an entry without one (written before run keys, by an older populate-manifest or Snowplow's
    tooling) is the run's own, as before; one populate-manifest back-filled from the run's own folder
    (`back_filled_key`) is too. `replaces`: an earlier attempt of
    this run key may have recorded pairs; those its batch no longer has are removed before it completes.
    `register_entry`: the run's entry in the register of unfinished runs, which the lake keeps in the run's commit
    too.
    """

    run_id: str
    etl_time: int
    ttl: int
    job: str = "dedup"
    run_key: str = ""
    replaces: bool = False
    register_entry: RegisteredRun | None = None

    @staticmethod
    def of(
        run_id: str, run_time: datetime, ttl_days: int, job: str = "dedup", run_key: str = "", replaces: bool = False,
        register_entry: RegisteredRun | None = None,
    ) -> ManifestRun:  # fmt: skip
        etl_time = int(run_time.timestamp())
        return ManifestRun(
            run_id=run_id, etl_time=etl_time, ttl=etl_time + ttl_days * SECONDS_PER_DAY, job=job, run_key=run_key,
            replaces=replaces, register_entry=register_entry,
        )  # fmt: skip


BACK_FILLED = "~populate-manifest"
"""Ends the run key of entries `populate-manifest` recorded (`back_filled_key`)."""


def back_filled_key(key: str) -> str:
    """The run key of the entries populate-manifest records for the run of `key` (a completed run folder's `good/`,
    at that run's time; or, for other files, the key of the input root and its --run-id). Never a dedup run's key,
    so no dedup run takes them over as its own keyless ones: to every run they are another run's delivery, except
    to a redo of the run whose `good/` they came from (`same_run`), whose own they are."""
    return f"{key}{BACK_FILLED}"


def same_run(entry_key: str, key: str) -> bool:
    """Whether an entry under `entry_key` is the run of `key`'s own: recorded by it, or back-filled from its run
    folder's `good/`. Not the other way round: a back-fill finds a run's own entries as already present."""
    return entry_key in (key, back_filled_key(key))


def others_entry(entry_time: int, entry_key: str | None, etl_time: int, key: str) -> bool:
    """True when an entry written at `entry_time` by run key `entry_key` (None: none recorded) was delivered by a
    run other than the one of `etl_time` and `key`, at the same second: a duplicate for it, not its own."""
    return entry_time == etl_time and bool(entry_key) and bool(key) and not same_run(entry_key or "", key)


def later_only(earlier: set[str], own: bool, later: set[str]) -> set[str]:
    """The later runs' fingerprints of an id that count for a run: only when no earlier run and not the run itself
    delivered the id. Else the later runs' entries of it are their copies of that delivery (a later run records the
    synthetic copies it finds), which must not change what a redo of this run decides."""
    return set() if earlier or own else later


def later_runs_entry(entry_time: int, entry_key: str | None, etl_time: int, key: str) -> bool:
    """True when an entry written at `entry_time` by run key `entry_key` was delivered by a later run with a run key
    (every other run had completed when this one started: the register sees to it), for a run with a run key.
    Entries without one (an older populate-manifest's, those from before run keys) are taken over as before."""
    return entry_time > etl_time and bool(entry_key) and bool(key) and not same_run(entry_key or "", key)


class ManifestClient(ABC):
    """One connection to the manifest, used by one Python worker for many partitions."""

    def __init__(self) -> None:
        self.stats = ManifestStats()

    @abstractmethod
    def put(self, event_id: str, fingerprint: str, etl_time: int, ttl: int, run_key: str = "") -> str:
        """Record the pair: `RECORDED` when it is new, this run's, a later run's without a run key, or expired;
        `SEEN_EARLIER` when an earlier run has it (or another run key of the same second: `others_entry`);
        `SEEN_LATER` when a later run with a run key has it (`later_runs_entry`): nothing is written."""

    @abstractmethod
    def fingerprints_of(self, event_id: str, etl_time: int, run_key: str = "") -> tuple[set[str], set[str]]:
        """Fingerprints of `event_id` not expired at `etl_time`: those recorded by earlier runs (smaller etl_time, or
        another run key of the same second), and those recorded by later runs with a run key (`later_runs_entry`)
        when the id has no entry of an earlier run or of this one (`later_only`)."""

    def earlier_fingerprints(self, event_id: str, etl_time: int, run_key: str = "") -> set[str]:
        """Fingerprints of `event_id` recorded by earlier runs and not expired at `etl_time` (`fingerprints_of`)."""
        return self.fingerprints_of(event_id, etl_time, run_key)[0]

    def check_ids(
        self, ids: Iterable[tuple[str, list[str]]], etl_time: int, ttl: int, detect_synthetic: bool, run_key: str = ""
    ) -> Iterable[tuple[str, list[str], IdResult]]:
        """Check-and-set every (id, fingerprints) of a partition. Backends may override to batch or parallelize."""
        for event_id, fingerprints in ids:
            yield (
                event_id,
                fingerprints,
                self.check_id(event_id, fingerprints, etl_time, ttl, detect_synthetic, run_key),
            )

    def check_id(
        self, event_id: str, fingerprints: list[str], etl_time: int, ttl: int, detect_synthetic: bool,
        run_key: str = "",
    ) -> IdResult:  # fmt: skip
        # Look before writing: afterwards this run's own writes would be among the answers (they are
        # excluded by etl_time and run key anyway, so a rerun, or Spark recomputing a task, gets the same answer).
        earlier, later = self.fingerprints_of(event_id, etl_time, run_key) if detect_synthetic else (set(), set())
        if later:  # a later run delivered the id: every copy here is its copy, recorded by none (SEEN_LATER)
            return IdResult(earlier_other=True, later=frozenset(later & set(fingerprints)))
        answers = {fp: self.put(event_id, fp, etl_time, ttl, run_key) for fp in fingerprints}
        seen = frozenset(fp for fp, answer in answers.items() if answer == SEEN_EARLIER)
        later_pairs = frozenset(fp for fp, answer in answers.items() if answer == SEEN_LATER)
        return IdResult(seen=seen, earlier_other=bool(earlier - set(fingerprints)), later=later_pairs)

    def close(self) -> None:  # noqa: B027  (optional hook)
        """Release connections."""


class Manifest(ABC):
    """A manifest location, checked on the driver; `spec` is what executors get to open their client."""

    uri: str
    records_when_checked: ClassVar[bool] = True
    """The run's pairs are recorded while `check_pairs` answers (SQLite, DynamoDB); False: only by the check's
    `record()` (the lake's commit), so a run that fails before it has recorded nothing."""

    @abstractmethod
    def check(self) -> None:
        """Verify the manifest is usable as is; raise ManifestError saying what is wrong and how to fix it."""

    @abstractmethod
    def create(self) -> None:
        """Create the manifest (an explicit action: `--create`); a no-op when it exists and is right."""

    @abstractmethod
    def check_pairs(self, pairs: DataFrame, run: ManifestRun, detect_synthetic: bool) -> ManifestCheck:
        """Check the batch's distinct (`event_key`, `fingerprint`) pairs: which an earlier run delivered, and (with
        `detect_synthetic`) which ids an earlier run delivered with another fingerprint."""

    @abstractmethod
    def leftovers(self, pairs: DataFrame, run: ManifestRun) -> int:
        """How many entries an earlier attempt of `run` (its run key) recorded that the batch's `pairs` lack: what
        a redo removes before it completes (its input shrank)."""

    def paced(self, tasks: int) -> tuple[Manifest, dict[str, Any] | None]:
        """This manifest with each worker's share of the backend's capacity when `tasks` tasks call it at once,
        and the pacing figures for summary.json (None: the backend needs no pacing)."""
        return self, None

    def settle(self) -> None:  # noqa: B027  (optional hook)
        """After a run's manifest work, on the driver: leave the manifest complete where it is stored."""
