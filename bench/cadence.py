"""`python -m bench.cadence`: what a lake manifest run reads, and takes, by cadence (issue 32).

A lake manifest holding `--days` past days of `--keys-per-day` keys (one segment a day, as compaction leaves
them), then one day of generated events delivered as 24 hourly runs, or as one daily run, each in one Spark
session beside the pass-through of its batch. Two designs on the same keys: past days read through their filters
(`jobs/manifest/lake_filter.py`), and every segment read whole (the design before filters: no filter is written,
so compaction writes none). What each run read is its own `summary.json` `manifest`.

    python -m bench.cadence                  # all cases, results in bench/cadence-results.json
    python -m bench.cadence --probe          # what a filter key and a probe cost (adds it to the JSON)
    python -m bench.cadence --merge          # the tables again from the JSON alone
    python -m bench.lake_cost                # the cost a day at 1 billion events, from the JSON
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any
from unittest import mock

from bench.crossbatch import DAY, Session, epoch, lake_entries, log, run_id_of

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / "work" / "cadence"
RESULTS = ROOT / "bench" / "cadence-results.json"
DAY_START = "2026-11-22-00-00-00"
"""The measured day: hourly runs at half past each hour, the daily run at 23:30."""
TTL_DAYS = 180
DESIGNS = ("filters", "whole")
CADENCES = ("hourly", "daily")


def seed(session: Session, path: Path, days: int, keys_per_day: int, buckets: int, filtered: bool) -> dict[str, Any]:
    """A lake manifest of `days` past days (one segment each, with its filter when `filtered`), one commit."""
    from jobs.manifest import open_manifest
    from jobs.manifest.lake import LakeManifest
    from jobs.manifest.lake_state import RunEntries, State

    shutil.rmtree(path, ignore_errors=True)
    manifest = open_manifest(f"lake:{path}", buckets=buckets)
    assert isinstance(manifest, LakeManifest)
    manifest.create()
    segments, filters = {}, {}
    runs: dict[int | str, RunEntries] = {}
    start = epoch(DAY_START)
    for day in range(days, 0, -1):
        etl_time = start - day * DAY + 12 * 3600
        name = f"{run_id_of(etl_time)}.{uuid.uuid4().hex[:8]}"
        entries = lake_entries(session.spark, keys_per_day, 7000 + day, etl_time, etl_time + TTL_DAYS * DAY)
        segment = dataclasses.replace(manifest.write_segment(entries, name, buckets), runs=(etl_time,),
                                      max_ttl=etl_time + TTL_DAYS * DAY)  # fmt: skip
        segments[name] = segment
        runs[etl_time] = RunEntries(etl_time, run_id_of(etl_time), etl_time + TTL_DAYS * DAY, name)
        if filtered and (made := manifest.filter_of(session.spark, name, segment, buckets)) is not None:
            filters[name] = made
    manifest.commit(State(0, buckets, segments, runs, filters), State(0, buckets), "bench seed", DAY_START)
    return {
        "keys": sum(s.keys for s in segments.values()),
        "segment_bytes": sum(s.bytes for s in segments.values()),
        "filter_bytes": sum(f.bytes for f in filters.values()),
        "filter_files": sum(f.files for f in filters.values()),
    }


def batches(events: int) -> dict[str, list[Path]]:
    """The day's events as 24 hourly batch folders, and as one daily folder of all of them."""
    from jobs.tools.generate import GenerateOptions, generate

    folder = WORK / f"events-{events}"
    if not (folder / "_COMPLETE").exists():
        shutil.rmtree(folder, ignore_errors=True)
        generate(folder, GenerateOptions(events=events, seed=32, files=1, batches=24, duplicate_share=0.05))
        daily = folder / "daily"
        daily.mkdir()
        for hour in range(24):
            os.link(folder / f"batch={hour + 1}" / "part-00000.tsv", daily / f"part-{hour:05d}.tsv")
        (folder / "_COMPLETE").touch()
    return {"hourly": [folder / f"batch={hour + 1}" for hour in range(24)], "daily": [folder / "daily"]}


