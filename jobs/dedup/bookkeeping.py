"""What a dedup run with a manifest keeps beside its pairs, in the order it keeps it: checked before it writes (no
older copy of the manifest, no unfinished earlier run), its entry in the register of unfinished runs before its first
manifest write (`jobs.manifest.unfinished`) and its output's marker of it (`jobs.manifest.registration`), what its summary records, and its completion once sealed
(`jobs.dedup.stale`)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobs.dedup.redo import refuse_a_moved_run
from jobs.dedup.stale import name_completion, record_completion, require_completions, require_sealed_runs_recorded
from jobs.fs.paths import normalized
from jobs.manifest.base import Manifest, RegisteredRun
from jobs.manifest.completions import CompletedRuns, ManifestUsed, completed_runs, manifest_place
from jobs.manifest.registration import remove_marker, require_registered, write_marker
from jobs.manifest.unfinished import RunRegister, run_register
from jobs.runtime.invocation import absolute_uri


def new_attempt() -> str:
    """An attempt id that sorts by when it was made (then a random part): a manifest holding a later attempt of a
    run than its output names was not copied before it (a kill between the two records leaves exactly that)."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}-{uuid.uuid4().hex[:12]}"


@dataclass
class RunBook:
    """The register and completion records of the run of run key `key` on one manifest."""

    register: RunRegister
    completions: CompletedRuns
    used: ManifestUsed
    key: str
    attempt: str = field(default_factory=new_attempt)

    @classmethod
    def of(cls, manifest: Manifest, key: str) -> RunBook:
        completions = completed_runs(manifest)
        used = ManifestUsed(absolute_uri(manifest.uri), manifest_place(manifest), completions.identity())
        return cls(run_register(manifest), completions, used, key)

    @property
    def run_id(self) -> str:
        return self.key.split("~", 1)[0]

    def check(self, output_path: str, etl_time: int, exists: Callable[[str], bool]) -> RegisteredRun | None:
        """Stop unless the manifest holds every completion recorded for it and no other run is unfinished; the
        entry of an earlier attempt of this run, if any.

        Raises:
            StaleManifestError: an older copy of the manifest (`jobs.dedup.stale`).
            UnfinishedRunError: another run recorded events and has not completed.
        """
        # First: a copy taken while a run was writing holds that run's entry, which the second check would complete.
        require_completions(self.completions, self.register, output_path, self.used, etl_time)
        # Before `require_registered` removes the markers of sealed runs: each must be in the manifest.
        require_sealed_runs_recorded(self.completions, output_path, self.used, self.run_id)
        refuse_a_moved_run(self.completions, output_path, self.used, self.run_id)
        require_registered(self.register, output_path, self.used, self.run_id)
        self.register.require_no_unfinished(self.key, self.used.uri, exists)
        return self.register.entry(self.key)

    def mark(self, output_path: str, run: RegisteredRun) -> None:
        """As the run registers (before its first manifest write, and before a completed output of it is cleared):
        the output's own record of it."""
        write_marker(output_path, run, asdict(self.used))

    def summary(self, folder: str) -> dict[str, Any]:
        """What the run's `summary.json` records of the manifest (after the run's writes), with the run key its
        entries have and the place (`folder` resolved) it was made of: a redo made of another place is refused."""
        generation = self.register.generation()
        return {
            **({"generation": generation} if generation is not None else {}),
            "identity": self.used.identity,
            "attempt": self.attempt,
            "run_key": self.key,
            "run_folder": normalized(folder),
        }

    def record(self, output_path: str, run: RegisteredRun) -> None:
        """Just before the run's `_SUCCESS`: its completion recorded in the manifest."""
        record_completion(self.completions, output_path, run, self.attempt)

    def complete(self, output_path: str, run: RegisteredRun) -> None:
        """After the run's `_SUCCESS`: its completion named in the output, its register entry and marker removed."""
        name_completion(output_path, self.used, run, self.attempt)
        self.register.complete(run)
        remove_marker(output_path, run.run_id)
