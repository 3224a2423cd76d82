"""An unfinished run never counts: a run killed after it wrote to the manifest, or killed during `run`'s shred,
stops the next run with one line, and following that line leaves every event in exactly one completed run.

The killed runs are real: one process (`killed_runs`, shared by the module's killed-run tests) runs each of them in a
thread of its own up to a fixed point, when its run folder is about to be sealed, after every output and every
manifest write, and there holds it; once all of them are there it dies (`os._exit`, as `kill -9` would: every
lease left behind). One process start instead of one each: what each run leaves is what its own killed process
would have left.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import boto3
import pytest
from moto import mock_aws
from pyspark.sql import SparkSession

from jobs.fs.runs import UnfinishedShredError
from jobs.fs.shreds import require_earlier_shred_complete
from jobs.manifest import open_manifest
from jobs.manifest.base import RegisteredRun, run_key
from jobs.manifest.sqlite import SqliteManifest
from jobs.manifest.unfinished import UnfinishedRunError, run_register
from jobs.runtime.cli import main
from tests.pipeline.helpers import PROG, error_line, event, read_lines
from tests.pipeline.helpers import numbered_events as events
from tests.pipeline.helpers import numbered_id as uuid
from tests.pipeline.helpers import write_lines as write

ROOT = Path(__file__).resolve().parents[2]
RUN_0, RUN_A, RUN_B, RUN_C = "2026-11-24-00-00-00", "2026-11-24-01-00-00", "2026-11-24-02-00-00", "2026-11-24-03-00-00"
# Runs each command of KILLED_RUNS ([argv, n]) in a thread of its own until its nth seal of a run folder (dedup's is
# the first; in `run`, shred's the second), where the thread stays, then the next; then the process dies.
DIES_AT_SEALS = """
import json, os, sys, threading
from jobs.fs.run_folder import RunFolder
seal, this = RunFolder.seal, threading.local()
def dying(self):
    this.seals += 1
    if this.seals == this.fatal:
        this.held.set()
        threading.Event().wait()  # held before its seal until the process dies
    seal(self)
RunFolder.seal = dying
from jobs.runtime.cli import main
def killed(argv, fatal, held, ended):
    this.seals, this.fatal, this.held = 0, fatal, held
    try:
        ended.append(main(argv))
    finally:
        held.set()
for argv, fatal in json.loads(os.environ["KILLED_RUNS"]):
    held, ended = threading.Event(), []
    threading.Thread(target=killed, args=(argv, fatal, held, ended), daemon=True).start()
    held.wait()
    if ended:
        sys.exit(f"{argv} ended (exit {ended[0]}) before its seal {fatal}")
os._exit(137)
"""
ATOMIC = "output=good/vendor=com.snowplowanalytics.snowplow/name=atomic/format=tsv/model=1/revision=0/addition=0"
SMALL = {"spark": {"conf": {"spark.sql.shuffle.partitions": "4"}}}  # as the test session: fewer tasks to start


class LedgerCase(NamedTuple):
    """An incremental dedup against a manifest of `backend`, killed at its seal (`test_a_killed_run_with_...`)."""

    root: Path
    output: Path
    manifest: str
    settings: Path

    def dedup(self, run_id: str) -> list[str]:
        return ["dedup", "--input", str(self.root), "--output", str(self.output), "--run-id", run_id, "--incremental",
                "--manifest", self.manifest, "--config", str(self.settings)]  # fmt: skip


def ledger_case(base: Path, backend: str) -> LedgerCase:
    folder = base / f"ledger-{backend}"
    manifest = f"sqlite:{folder / 'manifest.db'}" if backend == "sqlite" else f"lake:{folder / 'manifest'}"
    return LedgerCase(folder / "in", folder / "out", manifest, folder / "config.json")


class RedoCase(NamedTuple):
    """A `run` killed at its dedup's seal, every path relative to `work` (`test_the_printed_redo_...`)."""

    work: Path
    elsewhere: Path

    @staticmethod
    def argv(run_id: str, batch: str) -> list[str]:
        return ["run", "--input", f"in put/{batch}", "--output", "out [x]", "--run-id", run_id,
                "--manifest", "sqlite:the manifest.db", "--config", "con fig.json", "--synthetic", "quarantine"]  # fmt: skip


