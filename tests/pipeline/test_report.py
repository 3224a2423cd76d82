"""`python -m jobs report`: the events-per-event-ID distribution before and after dedup, table and chart."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.cli import main
from jobs.report import MAX_BARS, chart_png, table_lines
from tests.pipeline.helpers import ID_A, ID_B, ID_C, event

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_the_table_lists_every_value_seen_before_or_after() -> None:
    assert table_lines({1: 5, 3: 1}, {1: 7, 2: 1}) == [
        "events_per_event_id\tevent_ids_before\tevents_before\tevent_ids_after\tevents_after",
        "1\t5\t5\t7\t7",
        "2\t0\t0\t1\t2",
        "3\t1\t3\t0\t0",
    ]
    assert table_lines({2: 4}, None)[1:] == ["2\t4\t8\t\t"]


def test_a_long_tail_is_charted_too() -> None:
    before = {events: max(1, 10_000 // events**2) for events in range(1, MAX_BARS + 20)}
    assert chart_png(before, {1: 12_000}).startswith(PNG_MAGIC)


def test_report_before_and_after_dedup(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = write(
        tmp_path / "enriched" / "part-0.tsv",
        [
            event(ID_A),
            event(ID_B, event_fingerprint="x"),
            event(ID_B.upper(), event_fingerprint="y"),  # ids compare lower-cased, as dedup groups them
            *(event(ID_C, event_fingerprint=str(i)) for i in range(3)),
            "not an event",
        ],
    )
    # Two dedup runs (two batches): their good/ folders are counted together; only good/ is read.
    run_1, run_2 = tmp_path / "dedup" / "run=2026-11-22-03-00-00", tmp_path / "dedup" / "run=2026-11-22-04-00-00"
    write(run_1 / "good" / "part-0.tsv", [event(ID_A), event(ID_B)])
    write(run_1 / "bad" / "part-0.json", ['{"line":"not an event"}'])
    write(run_2 / "good" / "part-0.tsv", [event(ID_C)])

    out = tmp_path / "report"
    argv = ["report", "--input", str(before.parent), "--deduplicated", str(run_1), str(run_2), "--output", str(out)]
    assert main(argv) == 0

    assert (out / "events_per_event_id.tsv").read_text().splitlines() == [
        "events_per_event_id\tevent_ids_before\tevents_before\tevent_ids_after\tevents_after",
        "1\t1\t1\t3\t3",
        "2\t1\t2\t0\t0",
        "3\t1\t3\t0\t0",
    ]
    assert (out / "events_per_event_id.png").read_bytes().startswith(PNG_MAGIC)
    printed = capsys.readouterr().out.splitlines()
    assert printed[:5] == [
        "Winnow report  events per event ID",
        "  events/ID  IDs before  events before  IDs after  events after",
        "          1           1              1          3             3",
        "          2           1              2          0             0",
        "          3           1              3          0             0",
    ]
    assert "  lines that are not valid events (not counted): 1 before, 0 after" in printed


def test_report_without_a_dedup_run(spark: SparkSession, tmp_path: Path) -> None:
    before = write(tmp_path / "enriched.tsv", [event(ID_A), event(ID_A, event_fingerprint="z")])
    out = tmp_path / "report"
    assert main(["report", "--input", str(before), "--output", str(out)]) == 0
    assert (out / "events_per_event_id.tsv").read_text().splitlines()[1:] == ["2\t1\t2\t\t"]
    assert (out / "events_per_event_id.png").read_bytes().startswith(PNG_MAGIC)
    # Nothing else is written (Hadoop's local file system adds hidden .crc checksums).
    written = sorted(path.name for path in out.iterdir() if not path.name.startswith("."))
    assert written == ["events_per_event_id.png", "events_per_event_id.tsv"]
