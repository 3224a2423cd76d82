"""`make bench`'s results file: `--merge` keeps the sections a run did not measure, and the table says when each
section was measured and compares the profile with its own pass-through; the tables go into docs/benchmarks.md."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from bench import pipeline
from bench.__main__ import DOCS_PAGE, ROOT, merged, output_lines
from bench.measure import Sample
from bench.other_pyspark import requirements_with
from bench.report import END, START, markdown, update_page
from bench.timeline import timeline


def figure(seconds: float) -> dict[str, Any]:
    return {"median_seconds": seconds, "runs_seconds": [seconds], "warmup_seconds": None, "peak_rss_mb": None}


def results(date: str, runs: int, sections: dict[str, Any]) -> dict[str, Any]:
    return {
        "machine": {"date": date, "cpu": "cpu", "cores": 2, "memory_gib": 23.5, "python": "3.11", "spark": "4.0.2",
                    "java": "java 17", "load_average_at_start": 0.5},
        "settings": {"runs": runs, "keyed_rows": 1000},
        "input": {"events": 1000, "bytes": 1_500_000},
        "total_seconds": 600.0,
        **sections,
    }  # fmt: skip


def test_merge_keeps_the_earlier_sections_with_their_dates_and_the_profile_has_its_own_baseline() -> None:
    earlier = results("2026-11-25T12:00:00+00:00", 2, {
        "spark_jobs": {"pass-through": figure(2.0), "dedup": figure(10.0)},
        "profile": {"read": figure(1.0)},
    })  # fmt: skip
    current = results("2026-11-25T15:00:00+00:00", 3, {"profile": {"pass-through": figure(4.0), "read": figure(2.0)}})
    current["measured"] = {"profile": {"date": "2026-11-25T15:00:00+00:00", "runs": 3, "minutes": 10}}

    combined = merged(earlier, current)

    assert combined["spark_jobs"] == earlier["spark_jobs"]
    assert combined["profile"] == current["profile"]
    assert combined["measured"] == {
        "profile": {"date": "2026-11-25T15:00:00+00:00", "runs": 3, "minutes": 10},
        "spark": {"date": "2026-11-25T12:00:00+00:00", "runs": 2, "minutes": 10},
    }
    text = markdown(combined).splitlines()
    assert "Warm-up, then the median of each section's runs (below); `make bench` took 10 min." in text[0]
    assert (
        "Sections measured in separate runs (only ratios within a section compare): profile "
        "2026-11-25T15:00:00+00:00 (--runs 3, 10 min); spark 2026-11-25T12:00:00+00:00 (--runs 2, 10 min)."
    ) in text
    # The profile's ratios are to its own pass-through (4.0 s), not to the other run's (2.0 s).
    assert "| read | 2.00 | 0.50x | 500 | 2.00 |  |  |" in text
    assert "| dedup | 10.00 | 5.00x | 100 | 10.00 |  |  |" in text


def test_the_large_section_is_a_table_of_its_own() -> None:
    run = results("2026-11-25T16:00:00+00:00", 1, {"large": {
        "events": 10_000_000, "bytes": 15_300_000_000,
        "winnow dedup (process)": figure(400.0), "duckdb warehouse model (process)": figure(160.0),
    }})  # fmt: skip
    text = markdown(run)
    assert (
        "Whole processes on 10,000,000 events (15.3 GB; no warm-up, each output removed after its run):\n\n"
        "| case | median s | x pass-through | events/s | runs s | warm-up s | peak RSS MB |\n"
        "| --- | ---: | ---: | ---: | --- | ---: | ---: |\n"
        "| winnow dedup (process) | 400.00 |  | 25,000 | 400.00 |  |  |\n"
        "| duckdb warehouse model (process) | 160.00 |  | 62,500 | 160.00 |  |  |\n"
    ) in text


def test_the_tables_replace_what_is_between_the_markers_of_the_page_and_nothing_else(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# Benchmarks\n\nHow to run it.\n\n{START}\nold tables\n{END}\n\n## What the figures say\n")
    update_page(page, "| new | table |\n")
    assert page.read_text() == (
        f"# Benchmarks\n\nHow to run it.\n\n{START}\n| new | table |\n{END}\n\n## What the figures say\n"
    )


def test_a_page_without_the_markers_gets_them_at_its_end(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n")
    update_page(page, "| table |")
    assert page.read_text() == f"# Benchmarks\n\n## Results\n\n{START}\n| table |\n{END}\n"


def test_the_bench_writes_the_docs_page_not_the_readme() -> None:
    assert DOCS_PAGE == ROOT / "docs" / "benchmarks.md"
    text = DOCS_PAGE.read_text()
    assert text.count(START) == 1 and text.count(END) == 1 and text.index(START) < text.index(END)
    assert START not in (ROOT / "README.md").read_text()


def test_the_timeline_of_a_process_adds_up_to_its_wall_time_and_names_each_step() -> None:
    stamped = [
        (0.4, "[dedup    0.0s] starting Spark"),
        (0.7, "WARNING: Using incubator modules: jdk.incubator.vector"),
        (6.5, "[dedup    6.1s] reading and parsing every line of /in; deciding the bad lines and repeated ids"),
        (14.5, "[dedup   14.1s]   stage 3: 2/8 tasks, 1 running"),
        (20.0, "[dedup   19.6s] writing every line of /in where its decision says"),
        (31.0, "[dedup   30.6s] moving the written files from /out/run=1/_staging into place"),
        (31.5, "[dedup   31.1s] sealing /out/run=1: summary.json, then _SUCCESS"),
        (31.6, "Winnow dedup  run 2026-11-22-05-00-00"),
        (31.7, "  input lines     1,000"),
    ]
    steps = timeline(stamped, 33.0)
    assert [(step["step"], step["seconds"]) for step in steps] == [
        ("Python start and imports", 0.4),
        ("JVM and Spark session start", 6.1),
        ("first pass: every line read, parsed, the decision table built", 13.5),
        ("every line read again, decided and written", 11.0),
        ("written files moved into place", 0.5),
        ("summary.json and _SUCCESS", 0.1),
        ("summary printed, Spark stopped, process exit", 1.4),
    ]
    assert round(sum(step["seconds"] for step in steps), 2) == 33.0


def test_merge_keeps_the_timeline_with_its_section_and_the_whole_process_table_comes_first() -> None:
    steps = [{"step": "JVM and Spark session start", "seconds": 6.0}, {"step": "the rest", "seconds": 18.0}]
    earlier = results("2026-11-25T12:00:00+00:00", 2, {
        "processes": {"winnow dedup (process)": figure(24.0)}, "processes_timeline": steps,
    })  # fmt: skip
    current = results("2026-11-25T15:00:00+00:00", 2, {"spark_jobs": {"pass-through": figure(2.0)}})
    current["measured"] = {"spark": {"date": "2026-11-25T15:00:00+00:00", "runs": 2, "minutes": 10}}

    combined = merged(earlier, current)

    assert combined["processes_timeline"] == steps
    text = markdown(combined)
    assert text.index("Whole processes") < text.index("Spark jobs in one session")
    assert (
        "Where the last of those Winnow dedup processes spent its 24.0 s (1,000 events; each step begins at the "
        "line the job prints for it):\n\n| step | s | share |\n| --- | ---: | ---: |\n"
        "| JVM and Spark session start | 6.00 | 25% |\n| the rest | 18.00 | 75% |\n"
    ) in text


def test_the_other_pyspark_gets_the_same_pins_but_pysparks() -> None:
    pinned = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    other = requirements_with("4.1.1").splitlines()
    assert [line for line in other if line.startswith("pyspark")] == ["pyspark==4.1.1"]
    assert [line for line in other if not line.startswith("pyspark")] == [
        line for line in pinned if not line.startswith("pyspark")
    ]


def test_outputs_compare_line_by_line_whatever_the_part_files(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    (one / "good").mkdir(parents=True)
    (one / "good" / "part-00000-a.txt.gz").write_bytes(gzip.compress(b"b\na\n"))
    (one / "good" / "part-00001-a.txt.gz").write_bytes(gzip.compress(b"c\n"))
    (two / "good").mkdir(parents=True)
    (two / "good" / "part-00000-b.txt.gz").write_bytes(gzip.compress(b"c\nb\na\n"))
    (two / "_SUCCESS").touch()
    assert output_lines(one) == output_lines(two) == {"good": ["a\n", "b\n", "c\n"]}
    (two / "bad").mkdir()
    (two / "bad" / "part-00000-b.txt").write_text("x\n")
    assert output_lines(one) != output_lines(two)
    run = results("2026-11-26T13:00:00+00:00", 3, {"processes": {"winnow dedup (process)": figure(28.9)},
                                                   "processes_other_pyspark": {"version": "4.1.1", "identical_outputs": True}})  # fmt: skip
    assert "The outputs of Winnow's dedup on pyspark 4.1.1 and on 4.0.2: identical" in markdown(run)


def test_the_whole_pipeline_table_comes_first_with_issue_45s_target_on_each_workload() -> None:
    processes = {
        "winnow run (process)": figure(40.0), "winnow dedup (process)": figure(20.0),
        "duckdb warehouse model (process)": figure(5.0), "spark pass-through (process)": figure(10.0),
        "winnow run (process, heavy tail)": figure(60.0), "winnow dedup (process, heavy tail)": figure(30.0),
        "spark pass-through (process, heavy tail)": figure(8.0),
    }  # fmt: skip
    run = results("2026-11-28T06:00:00+00:00", 1, {
        "processes": processes, "processes_heavy_tail_input": {"events": 1000, "bytes": 1_600_000},
        "spark_jobs": {"pass-through": figure(2.0)},
    })  # fmt: skip
    run["input"]["events"] = 1_000_000
    text = markdown(run)
    assert (
        "The whole pipeline: `winnow run` (dedup then shred, a SQLite manifest created fresh for each run) as a cold "
        "process, x the Spark pass-through process on the same input; on 1,000,000 generated events and on as many "
        "heavy-tail events (0.00 GB; `generate --tail heavy --synthetic-share 0.5`: 1% of ids copied, Pareto(1.2) "
        "copies up to 5,000 per id, half of them synthetic):\n\n"
        "| case | median s | x pass-through | events/s | runs s | warm-up s | peak RSS MB |\n"
        "| --- | ---: | ---: | ---: | --- | ---: | ---: |\n"
        "| winnow run (process) | 40.00 | 4.00x | 25,000 | 40.00 |  |  |\n"
        "| spark pass-through (process) | 10.00 | 1.00x | 100,000 | 10.00 |  |  |\n"
        "| winnow run (process, heavy tail) | 60.00 | 7.50x | 16,667 | 60.00 |  |  |\n"
        "| spark pass-through (process, heavy tail) | 8.00 | 1.00x | 125,000 | 8.00 |  |  |\n\n"
        "Issue 45's target, `run` as a whole process within 5x the pass-through process at 1,000,000 events, on the "
        "generated events: **4.00x** (40.00 s against 10.00 s), met.\n\n"
        "Issue 45's target, `run` as a whole process within 5x the pass-through process at 1,000,000 events, on the "
        "heavy-tail input: **7.50x** (60.00 s against 8.00 s), not met: 20.00 s over 40.00 s.\n\n"
        "Whole processes, what every EMR job run"
    ) in text
    assert text.index("The whole pipeline") < text.index("| ") < text.index("Spark jobs in one session")
    # The other processes keep their table, each x the pass-through on its own input; `run` is not repeated there.
    assert "| winnow dedup (process) | 20.00 | 2.00x | 50,000 | 20.00 |  |  |" in text
    assert "| winnow dedup (process, heavy tail) | 30.00 | 3.75x | 33,333 | 30.00 |  |  |" in text
    assert "| duckdb warehouse model (process) | 5.00 | 0.50x | 200,000 | 5.00 |  |  |" in text
    assert text.count("| winnow run (process) |") == 1


def test_results_without_the_run_process_or_the_heavy_tail_have_no_or_a_smaller_pipeline_table() -> None:
    older = results("2026-11-27T03:18:16+00:00", 2, {"processes": {
        "winnow dedup (process)": figure(32.0), "spark pass-through (process)": figure(8.0),
    }})  # fmt: skip
    text = markdown(older)
    assert "The whole pipeline" not in text and "Issue 45's target, `run`" not in text
    assert "| winnow dedup (process) | 32.00 | 4.00x | 31 | 32.00 |  |  |" in text
    assert "The whole pipeline" not in markdown(results("2026-11-27T03:18:16+00:00", 2, {}))

    default_only = results("2026-11-28T06:00:00+00:00", 1, {"processes": {
        "winnow run (process)": figure(30.0), "spark pass-through (process)": figure(5.0),
    }})  # fmt: skip
    text = markdown(default_only)
    assert "; on 1,000 generated events:\n\n" in text and "heavy" not in text
    assert (
        "Issue 45's target, `run` as a whole process within 5x the pass-through process at 1,000,000 events, on the "
        "generated events: **6.00x** (30.00 s against 5.00 s), not judged on 1,000 events."
    ) in text


def test_each_run_process_starts_on_a_fresh_manifest_and_output_and_leaves_neither(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output, config, log = tmp_path / "proc-run", tmp_path / "local-bench.json", tmp_path / "processes.log"
    seen: list[tuple[list[str], list[str]]] = []

    def run(argv: list[str], env: dict[str, str], log: Path) -> Sample:
        seen.append((argv[1:], sorted(path.name for path in tmp_path.iterdir())))
        (output / "shredded").mkdir(parents=True)  # what a run leaves: its output and its manifest
        for suffix in ("", "-wal"):
            Path(f"{output}.db{suffix}").write_text("x")
        return Sample(1.0, None)

    monkeypatch.setattr(pipeline, "measure_process", run)
    case = pipeline.run_process(tmp_path / "events", output, config, {}, log)
    case()
    case()

    command = ["-m", "jobs", "run", "--input", str(tmp_path / "events"), "--output", str(output), "--config",
               str(config), "--run-id", pipeline.RUN_ID, "--manifest", f"sqlite:{output}.db", "--create"]  # fmt: skip
    assert seen == [(command, []), (command, [])]
    assert list(tmp_path.iterdir()) == []
    assert pipeline.baseline_of(pipeline.heavy(pipeline.RUN)) == "spark pass-through (process, heavy tail)"
    assert pipeline.baseline_of(pipeline.DEDUP) == pipeline.PASSTHROUGH