def redo_case(base: Path) -> RedoCase:
    return RedoCase(base / "team's batches", base / "another folder")


class ShredCase(NamedTuple):
    """A late `run` killed at its shred's seal (`test_a_late_run_killed_during_shred_...`)."""

    root: Path
    output: Path

    def pipeline(self, run_id: str, batch: str) -> list[str]:
        return ["run", "--input", str(self.root / batch), "--output", str(self.output), "--run-id", run_id]


def shred_case(base: Path) -> ShredCase:
    return ShredCase(base / "late" / "in", base / "late" / "out dir")  # the printed command must be quoted to paste


@pytest.fixture(scope="module")
def killed_runs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Each killed-run test's folder (`*_case(base)`), as its run killed before its seal left it: the runs before it
    completed in-process, the killed ones all in one process that died (each test takes only its own folder)."""
    base = tmp_path_factory.mktemp("killed")
    doomed: list[tuple[list[str], int]] = []
    for backend in ("sqlite", "lake"):
        ledger = ledger_case(base, backend)
        write(ledger.root / "a.tsv", events(range(0, 10)))
        # a lake of 4 bucket files a segment, not 64: quicker
        ledger.settings.write_text(json.dumps({"manifest": {"buckets": 4}, **SMALL}))
        doomed.append(([*ledger.dedup(RUN_A), "--create"], 1))  # its 10 pairs in the manifest, its folder unsealed

    redo = redo_case(base)
    redo.elsewhere.mkdir()
    redo.work.mkdir()
    (redo.work / "con fig.json").write_text(json.dumps({"manifest": {"ttl_days": 30}, **SMALL}))
    write(redo.work / "in put" / "0" / "a.tsv", events(range(0, 5)))
    synthetic = [event(uuid(9), event_fingerprint="fp-1"), event(uuid(9), event_fingerprint="fp-2")]
    write(redo.work / "in put" / "a" / "a.tsv", [*events(range(3, 9)), *synthetic])  # 3 and 4 delivered by run 0
    write(redo.work / "in put" / "b" / "a.tsv", events(range(7, 12)))
    with pytest.MonkeyPatch.context() as patched:
        patched.chdir(redo.work)  # every path the runs are given is relative to it
        assert main([*redo.argv(RUN_0, "0"), "--create"]) == 0
    doomed.append((redo.argv(RUN_A, "a"), 1))  # its pairs in the manifest, its folder unsealed

    late = shred_case(base)
    for batch, numbers in (("a", range(0, 4)), ("b", range(4, 6)), ("c", range(6, 8))):
        write(late.root / batch / "events.tsv", events(numbers))
    assert main(late.pipeline(RUN_B, "b")) == 0  # the latest run, complete
    doomed.append((late.pipeline(RUN_A, "a"), 2))  # the late batch: dedup sealed, shred killed before its seal

    env = {**os.environ, "PYTHONPATH": str(ROOT), "KILLED_RUNS": json.dumps(doomed)}
    died = subprocess.run([sys.executable, "-c", DIES_AT_SEALS], cwd=redo.work, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert died.returncode == 137, died.stderr
    # The process started its own session, for a small input (spark.small_input_mb): its first phase line says so.
    assert "] starting Spark (a small input: plans interpreted, spark.small_input_mb)\n" in died.stderr
    yield base


def stale_lease(line: str) -> Path:
    """The lease file a 'being written by' line names, checked to be a lease the killed run left."""
    match = re.search(r"remove its lease (\S+) and run again$", line)
    assert match, line
    return Path(match.group(1))


@pytest.mark.slow  # a Spark process that dies, then the runs that follow the printed way out
@pytest.mark.parametrize("backend", ["sqlite", "lake"])
def test_a_killed_run_with_its_ledger_entry_deleted_stops_the_next_run_until_it_is_redone(
    killed_runs: Path, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root, output, manifest, settings = case = ledger_case(killed_runs, backend)
    write(root / "b.tsv", events(range(5, 15)))  # 5 events again, 5 new
    (output / "_ledger" / f"{1:020d}.json").unlink()  # what the ledger's message once offered: A's files to B
    if backend == "lake":  # and its register folder removed too: the run's commit still holds its entry
        shutil.rmtree(Path(manifest.removeprefix("lake:")) / "_runs")

    assert main(case.dedup(RUN_B)) == 1  # the killed run's manifest lease is still there
    stale_lease(error_line(capsys)).unlink()
    assert main(case.dedup(RUN_B)) == 1
    assert error_line(capsys) == (
        f"error: manifest {manifest}: run {RUN_A} recorded its events and has not completed (no "
        f"{output}/run={RUN_A}/_SUCCESS), so no later run may decide against them; nothing was written. "
        f"If its input is gone for good, {PROG} manifest abandon --manifest "
        f"{manifest} --output {output} --run-id {RUN_A} abandons it (its events then wait for a later batch). Else "
        f"redo it first: {PROG} dedup --input {root} --output {output} --config {settings} --manifest "
        f"{manifest} --incremental --run-id {RUN_A}"
    )
    assert not (output / f"run={RUN_B}").exists() and not list((output / "_ledger").glob("*.json"))

    assert main(case.dedup(RUN_A)) == 1  # the printed redo: first the killed run's own folder lease
    stale_lease(error_line(capsys)).unlink()
    assert main(case.dedup(RUN_A)) == 0
    assert main(case.dedup(RUN_B)) == 0  # nothing new: exit 0, no run
    assert "nothing to do" in capsys.readouterr().out
    # Every event once, in the one completed run; none counted as delivered by the unfinished attempt.
    assert read_lines(output / f"run={RUN_A}" / "good") == sorted(events(range(0, 15)))
    assert read_lines(output / f"run={RUN_A}" / "duplicates") == sorted(events(range(5, 10)))
    assert (output / f"run={RUN_A}" / "_SUCCESS").exists() and not (output / f"run={RUN_B}").exists()


@pytest.mark.slow  # a Spark process that dies, then the runs that follow the printed way out
def test_a_late_run_killed_during_shred_stops_the_next_run_until_the_pasted_shred_command_completes_it(
    killed_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A late batch run with an earlier id than the latest completed run, killed in shred: the latest earlier run
    is complete, and the next run stops all the same (the register of unfinished shreds, `jobs.fs.shreds`)."""
    case = shred_case(killed_runs)
    output = case.output
    shredded, lease = output / "shredded", output / "shredded" / "_leases" / f"run={RUN_A}.json"
    assert main(case.pipeline(RUN_C, "c")) == 1
    quoted = f"'{output}/deduplicated/run={RUN_A}/good' --output '{shredded}' --run-id {RUN_A}"
    command = f"{PROG} shred --input {quoted}"
    assert error_line(capsys) == (
        f"error: run {RUN_A}: its dedup completed and its shred did not (no {shredded}/run={RUN_A}/_SUCCESS), so "
        f"its events are not in the warehouse yet; nothing was written. Its lease {lease} is still there: once that "
        f"run is gone, remove it first. Complete it first, then run again: {command}"
    )
    assert not (output / "deduplicated" / f"run={RUN_C}").exists()

    lease.unlink()  # the printed way out, word for word, through a shell in another folder, no PYTHONPATH set
    pasted = subprocess.run(["bash", "-c", command], cwd=killed_runs, env=operator_shell(), capture_output=True,
                            text=True, timeout=600)  # fmt: skip
    assert pasted.returncode == 0, pasted.stderr
    assert main(case.pipeline(RUN_C, "c")) == 0
    sealed = [folder for folder in output.glob("*/run=*") if (folder / "_SUCCESS").exists()]
    assert len(sealed) == 6  # dedup and shred of A, B and C
    good = sorted(line.split("\t")[6] for folder in sealed if folder.parent.name == "deduplicated"
                  for line in read_lines(folder / "good"))  # fmt: skip
    shred = sorted(line.split("\t")[6] for folder in sealed if folder.parent == shredded
                   for line in read_lines(folder / ATOMIC))  # fmt: skip
    assert good == shred == [uuid(number) for number in range(0, 8)]  # every event once, in the warehouse's input
    assert list((output / "deduplicated" / "_shred_pending").iterdir()) == []


