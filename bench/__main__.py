"""`python -m bench` (`make bench`): Winnow side by side with the pass-through limit and its peers, in one go.

Writes `bench/results.json` (`--results`) and `RESULTS.md` beside it, and puts the Markdown tables into
docs/benchmarks.md between the `bench:start` / `bench:end` markers. Every figure is a warm-up run, then the median
of `--runs` runs taken in turn (A B A B …); every ratio compares figures of this one run. Generated inputs are
kept in `bench/data/`.

    .venv/bin/python -m bench                      # 1M events, 3 runs, scaling 250k-2M, all sections but large
    .venv/bin/python -m bench --sections large --merge   # 10M: Winnow's process vs DuckDB's, the rest kept
    .venv/bin/python -m bench --sections small --merge --runs 2   # 10k, 40k: the small-input session's processes
    .venv/bin/python -m bench --sections processes --merge --runs 2   # run, dedup, pass-through processes (+ heavy tail)
    .venv/bin/python -m bench --events 200000 --runs 3 --scaling 100000 200000 --sections spark processes
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import other_pyspark, pipeline, report, small
from bench.measure import Figure, Sample, alternate, measure_in_process, measure_process
from bench.outputs import output_lines as output_lines  # also where tests/bench take it from
from bench.timeline import timeline

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
WORK = ROOT / "bench" / "work"
DOCS_PAGE = ROOT / "docs" / "benchmarks.md"  # the page whose tables each run rewrites
PROCESS_RUN_ID = "2026-11-22-05-00-00"
PROCESS_OUTPUT = WORK / "out" / "proc-dedup"
OTHER_PROCESS_OUTPUT = WORK / "out" / "proc-dedup-other-pyspark"
SECTIONS = ("spark", "processes", "small", "profile", "keyed", "scaling", "manifest", "crossbatch", "large")
# `large` (a 10M-event input of ~15 GB, generated once) runs only when asked for.
DEFAULT_SECTIONS = [name for name in SECTIONS if name != "large"]
# The Spark settings of the repo's local config (local[*], 4g driver, 16 shuffle partitions), for the in-session
# cases and the whole processes alike.
SPARK_CONFIG = {"spark": json.loads((ROOT / "configs" / "local.json").read_text())["spark"]}


def log(message: str) -> None:
    print(f"{datetime.now():%H:%M:%S} {message}", file=sys.stderr, flush=True)


def python_module(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


def enriched_input(events: int, heavy_tail: bool = False) -> Path:
    """Generated enriched events (the default long-tail duplicate distribution, or the heavy-tail workload of
    `bench.pipeline`), made once and kept."""
    folder = DATA / (f"events-heavy-{events}" if heavy_tail else f"events-{events}")
    if not (folder / "_COMPLETE").exists():
        log(f"generating {events:,} events into {folder}")
        subprocess.run(
            python_module(
                "jobs", "generate", "--output", str(folder), "--events", str(events), "--files", "4", "--overwrite",
                *(pipeline.HEAVY_GENERATE if heavy_tail else ()),
            ),  # an interrupted generation left files, not _COMPLETE
            check=True,
            cwd=ROOT,
        )  # fmt: skip
        (folder / "_COMPLETE").touch()
    return folder


def keyed_input(rows: int) -> Path:
    folder = DATA / f"keyed-{rows}"
    if not (folder / "_COMPLETE").exists():
        log(f"generating {rows:,} keyed records into {folder}")
        subprocess.run(
            python_module("jobs.tools.keyed_records", "--output", str(folder), "--rows", str(rows), "--files", "4"),
            check=True,
            cwd=ROOT,
        )
        (folder / "_COMPLETE").touch()
    return folder


def machine() -> dict[str, Any]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    memory_kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))  # type: ignore[union-attr]
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    import pyspark

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "java": java,
        "spark": pyspark.__version__,
        "load_average_at_start": os.getloadavg()[0],
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


class SparkBench:
    """The in-session cases: one Spark session (local mode, all cores) for every Spark figure."""

    def __init__(self) -> None:
        from bench import spark_cases
        from jobs.config import JobConfig, config_from_dict
        from jobs.runtime.session import spark_session

        self.cases = spark_cases
        self.config = spark_cases.in_batch_config(config_from_dict(JobConfig, SPARK_CONFIG))
        self.spark = spark_session(self.config.spark, "winnow-bench")
        self.pid = int(self.spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]

    def timed(self, work: Callable[[], Any]) -> Callable[[], Sample]:
        return lambda: measure_in_process(work, self.pid)

    def enriched_cases(self, source: Path, with_jobs: bool = True) -> dict[str, Callable[[], Sample]]:
        c, spark, config, out = self.cases, self.spark, self.config, WORK / "out"
        cases = {
            "pass-through": self.timed(lambda: c.passthrough(spark, str(source), str(out / "pass"))),
            "dedup": self.timed(lambda: c.dedup(spark, config, str(source), str(out / "dedup"))),
        }
        if with_jobs:
            cases.update({
                "dropDuplicates": self.timed(lambda: c.drop_duplicates(spark, str(source), str(out / "dd"))),
                "shred": self.timed(lambda: c.shred(spark, config, str(source), str(out / "shred"))),
                "shred (legacy layout)": self.timed(
                    lambda: c.shred(spark, config, str(source), str(out / "shred-legacy"), "legacy")
                ),
                "shred (TSV, Iglu)": self.timed(
                    lambda: c.shred(spark, config, str(source), str(out / "shred-tsv"), "rdb", "shred-tsv", iglu=True)
                ),
                "shred (wide-row Parquet)": self.timed(
                    lambda: c.shred(spark, config, str(source), str(out / "parquet"), "rdb", "widerow-parquet")
                ),
                "shred (wide-row Parquet, typed)": self.timed(
                    lambda: c.shred(
                        spark, config, str(source), str(out / "parquet-typed"), "rdb", "widerow-parquet", iglu=True
                    )
                ),
                "run (dedup + shred)": self.timed(lambda: c.run_pipeline(spark, config, str(source), str(out / "run"))),
            })  # fmt: skip
        return cases

    def profile_cases(self, source: Path) -> dict[str, Callable[[], Sample]]:
        """The steps, with this section's own pass-through (its ratios need no other section) and DuckDB's JSON
        parse (a process: the cheapest peer of the shred job's JSON step)."""
        c, spark, out = self.cases, self.spark, WORK / "out"
        steps = c.profile_steps(spark, self.config, str(source))
        duckdb_json = python_module("bench.peers.duckdb_json", "--input", str(source))
        cases = {"pass-through": self.timed(lambda: c.passthrough(spark, str(source), str(out / "pass")))}
        for name, step in steps.items():
            cases[name] = self.timed(step)
            if name == "shred: JSON fields parsed alone":
                cases["peer: DuckDB, the three JSON fields parsed (process)"] = lambda: measure_process(duckdb_json)
        return cases

    def keyed_cases(self, records: Path) -> dict[str, Callable[[], Sample]]:
        c, spark, out = self.cases, self.spark, WORK / "out"
        table = WORK / "table"
        c.replacing_table(spark, str(records), str(table))
        return {
            "keyed": self.timed(lambda: c.keyed(spark, str(records), str(out / "keyed"), str(WORK / "keyed-state"))),
            "table select --final": self.timed(lambda: c.select_final(spark, str(table), str(out / "final"))),
        }

    def distinct_pairs(self, source: Path) -> int:
        """Distinct (event_key, fingerprint) of the valid events: what the manifest should be written once for."""
        from jobs.enriched.parse import parse_events
        from jobs.fs.input import read_lines

        parsed = parse_events(read_lines(self.spark, str(source)), self.config.dedup.fingerprint_fields)
        return int(parsed.where("size(errors) = 0").select("event_key", "fingerprint").distinct().count())

    def manifest_requests(self, source: Path) -> dict[str, Any]:
        """Requests per input line of a dedup run against a fresh SQLite manifest (same code path as DynamoDB)."""
        database = WORK / "manifest.db"
        result: dict[str, Any] = {}
        distinct_pairs = self.distinct_pairs(source)
        for synthetic in (True, False):
            for suffix in ("", "-wal", "-shm"):  # a fresh manifest for each run
                Path(f"{database}{suffix}").unlink(missing_ok=True)
            base = self.cases.with_manifest(self.config, f"sqlite:{database}")
            config = dataclasses.replace(
                base, manifest=dataclasses.replace(base.manifest, cross_batch_synthetic=synthetic)
            )
            started = time.monotonic()
            summary = self.cases.dedup(self.spark, config, str(source), str(WORK / "out" / "manifest"), True)
            seconds = time.monotonic() - started
            manifest = summary["manifest"]
            result["synthetic_on" if synthetic else "synthetic_off"] = {
                "input_lines": summary["counts"]["input"],
                "distinct_pairs": distinct_pairs,
                "requests": manifest["requests"],
                "puts": manifest["puts"],
                "queries": manifest["queries"],
                "requests_per_input_line": manifest["requests_per_input_line"],
                "puts_per_distinct_pair": round(manifest["puts"] / distinct_pairs, 4),
                "seconds": round(seconds, 2),
            }
        return result


def process_cases(
    source: Path, other: tuple[str, Path] | None = None, heavy_source: Path | None = None
) -> dict[str, Callable[[], Sample]]:
    """Whole processes, Spark or DuckDB start-up included: Winnow's `run` (dedup then shred, `bench.pipeline`),
    its `dedup` command (with and without the class archive, `jobs.runtime.class_archive`), the DuckDB peer, the
    pass-through in a process of its own (what any Spark process pays before its work) and Spark's cheapest dedup
    in one (`dropDuplicates`, no check); with `other` (a pyspark version and the python that has it), Winnow's
    `dedup` on that Spark too, into a folder of its own; with `heavy_source`, `run`, `dedup` and the pass-through
    again on that input (the heavy-tail workload)."""
    from jobs.runtime.session import LOCAL_CONF

    config = WORK / "local-bench.json"
    config.write_text(json.dumps(SPARK_CONFIG))
    # The same settings, with the driver's JVM options given whole (a config's own win): no class archive.
    without_archive = WORK / "local-bench-without-class-archive.json"
    plain_jvm = {"spark.driver.extraJavaOptions": LOCAL_CONF["spark.driver.extraJavaOptions"]}
    without_archive.write_text(json.dumps({"spark": {**SPARK_CONFIG["spark"],
                                                     "conf": {**SPARK_CONFIG["spark"]["conf"], **plain_jvm}}}))  # fmt: skip
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}

    def winnow_dedup(
        config: Path, python: str = sys.executable, output: Path = PROCESS_OUTPUT, events: Path = source
    ) -> list[str]:
        return [python, "-m", "jobs", "dedup", "--input", str(events), "--output", str(output), "--config", str(config),
                "--run-id", PROCESS_RUN_ID]  # fmt: skip

    duckdb = python_module("bench.peers.duckdb_dedup", "--input", str(source), "--output", str(WORK / "out" / "duck"))

    def passthrough_of(source: Path, output: Path) -> list[str]:
        return python_module("bench.passthrough", "--input", str(source), "--output", str(output),
                             "--config", str(config))  # fmt: skip

    passthrough = passthrough_of(source, WORK / "out" / "proc-pass")
    drop_duplicates = python_module("bench.passthrough", "--input", str(source), "--output",
                                    str(WORK / "out" / "proc-drop"), "--config", str(config), "--drop-duplicates")  # fmt: skip
    log = WORK / "processes.log"
    cases = {
        pipeline.RUN: pipeline.run_process(source, WORK / "out" / "proc-run", config, env, log),
        "winnow dedup (process)": lambda: measure_process(winnow_dedup(config), env, log),
        "winnow dedup (process, without the class archive)": lambda: measure_process(
            winnow_dedup(without_archive), env, log
        ),
    }
    if other is not None:
        version, python = other
        command = winnow_dedup(config, str(python), OTHER_PROCESS_OUTPUT)
        cases[f"winnow dedup (process, pyspark {version})"] = lambda: measure_process(
            command, {**env, "PYSPARK_PYTHON": str(python)}, log
        )
    cases |= {
        "duckdb warehouse model (process)": lambda: measure_process(duckdb, env, log),
        "spark pass-through (process)": lambda: measure_process(passthrough, env, log),
        "spark dropDuplicates (process)": lambda: measure_process(drop_duplicates, env, log),
    }
    if heavy_source is not None:
        heavy_dedup = winnow_dedup(config, output=WORK / "out" / "proc-dedup-heavy", events=heavy_source)
        heavy_passthrough = passthrough_of(heavy_source, WORK / "out" / "proc-pass-heavy")
        cases |= {
            pipeline.heavy(pipeline.RUN): pipeline.run_process(
                heavy_source, WORK / "out" / "proc-run-heavy", config, env, log
            ),
            pipeline.heavy(pipeline.DEDUP): lambda: measure_process(heavy_dedup, env, log),
            pipeline.heavy(pipeline.PASSTHROUGH): lambda: measure_process(heavy_passthrough, env, log),
        }
    return cases


