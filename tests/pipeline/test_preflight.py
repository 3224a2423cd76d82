"""Mistakes in paths and manifests are told before Spark starts (`jobs.runtime.preflight`): one line, exit 2, nothing
written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.errors import InputNotFoundError
from jobs.runtime.preflight import require_local_input

NO_FILES = "holds no input files (names starting with _ or . are skipped); nothing to do"


def jobs_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobs", *args, "--run-id", "2026-11-25-05-00-00"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def tree(root: Path) -> list[str]:
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*"))


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    """`events/` holding one file, `markers/` holding only names Spark skips, `missing/` not there."""
    events, markers = tmp_path / "events", tmp_path / "markers"
    events.mkdir()
    (events / "part-00000.tsv").write_text("a line\n")
    (markers / "_temporary").mkdir(parents=True)
    (markers / "_temporary" / "part-00000.tsv").write_text("a line\n")
    (markers / "_SUCCESS").write_text("")
    (markers / ".part-00000.tsv.crc").write_text("")
    return {"events": events, "markers": markers, "missing": tmp_path / "missing", "root": tmp_path}


@pytest.mark.parametrize(
    ("command", "case", "expected"),
    [
        ("dedup", "missing", "error: --input: {missing} does not exist"),
        ("dedup", "markers", "error: --input: {markers} " + NO_FILES),
        ("shred", "missing", "error: --input: {missing} does not exist"),
        ("run", "markers", "error: --input: {markers} " + NO_FILES),
        (
            "dedup",
            "output inside input",
            "error: --output: given {events}/out, which is, holds or lies inside --input {events}; allowed: a folder apart "
            "from --input (neither inside the other)",
        ),
        (
            "shred",
            "input inside output",
            "error: --output: given {root}, which is, holds or lies inside --input {events}; allowed: a folder apart from "
            "--input (neither inside the other)",
        ),
        (
            "populate-manifest",
            "no manifest",
            "error: --manifest: none given and the config has no manifest.uri; allowed: sqlite:PATH, dynamodb://TABLE "
            "or lake:PATH",
        ),
    ],
)
def test_path_mistakes_stop_before_spark(folders: dict[str, Path], command: str, case: str, expected: str) -> None:
    source, output = folders.get(case, folders["events"]), folders["root"] / "out"
    if case == "output inside input":
        output = folders["events"] / "out"
    if case == "input inside output":
        output = folders["root"]
    args = ["--input", str(source)] + ([] if command == "populate-manifest" else ["--output", str(output)])
    before = tree(folders["root"])
    result = jobs_cli(command, *args)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [expected.format(**{name: str(path) for name, path in folders.items()})]
    assert tree(folders["root"]) == before  # nothing written, nothing removed


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (
            "redis://events",
            "error: --manifest: given 'redis://events'; allowed: sqlite:///abs/path.db, sqlite:relative/path.db, "
            "dynamodb://TABLE or lake:PATH (a folder or s3://bucket/prefix)",
        ),
        (
            "dynamodb://events/extra",
            "error: --manifest: given 'dynamodb://events/extra', which names no table; allowed: sqlite:///abs/path.db, "
            "sqlite:relative/path.db, dynamodb://TABLE or lake:PATH (a folder or s3://bucket/prefix)",
        ),
        (
            "dynamodb://events",
            "error: manifest dynamodb://events: no AWS region; allowed: set AWS_REGION or AWS_DEFAULT_REGION, or a "
            "region in the AWS profile",
        ),
        (
            "sqlite:{root}/manifest.db",
            "error: manifest sqlite:{root}/manifest.db: {root}/manifest.db does not exist; run once with --create to "
            "make an empty one",
        ),
        (
            "lake:{root}/lake",
            "error: manifest lake:{root}/lake: no _manifest.json in {root}/lake; run once with --create to make an empty one",
        ),
    ],
)
def test_manifest_mistakes_stop_before_spark(folders: dict[str, Path], manifest: str, expected: str) -> None:
    no_region = {k: v for k, v in os.environ.items() if k not in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")}
    no_region["AWS_CONFIG_FILE"] = str(folders["missing"])  # no profile to take a region from
    output, paths = folders["root"] / "out", {name: str(path) for name, path in folders.items()}
    before = tree(folders["root"])
    result = jobs_cli(
        "dedup", "--input", paths["events"], "--output", str(output), "--manifest", manifest.format(**paths),
        env=no_region,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.splitlines() == [expected.format(**paths)]
    assert tree(folders["root"]) == before  # no output, no manifest made


def test_a_file_counts_only_outside_skipped_names(tmp_path: Path) -> None:
    (tmp_path / "_staging" / "run=1").mkdir(parents=True)
    (tmp_path / "_staging" / "run=1" / "part-0.tsv").write_text("x\n")
    (tmp_path / ".hidden").write_text("x\n")
    with pytest.raises(InputNotFoundError, match="holds no input files"):
        require_local_input(str(tmp_path))
    (tmp_path / "day=1").mkdir()
    (tmp_path / "day=1" / "part-0.tsv").write_text("x\n")
    require_local_input(str(tmp_path))
    require_local_input("s3://bucket/not-looked-at")  # remote paths are Spark's to check