def run_case(session: Session, seeded: Path, design: str, cadence: str, folders: list[Path]) -> list[dict[str, Any]]:
    """The cadence's runs on a copy of the seeded manifest; per run its time, its pass-through's and what it read."""
    from jobs.manifest.lake import LakeManifest

    manifest = WORK / f"run-{design}-{cadence}"
    shutil.rmtree(manifest, ignore_errors=True)
    shutil.copytree(seeded, manifest)
    start = epoch(DAY_START)
    times = [start + hour * 3600 + 1800 for hour in range(24)] if cadence == "hourly" else [start + 23 * 3600 + 1800]
    results = []
    # The design before filters: compaction writes none, so every segment is read whole.
    no_filters = mock.patch.object(LakeManifest, "filter_of", lambda *args: None) if design == "whole" else None
    with no_filters or contextlib.nullcontext():
        for folder, etl_time in zip(folders, times, strict=True):
            run_id = run_id_of(etl_time)
            result = session.dedup(folder, WORK / "out" / f"{design}-{cadence}", run_id, f"lake:{manifest}")
            passthrough = session.passthrough(folder, WORK / "out" / "passthrough")
            results.append({"run_id": run_id, "seconds": result["seconds"], "cpu_seconds": result["cpu_seconds"],
                            "passthrough_seconds": passthrough["seconds"], "counts": result["counts"],
                            "manifest": result["manifest"]})  # fmt: skip
            log(f"{design} {cadence} {run_id}: {result['seconds']} s (pass-through {passthrough['seconds']} s), "
                f"read {result['manifest']['bytes_read']:,} bytes")  # fmt: skip
    return results


def totals(runs: list[dict[str, Any]], past_keys: int) -> dict[str, Any]:
    """A case's day: seconds, bytes read, and the bytes read of past days per past-day key (a run's bytes read less
    the segments the same day's earlier runs wrote)."""
    written_today, past_read = 0, []
    for run in runs:
        past_read.append(run["manifest"]["bytes_read"] - written_today)
        written_today += run["manifest"]["bytes_written"]
    return {
        "runs": len(runs),
        "seconds": round(sum(r["seconds"] for r in runs), 1),
        "passthrough_seconds": round(sum(r["passthrough_seconds"] for r in runs), 1),
        "bytes_read": sum(r["manifest"]["bytes_read"] for r in runs),
        "files_read": sum(r["manifest"]["files_read"] for r in runs),
        "past_bytes_per_past_key_per_run": round(sum(past_read) / len(runs) / past_keys, 3),
        "filter_matches": sum(r["manifest"]["filter_matches"] for r in runs),
        "lookup_files_read": sum(r["manifest"]["lookup_files_read"] for r in runs),
        "cross_batch_duplicates": sum(r["counts"].get("duplicates", 0) for r in runs),
    }


PROBE_DAYS = (10, 30)
"""The probe's joins read the filters of the first 10 past days, and of all 30: what an id costs a past day."""
PROBE_IDS = (24_000, 2_400_000)
"""The probe's batches: at 16 buckets and 2M keys a day, 24,000 ids meet about 0.4 a filter row, 2.4M about 37 (at
1 billion events a day, an hourly run's meet about 1.3 a row of each day, a daily run's about 32)."""
PROBE_ROUNDS = 4
"""Rounds of each measure, taken in turn over the two manifests (a drift of the machine falls on both alike); the
best of each counts. The whole daily run is measured in the first 2 rounds only."""


def cpu_seconds(work: Any) -> float:
    """CPU seconds of `work` (the process tree's: what EMR bills whatever the tasks' parallelism)."""
    from bench.crossbatch import measured

    return round(measured(work)[1], 3)


def scan_cpu(session: Session, seeded: Path) -> float:
    """Decoding the filters' hashes alone (a scan of their files, no join): what any run must pay to read them in
    Spark."""
    from pyspark.sql import functions as F

    from jobs.contract import LAKE_FILTERS

    return cpu_seconds(lambda: session.spark.read.parquet(str(seeded / LAKE_FILTERS))
                       .agg(F.max(F.array_max("hashes"))).collect())  # fmt: skip


