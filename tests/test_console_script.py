"""`pip install .` gives a `winnow` command with the subcommands of `python -m jobs` (pyproject.toml)."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from jobs.prog import LOCAL_PROG, local_prog
from jobs.runtime.cli import build_parser, console_main
from jobs.runtime.invocation import EMR_PROG, Invocation

ROOT = Path(__file__).resolve().parents[1]


def subcommands() -> list[str]:
    """The job names `python -m jobs` takes, in the order its help lists them."""
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    raise AssertionError("no subcommands")


def pip(*args: str, cwd: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q", *args],
        cwd=cwd, check=True, timeout=300, capture_output=True, text=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip` builds from the project, installed with `--no-deps` into a folder of its own: its path."""
    tmp = tmp_path_factory.mktemp("console")
    # A copy of what the build reads, so that the build leaves nothing (build/, *.egg-info) in the checkout.
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "requirements.txt"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "jobs", source / "jobs", ignore=shutil.ignore_patterns("__pycache__"))
    # The venv's setuptools (requirements-dev.txt) builds it: nothing is fetched.
    pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp / "dist"), str(source), cwd=tmp)
    (wheel,) = (tmp / "dist").glob("winnow-*.whl")
    pip("install", "--no-deps", "--no-index", "--target", str(tmp / "site"), str(wheel), cwd=tmp)
    return tmp


def winnow(installed: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`winnow ARGS` as installed, run outside the checkout (so `jobs` comes from the installed wheel)."""
    env = {**os.environ, "PYTHONPATH": str(installed / "site")}
    return subprocess.run(
        [str(installed / "site" / "bin" / "winnow"), *args],
        cwd=installed, env=env, timeout=120, capture_output=True, text=True,
    )  # fmt: skip


def test_winnow_help_lists_every_subcommand_of_python_m_jobs(installed: Path) -> None:
    done = winnow(installed, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: winnow ")
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("    ") and line.strip()]
    names = subcommands()
    assert [name for name in listed if name in names] == names
    assert "dedup" in names and "shred" in names and "run" in names


def test_a_winnow_subcommand_is_named_as_run(installed: Path) -> None:
    done = winnow(installed, "dedup", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: winnow dedup ")
    assert "lake:PATH" in done.stdout
    missing = winnow(installed, "dedup")
    assert missing.returncode == 2 and missing.stderr.startswith("usage: winnow dedup ")


def test_the_wheel_carries_the_log4j2_file_and_the_pinned_requirements(installed: Path) -> None:
    (wheel,) = (installed / "dist").glob("winnow-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = next(archive.read(name).decode() for name in names if name.endswith(".dist-info/METADATA"))
    assert "jobs/runtime/log4j2.properties" in names
    assert not any("__pycache__" in name or name.startswith("tests/") for name in names)
    required = [
        line.removeprefix("Requires-Dist: ") for line in metadata.splitlines() if line.startswith("Requires-Dist:")
    ]
    pinned = [
        line.strip()
        for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert required == pinned and any(line.startswith("pyspark==") for line in required)


def test_the_prog_is_python_m_jobs_unless_run_as_winnow(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build_parser().format_usage().startswith("usage: python -m jobs ")
    monkeypatch.setattr(sys, "argv", ["/somewhere/bin/winnow", "--help"])
    with pytest.raises(SystemExit) as done:
        console_main()
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("usage: winnow ")


def test_a_local_way_out_names_this_interpreter_and_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pasted into a shell whose `python` is another (or none), in another folder: the interpreter by its path, the
    checkout on PYTHONPATH (the package runs from it here, not installed); under spark-submit, the plain name."""
    assert local_prog() == f"PYTHONPATH={shlex.quote(str(ROOT))} {shlex.quote(sys.executable)} -m jobs"
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "41234")
    assert local_prog() == LOCAL_PROG == "python -m jobs"


def test_a_printed_redo_is_the_whole_command_line_quoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a later run prints to redo a run parses back to the run's own options (abbreviated or `=` forms too),
    paths absolute, `--create` left out, from any folder; on EMR it says how the state machine redoes it first."""
    monkeypatch.chdir(tmp_path)
    given = ["run", "--inp", "in put", "--output=it's [x]", "--manifest", "sqlite:m.db", "--synth", "quarantine",
             "--config", "c.json", "--create", "--incremental", "--max-files", "3", "--format", "widerow",
             "--run-id", "2026-11-24-01-00-00", "--debug"]  # fmt: skip
    parser = build_parser()
    args = parser.parse_args(given)
    printed = Invocation.of(parser, args, LOCAL_PROG).again("2026-11-24-05-00-00")
    assert printed == (
        f"{local_prog()} run --input '{tmp_path}/in put' --output '{tmp_path}/it'\"'\"'s [x]' --config "
        f"{tmp_path}/c.json --synthetic quarantine --manifest sqlite:{tmp_path}/m.db --incremental --max-files 3 "
        "--format widerow --run-id 2026-11-24-05-00-00"
    )
    again = vars(build_parser().parse_args(shlex.split(printed)[len(shlex.split(local_prog())) :]))
    assert {name: value for name, value in again.items() if value != vars(args)[name]} == {
        "input": f"{tmp_path}/in put", "output": f"{tmp_path}/it's [x]", "config": f"{tmp_path}/c.json",
        "manifest": f"sqlite:{tmp_path}/m.db", "create": False, "run_id": "2026-11-24-05-00-00",
    }  # fmt: skip

    emr = ["dedup", "--input", "s3://in/enriched/2026/", "--output", "s3://out/deduplicated", "--run-id",
           "2026-11-24-01-00-00", "--manifest", "dynamodb://manifest", "--shredded", "s3://out/shredded", "--create"]  # fmt: skip
    assert Invocation.of(parser, parser.parse_args(emr), EMR_PROG).again("2026-11-24-01-00-00") == (
        "redrive its failed execution of the pipeline's state machine, or start one named run-2026-11-24-01-00-00-"
        'redo with the input {"runId": "2026-11-24-01-00-00", "inputPrefix": "enriched/2026/"} (the same job by '
        "hand: python -m jobs dedup --input s3://in/enriched/2026/ --output s3://out/deduplicated --manifest "
        "dynamodb://manifest --shredded s3://out/shredded --run-id 2026-11-24-01-00-00)"
    )
