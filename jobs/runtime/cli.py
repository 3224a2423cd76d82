"""The command line: `python -m jobs <job> …`, or `winnow <job> …` where the package is installed (`pip install .`).

Each job has a module in `jobs/commands/` with `register(subparsers)`, which adds the job's parser and sets
`handler`: a thin entrypoint from parsed arguments to the job's `run`.
The shared part of every Spark job (config, run id, session, progress, errors, summary) is `run_spark_job`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from jobs.config import JobConfig, load_config
from jobs.contract import Progress
from jobs.errors import InvalidArgumentError, WinnowError
from jobs.fs.paths import check_readable
from jobs.fs.runs import new_run_id, run_timestamp
from jobs.incremental.ledger import NothingToDo
from jobs.prog import LOCAL_PROG
from jobs.runtime.invocation import Invocation

# Modules with a `register(subparsers)` function, in the order `--help` lists them.
COMMAND_MODULES = (
    "jobs.commands.dedup",
    "jobs.commands.populate_manifest",
    "jobs.commands.generate",
    "jobs.commands.keyed",
    "jobs.commands.table",
    "jobs.commands.shred",
    "jobs.commands.run",
    "jobs.commands.report",
    "jobs.commands.manifest",
)


class JobFailedError(WinnowError):
    """A Spark job failed (exit 1): no `_SUCCESS` was written; the cause is chained (`--debug` shows it)."""

    exit_code = 1


SparkJob = Callable[[SparkSession, JobConfig, str, Progress], dict[str, Any]]


def build_parser(prog: str = LOCAL_PROG) -> argparse.ArgumentParser:
    """The parser of every job; `prog` is the command its usage and help name."""
    parser = argparse.ArgumentParser(prog=prog, description="Winnow: deduplicate and shred event data on Spark.")
    subparsers = parser.add_subparsers(dest="job", required=True, metavar="JOB")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    _add_common_options(parser)
    return parser


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    """`--debug` and `--verbose` on every command and sub-command (wherever typed): tracebacks, not one-line
    errors; Spark's warnings that are expected in our plans, which jobs/runtime/log4j2.properties silences."""
    parser.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="print the traceback of an error too"
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show Spark's warnings that are expected in Winnow's plans, and its report of each failed task (silenced by default; local runs)",
    )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _add_common_options(sub)


RUN_ID_HELP = (
    "the run's id, YYYY-MM-DD-HH-MM-SS (UTC); default: now. Rerunning with the same id replaces that run's folder "
    "with identical content"
)


def add_run_options(parser: argparse.ArgumentParser, run_id_help: str = RUN_ID_HELP) -> None:
    """`--run-id` and `--config`, which every Spark job takes (`run_id_help` for a job that writes no run folder)."""
    parser.add_argument("--run-id", metavar="ID", help=run_id_help)
    parser.add_argument(
        "--config", metavar="FILE", help="job config JSON (see configs/README.md); default: the built-in defaults"
    )


def main(argv: Sequence[str] | None = None, prog: str = LOCAL_PROG) -> int:
    """Run one job; 0 when it completed, 2 for a usage, config or environment error, 1 when the job failed.

    Every error ends as one line on stderr (`error: …`); `--debug` adds the traceback.
    """
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    args.invocation = Invocation.of(parser, args, prog)  # a job's printed redo: `args.invocation.again(run_id)`
    debug = getattr(args, "debug", False)
    try:
        _check_spark_paths(args)
        return int(args.handler(args))
    except Exception as err:
        if debug:
            traceback.print_exc()
        if isinstance(err, WinnowError):
            message, code = one_line(str(err)), int(getattr(err, "exit_code", 2))
        else:  # not ours to explain: what it was, in one line
            message, code = f"{args.job} failed: {type(err).__name__}: {first_line(err)}", 1
        for note in notes_of(err):
            message = f"{message.rstrip('.')}. {one_line(note)}"
        # A failure with a cause worth reading (a Spark job, an unexpected error) says where the detail is.
        unexpected = isinstance(err, JobFailedError) or not isinstance(err, WinnowError)
        print(f"error: {message}{' (run with --debug for the traceback)' if unexpected and not debug else ''}",
              file=sys.stderr)  # fmt: skip
        return code


SPARK_PATH_OPTIONS = ("input", "output", "state", "table", "shredded", "deduplicated")
"""The options whose paths Spark reads (an output too: the jobs read back what they wrote)."""


LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
"""What ends a line (`str.splitlines`): a path holding one cannot be named in a one-line message."""


