"""`python -m bench.lake_cost`: what a lake manifest costs a day at 1 billion events, by cadence (issue 32).

A model, not a measurement at that scale: each term is a formula of the scale below, us-east-1 list prices and a
figure measured on this machine (`bench.cadence --probe` for the filters, `bench.crossbatch` for the job, the check
and an entry read); the table names each input and the floor of each term.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Any

from bench.cadence import RESULTS as CADENCE_RESULTS
from bench.crossbatch import DAYS_PER_MONTH, PRICES, ROOT

CROSSBATCH_RESULTS = ROOT / "bench" / "crossbatch-results.json"
BENCH_RESULTS = ROOT / "bench" / "results.json"

EVENTS_A_DAY = 1e9
TTL_DAYS = 180
KEPT_DAYS = TTL_DAYS + 7
"""Expired segments are kept a week (RETAIN_AFTER_EXPIRY_DAYS): stored and listed, not read."""
BUCKETS = 4096
FILTER_FILES = BUCKETS // 64
"""A filter's files at scale (ENTRY_BUCKETS_A_FILE)."""
LIST_PAGE = 1000
GETS_A_FILE = 2
"""A Parquet file read: its footer, then its column chunks (an estimate)."""
CADENCES = (("every 15 min", 96), ("hourly", 24), ("daily", 1))
S3_LIST_PER_1000 = 0.005


@dataclass(frozen=True)
class Measured:
    """The figures the model scales, each from a bench's JSON."""

    entry_bytes: float
    filter_bytes: float
    job_ns: float
    check_ns: float
    entry_read_ns: float
    filter_key_ns: float
    filter_key_scan_ns: float
    probe_ns: float
    id_hashed_ns: float
    job_floor_share: float
    """Spark's cheapest dedup process (`dropDuplicates`, nothing checked) over Winnow's, in one `make bench` run."""
    check_floor_share: float
    """The batch's keyed distinct pairs alone (which every backend computes) over the check's per-event work."""

    @staticmethod
    def load() -> Measured:
        crossbatch = json.loads(CROSSBATCH_RESULTS.read_text())
        probe = json.loads(CADENCE_RESULTS.read_text())["probe"]
        largest = max(probe["sizes"].values(), key=lambda size: size["filter_keys"])
        job = crossbatch["jobs"]["in-batch dedup"]
        check = crossbatch["lake_check_model"]
        processes = json.loads(BENCH_RESULTS.read_text())["processes"]
        check_ns = check["core_seconds_per_event"] * 1e9
        pairs_seconds = crossbatch["pairs"]["batch_1"]["keyed_pairs_seconds"]
        return Measured(
            entry_bytes=crossbatch["storage"]["lake"]["bytes_per_key"],
            filter_bytes=largest["seed"]["filter_bytes"] / largest["filter_keys"],
            # Wall time on every core: EMR bills the workers it holds (crossbatch's own model).
            job_ns=sum(job["batch_seconds"]) / 2 * crossbatch["cores"] / crossbatch["inputs"]["batch_1_lines"] * 1e9,
            check_ns=check_ns,
            entry_read_ns=check["core_seconds_per_key"] * 1e9,
            filter_key_ns=probe["vcpu_ns_a_filter_key"],
            filter_key_scan_ns=probe["vcpu_ns_a_filter_key_scanned"],
            probe_ns=probe["vcpu_ns_a_probe"],
            id_hashed_ns=probe["vcpu_ns_an_id_hashed"],
            job_floor_share=processes["spark dropDuplicates (process)"]["median_seconds"]
            / processes["winnow dedup (process)"]["median_seconds"],
            check_floor_share=pairs_seconds
            * crossbatch["cores"]
            / crossbatch["inputs"]["batch_1_lines"]
            / (check_ns / 1e9),
        )


def compute(vcpu_seconds: float) -> float:
    hours = vcpu_seconds / 3600
    return hours * (PRICES["emr_serverless_vcpu_hour"] + PRICES["gb_per_vcpu"] * PRICES["emr_serverless_gb_hour"])


def storage(keys: float, bytes_a_key: float) -> float:
    return keys * bytes_a_key / 1e9 * PRICES["s3_standard_gb_month"] / DAYS_PER_MONTH


def requests(gets: float = 0, puts: float = 0, lists: float = 0) -> float:
    return (gets * PRICES["s3_get_per_1000"] + puts * PRICES["s3_put_per_1000"] + lists * S3_LIST_PER_1000) / 1000


