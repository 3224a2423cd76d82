"""The lake manifest's cost model (`bench.lake_cost`): what each cadence pays for, from the measured figures."""

from __future__ import annotations

import pytest

from bench.lake_cost import Measured, compute, terms

MEASURED = Measured(entry_bytes=24.0, filter_bytes=3.0, job_ns=40_000, check_ns=50_000, entry_read_ns=400,
                    filter_key_ns=20, filter_key_scan_ns=10, probe_ns=50, id_hashed_ns=1_000, job_floor_share=0.5,
                    check_floor_share=0.25)  # fmt: skip
VCPU_HOUR = 0.052624 + 4 * 0.0057785


def test_a_daily_run_reads_every_past_day_s_filter_once_and_writes_one_segment() -> None:
    daily = terms(MEASURED, runs=1)
    assert compute(3600) == pytest.approx(VCPU_HOUR)
    # 1.8e11 filter keys at 20 vCPU-ns: one vCPU-hour; no earlier run of the day, no compaction.
    assert daily["filter keys read"] == pytest.approx(VCPU_HOUR)
    assert daily["filter files read"] == pytest.approx(180 * 64 * 2 * 0.0004 / 1000)
    # Its segment and its filter, which reads the day's entries again (400 vCPU-ns a key).
    assert daily["segments and filters written"] == pytest.approx(
        (4096 + 64) * 0.005 / 1000 + VCPU_HOUR * 1e9 * 400e-9 / 3600
    )
    # 1e9 ids, each probing 180 days at 50 ns and hashed once (1 us): 9,000 + 1,000 vCPU-seconds.
    assert daily["ids probed"] == pytest.approx(VCPU_HOUR * 10_000 / 3600)


def test_hourly_runs_read_the_past_days_24_times_and_the_day_s_earlier_runs_through_their_filters() -> None:
    hourly = terms(MEASURED, runs=24)
    earlier_runs_read = 24 * 23 / 2
    keys = 24 * 1.8e11 + earlier_runs_read * 1e9 / 24
    assert hourly["filter keys read"] == pytest.approx(VCPU_HOUR * keys * 20e-9 / 3600)
    assert hourly["filter files read"] == pytest.approx((24 * 180 + earlier_runs_read) * 64 * 2 * 0.0004 / 1000)
    # 24 runs' segments and the day's compaction; the runs' filters, the compaction and its filter each read the
    # day's entries again.
    assert hourly["segments and filters written"] == pytest.approx(
        25 * (4096 + 64) * 0.005 / 1000 + 3 * VCPU_HOUR * 1e9 * 400e-9 / 3600
    )
    # What does not depend on the cadence does not change with it.
    daily = terms(MEASURED, runs=1)
    for term in ("entries' storage", "filters' storage", "the dedup job", "the check's per-event work",
                 "chance matches looked up"):  # fmt: skip
        assert hourly[term] == daily[term]


def test_the_floors_are_the_cheapest_peers_and_the_ideal_code_of_the_hashes() -> None:
    daily, floor = terms(MEASURED, runs=1), terms(MEASURED, runs=1, floor=True)
    assert floor["filter keys read"] == pytest.approx(daily["filter keys read"] / 2)
    assert floor["the dedup job"] == pytest.approx(daily["the dedup job"] * 0.5)
    assert floor["the check's per-event work"] == pytest.approx(daily["the check's per-event work"] * 0.25)
    assert floor["entries' storage"] == daily["entries' storage"]
    # 40 bits less the log2 of 244,140 keys a bucket (17.9), plus 1.5: 2.95 bytes a key against 3.0 measured.
    assert floor["filters' storage"] == pytest.approx(daily["filters' storage"] * 2.9503 / 3.0, rel=1e-4)
