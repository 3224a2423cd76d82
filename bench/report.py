"""The Markdown tables of a `make bench` run, and the part of docs/benchmarks.md that shows them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import pipeline
from bench.small import PAIRS, PASSTHROUGH, TARGET_EVENTS, TARGET_RATIO

START, END = "<!-- bench:start -->", "<!-- bench:end -->"
BASELINE = "pass-through"


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _memory(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def _figure_rows(figures: dict[str, Any], baseline: float | None, events: int | None) -> list[str]:
    rows = []
    for name, figure in figures.items():
        median = figure["median_seconds"]
        ratio = f"{median / baseline:.2f}x" if baseline else ""
        rate = f"{events / median:,.0f}" if events else ""
        runs = " / ".join(_seconds(s) for s in figure["runs_seconds"])
        rows.append(f"| {name} | {_seconds(median)} | {ratio} | {rate} | {runs} | "
                    f"{_seconds(figure['warmup_seconds'])} | {_memory(figure['peak_rss_mb'])} |")  # fmt: skip
    return rows


def _timeline_rows(steps: list[dict[str, Any]] | None, input_text: str) -> list[str]:
    if not steps:
        return []
    total = sum(step["seconds"] for step in steps)
    rows = [f"Where the last of those Winnow dedup processes spent its {total:.1f} s ({input_text}; each step "
            "begins at the line the job prints for it):", "", "| step | s | share |", "| --- | ---: | ---: |"]  # fmt: skip
    rows += [f"| {step['step']} | {step['seconds']:.2f} | {step['seconds'] / total:.0%} |" for step in steps]
    return [*rows, ""]


def _process_rows(processes: dict[str, Any], names: list[str], events: int) -> list[str]:
    """Rows of whole processes, each x the pass-through process on its own input (`bench.pipeline.baseline_of`)."""
    rows = []
    for name in names:
        baseline = processes.get(pipeline.baseline_of(name))
        rows += _figure_rows({name: processes[name]}, baseline["median_seconds"] if baseline else None, events)
    return rows


def _pipeline_rows(results: dict[str, Any]) -> list[str]:
    """The whole pipeline, first: `run` as a cold process beside the pass-through process on the same input, on
    each workload measured, and issue 45's target for each (nothing where the results have no `run` process)."""
    processes, events = results.get("processes") or {}, results["input"]["events"]
    workloads = [(run, pipeline.baseline_of(run), label) for run, label in
                 ((pipeline.RUN, "the generated events"), (pipeline.heavy(pipeline.RUN), "the heavy-tail input"))
                 if run in processes and pipeline.baseline_of(run) in processes]  # fmt: skip
    if not workloads:
        return []
    heavy = results.get("processes_heavy_tail_input")
    heavy_text = (f" and on as many heavy-tail events ({heavy['bytes'] / 1e9:.2f} GB; `generate "
                  f"{' '.join(pipeline.HEAVY_GENERATE)}`: 1% of ids copied, Pareto(1.2) copies up to 5,000 per id, "
                  "half of them synthetic)") if heavy else ""  # fmt: skip
    lines = [f"The whole pipeline: `winnow run` (dedup then shred, a SQLite manifest created fresh for each run) as "
             f"a cold process, x the Spark pass-through process on the same input; on {events:,} generated events"
             f"{heavy_text}:", "", *HEADER,
             *_process_rows(processes, [name for run, passthrough, _ in workloads for name in (run, passthrough)],
                            events), ""]  # fmt: skip
    for run_name, passthrough_name, label in workloads:
        run, baseline = processes[run_name]["median_seconds"], processes[passthrough_name]["median_seconds"]
        bound = pipeline.TARGET_RATIO * baseline
        verdict = "met" if run <= bound else f"not met: {run - bound:.2f} s over {bound:.2f} s"
        if events != pipeline.TARGET_EVENTS:  # start-up weighs more on a smaller input: no verdict
            verdict = f"not judged on {events:,} events"
        lines += [f"Issue 45's target, `run` as a whole process within {pipeline.TARGET_RATIO:g}x the pass-through "
                  f"process at {pipeline.TARGET_EVENTS:,} events, on {label}: **{run / baseline:.2f}x** "
                  f"({run:.2f} s against {baseline:.2f} s), {verdict}.", ""]  # fmt: skip
    return lines


