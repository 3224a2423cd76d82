"""`python -m jobs report`: the events-per-event-ID distribution before and after dedup, table and chart."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from pyspark.sql import SparkSession

from jobs.runtime.cli import main
from jobs.tools.report import MAX_BARS, chart_figure, chart_png, table_lines
from tests.pipeline.helpers import ID_A, ID_B, ID_C, RUN_ID, event, read_lines

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def dedup_run(folder: Path, good: list[str]) -> Path:
    """A complete dedup run folder as dedup leaves it: good/, bad/, summary.json, then _SUCCESS."""
    write(folder / "good" / "part-0.tsv", good)
    write(folder / "bad" / "part-0.json", ['{"line":"not an event"}'])
    (folder / "summary.json").write_text('{"job": "dedup"}\n', encoding="utf-8")
    (folder / "_SUCCESS").write_bytes(b"")
    return folder


def test_the_table_lists_every_value_seen_before_or_after() -> None:
    assert table_lines({1: 5, 3: 1}, {1: 7, 2: 1}) == [
        "events_per_event_id\tevent_ids_before\tevents_before\tevent_ids_after\tevents_after",
        "1\t5\t5\t7\t7",
        "2\t0\t0\t1\t2",
        "3\t1\t3\t0\t0",
    ]
    assert table_lines({2: 4}, None)[1:] == ["2\t4\t8\t\t"]


def bars(axes: Any) -> list[float]:
    return [patch.get_height() for patch in axes.patches]


def test_the_chart_shows_before_and_after_side_by_side_and_says_what_changed() -> None:
    before, after = {1: 500, 2: 20, 3: 2}, {1: 540}
    figure = chart_figure(before, after)
    try:
        assert figure._suptitle.get_text() == (
            "Dedup: 546 \u2192 540 events, 6 fewer (1.1%); event IDs shared by 2 or more: 22 \u2192 0"
        )
        left, right = figure.axes
        assert (left.get_title(), right.get_title()) == (
            "before dedup: 546 events on 522 event IDs",
            "after dedup: 540 events on 540 event IDs",
        )
        assert (bars(left), bars(right)) == ([500, 20, 2], [540, 0, 0])
        assert [label.get_text() for label in right.get_xticklabels()] == ["1", "2", "3"]
        assert (left.get_yscale(), left.get_ylabel(), left.get_xlabel()) == ("log", "event IDs (log scale)",
                                                                            "events per event ID")  # fmt: skip
        assert left.get_ylim() == right.get_ylim()  # one count scale: the bars compare across the panels
    finally:
        plt.close(figure)
    assert chart_png(before, after).startswith(PNG_MAGIC)
    assert chart_png(before, after) == chart_png(before, after)


def test_a_long_tail_is_drawn_as_markers_on_log_axes() -> None:
    before = {events: max(1, 10_000 // events**2) for events in range(1, MAX_BARS + 20)}
    figure = chart_figure(before, {1: 12_000})
    try:
        left, right = figure.axes
        assert [list(line.get_xdata()) for line in left.lines] == [sorted(before)]
        assert [list(line.get_ydata()) for line in right.lines] == [[12_000]]
        assert (left.get_xscale(), right.get_xscale()) == ("log", "log")
    finally:
        plt.close(figure)


def test_without_a_dedup_run_the_chart_has_one_panel() -> None:
    figure = chart_figure({1: 5, 3: 1}, None)
    try:
        assert figure._suptitle.get_text() == "Events per event ID: 8 events, 1 event IDs shared by 2 or more"
        (only,) = figure.axes
        assert (only.get_title(), bars(only)) == ("before dedup: 8 events on 6 event IDs", [5, 1])
        assert [label.get_text() for label in only.get_xticklabels()] == ["1", "3"]
    finally:
        plt.close(figure)


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
    dedup_run(run_1, [event(ID_A), event(ID_B)])
    dedup_run(run_2, [event(ID_C)])

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


def test_report_reads_only_the_good_of_complete_dedup_runs(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = write(tmp_path / "enriched" / "part-0.tsv", [event(ID_A), event(ID_A), event(ID_B), "not an event"])
    dedup = tmp_path / "dedup"
    assert main(["dedup", "--input", str(before.parent), "--output", str(dedup), "--run-id", RUN_ID]) == 0
    run = dedup / f"run={RUN_ID}"
    assert read_lines(run / "duplicates") == [event(ID_A)]  # what must not be counted after dedup
    out = tmp_path / "report"
    report = ["report", "--input", str(before.parent), "--output", str(out), "--deduplicated"]

    def refused(path: Path) -> str:
        capsys.readouterr()  # what came before (progress lines)
        assert main([*report, str(path)]) == 2
        assert not out.exists()
        return capsys.readouterr().err.strip().splitlines()[-1]

    # The folder of run folders (what --output of dedup was): its duplicates/ would be counted as events.
    assert refused(dedup) == (
        f"error: --deduplicated: {dedup} holds run folders (run={RUN_ID}), whose duplicates/ and bad/ are not "
        "events; allowed: one run folder, or its good/"
    )

    for path in (run, run / "good"):  # the run folder means its good/; its good/ is enriched TSV after dedup
        assert main([*report, str(path)]) == 0
        assert (out / "events_per_event_id.tsv").read_text().splitlines()[1:] == ["1\t1\t1\t2\t2", "2\t1\t2\t0\t0"]
    shutil.rmtree(out)

    (run / "_SUCCESS").unlink()  # unfinished: its outputs may be partial
    assert refused(run) == (
        f"error: --deduplicated: {run} is a dedup run without _SUCCESS (incomplete or being written); "
        "allowed: a complete dedup run: rerun it first"
    )
    (run / "summary.json").unlink()  # unfinished earlier: the summary is written just before _SUCCESS
    assert refused(run) == (
        f"error: --deduplicated: {run} holds bad/, duplicates/, good/, quarantine/ but no summary.json and no "
        "_SUCCESS (a dedup run that did not finish); allowed: a complete dedup run folder, its good/, or enriched "
        "TSV after dedup"
    )
