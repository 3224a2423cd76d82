"""The command a job was started with, rendered again for another run id: the redo a later run prints.

A printed way out is pasted into a shell, often from another folder, by someone who did not start the run. So it
is built from the run's own parsed arguments, not written by hand: every option the run was given (abbreviated or
`--x=y` forms come out whole), local paths made absolute, `--run-id` set, `--create` dropped (the manifest exists
by then), quoted with `shlex.join`. On EMR Serverless (`emr_main.py`) a run is redone through the state machine,
so the line says that first, then the same job by hand.

A local way out starts with `jobs.prog.local_prog()`, which runs from any folder.
"""

from __future__ import annotations

import argparse
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

from jobs.fs.paths import absolute
from jobs.prog import LOCAL_PROG, local_prog

EMR_PROG = "emr_main.py"
"""The `prog` of `jobs.entrypoints.emr_main`: the job runs on EMR Serverless, started by the state machine."""

# Options whose values are local paths or URIs (made absolute: a redo may run from another folder).
PATH_OPTIONS = frozenset({"input", "output", "config", "shredded", "iglu_config", "state", "table", "deduplicated"})
MANIFEST_SCHEMES = ("sqlite:", "lake:")  # URIs whose rest is a path (dynamodb:// names a table)
# Not part of what a redo does: its id is set, the manifest exists by then, tracebacks and Spark's warnings.
LEFT_OUT = frozenset({"run_id", "create", "debug", "verbose", "help"})


@dataclass(frozen=True)
class Invocation:
    """A job's command line, as parsed: `words` (the job and its options, without `--run-id`) after `prog`."""

    prog: str
    words: tuple[str, ...]

    @classmethod
    def of(cls, parser: argparse.ArgumentParser, args: argparse.Namespace, prog: str) -> Invocation:
        """The invocation `parser` parsed into `args` (before the job changes them)."""
        return cls(prog, tuple(_words(parser, args)))

    def again(self, run_id: str) -> str:
        """The command that runs this job (one with `--run-id`) again as run `run_id`, ready to paste into a shell."""
        prog = {EMR_PROG: LOCAL_PROG, LOCAL_PROG: local_prog()}.get(self.prog, self.prog)
        by_hand = command(prog, [*self.words, "--run-id", run_id])
        if self.prog != EMR_PROG:
            return by_hand
        state = {"runId": run_id}
        given = dict(zip(self.words, self.words[1:], strict=False))
        if "--incremental" not in self.words and given.get("--input", "").startswith("s3://"):
            state["inputPrefix"] = urlparse(given["--input"]).path.lstrip("/")  # what the run read, not new files
        return (
            f"redrive its failed execution of the pipeline's state machine, or start one named run-{run_id}-redo "
            f"with the input {json.dumps(state)} (the same job by hand: {by_hand})"
        )


def command(prog: str, words: Sequence[str]) -> str:
    """`prog` (not quoted: `python -m jobs` is three words) and `words`, quoted for a shell."""
    return f"{prog} {shlex.join(words)}"


def absolute_uri(value: str) -> str:
    """A path or URI as a redo from any folder reads it: local paths absolute (also in `sqlite:` and `lake:`)."""
    for scheme in MANIFEST_SCHEMES:
        if value.startswith(scheme) and not value.startswith("sqlite://"):
            return scheme + absolute(value.removeprefix(scheme))
    return absolute(value)


def _words(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The words that give `args` to `parser`: each option given, then the sub-command chosen and its words."""
    words: list[str] = []
    chosen: list[str] = []  # last: a sub-command's parser takes every word after its name
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if isinstance(action, argparse._SubParsersAction):
            chosen = [str(value), *_words(action.choices[str(value)], args)]
        elif action.dest in LEFT_OUT or value is None or value is False or value == action.default:
            continue
        elif not action.option_strings:
            words += _values(action.dest, value)
        else:
            name = max(action.option_strings, key=len)  # the long form, whatever abbreviation was typed
            words += [name] if value is True and action.nargs == 0 else [name, *_values(action.dest, value)]
    return words + chosen


def _values(dest: str, value: object) -> list[str]:
    values = [str(item) for item in (value if isinstance(value, list) else [value])]
    return [absolute_uri(item) for item in values] if dest in PATH_OPTIONS | {"manifest"} else values