def large_cases(source: Path) -> dict[str, Callable[[], Sample]]:
    """Winnow's `dedup` process against DuckDB's and Spark's cheapest dedup process on a large input; each output is
    removed after its run, so the disk holds the input and one output at a time."""
    config = WORK / "local-bench.json"
    config.write_text(json.dumps(SPARK_CONFIG))
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    winnow_out, duckdb_out = WORK / "out" / "large-dedup", WORK / "out" / "large-duck"
    winnow = python_module("jobs", "dedup", "--input", str(source), "--output", str(winnow_out),
                           "--config", str(config), "--run-id", "2026-11-22-05-00-00")  # fmt: skip
    duckdb = python_module("bench.peers.duckdb_dedup", "--input", str(source), "--output", str(duckdb_out))
    drop_out = WORK / "out" / "large-drop"
    drop_duplicates = python_module("bench.passthrough", "--input", str(source), "--output", str(drop_out),
                                    "--config", str(config), "--drop-duplicates")  # fmt: skip

    def then_removed(command: list[str], output: Path) -> Callable[[], Sample]:
        def case() -> Sample:
            shutil.rmtree(output, ignore_errors=True)  # bench/work/out is this harness's own scratch
            try:
                return measure_process(command, env, WORK / "processes.log")
            finally:
                shutil.rmtree(output, ignore_errors=True)

        return case

    return {
        "winnow dedup (process)": then_removed(winnow, winnow_out),
        "duckdb warehouse model (process)": then_removed(duckdb, duckdb_out),
        "spark dropDuplicates (process)": then_removed(drop_duplicates, drop_out),
    }


