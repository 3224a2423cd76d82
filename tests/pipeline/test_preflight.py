"""Mistakes in paths and manifests are told before Spark starts (`jobs.runtime.preflight`): one line, exit 2, nothing
written."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.errors import InputNotFoundError
from jobs.runtime.cli import main
from jobs.runtime.preflight import require_local_input

NO_FILES = "holds no input files (names starting with _ or . are skipped); nothing to do"


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line in this process, with Spark's start refused: a mistake told after Spark started fails."""
    from jobs.runtime import session

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(session, "spark_session", refuse)


def jobs_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    """The exit code and stderr lines of the command line run in this process (stderr: only the error line, no
    "starting Spark" phase line before it)."""
    capsys.readouterr()
    code = main([*args, "--run-id", "2026-11-25-05-00-00"])
    return code, capsys.readouterr().err.splitlines()


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
def test_path_mistakes_stop_before_spark(
    folders: dict[str, Path], no_spark: None, capsys: pytest.CaptureFixture[str], command: str, case: str, expected: str
) -> None:
    source, output = folders.get(case, folders["events"]), folders["root"] / "out"
    if case == "output inside input":
        output = folders["events"] / "out"
    if case == "input inside output":
        output = folders["root"]
    args = ["--input", str(source)] + ([] if command == "populate-manifest" else ["--output", str(output)])
    before = tree(folders["root"])
    code, err = jobs_cli(capsys, command, *args)
    assert code == 2
    assert err == [expected.format(**{name: str(path) for name, path in folders.items()})]
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
def test_manifest_mistakes_stop_before_spark(
    folders: dict[str, Path], no_spark: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    manifest: str, expected: str,
) -> None:  # fmt: skip
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(folders["missing"]))  # no profile to take a region from
    import boto3

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # it caches the region earlier tests resolved
    output, paths = folders["root"] / "out", {name: str(path) for name, path in folders.items()}
    before = tree(folders["root"])
    code, err = jobs_cli(
        capsys, "dedup", "--input", paths["events"], "--output", str(output), "--manifest", manifest.format(**paths)
    )
    assert code == 2
    assert err == [expected.format(**paths)]
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