def _check_spark_paths(args: argparse.Namespace) -> None:
    """Refuse a path Spark cannot read exactly before anything runs (`paths.exact`), and a path holding a line
    break, which the one-line messages and printed commands (a run's way out) could not name as it is; a lake
    manifest is checked again where it is opened (its URI may come from the config)."""
    for name in (*SPARK_PATH_OPTIONS, "manifest", "config"):
        value = getattr(args, name, None)
        for path in value if isinstance(value, list) else [value] if isinstance(value, str) else []:
            if any(character in LINE_BREAKS for character in path):
                raise InvalidArgumentError(
                    f"--{name}: given {path!r}: a name holding a line break cannot be named in the one-line "
                    "messages and commands a run prints (its way out); allowed: names without line breaks. Rename "
                    "it; nothing was written"
                )
            if name in SPARK_PATH_OPTIONS and urlparse(path).scheme not in ("", "file") and "://" not in path:
                raise InvalidArgumentError(
                    f"--{name}: given {path}: the name before its first ':' reads as a URI scheme "
                    f"({urlparse(path).scheme}:); allowed: ./{path} or an absolute path. Nothing was written"
                )
            if name in SPARK_PATH_OPTIONS:
                check_readable(f"--{name}", path)
    manifest = getattr(args, "manifest", None)
    if isinstance(manifest, str) and manifest.startswith("lake:"):
        check_readable("--manifest", manifest.removeprefix("lake:"))


def console_main() -> int:
    """The `winnow` console script (pyproject.toml): `main`, its usage and help naming the command as it was run."""
    return main(prog=os.path.basename(sys.argv[0]) or "winnow")


def one_line(text: str) -> str:
    """A message on one line (embedded newlines, e.g. from a JVM error, would break the one-line contract)."""
    return " ".join(text.split())


def worker_error(err: BaseException) -> str | None:
    """The last of our own errors in a Spark task's Python traceback (e.g. a throttled manifest request), as
    `Class: message`; None when the failure came from elsewhere."""
    found = None
    for line in str(err).splitlines():
        match = re.match(r"\s*jobs\.[\w.]*\.(\w+Error): (.+)$", line)
        if match:
            found = f"{match.group(1)}: {match.group(2)}"
    return found


def out_of_memory(err: BaseException, spark_conf: dict[str, str]) -> str | None:
    """The way out when the JVM ran out of heap: its OutOfMemoryError in the failure, or Spark shut down under
    the job (what a task's OutOfMemoryError does in local mode, the JVM's log above the line says so); None
    otherwise."""
    text = str(err)
    given = spark_conf.get("spark.driver.memory")
    memory = f"spark.driver.memory: {given}" if given else "spark.driver.memory not set: Spark's default, 1g"
    if "java.lang.OutOfMemoryError" in text:
        what, more = f"Spark ran out of memory ({memory})", "and more memory"
    elif "SparkContext was shut down" in text:
        what = f"Spark shut down during the run, most often out of memory (java.lang.OutOfMemoryError above; {memory})"
        more = "with more memory if so"
    else:
        return None
    return (
        f'{what}; nothing is lost: rerun with the same run id {more} (locally "spark.driver.memory" in the '
        "config's spark.conf: configs/local.json sets 4g; on EMR emr.spark_conf's spark.driver.memory or "
        "spark.executor.memory)"
    )


def notes_of(err: BaseException) -> list[str]:
    """The notes added to `err` or to an error it was raised from (a lease that could not be released as the run
    stopped: `jobs.fs.lease`), in the order of the chain, each once."""
    notes: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        notes += [note for note in getattr(current, "__notes__", []) if note not in notes]
        current = current.__cause__ or current.__context__
    return notes


def first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [""])[0]


def _known_failure(err: BaseException, args: argparse.Namespace, config: JobConfig) -> str | None:
    """`failures.explain` with the run's output, manifest and Spark scratch folder."""
    from jobs.runtime.failures import RERUN, TABLE_RERUN, explain

    output = getattr(args, "output", None)
    rerun = {"table": TABLE_RERUN, "populate-manifest": back_fill_way_out(args)}.get(args.job, RERUN)
    return explain(err, output, config.manifest.uri, config.spark.conf.get("spark.local.dir"), rerun)


def back_fill_way_out(args: argparse.Namespace) -> str:
    """`failures.back_fill_again` with populate-manifest as it was given, its run id set; `--create` is kept (the
    failure may have come before the manifest was made, and it leaves an existing one as it is)."""
    from jobs.runtime.failures import back_fill_again

    command = args.invocation.again(args.run_id) + (" --create" if getattr(args, "create", False) else "")
    return back_fill_again(command)