def chdb_case(records: Path) -> Callable[[], Sample]:
    command = python_module("bench.peers.chdb_final", "--input", str(records), "--key", "id", "--version", "ver",
                            "--output", str(WORK / "out" / "chdb-final"))  # fmt: skip

    def case() -> Sample:
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
        wall = time.monotonic() - started
        result = json.loads(done.stdout)
        return Sample(wall, None, result)

    return case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events for the side-by-side figures")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per case after the warm-up (default 3)")
    parser.add_argument("--scaling", type=int, nargs="*", default=[250_000, 500_000, 1_000_000, 2_000_000])
    parser.add_argument("--keyed-rows", type=int, default=1_000_000)
    parser.add_argument("--small-events", type=int, nargs="+", default=small.DEFAULT_EVENTS,
                        help="small: the inputs' sizes (default 10000 40000)")  # fmt: skip
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=DEFAULT_SECTIONS,
                        help="default: all but large")  # fmt: skip
    parser.add_argument(
        "--large-events",
        type=int,
        default=10_000_000,
        help="events of the large section (default 10M: ~15 GB on disk, kept in bench/data)",
    )
    parser.add_argument(
        "--large-runs", type=int, default=1, help="timed runs of the large section, without warm-up (default 1)"
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the sections of the existing --results file that this run does not measure",
    )
    parser.add_argument("--other-pyspark", metavar="VERSION",
                        help="processes: Winnow's dedup on this pyspark too (a venv of its own in bench/), outputs "
                        "compared line by line with the pinned one's")  # fmt: skip
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results.json")
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.large_runs < 1:
        parser.error(f"--runs, --large-runs: given {args.runs}, {args.large_runs}; allowed: 1 or more")

    earlier = json.loads(args.results.read_text()) if args.merge and args.results.exists() else None
    if earlier and earlier["input"]["events"] != args.events:  # told now, not after an hour of measuring
        parser.error(f"--merge: {args.results} is of {earlier['input']['events']:,} events, this run of "
                     f"{args.events:,}; allowed: the same --events")  # fmt: skip

    WORK.mkdir(parents=True, exist_ok=True)
    settings = vars(args) | {"results": str(args.results)}
    results: dict[str, Any] = {"machine": machine(), "settings": settings}
    started = time.monotonic()
    source = DATA / f"events-{args.events}"
    if earlier and not set(args.sections) & {"spark", "processes", "profile"}:
        results["input"] = earlier["input"]  # no section of this run reads it: not generated for nothing
    else:
        source = enriched_input(args.events)
        results["input"] = {"events": args.events, "bytes": input_bytes(source)}

    spark_bench = SparkBench() if set(args.sections) & {"spark", "profile", "keyed", "scaling", "manifest"} else None
    if "spark" in args.sections and spark_bench:
        log(f"Spark jobs on {args.events:,} events")
        results["spark_jobs"] = figures(alternate(spark_bench.enriched_cases(source), args.runs, progress=log))
    if "processes" in args.sections:
        other = (args.other_pyspark, other_pyspark.python_with(args.other_pyspark)) if args.other_pyspark else None
        heavy_source = enriched_input(args.events, heavy_tail=True)
        log("whole processes: Winnow run and dedup vs the pass-through, DuckDB; and on the heavy-tail input")
        measured = alternate(process_cases(source, other, heavy_source), args.runs, progress=log)
        results["processes"] = figures(measured)
        results["processes_heavy_tail_input"] = {"events": args.events, "bytes": input_bytes(heavy_source)}
        results["processes_timeline"] = last_run_timeline(measured["winnow dedup (process)"])
        if other:
            run = f"run={PROCESS_RUN_ID}"
            same = output_lines(PROCESS_OUTPUT / run) == output_lines(OTHER_PROCESS_OUTPUT / run)
            results["processes_other_pyspark"] = {"version": other[0], "identical_outputs": same}
    if "small" in args.sections:
        log(f"small batches: whole processes on {', '.join(f'{n:,}' for n in args.small_events)} events")
        results["small"] = small.section(args.small_events, args.runs, enriched_input, WORK, SPARK_CONFIG, log)
    if "profile" in args.sections and spark_bench:
        log(f"where the time goes: the jobs' steps on {args.events:,} events, computed without writing")
        steps = spark_bench.profile_cases(source)
        results["profile"] = figures(alternate(steps, args.runs, progress=log))
    if "keyed" in args.sections and spark_bench:
        records = keyed_input(args.keyed_rows)
        log(f"keyed and table select --final on {args.keyed_rows:,} records, vs chdb ReplacingMergeTree FINAL")
        cases = spark_bench.keyed_cases(records) | {"chdb ReplacingMergeTree FINAL (process)": chdb_case(records)}
        keyed_figures = alternate(cases, args.runs, progress=log)
        results["keyed"] = figures(keyed_figures)
        chdb_runs = [run.result for run in keyed_figures["chdb ReplacingMergeTree FINAL (process)"].runs]
        results["keyed"]["chdb ReplacingMergeTree FINAL (process)"]["engine_seconds"] = chdb_runs
    if "scaling" in args.sections and spark_bench:
        results["scaling"] = []
        for events in args.scaling:
            log(f"scaling: {events:,} events")
            scaled = alternate(spark_bench.enriched_cases(enriched_input(events), False), args.runs, progress=log)
            results["scaling"].append({"events": events, **figures(scaled)})
    if "manifest" in args.sections and spark_bench:
        smallest = enriched_input(min(args.scaling or [args.events]))
        log(f"manifest requests per event on {smallest.name}")
        results["manifest"] = {"requests": spark_bench.manifest_requests(smallest)}
        log("manifest throughput against a local endpoint with injected latency")
        done = subprocess.run(python_module("bench.manifest_latency", "--json"), capture_output=True, text=True,
                              check=True, cwd=ROOT)  # fmt: skip
        results["manifest"]["latency"] = json.loads(done.stdout)
    crossbatch_markdown = ""
    if "crossbatch" in args.sections:
        log("cross-batch dedup against a 30-day manifest: lake, SQLite, DynamoDB stand-in (bench/crossbatch.py)")
        command = python_module("bench.crossbatch", "--events", str(args.events))
        if "processes" in results:  # this run's pass-through process, the second yardstick of the target
            seconds = results["processes"]["spark pass-through (process)"]["median_seconds"]
            command += ["--process-passthrough-seconds", str(seconds)]
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True, cwd=ROOT)
        results["crossbatch"] = {"results": "bench/crossbatch-results.json"}
        crossbatch_markdown = (
            "\nCross-batch dedup against a 30-day manifest (`python -m bench.crossbatch`):\n\n" + done.stdout
        )
    if "large" in args.sections:
        large = enriched_input(args.large_events)
        log(f"whole processes on {args.large_events:,} events: Winnow dedup vs DuckDB, {args.large_runs} run(s)")
        measured = alternate(large_cases(large), args.large_runs, warmup=False, progress=log)
        results["large"] = {"events": args.large_events, "bytes": input_bytes(large), **figures(measured)}
        results["large_timeline"] = last_run_timeline(measured["winnow dedup (process)"])
    results["total_seconds"] = round(time.monotonic() - started, 1)
    date, minutes = results["machine"]["date"], round(results["total_seconds"] / 60)
    results["measured"] = {
        name: {"date": date, "runs": args.large_runs if name == "large" else args.runs, "minutes": minutes}
        for name in args.sections
    }
    if earlier:
        results = merged(earlier, results)

    args.results.write_text(json.dumps(results, indent=2) + "\n")
    markdown = report.markdown(results) + crossbatch_markdown
    args.results.with_name("RESULTS.md").write_text(markdown)  # beside the results file, wherever it is
    if not args.no_docs:
        report.update_page(DOCS_PAGE, markdown)
    print(markdown)
    return 0