def operator_shell() -> dict[str, str]:
    """An operator's shell: no PYTHONPATH, and a PATH without this interpreter's folder (its `python` is another
    one, or none): the printed line must carry what it needs."""
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(part for part in os.environ["PATH"].split(os.pathsep) if part != venv_bin)
    return {**{name: value for name, value in os.environ.items() if name != "PYTHONPATH"}, "PATH": path}


def completed_ids(folders: list[Path], subfolder: str) -> list[str]:
    """The event ids in `subfolder` of every completed (`_SUCCESS`) run folder, sorted: a doubled one twice."""
    done = [folder for folder in folders if (folder / "_SUCCESS").exists()]
    return sorted(line.split("\t")[6] for folder in done for line in read_lines(folder / subfolder))


@pytest.mark.slow  # a Spark process that dies, then its printed redo pasted into a shell
def test_the_printed_redo_pasted_into_a_shell_leaves_every_event_once(
    killed_runs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The redo a later run prints is the killed run's whole command line: pasted as printed, from another folder,
    it keeps the manifest (without it the redo would deliver the first run's events again), --synthetic and --config;
    paths with spaces, quotes and brackets stay one word each. `run` (dedup's redo is built the same way, and a `run`
    redo also completes the shred)."""
    work, elsewhere = redo_case(killed_runs)
    monkeypatch.chdir(work)  # every path the runs are given is relative to it
    output = Path("out [x]")
    assert main(RedoCase.argv(RUN_B, "b")) == 1  # the killed run's manifest lease, which the line names
    Path(shlex.split(error_line(capsys).rsplit("remove its lease ", 1)[1])[0]).unlink()
    assert main(RedoCase.argv(RUN_B, "b")) == 1
    printed = error_line(capsys).split("Else redo it first: ", 1)[1]
    assert printed == (
        f"{PROG} run --input {shlex.quote(str(work / 'in put' / 'a'))} --output "
        f"{shlex.quote(str(work / output))} --config {shlex.quote(str(work / 'con fig.json'))} --synthetic quarantine "
        f"--manifest {shlex.quote(f'sqlite:{work}/the manifest.db')} --run-id {RUN_A}"
    )
    dedup_output = work / output / "deduplicated"
    (dedup_output / "_leases" / f"run={RUN_A}.json").unlink()  # the killed run's folder lease (its line: above)

    redo = subprocess.run(["bash", "-c", printed], cwd=elsewhere, env=operator_shell(), capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert redo.returncode == 0, redo.stderr
    assert main(RedoCase.argv(RUN_B, "b")) == 0

    runs = [dedup_output / f"run={run_id}" for run_id in (RUN_0, RUN_A, RUN_B)]
    assert all((run / "_SUCCESS").exists() for run in runs)
    once = sorted(uuid(number) for number in range(0, 12) if number != 9)
    assert completed_ids(runs, "good") == once  # nothing missing, nothing delivered twice
    assert completed_ids(runs, "quarantine") == [uuid(9)] * 2  # --synthetic quarantine kept by the redo
    shredded = [work / output / "shredded" / f"run={run_id}" for run_id in (RUN_0, RUN_A, RUN_B)]
    assert completed_ids(shredded, ATOMIC) == once  # and in the warehouse's input, once


def test_a_run_killed_after_sealing_is_taken_as_complete(tmp_path: Path) -> None:
    """Between `_SUCCESS` and the register's `complete` a run can die: its `_SUCCESS` is what counts."""
    manifest = open_manifest(f"sqlite:{tmp_path / 'manifest.db'}")
    manifest.create()
    register = run_register(manifest)
    sealed = tmp_path / "out" / f"run={RUN_A}"
    register.begin(RegisteredRun(RUN_A, 1, 2, str(sealed), "redo A"))
    sealed.mkdir(parents=True)
    (sealed / "_SUCCESS").touch()
    register.require_no_unfinished(run_key(str(tmp_path / "out" / f"run={RUN_B}"), RUN_B), manifest.uri,
                                   lambda path: Path(path).exists())  # fmt: skip
    assert register.unfinished() == []  # taken out on the way
    run_b = RegisteredRun(RUN_B, 3, 4, str(tmp_path / "out" / f"run={RUN_B}"), "redo B")
    register.begin(run_b)
    register.require_no_unfinished(run_b.key, manifest.uri, lambda path: Path(path).exists())  # its own redo passes
    other = run_key(str(tmp_path / "out" / "run=2026-11-24-03-00-00"), "2026-11-24-03-00-00")
    with pytest.raises(UnfinishedRunError, match=f"run {RUN_B} recorded its events .* Else redo it first: redo B$"):
        register.require_no_unfinished(other, manifest.uri, lambda path: Path(path).exists())


def test_a_manifest_and_register_of_the_first_layout_are_read_and_rekeyed_in_place(tmp_path: Path) -> None:
    """Files written before run keys: the events table gains `run_key`, the register's entries their folders' keys."""
    path = tmp_path / "manifest.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE events_manifest (event_id TEXT NOT NULL, fingerprint TEXT NOT NULL, etl_time INTEGER "
                   "NOT NULL, ttl INTEGER NOT NULL, PRIMARY KEY (event_id, fingerprint)) WITHOUT ROWID")  # fmt: skip
        db.execute("CREATE TABLE winnow_runs (run_id TEXT PRIMARY KEY, etl_time INTEGER NOT NULL, ttl INTEGER NOT "
                   "NULL, folder TEXT NOT NULL, redo TEXT NOT NULL)")  # fmt: skip
        db.execute("INSERT INTO events_manifest VALUES ('id-1', 'fp-1', 100, 200)")
        db.execute("INSERT INTO winnow_runs VALUES (?, 100, 200, '/out/run=A', 'redo A')", (RUN_A,))
        db.commit()
    manifest = open_manifest(f"sqlite:{path}")
    manifest.check()  # the first layout is accepted as is
    assert isinstance(manifest, SqliteManifest)
    assert manifest.own_pairs("x", legacy_etl_time=100) == [("id-1", "fp-1")]  # gains the column on the way
    register = run_register(manifest)
    [legacy] = register.unfinished()
    assert legacy == RegisteredRun(RUN_A, 100, 200, "/out/run=A", "redo A")
    assert register.entry(run_key("/out/run=A", RUN_A)) == legacy
    register.complete(legacy)
    assert register.unfinished() == []


def test_a_register_without_completed_before_gains_it_in_place(tmp_path: Path) -> None:
    """A SQLite register of the layout before `completed_before`: its entries read as never completed, and an entry
    of a completed run's redo keeps the flag."""
    path = tmp_path / "manifest.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE winnow_runs (run_key TEXT PRIMARY KEY, run_id TEXT NOT NULL, etl_time INTEGER NOT "
                   "NULL, ttl INTEGER NOT NULL, folder TEXT NOT NULL, redo TEXT NOT NULL)")  # fmt: skip
        db.execute("INSERT INTO winnow_runs VALUES (?, ?, 100, 200, '/out/run=A', 'redo A')",
                   (run_key("/out/run=A", RUN_A), RUN_A))  # fmt: skip
        db.commit()
    register = run_register(open_manifest(f"sqlite:{path}"))
    assert register.unfinished() == [RegisteredRun(RUN_A, 100, 200, "/out/run=A", "redo A")]
    redo = RegisteredRun(RUN_B, 3, 4, "/out/run=B", "redo B", completed_before=True)
    register.begin(redo)
    assert register.entry(redo.key) == redo