RECORD_JOBS_LIMIT_DIVISOR = 32
"""`keyed` and `table` read records, not enriched events: what makes an input small is its rows, and a record (a
csv row of `jobs.tools.keyed_records`) is some 40 times smaller than an event, so their limit is
`spark.small_input_mb` / 32 (docs/configuration.md has the figures)."""


def is_small_input(args: argparse.Namespace, limit_mb: int) -> bool:
    """True when the job's `--input` holds `limit_mb` MiB or less (the session then runs its plans interpreted), or
    for `keyed` and `table` a `RECORD_JOBS_LIMIT_DIVISOR`th of it; False without one, or when it cannot be listed (the
    job then says why, with Spark's defaults)."""
    from jobs.fs import store

    root = getattr(args, "input", None)
    if not isinstance(root, str) or limit_mb == 0:
        return False
    share = RECORD_JOBS_LIMIT_DIVISOR if getattr(args, "job", None) in ("keyed", "table") else 1
    try:
        return not store.larger_than(root, limit_mb * 1024 * 1024 // share)
    except Exception:  # only a choice of settings: the run itself reports what is wrong
        return False


def run_spark_job(
    args: argparse.Namespace,
    job: SparkJob,
    render: Callable[[dict[str, Any]], str],
    configure: Callable[[JobConfig], JobConfig] = lambda config: config,
    preflight: Callable[[JobConfig], None] = lambda config: None,
) -> int:
    """Load the config, validate the run id, run `preflight` (checks that need no Spark), start Spark, run `job`,
    print its summary table.

    A `WinnowError` propagates (a usage error, exit 2); any other failure ends with one clear line and exit 1.
    """
    config = configure(load_config(args.config))
    run_id = args.run_id = args.run_id or new_run_id()  # the preflight sees the id the job gets
    run_timestamp(run_id)  # validate before Spark starts (which takes seconds): a mistake is told in under a second
    try:
        preflight(config)
    except WinnowError:
        raise
    except Exception as err:  # a known cause (a dangling link, a damaged manifest) named; any other as it was
        known = _known_failure(err, args, config)
        if known is None:
            raise
        raise JobFailedError(f"{args.job} run {run_id} stopped before Spark started, nothing written: {known}") from err
    from jobs.prog import launched_by_spark_submit
    from jobs.runtime.progress import Reporter, StageWatcher
    from jobs.runtime.session import spark_session

    # Only a session the job starts gets the small-input settings. Before the first line: listing the input is part of
    # getting ready, not of Spark's start.
    starts_its_own = not launched_by_spark_submit() and SparkSession.getActiveSession() is None
    small_input = starts_its_own and is_small_input(args, config.spark.small_input_mb)
    progress = Reporter(args.job)
    progress(
        "starting Spark (a small input: plans interpreted, spark.small_input_mb)" if small_input else "starting Spark"
    )
    with StageWatcher(progress) as watcher:  # between the phase lines, what Spark is doing in each
        spark = spark_session(config.spark, f"winnow-{args.job}", getattr(args, "verbose", False), small_input)
        watcher.spark = spark
        try:
            summary = job(spark, config, run_id, progress)
        except NothingToDo as nothing:  # an incremental run with no new input: no run is written, and that is fine
            print(f"{args.job} run {run_id}: {nothing}")
            return 0
        except WinnowError:
            raise
        except Exception as err:  # a failed Spark job: one clear line (main prints it), the detail with --debug
            known = _known_failure(err, args, config)  # names its way out
            cause = (
                worker_error(err)
                or out_of_memory(err, config.spark.conf)
                or known
                or f"{type(err).__name__}: {first_line(err)}"
            )
            if args.job == "table":  # no run id, no _SUCCESS: a change is committed whole or not at all
                raise JobFailedError(f"table {args.operation} failed, nothing committed: {cause}") from err
            if args.job == "populate-manifest":  # no run folder: what it recorded stays, and passes as its own
                way_out = "" if cause == known else f". Fix that, {back_fill_way_out(args)}"
                raise JobFailedError(f"populate-manifest run {run_id} failed: {cause}{way_out}") from err
            job_run = "run" if args.job == "run" else f"{args.job} run"  # not "run run ID"
            raise JobFailedError(f"{job_run} {run_id} failed, no _SUCCESS written: {cause}") from err
    print(render(summary))
    return 0