def _small_rows(small: dict[str, Any] | None) -> list[str]:
    """The `small` section: a table per input size, the pairs' outputs compared, and issue 45's target."""
    if not small:
        return []
    lines = ["Small batches (`small`): whole cold processes, `run` (dedup then shred) and `dedup` each against a "
             "SQLite manifest created fresh, in the small-input session (plans interpreted, the driver JVM on the "
             f"JIT's quick tier: what an input of `spark.small_input_mb`, {small['limit_mb']} MiB, or less gets) "
             "and with Spark's defaults (`small_input_mb: 0`); x the Spark pass-through process on the same input:",
             ""]  # fmt: skip
    for size in small["sizes"]:
        cases, events = size["cases"], size["events"]
        baseline = cases[PASSTHROUGH]["median_seconds"]
        chosen = "by default" if size["small_input_by_default"] else "forced: over the limit, the default is Spark's"
        lines += [f"{events:,} events ({size['bytes'] / 1e6:.1f} MB; the small-input session {chosen}):", "",
                  *HEADER, *_figure_rows(cases, baseline, events), ""]  # fmt: skip
        pairs = "; ".join(
            f"{what} {cases[small_case]['median_seconds'] / cases[defaults_case]['median_seconds']:.2f}x, "
            f"{size['identical_outputs'][what]['lines']:,} lines in {size['identical_outputs'][what]['folders']} "
            "folders identical"
            for what, small_case, defaults_case in PAIRS
        )
        lines += [f"The small-input session against Spark's defaults: {pairs} (every output folder's lines "
                  "compared).", ""]  # fmt: skip
        if events == TARGET_EVENTS:
            run = cases[PAIRS[0][1]]["median_seconds"]
            bound = TARGET_RATIO * baseline
            verdict = "met" if run <= bound else f"not met: {run - bound:.2f} s over {bound:.2f} s"
            lines += [f"Issue 45's target, a `run` of {events:,} events within {TARGET_RATIO}x the pass-through "
                      f"process: **{run / baseline:.2f}x** ({run:.2f} s against {baseline:.2f} s), {verdict}.", ""]  # fmt: skip
    return lines


HEADER = [
    "| case | median s | x pass-through | events/s | runs s | warm-up s | peak RSS MB |",
    "| --- | ---: | ---: | ---: | --- | ---: | ---: |",
]