def test_the_dynamodb_register_keeps_its_items_apart_from_the_events() -> None:
    with mock_aws():
        manifest = open_manifest("dynamodb://manifest")
        manifest.create()
        register = run_register(manifest)
        first = RegisteredRun(RUN_A, 1, 2, "s3://out/run=A", "redo A")
        register.begin(first)
        register.begin(RegisteredRun(RUN_B, 3, 4, "s3://out/run=B", "redo B", completed_before=True))
        register.complete(first)
        assert register.unfinished() == [RegisteredRun(RUN_B, 3, 4, "s3://out/run=B", "redo B", True)]
        assert register.generation() == 2  # each registration counts (jobs.dedup.stale)
        register.advance(5)
        register.advance(3)  # a back-fill never lowers it
        assert register.generation() == 5
        items = boto3.client("dynamodb").scan(TableName="manifest")["Items"]
        assert sorted(
            (item["eventId"]["S"], item["fingerprint"]["S"], item.get("ttl", {}).get("N", "")) for item in items
        ) == [
            ("winnow:generation", "winnow:generation", ""),  # never expires
            ("winnow:runs", run_key("s3://out/run=B", RUN_B), "4"),
        ]  # no event id: no event's query meets them; a run's entry expires with the run's events


def test_dedup_with_shredded_stops_before_spark_while_an_earlier_shred_is_unfinished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The deployed pipeline runs dedup and shred as two job runs: dedup's `--shredded` makes the same check."""
    root, deduplicated, shredded = tmp_path / "in", tmp_path / "out" / "deduplicated", tmp_path / "out" / "shredded"
    write(root / "a.tsv", events(range(0, 2)))
    for folder in (deduplicated / f"run={RUN_A}", shredded / f"run={RUN_A}"):
        folder.mkdir(parents=True)
    (deduplicated / f"run={RUN_A}" / "_SUCCESS").touch()  # its dedup completed, its shred did not
    argv = ["dedup", "--input", str(root), "--output", str(deduplicated), "--shredded", str(shredded),
            "--run-id", RUN_B]  # fmt: skip
    assert main(argv) == 1
    assert error_line(capsys) == (
        f"error: run {RUN_A}: its dedup completed and its shred did not (no {shredded}/run={RUN_A}/_SUCCESS), so "
        f"its events are not in the warehouse yet; nothing was written. Complete it first, then run again: {PROG} "
        f"shred --input {deduplicated}/run={RUN_A}/good --output {shredded} --run-id {RUN_A}"
    )
    assert sorted(path.name for path in deduplicated.iterdir()) == [f"run={RUN_A}"]  # nothing written


