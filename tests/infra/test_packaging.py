"""`make package`: the jobs zip, the dependency install, the build info; and the EMR entry point."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cdk.artifact_layout import BUILD_FILES, BUILD_INFO, DEPS_ARCHIVE, ENTRYPOINT, PACKAGE_ZIP
from jobs.entrypoints import emr_main
from scripts import package_jobs

ROOT = Path(__file__).resolve().parents[2]


def test_build_writes_every_artifact_with_its_hash(build_dir: Path) -> None:
    assert sorted(path.name for path in build_dir.iterdir()) == sorted(BUILD_FILES)
    info = json.loads((build_dir / BUILD_INFO).read_text(encoding="utf-8"))
    assert info["jobs_version"] == "0.1.0"
    for name in (PACKAGE_ZIP, DEPS_ARCHIVE, ENTRYPOINT):
        assert info["sha256"][name] == hashlib.sha256((build_dir / name).read_bytes()).hexdigest()
    assert (build_dir / ENTRYPOINT).read_bytes() == (ROOT / "jobs" / "entrypoints" / ENTRYPOINT).read_bytes()


def test_package_zip_holds_the_jobs_package_only_and_imports(build_dir: Path, tmp_path: Path) -> None:
    names = zipfile.ZipFile(build_dir / PACKAGE_ZIP).namelist()
    assert "jobs/__init__.py" in names and "jobs/cli.py" in names and "jobs/log4j2.properties" in names
    assert all(name.startswith("jobs/") for name in names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or "/entrypoints/" in n]
    # The zip alone (as --py-files puts it on sys.path) gives the command line.
    code = "import jobs.cli, sys; print(jobs.cli.__file__); jobs.cli.build_parser()"
    env = {**os.environ, "PYTHONPATH": str(build_dir / PACKAGE_ZIP)}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(str(build_dir / PACKAGE_ZIP))


def test_builds_are_reproducible(tmp_path: Path) -> None:
    import shutil

    source = tmp_path / "source"  # a snapshot: the same sources for both builds
    shutil.copytree(ROOT / "jobs", source / "jobs", ignore=shutil.ignore_patterns("__pycache__"))
    first = package_jobs.build(tmp_path / "first", requirements=None, root=source)
    (source / "jobs" / "cli.py").touch()  # a newer mtime alone changes nothing
    assert package_jobs.build(tmp_path / "second", requirements=None, root=source) == first


def test_dependencies_are_pure_python_wheels_for_emr_python(tmp_path: Path) -> None:
    command = package_jobs.pip_install_command(ROOT / "requirements-jobs.txt", tmp_path, "manylinux2014_x86_64")
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    joined = " ".join(command)
    for part in (
        "--only-binary=:all:",
        "--platform manylinux2014_x86_64",
        "--python-version 3.11",
        f"--target {tmp_path}",
        "--implementation cp",
    ):
        assert part in joined


def test_dependencies_archive_unpacks_to_the_folder_content(tmp_path: Path) -> None:
    folder = tmp_path / "deps"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "__init__.py").write_text("X = 1\n", encoding="utf-8")
    (folder / "pkg" / "__pycache__").mkdir()
    (folder / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    package_jobs.write_tar(tmp_path / "deps.tar.gz", folder)
    with tarfile.open(tmp_path / "deps.tar.gz") as tar:
        assert tar.getnames() == ["pkg/__init__.py"]


def test_jobs_requirements_are_pinned_and_match_the_local_boto3() -> None:
    from importlib.metadata import version

    lines = [
        line
        for line in (ROOT / "requirements-jobs.txt").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    pins = dict(line.split("==") for line in lines)
    assert len(pins) == len(lines)
    assert (pins["boto3"], pins["botocore"]) == (version("boto3"), version("botocore"))
    assert "pyspark" not in pins  # EMR provides Spark


SUMMARY: dict[str, Any] = {
    "job": "dedup",
    "counts": {"input": 100, "good": 90, "bad": 2, "duplicates": 7, "quarantined": 1, "dropped": 0},
    "wall_time_seconds": 31.5,
}


def test_entrypoint_metrics_come_from_the_summary() -> None:
    data = emr_main.metric_data("dedup", "dev", SUMMARY)
    dims = [{"Name": "Env", "Value": "dev"}, {"Name": "Job", "Value": "dedup"}]
    assert data == [
        {"MetricName": "DurationSeconds", "Dimensions": dims, "Value": 31.5, "Unit": "Seconds"},
        {"MetricName": "InputLines", "Dimensions": dims, "Value": 100.0, "Unit": "Count"},
        {"MetricName": "Duplicates", "Dimensions": dims, "Value": 7.0, "Unit": "Count"},
        {"MetricName": "Quarantined", "Dimensions": dims, "Value": 1.0, "Unit": "Count"},
        {"MetricName": "Bad", "Dimensions": dims, "Value": 2.0, "Unit": "Count"},
    ]
    assert emr_main.metric_data("shred", "dev", {"wall_time_seconds": 3}) == [
        {
            "MetricName": "DurationSeconds",
            "Dimensions": [dims[0], {"Name": "Job", "Value": "shred"}],
            "Value": 3.0,
            "Unit": "Seconds",
        }
    ]


def test_entrypoint_exits_with_the_job_code_and_publishes_only_after_success(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    published: list[tuple[str, str]] = []
    monkeypatch.setattr(emr_main, "publish_metrics", lambda job, uri: published.append((job, uri)))
    monkeypatch.setattr("jobs.cli.main", lambda argv: 2)
    argv = ["dedup", "--input", "s3://in/", "--output", "s3://out/deduplicated", "--run-id", "2026-11-22-03-00-00"]
    assert emr_main.run(argv) == 2
    assert published == []
    monkeypatch.setattr("jobs.cli.main", lambda argv: 0)
    assert emr_main.run(argv) == 0
    assert published == [("dedup", "s3://out/deduplicated/run=2026-11-22-03-00-00/summary.json")]


def test_entrypoint_a_metrics_failure_never_fails_a_completed_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(job: str, uri: str) -> None:
        raise ConnectionError("no route")

    monkeypatch.setattr(emr_main, "publish_metrics", broken)
    monkeypatch.setattr("jobs.cli.main", lambda argv: 0)
    argv = ["dedup", "--input", "s3://in/", "--output", "s3://out/d", "--run-id", "2026-11-22-03-00-00"]
    assert emr_main.run(argv) == 0
    assert "warning: metrics not published: ConnectionError: no route" in capsys.readouterr().err


def test_entrypoint_publishes_the_summary_figures_to_cloudwatch(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from moto import mock_aws

    for name, value in {
        "AWS_ACCESS_KEY_ID": "t",
        "AWS_SECRET_ACCESS_KEY": "t",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "WINNOW_ENV": "dev",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="out", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        s3.put_object(Bucket="out", Key="d/run=2026-11-22-03-00-00/summary.json", Body=json.dumps(SUMMARY))
        emr_main.publish_metrics("dedup", "s3://out/d/run=2026-11-22-03-00-00/summary.json")
        metrics = boto3.client("cloudwatch").list_metrics(Namespace="Winnow")["Metrics"]
    assert sorted(m["MetricName"] for m in metrics) == [
        "Bad",
        "Duplicates",
        "DurationSeconds",
        "InputLines",
        "Quarantined",
    ]
    assert {d["Name"]: d["Value"] for d in metrics[0]["Dimensions"]} == {"Env": "dev", "Job": "dedup"}
