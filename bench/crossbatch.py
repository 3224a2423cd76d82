"""Cross-batch dedup against a manifest holding 30 days of keys: lake vs SQLite vs DynamoDB, and what it costs.

Two batches of generated events (seed 1, then seed 2 plus a few hundred lines of batch 1 again, so batch 2 has
cross-batch copies to find) are deduplicated one after the other, as an hourly run would, against a manifest
already holding `--days` daily runs of `--keys-per-day` random keys (written directly, not through the job:
the lake's segments with LakeManifest's own `write_segment` and `commit`, exactly the layout record_run leaves;
SQLite with `executemany` into jobs/manifest/sqlite.py's schema). Every case runs in one Spark session (local
mode, configs/local.json's settings, Spark start-up excluded), side by side with the pass-through and with the
in-batch-only dedup (no manifest); the manifest is put back to its seeded state before each case's batch 1.

Sections (all by default):
- `buckets`: the lake check on batch 1 against `--days` segments of `--trial-keys-per-day` keys, for each of
  `--trial-buckets`: how the bucket count plays, and (with `jobs`) the per-key cost of the check;
- `jobs`: the measured table (pass-through, in-batch dedup, lake, SQLite; batch 1 then batch 2), `--runs` rounds;
- `pairs`: the batch's distinct (event_key, fingerprint) pairs alone, what every manifest check computes first;
- `dynamodb`: the dedup job (its own process) against moto behind a proxy adding `--latency-ms` per request
  (bench/manifest_latency.py's endpoint): put only on `--dynamodb-events`, cross-batch synthetic detection on (a
  Query per id too) on `--dynamodb-synthetic-events` (moto's Query scans the whole table per request, so a large
  synthetic-on run measures moto); requests per event, time, and a labelled projection to 1M events;
- storage per key, bytes and requests per event, and the dollars-per-day table for 1B events/day are derived
  from the measured figures (`cost_model`), every assumption written next to it in the results.

Before each measurement the benchmark syncs the disk and waits (up to `--quiet-wait` s) for an idle machine; the
CPU other processes used during each measurement is recorded (`other_cores_busy`). With `--merge`, the sections
run are added to the existing results (rounds of `jobs` are appended, medians taken over all); `--merge
--sections` with no section only derives the tables again.

    .venv/bin/python -m bench.crossbatch                      # 1M-event batches, 30 x 1M keys: ~35 min on 2 cores
    .venv/bin/python -m bench.crossbatch --merge --sections jobs --runs 1      # one more round of the main table
    .venv/bin/python -m bench.crossbatch --events 200000 --keys-per-day 200000 --sections jobs

Writes bench/crossbatch-results.json and prints the Markdown tables on stdout (progress on stderr). The seeded
manifests are kept under bench/work/crossbatch/ and reused by a later run with the same parameters.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.measure import process_tree

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
WORK = ROOT / "bench" / "work" / "crossbatch"
SECTIONS = ("buckets", "jobs", "pairs", "dynamodb")
SPARK_CONFIG = {"spark": json.loads((ROOT / "configs" / "local.json").read_text())["spark"]}
BATCH_RUN_IDS = ("2026-11-22-05-00-00", "2026-11-22-06-00-00")  # an hourly cadence: batch 2 an hour after batch 1
TTL_DAYS = 180
DAY = 86_400

# Prices: us-east-1 list prices (DynamoDB's on-demand and provisioned both).
PRICES = {
    "emr_serverless_vcpu_hour": 0.052624,
    "emr_serverless_gb_hour": 0.0057785,
    "gb_per_vcpu": 4,
    "s3_standard_gb_month": 0.023,
    "s3_get_per_1000": 0.0004,
    "s3_put_per_1000": 0.005,
    "dynamodb_on_demand_per_million_wru": 0.625,
    "dynamodb_on_demand_per_million_rru": 0.125,
    "dynamodb_storage_gb_month": 0.25,
    "dynamodb_wcu_hour": 0.00065,
    "dynamodb_rcu_hour": 0.00013,
}
DAYS_PER_MONTH = 30.4


def log(message: str) -> None:
    print(f"{datetime.now():%H:%M:%S} {message}", file=sys.stderr, flush=True)


def epoch(run_id: str) -> int:
    return int(datetime.strptime(run_id, "%Y-%m-%d-%H-%M-%S").replace(tzinfo=UTC).timestamp())


def run_id_of(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d-%H-%M-%S")


def seeded_days(days: int) -> list[tuple[str, int, int]]:
    """(run id, etl_time, ttl) of the seeded daily runs: the `days` days before batch 1, same hour."""
    first = epoch(BATCH_RUN_IDS[0])
    return [(run_id_of(first - d * DAY), first - d * DAY, first - d * DAY + TTL_DAYS * DAY) for d in range(days, 0, -1)]


# --- CPU time of a process tree -----------------------------------------------------------------------------


class TreeCpu:
    """CPU seconds used by a process tree over an interval (live descendants sampled; a process seen only at the
    end counts whole, one gone before the end keeps its last sample)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.ticks = os.sysconf("SC_CLK_TCK")
        self.start = self.sample()
        self.last = dict(self.start)

    def sample(self) -> dict[tuple[int, str], float]:
        # utime stime cutime cstime (reaped children count in their parent); starttime names the process
        return {
            (pid, fields[19]): sum(int(v) for v in fields[11:15]) / self.ticks
            for pid, fields in process_tree(self.root).items()
        }

    def poll(self) -> None:
        self.last.update(self.sample())

    def seconds(self) -> float:
        self.poll()
        return sum(value - self.start.get(key, 0.0) for key, value in self.last.items())


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (not idle, not waiting on I/O), from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


OTHER_CPU: list[float] = []
"""CPU seconds other processes (not this benchmark's tree) used during each measurement: another Spark or test
run on the machine shows here."""


def measured(work: Callable[[], Any], root: int | None = None) -> tuple[float, float, Any]:
    """Wall seconds, CPU seconds of this process's tree (the driver, the Spark JVM, its Python workers), result."""
    cpu, busy = TreeCpu(root or os.getpid()), busy_seconds()
    started = time.monotonic()
    result = work()
    wall, own = time.monotonic() - started, cpu.seconds()
    OTHER_CPU.append(max(busy_seconds() - busy - own, 0.0) / wall)
    return wall, own, result


def wait_for_quiet(limit_seconds: float, threshold: float = 0.3) -> float:
    """Wait (up to `limit_seconds`) until the machine is nearly idle (under `threshold` of one core busy over
    5 s, this benchmark idle meanwhile): other Spark or test runs on a 2-core machine would be measured too.
    The busy share seen last."""
    os.sync()  # the previous case's output still being written to disk would slow the next case's writes
    deadline = time.monotonic() + limit_seconds
    while True:
        before = busy_seconds()
        time.sleep(5)
        share = (busy_seconds() - before) / 5
        if share < threshold or time.monotonic() > deadline:
            if share >= threshold:
                log(f"  the machine is still busy ({share:.2f} cores besides idle); measuring anyway")
            return share
        log(f"  waiting for a quiet machine: {share:.2f} cores busy")