def test_the_shred_check_reads_s3_folders_as_the_deployed_jobs_see_them() -> None:
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="out", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        for key in (f"deduplicated/run={RUN_A}/_SUCCESS", f"deduplicated/run={RUN_A}/good/part-0.gz",
                    f"shredded/run={RUN_A}/output=good/part-0.gz", f"shredded/_leases/run={RUN_A}.json"):  # fmt: skip
            s3.put_object(Bucket="out", Key=key, Body=b"")
        with pytest.raises(UnfinishedShredError) as stopped:
            require_earlier_shred_complete("s3://out/deduplicated", "s3://out/shredded/", RUN_B)
        assert str(stopped.value).endswith(
            f"Its lease s3://out/shredded/_leases/run={RUN_A}.json is still there: once that run is gone, remove it "
            f"first. Complete it first, then run again: {PROG} shred --input s3://out/deduplicated/run={RUN_A}"
            f"/good --output s3://out/shredded --run-id {RUN_A}"
        )
        require_earlier_shred_complete("s3://out/deduplicated", "s3://out/shredded", RUN_A)  # none before A
        s3.put_object(Bucket="out", Key=f"shredded/run={RUN_A}/_SUCCESS", Body=b"")
        require_earlier_shred_complete("s3://out/deduplicated", "s3://out/shredded", RUN_B)  # completed: passes


def test_a_cut_or_stray_register_file_of_a_lake_stops_the_next_run_naming_it(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `_runs/` file cut short (a kill as it was written by an older version, a bad copy) or one of another kind is
    named with the way out, never a bare JSONDecodeError or TypeError."""
    root, output, lake = tmp_path / "in", tmp_path / "out", tmp_path / "manifest"
    write(root / "a.tsv", events(range(0, 2)))
    open_manifest(f"lake:{lake}", buckets=4).create()
    runs = lake / "_runs"
    runs.mkdir()
    dedup = ["dedup", "--input", str(root), "--output", str(output), "--run-id", RUN_B, "--manifest", f"lake:{lake}"]
    for name, content in (("run=cut.json", '{"run_id": "2026-11-24-01-0'), ("notes.json", '{"owner": "ops"}')):
        (runs / name).write_text(content)
        assert main(dedup) == 1
        line = error_line(capsys)
        assert line.startswith(f"error: {runs / name} is ") and f"a stray file: move it out of {runs}" in line
        (runs / name).unlink()
    assert not (output / f"run={RUN_B}").exists()
