"""Where a whole `dedup` process spends its time: its steps, from the phase lines it prints as it goes.

The job names each phase on a line of its own (`[dedup   6.4s] reading and parsing …`); the bench stamps every line
with the time since it started the process, so the steps also show what comes before the job's first line (Python
and its imports) and after its last (the summary printed, the JVM stopped).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# A phase line: the job's name and clock, one space, then the phase (status lines are indented further).
PHASE_LINE = re.compile(r"^\[[a-z-]+ +[0-9.]+s\] (\S.*)$")
# The phases of a dedup run, by how their line starts, and the name the timeline gives the step each begins.
STEPS = (
    ("starting Spark", "JVM and Spark session start"),
    ("finding the input files", "incremental: the ledger and the listing"),
    ("reading and parsing", "first pass: every line read, parsed, the decision table built"),
    ("checking the manifest", "manifest: pairs asked"),
    ("deciding the bad lines, the repeated ids and the ids", "decision table with the manifest's answers"),
    ("writing every line", "every line read again, decided and written"),
    ("moving the written files", "written files moved into place"),
    ("recording this run's events", "manifest: this run's pairs recorded"),
    ("sealing", "summary.json and _SUCCESS"),
)
BEFORE_FIRST_LINE = "Python start and imports"
AFTER_LAST_LINE = "summary printed, Spark stopped, process exit"


def step_of(message: str) -> str:
    for start, step in STEPS:
        if message.startswith(start):
            return step
    return message


def timeline(lines: Sequence[tuple[float, str]], wall_seconds: float) -> list[dict[str, Any]]:
    """The steps of one process and their seconds, from its stderr lines stamped with the seconds since it
    started; the last step ends at `wall_seconds`, and the steps add up to it."""
    starts = [(0.0, BEFORE_FIRST_LINE)]
    for seconds, text in lines:
        if match := PHASE_LINE.match(text):
            starts.append((seconds, step_of(match.group(1))))
    ends = [seconds for seconds, _ in starts[1:]]
    last_phase_end = next((s for s, t in lines if not PHASE_LINE.match(t) and "Winnow dedup" in t), None)
    if last_phase_end is not None and last_phase_end >= starts[-1][0]:
        starts.append((last_phase_end, AFTER_LAST_LINE))
        ends.append(last_phase_end)
    ends.append(wall_seconds)
    return [{"step": step, "seconds": round(end - start, 2)} for (start, step), end in zip(starts, ends, strict=True)]