def running_seeder(path: Path) -> int | None:
    """The pid of a `--seed-sqlite PATH` process already running (an earlier invocation's), if any."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--seed-sqlite" in words and str(path).encode() in words and int(cmdline.parent.name) != os.getpid():
            return int(cmdline.parent.name)
    return None


# --- inputs -------------------------------------------------------------------------------------------------


def python_module(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


def generated(events: int, seed: int) -> Path:
    """`python -m jobs generate` output, made once and kept (seed 1 is the folder bench/__main__.py uses)."""
    folder = DATA / (f"events-{events}" if seed == 1 else f"events-{events}-seed-{seed}")
    if not (folder / "_COMPLETE").exists():
        log(f"generating {events:,} events (seed {seed}) into {folder}")
        subprocess.run(
            python_module("jobs", "generate", "--output", str(folder), "--events", str(events), "--seed", str(seed),
                          "--files", "4", "--overwrite"),  # an interrupted generation left files, not _COMPLETE
            check=True, cwd=ROOT,
        )  # fmt: skip
        (folder / "_COMPLETE").touch()
    return folder


def second_batch(events: int, overlap: int) -> Path:
    """Batch 2: seed 2's events plus the first `overlap` lines of batch 1 again (cross-batch copies), as a 5th file
    in a folder of links to seed 2's files."""
    first, second = generated(events, 1), generated(events, 2)
    folder = DATA / f"crossbatch-{events}-batch-2-overlap-{overlap}"
    if not (folder / "_COMPLETE").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for part in sorted(second.glob("*.tsv")):
            os.link(part, folder / part.name)
        with open(sorted(first.glob("*.tsv"))[0], encoding="utf-8") as source:
            lines = [line for _, line in zip(range(overlap), source, strict=False)]
        (folder / "part-99999-overlap.tsv").write_text("".join(lines), encoding="utf-8")
        (folder / "_COMPLETE").touch()
    return folder


def lines_in(folder: Path) -> int:
    total = 0
    for part in folder.glob("*.tsv"):
        with open(part, "rb") as file:
            total += sum(chunk.count(b"\n") for chunk in iter(lambda: file.read(1 << 24), b""))
    return total


def folder_bytes(folder: Path, suffix: str = "") -> int:
    return sum(p.stat().st_size for p in folder.rglob(f"*{suffix}") if p.is_file())


# --- seeding the manifests ----------------------------------------------------------------------------------


def lake_entries(spark: Any, keys: int, salt: int, etl_time: int, ttl: int) -> Any:
    """`keys` random entries (LAKE_COLUMNS) of one run: UUIDv4-shaped ids (version and variant bits set as in a
    real event id), a random 64-bit fingerprint hash."""
    from pyspark.sql import functions as F

    def random64(part: int) -> Any:
        return F.xxhash64(F.col("id"), F.lit(salt), F.lit(part))

    high = random64(1).bitwiseAND(F.lit(~0xF000)).bitwiseOR(F.lit(0x4000))
    low = random64(2).bitwiseAND(F.lit(0x3FFF_FFFF_FFFF_FFFF)).bitwiseOR(F.lit(-(1 << 63)))
    return spark.range(keys).select(
        high.alias("id_hi"), low.alias("id_lo"), random64(3).alias("fingerprint"),
        F.lit(etl_time).cast("long").alias("etl_time"), F.lit(ttl).cast("long").alias("ttl"),
    )  # fmt: skip


def seed_lake(spark: Any, path: Path, buckets: int, days: int, keys_per_day: int, salt: int) -> dict[str, Any]:
    """A lake manifest holding `days` daily runs of `keys_per_day` keys: one segment per day written with
    LakeManifest.write_segment and one commit naming them all (what `days` record_run calls leave, each day being
    one segment, nothing expired and nothing to compact). Reused when a seed with these parameters exists."""
    from jobs.manifest import open_manifest
    from jobs.manifest.lake_state import RunEntries, State

    marker = path / "_bench_seed.json"
    wanted = {"buckets": buckets, "days": days, "keys_per_day": keys_per_day, "salt": salt,
              "first_batch": BATCH_RUN_IDS[0]}  # fmt: skip
    if marker.exists() and json.loads(marker.read_text())["parameters"] == wanted:
        log(f"lake manifest {path}: seeded earlier, reused")
        return dict(json.loads(marker.read_text()))
    shutil.rmtree(path, ignore_errors=True)
    manifest = open_manifest(f"lake:{path}", buckets=buckets)
    manifest.create()
    manifest.check()
    segments: dict[str, Any] = {}
    runs: dict[int | str, RunEntries] = {}
    started = time.monotonic()
    for day, (run_id, etl_time, ttl) in enumerate(seeded_days(days)):
        name = f"{run_id}.{uuid.uuid4().hex[:8]}"
        entries = lake_entries(spark, keys_per_day, salt * 1000 + day, etl_time, ttl)
        segment = manifest.write_segment(entries, name, buckets)  # type: ignore[attr-defined]
        segments[name] = dataclasses.replace(segment, runs=(etl_time,), max_ttl=ttl)
        runs[etl_time] = RunEntries(etl_time, run_id, ttl, name)
    state = manifest.commit(State(0, buckets, segments, runs), "bench seed", seeded_days(days)[-1][0])  # type: ignore[attr-defined]
    seed = {
        "parameters": wanted,
        "commit": state.commit,
        "segments": sorted(segments),
        "keys": sum(s.keys for s in segments.values()),
        "files": sum(s.files for s in segments.values()),
        "bytes": sum(s.bytes for s in segments.values()),
        "seconds": round(time.monotonic() - started, 1),
    }
    marker.write_text(json.dumps(seed, indent=1))
    log(f"lake manifest {path}: {seed['keys']:,} keys, {seed['files']:,} files, {seed['bytes']:,} bytes, "
        f"{seed['seconds']} s")  # fmt: skip
    return seed


def reset_lake(path: Path, seed: dict[str, Any]) -> None:
    """Back to the seeded state: drop the commits and segments written since (and a lease left behind)."""
    from jobs.contract import LAKE_COMMITS, LAKE_LEASE, LAKE_SEGMENTS

    for commit in (path / LAKE_COMMITS).glob("*.json"):
        if commit.stem.isdigit() and int(commit.stem) > seed["commit"]:
            commit.unlink()
    keep = {f"segment={name}" for name in seed["segments"]}
    for folder in (path / LAKE_SEGMENTS).iterdir():
        if folder.name not in keep:
            shutil.rmtree(folder)
    (path / LAKE_LEASE).unlink(missing_ok=True)


def sqlite_rows(day: int, keys: int, etl_time: int, ttl: int) -> list[tuple[str, str, int, int]]:
    """`keys` random (event id, fingerprint) rows as the job writes them: a lower-case UUIDv4, a 32-hex MD5."""
    digits = random.Random(f"winnow-crossbatch-sqlite-{day}").randbytes(32 * keys).hex()
    rows = []
    for k in range(keys):
        h = digits[64 * k : 64 * k + 64]
        event_id = f"{h[0:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"
        rows.append((event_id, h[32:64], etl_time, ttl))
    rows.sort()
    return rows