def markdown(results: dict[str, Any]) -> str:
    m, events = results["machine"], results["input"]["events"]
    measured = results.get("measured", {})
    merged = len({stamp["date"] for stamp in measured.values()}) > 1  # a --merge: each section has its own run
    runs = "each section's runs (below)" if merged else f"{results['settings']['runs']} alternating runs"
    lines = [
        f"Measured {m['date']} on {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Python {m['python']}, "
        f"Spark {m['spark']}, {m['java']}; load average {m['load_average_at_start']:.2f} at start. "
        f"Input: {events:,} generated events ({results['input']['bytes'] / 1e9:.2f} GB). "
        f"Warm-up, then the median of {runs}; `make bench` took {results['total_seconds'] / 60:.0f} min.",
        "",
    ]
    if merged:
        lines += ["Sections measured in separate runs (only ratios within a section compare): " + "; ".join(
            f"{name} {stamp['date']} (--runs {stamp['runs']}, {stamp['minutes']} min)"
            for name, stamp in measured.items()) + ".", ""]  # fmt: skip
    lines += _pipeline_rows(results)
    processes = results.get("processes")
    if processes:
        lines += ["Whole processes, what every EMR job run and every scheduled local run pays (wall time with "
                  "start-up; peak RSS of the process tree, sampled; x the pass-through process on the same "
                  "input):", ""]  # fmt: skip
        others = [name for name in processes if name not in (pipeline.RUN, pipeline.heavy(pipeline.RUN))]
        lines += [*HEADER, *_process_rows(processes, others, events), ""]
        other = results.get("processes_other_pyspark")
        if other:
            same = "identical" if other["identical_outputs"] else "NOT identical"
            lines += [f"The outputs of Winnow's dedup on pyspark {other['version']} and on {results['machine']['spark']}: "
                      f"{same} (every output folder's lines compared).", ""]  # fmt: skip
        lines += _timeline_rows(results.get("processes_timeline"), f"{events:,} events")
    lines += _small_rows(results.get("small"))
    spark_jobs = results.get("spark_jobs")
    if spark_jobs:
        baseline = spark_jobs[BASELINE]["median_seconds"]
        lines += ["Spark jobs in one session (job time, Spark start-up excluded; peak RSS of the Spark JVM):", ""]
        lines += [*HEADER, *_figure_rows(spark_jobs, baseline, events), ""]
    profile = results.get("profile")
    if profile:
        own = profile.get(BASELINE) or (spark_jobs or {}).get(BASELINE)  # older results had no own pass-through
        baseline = own["median_seconds"] if own else None
        lines += ["Where the time goes: each step of the jobs run alone, every row and column computed but "
                  "nothing written (Spark's `noop` sink); each reads the input itself:", ""]  # fmt: skip
        lines += [*HEADER, *_figure_rows(profile, baseline, events), ""]
    large = results.get("large")
    if large:
        cases = {name: figure for name, figure in large.items() if isinstance(figure, dict)}
        lines += [f"Whole processes on {large['events']:,} events ({large['bytes'] / 1e9:.1f} GB; no warm-up, each "
                  "output removed after its run):", ""]  # fmt: skip
        lines += [*HEADER, *_figure_rows(cases, None, large["events"]), ""]
        lines += _timeline_rows(results.get("large_timeline"), f"{large['events']:,} events")
    keyed = results.get("keyed")
    if keyed:
        rows = results["settings"]["keyed_rows"]
        lines += [f"Keyed records ({rows:,} generated rows, key `id`, version `ver`):", ""]
        lines += [*HEADER, *_figure_rows(keyed, None, rows)]
        chdb = keyed.get("chdb ReplacingMergeTree FINAL (process)", {}).get("engine_seconds")
        if chdb:
            lines += ["", "chdb's own timings per run (load, FINAL): " + "; ".join(
                f"{run.get('load_seconds', '?')} s, {run.get('final_seconds', '?')} s" for run in chdb)]  # fmt: skip
        lines.append("")
    scaling = results.get("scaling")
    if scaling:
        lines += ["Scaling (median job seconds; cost per million events):", "",
                  "| events | pass-through s | dedup s | dedup x pass-through | dedup s per 1M |",
                  "| ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
        for point in scaling:
            passthrough, dedup = point[BASELINE]["median_seconds"], point["dedup"]["median_seconds"]
            lines.append(f"| {point['events']:,} | {passthrough:.2f} | {dedup:.2f} | {dedup / passthrough:.2f}x | "
                         f"{dedup / point['events'] * 1e6:.2f} |")  # fmt: skip
        lines.append("")
    manifest = results.get("manifest")
    if manifest:
        lines += ["Manifest requests (dedup against a fresh SQLite manifest):", "",
                  "| cross-batch synthetic | input lines | distinct pairs | puts | queries | requests per line "
                  "| puts per distinct pair |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
        for name, figures in manifest["requests"].items():
            lines.append(f"| {name.removeprefix('synthetic_')} | {figures['input_lines']:,} | "
                         f"{figures['distinct_pairs']:,} | {figures['puts']:,} | {figures['queries']:,} | "
                         f"{figures['requests_per_input_line']} | {figures['puts_per_distinct_pair']} |")  # fmt: skip
        latency = manifest.get("latency")
        if latency:
            lines += ["", "Manifest throughput, one client (a Spark task) against moto behind a proxy that adds "
                      "latency per request:", "",
                      "| latency ms | concurrency | synthetic | pass | ids/s | requests/s | requests per id | "
                      "throttles | retries |", "| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
            for row in latency:
                lines.append(f"| {row['latency_ms']} | {row['concurrency']} | {row['synthetic']} | "
                             f"{row.get('pass', '')} | {row['ids_per_second']:.0f} | "
                             f"{row.get('requests_per_second', 0):.0f} | {row['requests_per_id']} | "
                             f"{row['throttles']} | {row['retries']} |")  # fmt: skip
        lines.append("")
    return "\n".join(lines)


def update_page(page: Path, markdown_text: str) -> None:
    """Replace what is between the bench markers of a Markdown page (appending them the first time)."""
    text = page.read_text()
    block = f"{START}\n{markdown_text.rstrip()}\n{END}"
    if START in text and END in text:
        before, rest = text.split(START, 1)
        text = before + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n## Results\n\n" + block + "\n"
    page.write_text(text)