def terms(m: Measured, runs: int, floor: bool = False) -> dict[str, float]:
    """Dollars a day of each term for `runs` runs a day; `floor`: each term at its measured floor."""
    past_keys = EVENTS_A_DAY * TTL_DAYS
    today_reads = runs * (runs - 1) / 2  # each run reads the day's earlier runs' segments, through their filters
    run_keys = EVENTS_A_DAY / runs
    keys_a_bucket = EVENTS_A_DAY / BUCKETS
    chance_lookups = EVENTS_A_DAY * TTL_DAYS * keys_a_bucket / 2**40  # (id, past day) chance matches: a file each
    segments_written = runs + (1 if runs > 1 else 0)  # the runs', and the day's compaction
    # A day's keys re-read: by the runs' filters, and (runs > 1) by the compaction and the compacted day's filter.
    reread_days = 1 + (2 if runs > 1 else 0)
    # The ideal sorted-hash code: the hash's bits less those its bucket and place give, plus ~1.5 (Golomb).
    filter_bytes = (40 - math.log2(keys_a_bucket) + 1.5) / 8 if floor else m.filter_bytes
    filter_key_ns = m.filter_key_scan_ns if floor else m.filter_key_ns
    job_ns, check_ns = (
        (m.job_ns * m.job_floor_share, m.check_ns * m.check_floor_share) if floor else (m.job_ns, m.check_ns)
    )
    return {
        "entries' storage": storage(EVENTS_A_DAY * KEPT_DAYS, m.entry_bytes),
        "filters' storage": storage(EVENTS_A_DAY * KEPT_DAYS, filter_bytes),
        "the dedup job": compute(EVENTS_A_DAY * job_ns / 1e9),
        "the check's per-event work": compute(EVENTS_A_DAY * check_ns / 1e9),
        "segments and filters written": requests(puts=segments_written * (BUCKETS + FILTER_FILES))
        + compute(reread_days * EVENTS_A_DAY * m.entry_read_ns / 1e9),
        "commits checked (listings)": requests(
            lists=runs
            * (KEPT_DAYS * (math.ceil(BUCKETS / LIST_PAGE) + 1) + (runs - 1) / 2 * (math.ceil(BUCKETS / LIST_PAGE) + 1))
        ),
        "filter files read": requests(gets=(runs * TTL_DAYS + today_reads) * FILTER_FILES * GETS_A_FILE),
        "filter keys read": compute((runs * past_keys + today_reads * run_keys) * filter_key_ns / 1e9),
        "ids probed": compute(
            EVENTS_A_DAY * ((TTL_DAYS + (runs - 1) / 2) * m.probe_ns + (2 if runs > 1 else 1) * m.id_hashed_ns) / 1e9
        ),
        "copies looked up": requests(gets=runs * BUCKETS * GETS_A_FILE) + compute(EVENTS_A_DAY * m.entry_read_ns / 1e9),
        "chance matches looked up": requests(gets=chance_lookups * GETS_A_FILE)
        + compute(chance_lookups * keys_a_bucket * m.entry_read_ns / 1e9),
    }


def formulas(m: Measured) -> dict[str, str]:
    return {
        "entries' storage": f"{KEPT_DAYS} days x 1e9 keys x {m.entry_bytes:.1f} B",
        "filters' storage": f"{KEPT_DAYS} days x 1e9 keys x {m.filter_bytes:.2f} B",
        "the dedup job": f"1e9 events x {m.job_ns / 1000:.1f} vCPU-us",
        "the check's per-event work": f"1e9 events x {m.check_ns / 1000:.1f} vCPU-us (pairs, answers, the run's segment)",
        "segments and filters written": f"(runs + a compaction) x ({BUCKETS} + {FILTER_FILES}) PUTs; a filter re-reads "
        f"its segment, a compaction its day, at {m.entry_read_ns:.0f} vCPU-ns a key",
        "commits checked (listings)": f"runs x segments kept x ({math.ceil(BUCKETS / LIST_PAGE)} + 1) LISTs",
        "filter files read": f"runs x {TTL_DAYS} days x {FILTER_FILES} files x {GETS_A_FILE} GETs",
        "filter keys read": f"runs x 1.8 x 1e11 keys x {m.filter_key_ns:.1f} vCPU-ns",
        "ids probed": f"1e9 ids x {TTL_DAYS} days x {m.probe_ns:.1f} vCPU-ns, + {m.id_hashed_ns:.0f} an id hashed",
        "copies looked up": f"runs x {BUCKETS} files x {GETS_A_FILE} GETs, 1e9 entries at {m.entry_read_ns:.0f} vCPU-ns "
        "(at worst: each run's copies, retries of the run before, in every bucket file of one earlier segment)",
        "chance matches looked up": f"1e9 x {TTL_DAYS} x {EVENTS_A_DAY / BUCKETS:,.0f} / 2^40 files, a GET pair and "
        f"{EVENTS_A_DAY / BUCKETS:,.0f} entries each",
    }


def table(m: Measured) -> dict[str, Any]:
    by_cadence = {name: terms(m, runs) for name, runs in CADENCES}
    floors = {name: terms(m, runs, floor=True) for name, runs in CADENCES if name != "every 15 min"}
    return {"measured": m.__dict__, "terms": by_cadence, "floors": floors, "formulas": formulas(m)}


def markdown(result: dict[str, Any]) -> str:
    by_cadence, floors = result["terms"], result["floors"]
    lines = ["| term | formula | " + " | ".join(by_cadence) + " | floor (hourly / daily) |",
             "|---|---|" + "---:|" * len(by_cadence) + "---|"]  # fmt: skip
    for term, formula in result["formulas"].items():
        cells = " | ".join(f"{costs[term]:.2f}" for costs in by_cadence.values())
        floor = " / ".join(f"{costs[term]:.2f}" for costs in floors.values())
        lines.append(f"| {term} | {formula} | {cells} | {floor} |")
    totals = " | ".join(f"**{sum(costs.values()):.2f}**" for costs in by_cadence.values())
    floor_totals = " / ".join(f"{sum(costs.values()):.2f}" for costs in floors.values())
    lines.append(f"| **total** | | {totals} | **{floor_totals}** |")
    return "\n".join(lines)


def main() -> int:
    print(markdown(table(Measured.load())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