def seed_sqlite(path: Path, days: int, keys_per_day: int) -> dict[str, Any]:
    """The SQLite manifest (jobs/manifest/sqlite.py's schema) holding `days` daily runs of `keys_per_day` rows,
    inserted with executemany (a day per transaction). Reused when a seed with these parameters exists."""
    from jobs.manifest.sqlite import SCHEMA, TABLE

    marker = Path(f"{path}.seed.json")
    wanted = {"days": days, "keys_per_day": keys_per_day, "first_batch": BATCH_RUN_IDS[0]}
    if marker.exists() and path.exists() and json.loads(marker.read_text())["parameters"] == wanted:
        log(f"SQLite manifest {path}: seeded earlier, reused")
        return dict(json.loads(marker.read_text()))
    path.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm", ".seed.json"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    started = time.monotonic()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    db.execute("PRAGMA cache_size=-2000000")  # 2 GB of page cache while building
    db.execute(SCHEMA)
    for day, (_, etl_time, ttl) in enumerate(seeded_days(days)):
        rows = sqlite_rows(day, keys_per_day, etl_time, ttl)
        db.execute("BEGIN")
        db.executemany(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?)", rows)
        db.execute("COMMIT")
        log(f"  SQLite seed: day {day + 1}/{days} ({time.monotonic() - started:.0f} s)")
    count = db.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]
    db.execute("PRAGMA journal_mode=WAL")  # as the job's connections leave it
    db.close()
    seed = {"parameters": wanted, "rows": count, "bytes": path.stat().st_size,
            "seconds": round(time.monotonic() - started, 1)}  # fmt: skip
    marker.write_text(json.dumps(seed, indent=1))
    log(f"SQLite manifest {path}: {count:,} rows, {seed['bytes']:,} bytes, {seed['seconds']} s")
    return seed


def reset_sqlite(seeded: Path, working: Path) -> None:
    for suffix in ("", "-wal", "-shm", ".lease"):
        Path(f"{working}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(seeded, working)


# --- the cases ----------------------------------------------------------------------------------------------


class Session:
    """One Spark session for every in-session case."""

    def __init__(self) -> None:
        from bench import spark_cases
        from jobs.config import JobConfig, config_from_dict
        from jobs.runtime.session import spark_session

        self.cases = spark_cases
        self.config = spark_cases.in_batch_config(config_from_dict(JobConfig, SPARK_CONFIG))
        self.spark = spark_session(self.config.spark, "winnow-bench-crossbatch")
        self.cores = self.spark.sparkContext.defaultParallelism

    def passthrough(self, source: Path, output: Path) -> dict[str, Any]:
        shutil.rmtree(output, ignore_errors=True)
        wall, cpu, _ = measured(lambda: self.cases.passthrough(self.spark, str(source), str(output)))
        return {"seconds": round(wall, 3), "cpu_seconds": round(cpu, 2), "other_cores_busy": round(OTHER_CPU[-1], 2)}

    def dedup(self, source: Path, output: Path, run_id: str, manifest: str | None) -> dict[str, Any]:
        from jobs.dedup import job as dedup_job

        shutil.rmtree(output, ignore_errors=True)
        config = self.config if manifest is None else self.cases.with_manifest(self.config, manifest)
        wall, cpu, summary = measured(lambda: dedup_job.run(self.spark, config, str(source), str(output), run_id))
        counts = summary["counts"]
        return {
            "seconds": round(wall, 3),
            "cpu_seconds": round(cpu, 2),
            "other_cores_busy": round(OTHER_CPU[-1], 2),
            "summary_wall_time_seconds": summary["wall_time_seconds"],
            "counts": {k: counts[k] for k in ("input", "good", "bad", "duplicates") if k in counts},
            "by_reason": summary["by_reason"],
            "synthetic_by_reason": summary["synthetic"]["by_reason"],
            "manifest": summary["manifest"],
        }


def cross_batch_copies(result: dict[str, Any]) -> int:
    """Lines the manifest decided: cross-batch natural copies dropped plus cross-batch synthetic events."""
    return int(result["by_reason"].get("duplicates", {}).get("cross_batch_natural", 0)
               + result["synthetic_by_reason"].get("cross_batch_synthetic", 0))  # fmt: skip


# --- DynamoDB stand-in --------------------------------------------------------------------------------------


def run_job_process(args: list[str], env: dict[str, str], log_path: Path, timeout: float) -> dict[str, Any]:
    """A whole `python -m jobs …` process: wall time, CPU seconds of its process tree (sampled every 0.2 s).

    Raises:
        subprocess.CalledProcessError: it failed (or ran past `timeout` seconds and was stopped).
    """
    with open(log_path, "ab") as out:
        started = time.monotonic()
        process = subprocess.Popen(python_module("jobs", *args), stdout=out, stderr=out, cwd=ROOT,
                                   env={**os.environ, **env})  # fmt: skip
        cpu = TreeCpu(process.pid)
        while process.poll() is None:
            cpu.poll()
            time.sleep(0.2)
            if time.monotonic() - started > timeout:
                process.terminate()
                process.wait(30)
        wall = time.monotonic() - started
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, args, f"after {wall:.0f} s; see {log_path}")
    return {"seconds": round(wall, 2), "cpu_seconds": round(cpu.seconds(), 2)}