def join_cpu(session: Session, seeded: Path) -> dict[str, float]:
    """The filters' join alone (`lake_filter.filter_matches`) of PROBE_IDS new ids with the filters of PROBE_DAYS
    past days of the manifest `seeded`: a run's filter terms without the rest of the run."""
    from jobs.contract import LAKE_FILTERS
    from jobs.manifest.lake import open_lake
    from jobs.manifest.lake_filter import filter_matches, register_filters

    state = open_lake(f"lake:{seeded}").state()
    kind = next(iter(state.filters.values()))  # the seed's days have one key count, so one kind of filter
    cases: dict[str, float] = {}
    for ids in PROBE_IDS:
        batch = lake_entries(session.spark, ids, 99, 0, 0).select("id_hi", "id_lo").cache()
        batch.count()
        for days in PROBE_DAYS:
            table = f"bench_filters_{uuid.uuid4().hex}"
            register_filters(session.spark, table, str(seeded / LAKE_FILTERS), kind.file_buckets,
                             sorted(state.filters)[:days])  # fmt: skip
            try:
                cases[f"{days}d {ids}"] = cpu_seconds(
                    lambda: filter_matches(session.spark, batch, table, state.buckets, kind)  # noqa: B023
                )
            finally:
                session.spark.sql(f"DROP TABLE {table}")
        batch.unpersist()
    return cases


def probe_cost(session: Session, args: argparse.Namespace, daily: list[Path]) -> dict[str, Any]:
    """The cost of the filters, in vCPU-ns (CPU seconds of the process tree, best round against best round): a filter
    key a run (the joins against filtered manifests of `--keys-per-day` and 10 times that, all days, fewest ids),
    an id a past day (the joins of the larger manifest, PROBE_IDS against PROBE_DAYS), the batch's own hashing an
    id, and the floor of a key (a scan of the filters alone); and the daily run's slope between the two manifests,
    the whole run's CPU."""
    seeds: dict[int, Path] = {}
    sizes: dict[str, Any] = {}
    for keys_per_day in (args.keys_per_day, args.keys_per_day * 10):
        seeds[keys_per_day] = WORK / f"seed-probe-{keys_per_day}"
        figures = seed(session, seeds[keys_per_day], args.days, keys_per_day, args.buckets, filtered=True)
        sizes[str(keys_per_day)] = {"filter_keys": figures["keys"], "seed": figures, "run_cpu_seconds": [],
                                    "seconds": [], "scan_cpu_seconds": [], "join_cpu_seconds": {}}  # fmt: skip
    for number in range(PROBE_ROUNDS):
        for keys_per_day, seeded in seeds.items():
            size = sizes[str(keys_per_day)]
            if number < 2:
                run = run_case(session, seeded, f"probe-{keys_per_day}", "daily", daily)[0]
                size["run_cpu_seconds"].append(run["cpu_seconds"])
                size["seconds"].append(run["seconds"])
                size["manifest"] = run["manifest"]
            size["scan_cpu_seconds"].append(scan_cpu(session, seeded))
            for case, cpu in join_cpu(session, seeded).items():
                size["join_cpu_seconds"].setdefault(case, []).append(cpu)
        log(f"probe round {number + 1} of {PROBE_ROUNDS}")
    small, large = sizes[str(args.keys_per_day)], sizes[str(args.keys_per_day * 10)]
    keys: int = large["filter_keys"] - small["filter_keys"]
    few, many = PROBE_IDS
    near, far = PROBE_DAYS
    join_all_days = f"{far}d {few}"

    def best(size: dict[str, Any], key: str, case: str | None = None) -> float:
        return float(min(size[key][case] if case else size[key]))

    def per_filter_key(key: str) -> float:
        return round((best(large, key) - best(small, key)) / float(keys) * 1e9, 1)

    per_key = (best(large, "join_cpu_seconds", join_all_days) - best(small, "join_cpu_seconds", join_all_days)) / keys
    # Per added id: its hashing, plus a probe of each past day read; the days' difference is the probes alone.
    per_id = {days: (best(large, "join_cpu_seconds", f"{days}d {many}") - best(large, "join_cpu_seconds",
                                                                               f"{days}d {few}")) / (many - few)
              for days in PROBE_DAYS}  # fmt: skip
    per_probe = (per_id[far] - per_id[near]) / (far - near)
    return {
        "sizes": sizes,
        "cores": session.cores,
        "vcpu_ns_a_filter_key": round(per_key * 1e9, 1),
        "vcpu_ns_a_probe": round(per_probe * 1e9, 1),
        "vcpu_ns_an_id_hashed": round((per_id[near] - near * per_probe) * 1e9, 1),
        "vcpu_ns_a_filter_key_scanned": per_filter_key("scan_cpu_seconds"),
        "vcpu_ns_a_filter_key_in_a_run": per_filter_key("run_cpu_seconds"),
    }


