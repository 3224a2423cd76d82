"""`make package`: the jobs zip, the dependency install, the Iglu folder, the build info; and the EMR entry
point."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from cdk.artifact_layout import BUILD_FILES, BUILD_INFO, DEPS_ARCHIVE, ENTRYPOINT, IGLU_DIR, IGLU_RESOLVER, PACKAGE_ZIP
from jobs.entrypoints import emr_main
from jobs.runtime.invocation import EMR_PROG
from scripts import package_jobs

ROOT = Path(__file__).resolve().parents[2]
WEB_PAGE = "iglu/embedded/schemas/com.snowplowanalytics.snowplow/web_page/jsonschema/1-0-0"


def test_build_writes_every_artifact_with_its_hash(build_dir: Path) -> None:
    assert sorted(path.name for path in build_dir.iterdir()) == sorted({*BUILD_FILES, IGLU_DIR} - {IGLU_RESOLVER})
    info = json.loads((build_dir / BUILD_INFO).read_text(encoding="utf-8"))
    assert info["jobs_version"] == "0.1.0"
    for name in (PACKAGE_ZIP, DEPS_ARCHIVE, ENTRYPOINT):
        assert info["sha256"][name] == hashlib.sha256((build_dir / name).read_bytes()).hexdigest()
    assert (build_dir / ENTRYPOINT).read_bytes() == (ROOT / "jobs" / "entrypoints" / ENTRYPOINT).read_bytes()


def test_the_build_holds_the_iglu_folder_byte_for_byte_and_lists_each_file(build_dir: Path) -> None:
    sources = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / IGLU_DIR).rglob("*") if p.is_file())
    built = sorted(p.relative_to(build_dir).as_posix() for p in (build_dir / IGLU_DIR).rglob("*") if p.is_file())
    assert built == sources
    assert IGLU_RESOLVER in built and WEB_PAGE in built and len(built) >= 30
    for name in built:
        assert (build_dir / name).read_bytes() == (ROOT / name).read_bytes(), name
    info = json.loads((build_dir / BUILD_INFO).read_text(encoding="utf-8"))
    assert sorted(info["sha256"]) == sorted([PACKAGE_ZIP, DEPS_ARCHIVE, ENTRYPOINT, *built])
    for name in built:
        assert info["sha256"][name] == hashlib.sha256((ROOT / name).read_bytes()).hexdigest(), name


def _iglu_source(tmp_path: Path, resolver: dict[str, object] | None = None) -> Path:
    """A copy of the repository's iglu/ folder under `tmp_path` (a source root), with another resolver config."""
    import shutil

    shutil.copytree(ROOT / IGLU_DIR, tmp_path / IGLU_DIR)
    if resolver is not None:
        (tmp_path / IGLU_RESOLVER).write_text(json.dumps(resolver), encoding="utf-8")
    return tmp_path


def test_hidden_files_stay_out_of_the_iglu_folder(tmp_path: Path) -> None:
    root = _iglu_source(tmp_path)
    (root / IGLU_DIR / ".DS_Store").write_bytes(b"\0")
    (root / IGLU_DIR / "embedded" / ".git").mkdir()
    (root / IGLU_DIR / "embedded" / ".git" / "HEAD").write_text("ref\n", encoding="utf-8")
    names = package_jobs.iglu_files(root)
    assert names == sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / IGLU_DIR).rglob("*") if p.is_file())


RESOLVER_CONFIG = "iglu:com.snowplowanalytics.iglu/resolver-config/jsonschema/1-0-3"
OUTSIDE = {"name": "outside", "priority": 0, "vendorPrefixes": [], "connection": {"embedded": {"path": "../schemas"}}}
"""An embedded repository beside iglu/, not in it: `make package` would not ship it."""


@pytest.mark.parametrize(
    ("resolver", "message"),
    [
        (None, r"iglu/resolver.json: missing; allowed: an Iglu resolver config"),
        (
            {"schema": "iglu:com.acme/x/jsonschema/1-0-0", "data": {}},
            r"iglu config .*/iglu/resolver.json: schema: given \"iglu:com.acme/x/jsonschema/1-0-0\"; allowed: iglu:com",
        ),
        (
            {"schema": RESOLVER_CONFIG, "data": {"cacheSize": 500, "repositories": [OUTSIDE]}},
            r"repository 'outside' is the local folder .*/schemas, which is not deployed; allowed: a folder under",
        ),
    ],
)
def test_an_iglu_folder_the_deployed_jobs_cannot_use_stops_the_build(
    tmp_path: Path, resolver: dict[str, object] | None, message: str
) -> None:
    root = _iglu_source(tmp_path / "source", resolver)
    if resolver is None:
        (root / IGLU_RESOLVER).unlink()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "previous").write_text("kept\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=message):
        package_jobs.build(tmp_path / "out", requirements=None, root=root)
    assert (tmp_path / "out" / "previous").is_file()  # checked before the output folder is emptied


def test_package_zip_holds_the_jobs_package_only_and_imports(build_dir: Path, tmp_path: Path) -> None:
    names = zipfile.ZipFile(build_dir / PACKAGE_ZIP).namelist()
    assert "jobs/__init__.py" in names and "jobs/runtime/cli.py" in names and "jobs/runtime/log4j2.properties" in names
    assert all(name.startswith("jobs/") for name in names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc") or "/entrypoints/" in n]
    # The zip alone (as --py-files puts it on sys.path) gives the command line.
    code = "import jobs.runtime.cli, sys; print(jobs.runtime.cli.__file__); jobs.runtime.cli.build_parser()"
    env = {**os.environ, "PYTHONPATH": str(build_dir / PACKAGE_ZIP)}
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(str(build_dir / PACKAGE_ZIP))
    # The same zip is the input planner's Lambda code: its handler imports without Spark (the runtime has boto3).
    code = "import sys; sys.modules['pyspark'] = None; import jobs.incremental.planner_lambda; print(jobs.incremental.planner_lambda.__file__)"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith(str(build_dir / PACKAGE_ZIP))


def test_builds_are_reproducible(tmp_path: Path) -> None:
    import shutil

    source = tmp_path / "source"  # a snapshot: the same sources for both builds
    shutil.copytree(ROOT / "jobs", source / "jobs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / IGLU_DIR, source / IGLU_DIR)
    first = package_jobs.build(tmp_path / "first", requirements=None, root=source)
    (source / "jobs" / "runtime" / "cli.py").touch()  # a newer mtime alone changes nothing
    (source / WEB_PAGE).touch()
    assert package_jobs.build(tmp_path / "second", requirements=None, root=source) == first

    def files(folder: Path) -> dict[str, bytes]:
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    assert files(tmp_path / "second") == files(tmp_path / "first")


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


def test_entrypoint_exits_with_the_job_code(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["dedup", "--input", "s3://in/", "--output", "s3://out/deduplicated", "--run-id", "2026-11-22-03-00-00"]
    for code in (0, 1, 2):
        monkeypatch.setattr(
            "jobs.runtime.cli.main",
            lambda given, prog, code=code: code if (list(given), prog) == (argv, EMR_PROG) else 99,
        )  # its prog: the printed redo says how to redo the run through the state machine
        assert emr_main.run(argv) == code