def dynamodb_pass(
    control: Any, sample: Path, synthetic: bool, latency_ms: float, out: Path, timeout: float
) -> dict[str, Any]:
    """The dedup job as a process on `sample`: in-batch only, then against a new table behind the proxy."""
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    config = out / f"config-synthetic-{synthetic}.json"
    out.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({**SPARK_CONFIG, "manifest": {"cross_batch_synthetic": synthetic}}))
    common = ["dedup", "--input", str(sample), "--config", str(config), "--run-id", BATCH_RUN_IDS[0]]
    name = f"{sample.name}-synthetic-{'on' if synthetic else 'off'}"
    log(f"DynamoDB stand-in: in-batch-only dedup process on {sample.name}")
    in_batch_process = run_job_process([*common, "--output", str(out / f"{name}-in-batch")], env,
                                       WORK / "dynamodb.log", timeout)  # fmt: skip
    control.call("setup", latency_ms, None)
    aws = {"AWS_ENDPOINT_URL_DYNAMODB": control.url, "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}  # fmt: skip
    table = f"winnow-bench-{uuid.uuid4().hex[:8]}"
    log(f"DynamoDB stand-in: dedup process on {sample.name}, synthetic {'on' if synthetic else 'off'}, against moto "
        f"at {latency_ms:g} ms per request")  # fmt: skip
    control.call("start")
    process = run_job_process(
        [*common, "--output", str(out / name), "--manifest", f"dynamodb://{table}", "--create"],
        {**env, **aws}, WORK / "dynamodb.log", timeout,
    )  # fmt: skip
    endpoint = control.call("counters")
    summary = json.loads((out / name / f"run={BATCH_RUN_IDS[0]}" / "summary.json").read_text())
    in_batch = json.loads((out / f"{name}-in-batch" / f"run={BATCH_RUN_IDS[0]}" / "summary.json").read_text())
    manifest = summary["manifest"]
    manifest_seconds = summary["wall_time_seconds"] - in_batch["wall_time_seconds"]
    return {
        "sample": str(sample),
        "synthetic": synthetic,
        "input_lines": summary["counts"]["input"],
        "process": process,
        "in_batch_process": in_batch_process,
        "summary_wall_time_seconds": summary["wall_time_seconds"],
        "in_batch_summary_wall_time_seconds": in_batch["wall_time_seconds"],
        "manifest": {
            k: manifest[k]
            for k in (
                "requests",
                "puts",
                "queries",
                "conditional_failures",
                "retries",
                "throttles",
                "requests_per_input_line",
            )
        },
        "endpoint": {k: endpoint[k] for k in ("forwarded", "throttled", "moto_errors", "cpu_s")},
        "manifest_seconds": round(manifest_seconds, 2),
        "requests_per_second": round(manifest["requests"] / manifest_seconds, 1) if manifest_seconds > 0 else None,
        "client_cpu_ms_per_request": round(
            (process["cpu_seconds"] - in_batch_process["cpu_seconds"]) * 1000 / manifest["requests"], 3
        ),
    }


def dynamodb_section(events: int, synthetic_events: int, latency_ms: float, timeout: float) -> dict[str, Any]:
    """The dedup job (a process, as on EMR) against DynamoDB at `latency_ms`: put only (cross-batch synthetic
    detection off) on `events`, for the request rate and the client's CPU per request; synthetic on (a Query per
    id too) on `synthetic_events` only, for the requests per event, since moto's Query scans the whole table
    (O(items) per request), which makes a large synthetic-on run crawl against moto, not against DynamoDB."""
    from bench.manifest_latency import local_endpoint

    out = WORK / "out" / "dynamodb"
    shutil.rmtree(out, ignore_errors=True)
    result: dict[str, Any] = {"latency_ms": latency_ms, "passes": {}}
    with local_endpoint() as control:
        result["passes"]["put only"] = dynamodb_pass(control, generated(events, 1), False, latency_ms, out, timeout)
        result["passes"]["synthetic on"] = dynamodb_pass(
            control, generated(synthetic_events, 1), True, latency_ms, out, timeout
        )
    put_only, synthetic = result["passes"]["put only"], result["passes"]["synthetic on"]
    # The figures the rest uses: requests per line from the synthetic-on pass (the default config), the rate and
    # the client's CPU per request from the larger put-only pass.
    result["input_lines"] = synthetic["input_lines"]
    result["manifest"] = synthetic["manifest"]
    result["requests_per_second"] = put_only["requests_per_second"]
    result["client_cpu_ms_per_request"] = put_only["client_cpu_ms_per_request"]
    return result


# --- derived figures ----------------------------------------------------------------------------------------


def cost_model(results: dict[str, Any], scale_events: float = 1e9, buckets_at_scale: int = 4096) -> dict[str, Any]:
    """Dollars per day at `scale_events` events/day from the measured figures; every assumption in the output."""
    p = PRICES
    jobs, storage = results["jobs"], results["storage"]
    cores = results["cores"]
    events = results["inputs"]["batch_1_lines"]
    live_keys = scale_events * TTL_DAYS

    def compute_dollars(core_seconds: float) -> float:
        hours = core_seconds / 3600
        return hours * p["emr_serverless_vcpu_hour"] + hours * p["gb_per_vcpu"] * p["emr_serverless_gb_hour"]

    # Billed vCPU-seconds per event of the in-batch dedup job: its wall time on all `cores` (EMR Serverless bills
    # the workers it holds, busy or not), median over the two batches.
    in_batch_s = sum(jobs["in-batch dedup"]["batch_seconds"]) / 2
    in_batch_core_s_per_event = in_batch_s * cores / events
    # The lake check: extra = per_key * keys_read + per_pair * events, from the two measured manifest sizes.
    per_key = results["lake_check_model"]["core_seconds_per_key"]
    per_event = results["lake_check_model"]["core_seconds_per_event"]
    bytes_per_key = storage["lake"]["bytes_per_key"]
    retained_days = TTL_DAYS + 7  # RETAIN_AFTER_EXPIRY_DAYS: expired segments are kept 7 more days
    s3_storage = live_keys * retained_days / TTL_DAYS * bytes_per_key / 1e9 * p["s3_standard_gb_month"] / DAYS_PER_MONTH
    base_compute = compute_dollars(in_batch_core_s_per_event * scale_events)
    rows: list[dict[str, Any]] = []
    for cadence, runs_per_day in (("daily", 1), ("hourly", 24)):
        scan = compute_dollars(per_key * live_keys * runs_per_day)
        pairs = compute_dollars(per_event * scale_events)
        files_per_run = TTL_DAYS * buckets_at_scale  # one compacted segment per past day, a file per bucket
        gets = files_per_run * 2 * runs_per_day
        puts = buckets_at_scale * runs_per_day + (buckets_at_scale if runs_per_day > 1 else 0)  # + daily compaction
        compaction = compute_dollars(per_key * scale_events) if runs_per_day > 1 else 0.0
        requests = gets / 1000 * p["s3_get_per_1000"] + puts / 1000 * p["s3_put_per_1000"]
        manifest_total = scan + pairs + compaction + s3_storage + requests
        rows.append({
            "backend": f"lake ({cadence} runs)",
            "dedup_job_compute": round(base_compute, 2),
            "manifest_compute": round(scan + pairs + compaction, 2),
            "manifest_storage": round(s3_storage, 2),
            "manifest_requests": round(requests, 2),
            "manifest_total": round(manifest_total, 2),
            "total": round(base_compute + manifest_total, 2),
            "notes": (f"reads {live_keys:.3g} keys ({live_keys * bytes_per_key / 1e12:.1f} TB) per run, {runs_per_day} "
                      f"run(s)/day; scan {scan:.2f}, pair check {pairs:.2f}, compaction {compaction:.2f}; "
                      f"{gets:,.0f} GETs + {puts:,.0f} PUTs/day ({buckets_at_scale} buckets x {TTL_DAYS} segments)"),
        })  # fmt: skip
    # DynamoDB: a put per distinct pair plus (cross-batch synthetic on) a query per id; measured ratios per event.
    dynamo = results.get("dynamodb")
    puts_per_event = dynamo["manifest"]["puts"] / dynamo["input_lines"] if dynamo else 0.98
    queries_per_event = dynamo["manifest"]["queries"] / dynamo["input_lines"] if dynamo else 0.96
    client_cpu_ms = dynamo["client_cpu_ms_per_request"] if dynamo else 1.3
    item_bytes = 100 + len("eventId") + 36 + len("fingerprint") + 32 + len("etlTime") + 6 + len("ttl") + 6
    dynamo_storage = live_keys * item_bytes / 1e9 * p["dynamodb_storage_gb_month"] / DAYS_PER_MONTH
    request_compute = compute_dollars((puts_per_event + queries_per_event) * scale_events * client_cpu_ms / 1000)
    on_demand = (puts_per_event * scale_events / 1e6 * p["dynamodb_on_demand_per_million_wru"]
                 + queries_per_event * scale_events / 2 / 1e6 * p["dynamodb_on_demand_per_million_rru"])  # fmt: skip
    wcu = puts_per_event * scale_events / DAY
    rcu = queries_per_event * scale_events / 2 / DAY
    provisioned = 24 * (wcu * p["dynamodb_wcu_hour"] + rcu * p["dynamodb_rcu_hour"])
    for name, requests_dollars, note in (
        ("DynamoDB on-demand", on_demand,
         f"{puts_per_event:.3f} WRU + {queries_per_event:.3f}/2 RRU per event (eventually consistent query < 4 KB)"),
        ("DynamoDB provisioned", provisioned,
         f"{wcu:,.0f} WCU + {rcu:,.0f} RCU held all day: the average rate, 100% utilised, so the job must run "
         "continuously (a daily 1-hour run would need 24x the units for that hour)"),
    ):  # fmt: skip
        manifest_total = request_compute + dynamo_storage + requests_dollars
        rows.append({
            "backend": name,
            "dedup_job_compute": round(base_compute, 2),
            "manifest_compute": round(request_compute, 2),
            "manifest_storage": round(dynamo_storage, 2),
            "manifest_requests": round(requests_dollars, 2),
            "manifest_total": round(manifest_total, 2),
            "total": round(base_compute + manifest_total, 2),
            "notes": note + f"; {item_bytes} B/item incl. DynamoDB's 100 B overhead; client CPU {client_cpu_ms:g} ms/request",
        })  # fmt: skip
    return {
        "events_per_day": scale_events,
        "live_keys": live_keys,
        "prices": p,
        "assumptions": [
            f"{scale_events:.3g} events/day, TTL {TTL_DAYS} days: {live_keys:.3g} live keys in the manifest.",
            f"EMR Serverless bills vCPU-seconds = measured job wall time x {cores} local cores, scaled linearly per "
            f"event (in-batch dedup: {in_batch_core_s_per_event * 1e6:.1f} vCPU-us/event) and per key read (lake scan: "
            f"{per_key * 1e9:.0f} vCPU-ns/key); {p['gb_per_vcpu']} GB per vCPU; no worker start-up, minimum billing "
            "or driver overhead added.",
            f"Lake: {bytes_per_key:.1f} B/key measured; at scale {buckets_at_scale} buckets and one compacted "
            f"segment per day, so each run reads {TTL_DAYS} x {buckets_at_scale} files; 2 GETs per file (footer, "
            "then column chunks; an estimate) and 1 PUT per file written; LIST/commit requests negligible. Expired "
            "segments kept 7 more days (RETAIN_AFTER_EXPIRY_DAYS). The local scan read files from the page cache; "
            "S3 reads are slower per byte, so the scan figure is a lower bound on wall time.",
            "Hourly cadence: 24 runs/day each read every live key; a past day's 24 segments are compacted once "
            "(one more read and write of a day's keys).",
            f"DynamoDB: per event {puts_per_event:.3f} PutItem and {queries_per_event:.3f} Query (measured ratios, "
            "cross-batch synthetic detection on); no transactions; TTL deletes free; storage at 100 B overhead + "
            "attribute names and values per item; the client's CPU per request as measured against moto.",
            "Not included: input/output S3 storage and requests of the enriched data (the same for every backend), "
            "data transfer, DynamoDB backups/PITR, EMR Serverless pre-initialised capacity.",
        ],
        "rows": rows,
    }


# --- Markdown -----------------------------------------------------------------------------------------------


def markdown(results: dict[str, Any]) -> str:
    out: list[str] = []
    m = results["machine"]
    ins = results["inputs"]
    out.append(
        f"Measured {m['date']} on {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Spark {m['spark']}. "
        f"Batch 1: {ins['batch_1_lines']:,} lines (seed 1); batch 2: {ins['batch_2_lines']:,} lines (seed 2 + "
        f"{ins['overlap']:,} lines of batch 1). Manifest: {results['parameters']['days']} daily runs x "
        f"{results['parameters']['keys_per_day']:,} keys, lake with {results['parameters']['buckets']} buckets. "
        f"{len(results.get('jobs', {}).get('pass-through', {}).get('runs', [])) or results['parameters']['runs']} "
        f"measured round(s) after a warm-up; one Spark session (start-up excluded)."
    )
    if "bucket_trial" in results:
        t = results["bucket_trial"]
        out += ["", f"Bucket count (lake check of batch 1 against {t['keys']:,} keys in {t['days']} segments; "
                f"in-batch-only dedup of batch 1: {t['in_batch_seconds']:.2f} s):", "",
                "| buckets | files | manifest MB | dedup s | check adds s | x pass-through |",
                "| ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
        for row in t["rows"]:
            out.append(f"| {row['buckets']} | {row['files']:,} | {row['bytes'] / 1e6:,.1f} | {row['seconds']:.2f} | "
                       f"{row['check_seconds']:.2f} | {row['check_x_passthrough']:.2f}x |")  # fmt: skip
    if "jobs" in results:
        out += ["", "Cross-batch dedup, batch 1 then batch 2 (job seconds; ratios to the pass-through of the same batch, "
                "same session):", "",
                "| case | batch 1 s | batch 2 s | batch 1 x pass | batch 2 x pass | manifest adds (x pass) b1 / b2 | "
                "cross-batch copies b1 / b2 | CPU s b1 / b2 | other load (cores) b1 / b2 |",
                "| --- | ---: | ---: | ---: | ---: | --- | --- | --- | --- |"]  # fmt: skip
        passes = results["jobs"]["pass-through"]["batch_seconds"]
        base = results["jobs"]["in-batch dedup"]["batch_seconds"]
        for name, case in results["jobs"].items():
            s = case["batch_seconds"]
            adds = " / ".join(f"{(s[i] - base[i]) / passes[i]:.2f}x" for i in range(2)) if case.get("manifest") else ""
            copies = " / ".join(str(c) for c in case.get("cross_batch_copies", [])) if case.get("manifest") else ""
            out.append(f"| {name} | {s[0]:.2f} | {s[1]:.2f} | {s[0] / passes[0]:.2f}x | {s[1] / passes[1]:.2f}x | "
                       f"{adds} | {copies} | {' / '.join(f'{c:.1f}' for c in case['batch_cpu_seconds'])} | "
                       f"{' / '.join(f'{c:.2f}' for c in case['other_cores_busy'])} |")  # fmt: skip
        target = results.get("target")
        if target:
            out += ["", f"Target: the lake check adds at most 1x pass-through. Measured: "
                    f"{target['lake_adds_x_passthrough'][0]:.2f}x (batch 1), {target['lake_adds_x_passthrough'][1]:.2f}x "
                    f"(batch 2) in-session; against the pass-through as a whole process ({target['process_passthrough_seconds']:.2f} s, "
                    f"bench/RESULTS.md) {target['lake_adds_x_process_passthrough'][0]:.2f}x / "
                    f"{target['lake_adds_x_process_passthrough'][1]:.2f}x. Met: {'yes' if target['met'] else 'no'}."]  # fmt: skip
    if "pairs" in results:
        out += ["", "The batch's distinct pairs alone (a second read and parse of the input, what every manifest "
                "check pays before any look-up; computed, not written):", "",
                "| batch | distinct pairs s | with id halves and hash s | pass-through s | pairs x pass-through |",
                "| --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
        for name, row in results["pairs"].items():
            out.append(f"| {name} | {row['distinct_pairs_seconds']:.2f} | {row['keyed_pairs_seconds']:.2f} | "
                       f"{row['passthrough_seconds']:.2f} | "
                       f"{row['distinct_pairs_seconds'] / row['passthrough_seconds']:.2f}x |")  # fmt: skip
    if "storage" in results:
        st = results["storage"]
        out += ["", "Storage and I/O per key and per event (manifest figures from the runs' summary.json):", "",
                "| backend | bytes per key | manifest bytes | bytes read per event | requests per event |",
                "| --- | ---: | ---: | ---: | --- |"]  # fmt: skip
        for name, row in st.items():
            out.append(f"| {name} | {row['bytes_per_key']:.1f} | {row['bytes']:,} | {row.get('bytes_read_per_event', '')} | "
                       f"{row.get('requests_per_event', '')} |")  # fmt: skip
    if "dynamodb" in results:
        d = results["dynamodb"]
        out += ["", f"DynamoDB stand-in (moto behind a proxy adding {d['latency_ms']:g} ms per request; the dedup job as "
                "a whole process, against a new table, and in-batch only on the same sample):", "",
                "| pass | lines | job s | in-batch only s | manifest s | requests | PutItem | Query | requests/line | "
                "requests/s | client CPU ms/request | moto 5xx |",
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
        for name, row in d["passes"].items():
            m = row["manifest"]
            out.append(f"| {name} | {row['input_lines']:,} | {row['summary_wall_time_seconds']:.1f} | "
                       f"{row['in_batch_summary_wall_time_seconds']:.1f} | {row['manifest_seconds']:.1f} | "
                       f"{m['requests']:,} | {m['puts']:,} | {m['queries']:,} | {m['requests_per_input_line']} | "
                       f"{row['requests_per_second']} | {row['client_cpu_ms_per_request']} | "
                       f"{row['endpoint']['moto_errors']} |")  # fmt: skip
        pr = d["projection"]
        out += ["", f"Projection to 1M events (not measured; {pr['what']}): {pr['requests']:,.0f} requests "
                f"({d['manifest']['requests_per_input_line']} per line, synthetic on). At the measured put-only rate "
                f"against moto ({d['requests_per_second']} requests/s, bound by moto's single Python process) "
                f"{pr['seconds_at_measured_rate'] / 60:.0f} min; bound by latency alone ({pr['in_flight']} requests in "
                f"flight at {d['latency_ms']:g} ms) {pr['seconds_latency_bound']:.0f} s; bound by the client's CPU "
                f"({d['client_cpu_ms_per_request']} ms per request on {results['cores']} cores) "
                f"{pr['seconds_client_cpu_bound']:.0f} s; bound by a new on-demand table's 4,000 writes/s "
                f"{pr['seconds_on_demand_initial']:.0f} s. The real job would take the largest of the last three, plus "
                "the in-batch dedup."]  # fmt: skip
    if "cost" in results:
        c = results["cost"]
        out += ["", f"Dollars per day at {c['events_per_day']:.0e} events/day (list prices, us-east-1; assumptions "
                "below):", "",
                "| backend | dedup job compute | manifest compute | manifest storage | manifest requests | total $/day | notes |",
                "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]  # fmt: skip
        for row in c["rows"]:
            out.append(f"| {row['backend']} | {row['dedup_job_compute']:.2f} | {row['manifest_compute']:.2f} | "
                       f"{row['manifest_storage']:.2f} | {row['manifest_requests']:.2f} | {row['total']:.2f} | "
                       f"{row['notes']} |")  # fmt: skip
        out += [""] + [f"- {a}" for a in c["assumptions"]]
    return "\n".join(out) + "\n"


# --- main ---------------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    import platform

    import pyspark

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())  # fmt: skip
    memory_kb = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                         if line.startswith("MemTotal")))  # fmt: skip
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(memory_kb / 1024 / 1024, 1),
            "python": platform.python_version(), "spark": pyspark.__version__,
            "load_average_at_start": os.getloadavg()[0], "date": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.crossbatch", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events per batch (default 1,000,000)")
    parser.add_argument("--overlap", type=int, default=500, help="lines of batch 1 delivered again in batch 2")
    parser.add_argument("--days", type=int, default=30, help="daily runs already in the manifest (default 30)")
    parser.add_argument("--keys-per-day", type=int, default=1_000_000, help="keys per seeded day (default 1M)")
    parser.add_argument("--buckets", type=int, default=16, help="lake buckets of the measured manifest (default 16)")
    parser.add_argument("--trial-buckets", type=int, nargs="*", default=[8, 16, 64])
    parser.add_argument("--trial-keys-per-day", type=int, default=200_000, help="keys per day in the bucket trial")
    parser.add_argument("--runs", type=int, default=1, help="measured rounds of the jobs section (default 1)")
    parser.add_argument("--dynamodb-events", type=int, default=20_000, help="events of the put-only DynamoDB pass")
    parser.add_argument("--dynamodb-synthetic-events", type=int, default=2_000,
                        help="events of the synthetic-on DynamoDB pass (moto's Query is O(items))")  # fmt: skip
    parser.add_argument("--dynamodb-timeout", type=float, default=900, help="seconds before a DynamoDB pass stops")
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--process-passthrough-seconds", type=float, default=None,
                        help="the pass-through as a whole process (default: bench/results.json's figure)")  # fmt: skip
    parser.add_argument("--quiet-wait", type=float, default=300,
                        help="seconds to wait for an idle machine before each measurement (default 300)")  # fmt: skip
    parser.add_argument("--sections", nargs="*", choices=SECTIONS, default=list(SECTIONS),
                        help="what to measure; none (with --merge): only derive the figures and tables again")  # fmt: skip
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "crossbatch-results.json")
    parser.add_argument("--merge", action="store_true",
                        help="add this run's sections to the existing --results file instead of replacing it")  # fmt: skip
    parser.add_argument("--seed-sqlite", type=Path, help=argparse.SUPPRESS)  # internal: the seeding subprocess
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.seed_sqlite:
        seed_sqlite(args.seed_sqlite, args.days, args.keys_per_day)
        return 0
    started = time.monotonic()
    WORK.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": machine(), "parameters": {
        k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "seed_sqlite"}}  # fmt: skip
    if args.merge and args.results.exists():
        earlier = json.loads(args.results.read_text())
        results = {**earlier, "merged_runs": [*earlier.get("merged_runs", []), results]}
    batches = (generated(args.events, 1), second_batch(args.events, args.overlap))
    results["inputs"] = {"batch_1": str(batches[0]), "batch_2": str(batches[1]), "overlap": args.overlap,
                         "batch_1_lines": lines_in(batches[0]), "batch_2_lines": lines_in(batches[1]),
                         "batch_1_bytes": folder_bytes(batches[0], ".tsv"), "batch_2_bytes": folder_bytes(batches[1], ".tsv")}  # fmt: skip
    if "dynamodb" in args.sections:
        generated(args.dynamodb_events, 1)
        generated(args.dynamodb_synthetic_events, 1)
    session = Session()
    results["cores"] = session.cores
    out = WORK / "out"

    def save() -> None:
        results["total_seconds"] = round(time.monotonic() - started, 1)
        args.results.write_text(json.dumps(results, indent=1) + "\n")

    # Seeding first (not measured): the SQLite seed is plain Python and runs in its own process while Spark writes
    # the lake seeds; every measurement starts once both are done.
    sqlite_seed = WORK / f"sqlite-{args.days}x{args.keys_per_day}.db"
    seeding = None
    running = running_seeder(sqlite_seed)
    if "jobs" in args.sections and running is not None:
        log(f"SQLite manifest {sqlite_seed}: being seeded by process {running}; waiting for it later")
    elif "jobs" in args.sections:
        seeding = subprocess.Popen(
            python_module("bench.crossbatch", "--seed-sqlite", str(sqlite_seed), "--days", str(args.days),
                          "--keys-per-day", str(args.keys_per_day)), cwd=ROOT,
        )  # fmt: skip
    trial_seeds = {}
    if "buckets" in args.sections:
        for buckets in args.trial_buckets:
            path = WORK / f"lake-trial-{buckets}-{args.days}x{args.trial_keys_per_day}"
            trial_seeds[buckets] = (
                path,
                seed_lake(session.spark, path, buckets, args.days, args.trial_keys_per_day, 7),
            )
    lake_path = WORK / f"lake-{args.buckets}-{args.days}x{args.keys_per_day}"
    lake_seed: dict[str, Any] = {}
    if "jobs" in args.sections:
        lake_seed = seed_lake(session.spark, lake_path, args.buckets, args.days, args.keys_per_day, salt=1)
        if seeding is not None and seeding.wait() != 0:
            raise RuntimeError("seeding the SQLite manifest failed")
        while running is not None and Path(f"/proc/{running}").exists():
            time.sleep(2)

    if set(args.sections) & {"buckets", "jobs", "pairs"}:
        log("warm-up: pass-through and in-batch dedup of batch 1 (not measured)")
        session.passthrough(batches[0], out / "pass")
        session.dedup(batches[0], out / "in-batch", BATCH_RUN_IDS[0], None)
    warm_path, warm_seed = next(iter(trial_seeds.values())) if trial_seeds else (lake_path, lake_seed)
    if warm_seed:
        log("warm-up: lake dedup of batch 1 (not measured)")
        session.dedup(batches[0], out / "lake-warm-up", BATCH_RUN_IDS[0], f"lake:{warm_path}")
        reset_lake(warm_path, warm_seed)

    if "buckets" in args.sections:
        trial: dict[str, Any] = {"days": args.days, "keys": args.days * args.trial_keys_per_day, "rows": []}
        quiet = wait_for_quiet(args.quiet_wait)
        passthrough = session.passthrough(batches[0], out / "pass")["seconds"]
        in_batch = session.dedup(batches[0], out / "in-batch", BATCH_RUN_IDS[0], None)["seconds"]
        trial["passthrough_seconds"], trial["in_batch_seconds"] = passthrough, in_batch
        trial["quiet_before"] = quiet
        for buckets, (path, seed) in trial_seeds.items():
            reset_lake(path, seed)
            wait_for_quiet(args.quiet_wait)
            run = session.dedup(batches[0], out / "lake-trial", BATCH_RUN_IDS[0], f"lake:{path}")
            check = run["seconds"] - in_batch
            trial["rows"].append({"buckets": buckets, "files": seed["files"], "bytes": seed["bytes"],
                                  "seconds": run["seconds"], "cpu_seconds": run["cpu_seconds"],
                                  "check_seconds": round(check, 3), "check_x_passthrough": round(check / passthrough, 3),
                                  "manifest": run["manifest"]})  # fmt: skip
            log(f"  trial {buckets} buckets: dedup {run['seconds']:.2f} s (in-batch {in_batch:.2f} s)")
            reset_lake(path, seed)
        results["bucket_trial"] = trial
        save()

    if "jobs" in args.sections:
        sqlite_info = json.loads(Path(f"{sqlite_seed}.seed.json").read_text())
        sqlite_work = WORK / "sqlite-working.db"
        results["seeds"] = {"lake": lake_seed, "sqlite": sqlite_info}
        cases: dict[str, Callable[[int], dict[str, Any]]] = {
            "pass-through": lambda b: session.passthrough(batches[b], out / f"pass-{b}"),
            "in-batch dedup": lambda b: session.dedup(batches[b], out / f"in-batch-{b}", BATCH_RUN_IDS[b], None),
            "lake dedup": lambda b: session.dedup(batches[b], out / f"lake-{b}", BATCH_RUN_IDS[b], f"lake:{lake_path}"),
            "SQLite dedup": lambda b: session.dedup(batches[b], out / f"sqlite-{b}", BATCH_RUN_IDS[b],
                                                    f"sqlite:{sqlite_work}"),
        }  # fmt: skip
        resets: dict[str, Callable[[], None]] = {
            "lake dedup": lambda: reset_lake(lake_path, lake_seed),
            "SQLite dedup": lambda: reset_sqlite(sqlite_seed, sqlite_work),
        }
        # With --merge, this invocation's rounds are added to the earlier ones (medians over all of them).
        earlier_jobs = results.get("jobs", {}) if args.merge else {}
        runs: dict[str, list[list[dict[str, Any]]]] = {
            name: list(earlier_jobs.get(name, {}).get("runs", [])) for name in cases
        }
        first_round = len(runs["pass-through"]) + 1
        for round_number in range(first_round, first_round + args.runs):
            for name, case in cases.items():
                if name in resets:
                    resets[name]()
                wait_for_quiet(args.quiet_wait)
                pair = [case(0), case(1)]
                runs[name].append(pair)
                log(
                    f"  round {round_number} {name}: batch 1 {pair[0]['seconds']:.2f} s, batch 2 {pair[1]['seconds']:.2f} s"
                )
        jobs: dict[str, Any] = {}
        for name, rounds in runs.items():
            import statistics

            jobs[name] = {
                "batch_seconds": [round(statistics.median(p[b]["seconds"] for p in rounds), 3) for b in (0, 1)],
                "batch_cpu_seconds": [round(statistics.median(p[b]["cpu_seconds"] for p in rounds), 2) for b in (0, 1)],
                "other_cores_busy": [max(p[b]["other_cores_busy"] for p in rounds) for b in (0, 1)],
                "runs": rounds,
            }
            last = rounds[-1]
            if "manifest" in last[0] and last[0]["manifest"]:
                jobs[name]["manifest"] = [last[0]["manifest"], last[1]["manifest"]]
                jobs[name]["cross_batch_copies"] = [cross_batch_copies(last[0]), cross_batch_copies(last[1])]
        results["jobs"] = jobs
        passes = jobs["pass-through"]["batch_seconds"]
        base = jobs["in-batch dedup"]["batch_seconds"]
        lake_s = jobs["lake dedup"]["batch_seconds"]
        process_pass = args.process_passthrough_seconds
        if process_pass is None:
            try:
                old = json.loads((ROOT / "bench" / "results.json").read_text())
                process_pass = old["processes"]["spark pass-through (process)"]["median_seconds"]
            except (OSError, KeyError, ValueError):
                process_pass = float("nan")
        adds = [(lake_s[i] - base[i]) / passes[i] for i in (0, 1)]
        results["target"] = {
            "lake_adds_seconds": [round(lake_s[i] - base[i], 3) for i in (0, 1)],
            "lake_adds_x_passthrough": [round(a, 3) for a in adds],
            "process_passthrough_seconds": process_pass,
            "lake_adds_x_process_passthrough": [round((lake_s[i] - base[i]) / process_pass, 3) for i in (0, 1)],
            "met": max(adds) <= 1.0,
        }
        # Storage and I/O per key and per event.
        lake_m = jobs["lake dedup"]["manifest"]
        sqlite_m = jobs["SQLite dedup"]["manifest"]
        lines = [results["inputs"]["batch_1_lines"], results["inputs"]["batch_2_lines"]]
        lake_requests = [
            # GETs: 2 per file read (estimate); per run about 6 more: descriptor, commit list/reads, lease; PUTs: the
            # files written, the commit and the lease (and its delete).
            (m["files_read"] * 2 + 6 + m["files_written"] + 3) / n
            for m, n in zip(lake_m, lines, strict=True)
        ]
        results["storage"] = {
            "lake": {
                "bytes": lake_seed["bytes"], "keys": lake_seed["keys"],
                "bytes_per_key": round(lake_seed["bytes"] / lake_seed["keys"], 2),
                "bytes_read_per_event": " / ".join(f"{m['bytes_read'] / n:,.0f}" for m, n in zip(lake_m, lines, strict=True)),
                "requests_per_event": " / ".join(f"{r:.4f} (est.: {m['files_read']:,} files read x 2 + ~9)"
                                                 for r, m in zip(lake_requests, lake_m, strict=True)),
            },
            "SQLite": {
                "bytes": sqlite_info["bytes"], "keys": sqlite_info["rows"],
                "bytes_per_key": round(sqlite_info["bytes"] / sqlite_info["rows"], 2),
                "bytes_read_per_event": "n/a (page reads, not counted)",
                "requests_per_event": " / ".join(f"{m['requests_per_input_line']}" for m in sqlite_m),
            },
        }  # fmt: skip
        save()

    def noop_write(frame: Any) -> None:
        frame.write.format("noop").mode("overwrite").save()

    if "pairs" in args.sections:
        # What every manifest check pays before any look-up: the batch's distinct (event_key, fingerprint) pairs,
        # which the job takes from its one full parse of the input (jobs/dedup/inbatch.delivered_pairs).
        from jobs.dedup.inbatch import delivered_pairs
        from jobs.enriched.parse import narrow_events
        from jobs.fs.input import read_lines
        from jobs.manifest.lake_writes import keyed_pairs

        fields = session.config.dedup.fingerprint_fields
        pairs: dict[str, Any] = {}
        for b in (0, 1):
            events = narrow_events(read_lines(session.spark, str(batches[b])), fields)
            frame = delivered_pairs(events).distinct()
            keyed = keyed_pairs(delivered_pairs(events)).distinct()
            wait_for_quiet(args.quiet_wait)
            pairs[f"batch_{b + 1}"] = {
                "distinct_pairs_seconds": round(measured(functools.partial(noop_write, frame))[0], 3),
                "keyed_pairs_seconds": round(measured(functools.partial(noop_write, keyed))[0], 3),
                "passthrough_seconds": session.passthrough(batches[b], out / "pass")["seconds"],
            }
        results["pairs"] = pairs
        save()

    if "dynamodb" in args.sections:
        wait_for_quiet(args.quiet_wait)
        d = dynamodb_section(args.dynamodb_events, args.dynamodb_synthetic_events, args.latency_ms,
                             args.dynamodb_timeout)  # fmt: skip
        per_event = d["manifest"]["requests"] / d["input_lines"]
        projected = per_event * 1_000_000
        in_flight = session.cores * 16  # manifest.concurrency (16) per task, a task per core
        d["projection"] = {
            "what": "a projection, not a measurement: 1M events x the measured requests per line, at a request rate",
            "requests": round(projected),
            "seconds_at_measured_rate": round(projected / d["requests_per_second"], 1)
            if d["requests_per_second"]
            else None,
            "in_flight": in_flight,
            "seconds_latency_bound": round(projected * d["latency_ms"] / 1000 / in_flight, 1),
            "seconds_client_cpu_bound": round(projected * d["client_cpu_ms_per_request"] / 1000 / session.cores, 1),
            "seconds_on_demand_initial": round(d["manifest"]["puts"] / d["input_lines"] * 1_000_000 / 4000, 1),
        }
        results["dynamodb"] = d
        save()

    if "dynamodb" in results and "storage" in results:
        d = results["dynamodb"]
        results["storage"]["DynamoDB"] = {
            "bytes": 0,
            "keys": 0,
            "bytes_per_key": 100 + 7 + 36 + 11 + 32 + 7 + 6 + 3 + 6,
            "bytes_read_per_event": "n/a (billed per request)",
            "requests_per_event": f"{d['manifest']['requests'] / d['input_lines']:.4f} (measured, moto)",
        }

    if "jobs" in results and "bucket_trial" in results:
        # The lake check's cost: extra wall time = per_key * keys + per_event * events. Per key: the lake dedup of
        # batch 1 against the full manifest minus the same against the trial's (same batch, same bucket count if
        # tried); per event: what is left of the full run's extra over the in-batch dedup.
        lake_seed = results["seeds"]["lake"]
        lake_path = WORK / f"lake-{lake_seed['parameters']['buckets']}-{args.days}x{args.keys_per_day}"
        trial_rows = {row["buckets"]: row for row in results["bucket_trial"]["rows"]}
        row = trial_rows.get(args.buckets) or min(trial_rows.values(), key=lambda r: r["seconds"])
        full_extra = (
            results["jobs"]["lake dedup"]["batch_seconds"][0] - results["jobs"]["in-batch dedup"]["batch_seconds"][0]
        )
        trial_extra = row["check_seconds"]
        keys_full, keys_trial = lake_seed["keys"], results["bucket_trial"]["keys"]
        full_seconds = results["jobs"]["lake dedup"]["batch_seconds"][0]
        per_key_wall = max((full_seconds - row["seconds"]) / (keys_full - keys_trial), 0.0)
        per_event_wall = max((full_extra - per_key_wall * keys_full) / results["inputs"]["batch_1_lines"], 0.0)
        # A cross-check: reading the live keys alone (no join), as the check's scan side does.
        from pyspark.sql import functions as F

        scan = (
            session.spark.read.parquet(f"file://{lake_path}/segments")
            .where(F.col("etl_time") < epoch(BATCH_RUN_IDS[0]))
            .select("id_hi", "id_lo", "fingerprint")
        )
        scan_seconds = results.get("lake_check_model", {}).get("scan_only_seconds")
        if scan_seconds is None or "jobs" in args.sections:
            scan_seconds = min(
                measured(lambda: scan.write.format("noop").mode("overwrite").save())[0] for _ in range(2)
            )
        rounds = [pair[0]["seconds"] for pair in results["jobs"]["lake dedup"]["runs"]]
        results["lake_check_model"] = {
            "scan_only_seconds": round(scan_seconds, 3),
            "scan_only_core_seconds_per_key": scan_seconds * session.cores / keys_full,
            "keys_full": keys_full, "keys_trial": keys_trial, "trial_buckets": row["buckets"],
            "extra_seconds_full": round(full_extra, 3), "extra_seconds_trial": round(trial_extra, 3),
            "core_seconds_per_key": per_key_wall * session.cores,
            "core_seconds_per_key_by_round": [
                max((r - row["seconds"]) / (keys_full - keys_trial), 0.0) * session.cores for r in rounds
            ],
            "core_seconds_per_event": per_event_wall * session.cores,
            "how": "per key: (lake dedup of batch 1 against the full manifest - the same against the trial's) / "
                   "(keys_full - keys_trial); per event: (extra_seconds_full - per_key * keys_full) / lines; "
                   "core-seconds = wall x local cores",
        }  # fmt: skip
        results["cost"] = cost_model(results)
        save()

    save()
    print(markdown(results))
    log(f"done in {results['total_seconds']:.0f} s; results in {args.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