def markdown(results: dict[str, Any]) -> str:
    p = results["parameters"]
    lines = [
        f"{p['days']} past days of {p['keys_per_day']:,} keys ({p['buckets']} buckets), one day of "
        f"{p['events']:,} events; {results['machine']}",
        "",
        "| design | cadence | runs | job s (sum) | x pass-through | bytes read (day) | past-day bytes a past key, a run |"
        " files read (day) | filter matches | look-up files |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for design in DESIGNS:
        for cadence in CADENCES if design in results["totals"] else ():
            t = results["totals"][design][cadence]
            lines.append(
                f"| {design} | {cadence} | {t['runs']} | {t['seconds']} | {t['seconds'] / t['passthrough_seconds']:.1f}x "
                f"| {t['bytes_read']:,} | {t['past_bytes_per_past_key_per_run']} | {t['files_read']:,} "
                f"| {t['filter_matches']} | {t['lookup_files_read']} |"
            )
    if "probe" in results:
        probe = results["probe"]
        cases = list(next(iter(probe["sizes"].values()))["join_cpu_seconds"])
        lines += ["", "CPU seconds (best of the rounds):", "",
                  "| filter keys | daily run | scan | " + " | ".join(f"join {c} ids" for c in cases) + " |",
                  "|---:|---:|---:|" + "---:|" * len(cases)]  # fmt: skip
        lines += [f"| {size['filter_keys']:,} | {min(size['run_cpu_seconds'])} | {min(size['scan_cpu_seconds'])} | "
                  + " | ".join(str(min(size["join_cpu_seconds"][c])) for c in cases) + " |"
                  for size in probe["sizes"].values()]  # fmt: skip
        lines += ["", f"vCPU-ns: a filter key {probe['vcpu_ns_a_filter_key']} in the join "
                  f"({probe['vcpu_ns_a_filter_key_scanned']} scanned alone, {probe['vcpu_ns_a_filter_key_in_a_run']} "
                  f"in a whole run), a probe (an id, a past day) {probe['vcpu_ns_a_probe']}, an id hashed "
                  f"{probe['vcpu_ns_an_id_hashed']}"]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cadence", description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--keys-per-day", type=int, default=200_000)
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--events", type=int, default=240_000, help="the measured day's events (24 hourly batches)")
    parser.add_argument("--merge", action="store_true", help="print the table from the JSON alone")
    parser.add_argument("--probe", action="store_true", help="only the cost of a filter key (adds it to the JSON)")
    args = parser.parse_args(argv)
    if args.merge:
        print(markdown(json.loads(RESULTS.read_text())))
        return 0
    WORK.mkdir(parents=True, exist_ok=True)
    session = Session()
    folders = batches(args.events)
    results: dict[str, Any] = {"parameters": vars(args), "machine": f"{os.cpu_count()} cores", "seeds": {},
                               "runs": {}, "totals": {}}  # fmt: skip
    if args.probe:
        results = json.loads(RESULTS.read_text()) if RESULTS.exists() else results
        results["probe"] = probe_cost(session, args, folders["daily"])
        RESULTS.write_text(json.dumps(results, indent=1) + "\n")
        print(markdown(results))
        return 0
    for design in DESIGNS:
        seeded = WORK / f"seed-{design}"
        results["seeds"][design] = seed(session, seeded, args.days, args.keys_per_day, args.buckets,
                                        filtered=design == "filters")  # fmt: skip
        log(f"seeded {design}: {results['seeds'][design]}")
        results["runs"][design], results["totals"][design] = {}, {}
        for cadence in CADENCES:
            runs = run_case(session, seeded, design, cadence, folders[cadence])
            results["runs"][design][cadence] = runs
            results["totals"][design][cadence] = totals(runs, args.days * args.keys_per_day)
            RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