# The results keys of a section, where they are not just the section's name.
RESULT_KEYS = {"spark": ("spark_jobs",), "processes": ("processes", "processes_timeline", "processes_other_pyspark",
                                                     "processes_heavy_tail_input"),
               "large": ("large", "large_timeline")}  # fmt: skip


def merged(earlier: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """`current` with the sections of `earlier` (same input) it did not measure, each with the date it was
    measured."""
    earlier_stamp = {"date": earlier["machine"]["date"], "runs": earlier["settings"]["runs"],
                     "minutes": round(earlier["total_seconds"] / 60)}  # fmt: skip
    result = dict(current)
    for section in SECTIONS:
        keys = [key for key in RESULT_KEYS.get(section, (section,)) if key in earlier]
        if section not in current["measured"] and keys:
            result.update({key: earlier[key] for key in keys})
            result["measured"][section] = earlier.get("measured", {}).get(section, earlier_stamp)
    return result


def input_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.glob("*.tsv"))


def last_run_timeline(figure: Figure) -> list[dict[str, Any]]:
    """The steps of the last timed run of a whole `dedup` process (`bench.timeline`)."""
    run = figure.runs[-1]
    return timeline(run.result, run.seconds)


def figures(measured: dict[str, Figure]) -> dict[str, Any]:
    return {name: figure.as_dict() for name, figure in measured.items()}


if __name__ == "__main__":
    sys.exit(main())
