"""What the rehearsal checks: the scripts that report where the artifacts import from (the probe job, the planner's
invocation), and what their answers and the jobs' summaries must show."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cdk.artifact_layout import DEPS_DIR, PACKAGE_ZIP
from scripts.rehearsal.environment import CACHE_DIR, aws_environment, in_checkout
from scripts.rehearsal.steps import RehearsalError

AWS_SETTINGS = sorted(aws_environment("", ""))
"""The AWS settings the driver and executors must have (fake credentials, the region, moto's endpoint)."""
PROBE_MARK = "REHEARSAL-PROBE "
"""What starts the line a probe prints its answer on (as JSON), among the job's other output."""

# ----------------------------------------------------------------------------------------------------------------
# The scripts and their answers

_PROBE = """
import json, os, sys
def origins():
    import boto3, jobs, jobs.runtime.cli, pyspark
    from pyspark import SparkFiles
    modules = {m.__name__: os.path.abspath(m.__file__) for m in (jobs, boto3, pyspark)}
    paths = [os.path.abspath(entry) for entry in sys.path]
    unpacked = os.path.join(SparkFiles.getRootDirectory(), DEPS)
    archive = sorted(os.listdir(unpacked)) if os.path.isdir(unpacked) else None
    aws = sorted(key for key in os.environ if key.startswith("AWS_"))
    return {"python": sys.executable, "sys_path": paths, "modules": modules, "archive": archive, "aws": aws}
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("rehearsal-probe").getOrCreate()
executor = spark.sparkContext.parallelize([0], 1).map(lambda _: origins()).collect()[0]
print(MARK + json.dumps({"driver": origins(), "executor": executor}))
spark.stop()
"""
"""A job submitted like the real ones: where the driver and an executor import from (`jobs.runtime.cli` imports
every job's module), what Spark unpacked from `spark.archives` (an executor's `./deps` on EMR; in local[2]
executors run in the driver's working dir, so they import from the copy unpacked there), and the names of the AWS
settings in its environment."""

_INVOKE = """
import json, os, sys
from jobs.incremental.planner_lambda import handler
result = handler(json.loads(sys.argv[1]), None)
modules = {name: getattr(m, "__file__", None) for name, m in sys.modules.items() if "." not in name}
paths = [os.path.abspath(entry) for entry in sys.path]
print(MARK + json.dumps({"result": result, "sys_path": paths, "modules": modules}))
"""
"""The Lambda runtime's part: import the handler from the function's code, call it with the event."""


def probe_job_source() -> str:
    """The probe job's Python source (see `_PROBE`), its mark and the archive's folder name set."""
    return f"MARK, DEPS = {PROBE_MARK!r}, {DEPS_DIR!r}\n{_PROBE}"


def planner_invocation_source() -> str:
    """The source of a script that calls the planner's handler as Lambda does (see `_INVOKE`), its mark set; it
    takes the event as its argument."""
    return f"MARK = {PROBE_MARK!r}\n{_INVOKE}"


def marked(output: str, log: Path) -> dict[str, Any]:
    """The JSON a probe printed after PROBE_MARK.

    Raises:
        RehearsalError: it printed none.
    """
    for line in output.splitlines():
        if line.startswith(PROBE_MARK):
            found: dict[str, Any] = json.loads(line.removeprefix(PROBE_MARK))
            return found
    raise RehearsalError(f"no line starting {PROBE_MARK!r} in the output; expected the probe's answer", log)


# ----------------------------------------------------------------------------------------------------------------
# The checks


def check_origins(
    probed: Mapping[str, Any], venv: Path, archive: list[str], cache: Path = CACHE_DIR, executors: Path | None = None
) -> list[str]:
    """Each side's Python is the venv's; `jobs` comes from the package zip, `boto3` from a `deps` folder (the
    archive), `pyspark` from the venv; no path of the checkout is on `sys.path` or a module's file; Spark unpacked
    `spark.archives` to `archive` (the top-level names of the dependencies archive); with `executors` (a cluster's
    folder), the executor's `jobs` and `boto3` are the copies Spark shipped under it; the notes.

    Raises:
        RehearsalError: one is not so.
    """
    notes = []
    for side in ("driver", "executor"):
        seen = probed[side]
        modules = seen["modules"]
        checkout = [entry for entry in seen["sys_path"] if in_checkout(entry, cache)]
        checks = {
            "python": (seen["python"], seen["python"] == str(venv / "bin" / "python")),
            "jobs": (modules["jobs"], f"/{PACKAGE_ZIP}/jobs/" in modules["jobs"]),
            "boto3": (modules["boto3"], f"/{DEPS_DIR}/boto3/" in modules["boto3"]),
            "pyspark": (modules["pyspark"], modules["pyspark"].startswith(f"{venv}/")),
            "sys.path entries of the checkout": (checkout, not checkout),
            "AWS settings": (seen["aws"], set(AWS_SETTINGS) <= set(seen["aws"])),
            "spark.archives unpacked": (
                seen["archive"],
                [n for n in seen["archive"] or [] if n != "__pycache__"] == archive,
            ),
        }
        if side == "executor" and executors is not None:
            shipped = [modules[name] for name in ("jobs", "boto3")]
            checks[f"jobs and boto3 under {executors}"] = (shipped, all(f.startswith(f"{executors}/") for f in shipped))
        wrong = {name: given for name, (given, ok) in checks.items() if not ok}
        if wrong:
            raise RehearsalError(
                f"{side}: given {wrong}; expected the venv's Python and pyspark, jobs from {PACKAGE_ZIP}, boto3 from "
                f"./{DEPS_DIR}, no sys.path entry of the checkout, spark.archives unpacked to {archive}, the AWS "
                f"settings {AWS_SETTINGS}"
            )
        where = f" of {Path(modules['jobs']).parents[2]}" if side == "executor" and executors is not None else ""
        notes.append(
            f"{side}: jobs from {PACKAGE_ZIP}, boto3 from ./{DEPS_DIR}{where}, the {len(AWS_SETTINGS)} AWS settings"
        )
    notes.append(f"spark.archives unpacked to the {len(archive)} names of ./{DEPS_DIR}")
    return notes


def read_summary(run_folder: Path) -> dict[str, Any]:
    """A completed run's summary.json.

    Raises:
        RehearsalError: the run folder has no `_SUCCESS` or no summary.json.
    """
    missing = [name for name in ("_SUCCESS", "summary.json") if not (run_folder / name).is_file()]
    if missing:
        raise RehearsalError(f"run folder {run_folder}: no {', '.join(missing)}; expected a completed run")
    summary: dict[str, Any] = json.loads((run_folder / "summary.json").read_text(encoding="utf-8"))
    return summary


def check_dedup(summary: Mapping[str, Any], lines: int, manifest: str) -> str:
    """Every input line is in exactly one outcome (summary.json's `counts.input` is the sum of the other counts:
    good, bad, duplicates, quarantined, dropped), and the manifest is the deployment's.

    Raises:
        RehearsalError: the counts do not add up, or another manifest was used.
    """
    counts = summary["counts"]
    outcomes = {name: count for name, count in counts.items() if name != "input"}
    if counts["input"] != lines or sum(outcomes.values()) != lines:
        raise RehearsalError(
            f"dedup summary counts {counts}: expected input = {lines} generated lines = {' + '.join(outcomes)}"
        )
    used = (summary.get("manifest") or {}).get("uri")
    if used != manifest:
        raise RehearsalError(f"dedup summary manifest: given {used!r}; expected {manifest!r}")
    return f"{lines} lines: {counts['good']} good, {counts['bad']} bad, {counts['duplicates']} duplicates"


def check_shred(summary: Mapping[str, Any], good: int, resolver: str, run_folder: Path) -> str:
    """Shred read dedup's good lines, each good or bad, with the deployed Iglu resolver config, and (rdb layout)
    wrote the loader's message.

    Raises:
        RehearsalError: one is not so.
    """
    counts, iglu = summary["counts"], summary.get("iglu") or {}
    if counts["input"] != good or counts["good"] + counts["bad"] != good:
        raise RehearsalError(f"shred summary counts {counts}: expected input = dedup's {good} good = good + bad")
    if iglu.get("config") != resolver or iglu.get("failures"):
        raise RehearsalError(f"shred summary iglu {iglu}: expected config {resolver!r} and no failures")
    if summary.get("layout") == "rdb" and not (run_folder / "shredding_complete.json").is_file():
        raise RehearsalError(f"run folder {run_folder}: no shredding_complete.json; expected one (rdb layout)")
    return f"{good} events, {summary['entities']} entities of {len(summary['shredded_types'])} types"


def check_plan(answer: Mapping[str, Any], task: Path, size: int, cache: Path = CACHE_DIR) -> str:
    """The handler planned the one input file; `jobs` came from the function's code and nothing from the checkout.

    Raises:
        RehearsalError: one is not so.
    """
    result, modules = answer["result"], answer["modules"]
    if (result["files"], result["bytes"], result["reused"]) != (1, size, False) or not result["entry"]:
        raise RehearsalError(f"planner answered {result}; expected a new entry of 1 file, {size} bytes")
    jobs = modules.get("jobs") or ""
    checkout = sorted(name for name, file in modules.items() if file and in_checkout(file, cache))
    checkout += [entry for entry in answer["sys_path"] if in_checkout(entry, cache)]
    if not jobs.startswith(f"{task}/") or checkout:
        raise RehearsalError(f"planner imported jobs from {jobs!r}, from the checkout {checkout}; expected jobs "
                             f"from {task} and nothing of the checkout")  # fmt: skip
    return f"{result['files']} file, {result['bytes']} bytes, entry {result['entry']}"


# ----------------------------------------------------------------------------------------------------------------
# The cluster's outputs against local[2]'s


def output_lines(root: Path) -> dict[str, list[bytes]]:
    """The sorted lines of every folder under `root` that holds data files (gzip ones read uncompressed), by path
    relative to `root`. Data files are those of a run's folders: not a run folder's own files (summary.json,
    _SUCCESS, the loader's message: they hold times and ids), nor hidden or `_` files (checksums, markers)."""
    folders: dict[str, list[bytes]] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.startswith(("_", ".")) or path.parent.name.startswith("run="):
            continue
        data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
        folders.setdefault(path.parent.relative_to(root).as_posix(), []).extend(data.splitlines())
    return {folder: sorted(lines) for folder, lines in folders.items()}


def check_same_outputs(local: Path, cluster: Path) -> str:
    """The cluster run's output folders hold the same lines as local[2]'s, folder by folder (in any order).

    Raises:
        RehearsalError: a folder is on one side only, or holds other lines (the first such folder named).
    """
    expected, given = output_lines(local), output_lines(cluster)
    for folder in sorted(set(expected) | set(given)):
        if folder not in given or folder not in expected:
            side = "local[2]'s" if folder in expected else "the cluster's"
            raise RehearsalError(f"output folder {folder}: only in {side} outputs; expected in both "
                                 f"({local} and {cluster})")  # fmt: skip
        if given[folder] != expected[folder]:
            raise RehearsalError(
                f"output folder {folder}: {len(given[folder])} lines on the cluster against {len(expected[folder])} "
                f"in local[2], not the same; expected the same lines (compare {cluster / folder} with {local / folder})"
            )
    lines = sum(len(found) for found in expected.values())
    return f"{len(expected)} output folders, {lines} lines, the same as local[2]'s"


def check_same_counts(job: str, local: Mapping[str, Any], cluster: Mapping[str, Any]) -> None:
    """The cluster run's summary counts are local[2]'s.

    Raises:
        RehearsalError: they differ.
    """
    if cluster["counts"] != local["counts"]:
        raise RehearsalError(f"{job} summary counts on the cluster {cluster['counts']}; expected local[2]'s "
                             f"{local['counts']}")  # fmt: skip
