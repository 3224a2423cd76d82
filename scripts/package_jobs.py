"""`make package`: build the job artifacts CDK deploys to `s3://<artifacts>/jobs/<version>/`.

Writes to OUT (default dist/package/):
- winnow_jobs.zip: the `jobs` package (for `--py-files`), reproducible: same sources, same bytes;
- deps.tar.gz: requirements-jobs.txt installed with pip into a folder and archived (pure Python only, so
  no Docker and no Amazon Linux build host is needed; a compiled wheel is refused);
- emr_main.py: the spark-submit entry point;
- iglu/: the repository's `iglu/` folder (the Iglu resolver config `iglu/resolver.json` and the embedded schemas
  under `iglu/embedded/schemas/`), copied byte for byte with the same relative paths;
- build.json: the jobs version and the SHA-256 of each file, by its path in the build.
The deployed version is `<jobs version>-<hash of these files and the env's job config>` (cdk/components/job_artifacts.py).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from cdk.artifact_layout import BUILD_INFO, DEPS_ARCHIVE, ENTRYPOINT, IGLU_DIR, IGLU_RESOLVER, PACKAGE_ZIP

ROOT = Path(__file__).resolve().parent.parent
FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # zip entries carry no build time, so a rebuild is byte-identical
PYTHON_VERSION = "3.11"


def jobs_version(root: Path = ROOT) -> str:
    """`jobs.__version__`, read from the source (without importing the package)."""
    for line in (root / "jobs" / "__init__.py").read_text(encoding="utf-8").splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    raise SystemExit("jobs/__init__.py has no __version__")


def package_files(root: Path = ROOT) -> list[Path]:
    """The files of the `jobs` package to ship: sources and package data, no caches, no entry points."""
    package = root / "jobs"
    return sorted(
        path
        for path in package.rglob("*")
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.suffix not in {".pyc", ".pyo"}
        and "entrypoints" not in path.relative_to(package).parts
    )


def build_package_zip(out: Path, root: Path = ROOT) -> None:
    """Zip the `jobs` package with `jobs/` at the root, entries sorted and timestamps fixed."""
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in package_files(root):
            info = zipfile.ZipInfo(path.relative_to(root).as_posix(), date_time=FIXED_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())


def iglu_files(root: Path = ROOT) -> list[str]:
    """The files of `iglu/` to ship, as sorted POSIX paths relative to `root` (`iglu/...`); hidden files and
    folders (`.DS_Store`, `.gitkeep`, ...) stay out.

    Raises:
        SystemExit: there is no `iglu/resolver.json`, it is not a valid Iglu resolver config, or one of its
            embedded repositories is a local folder outside `iglu/` (it would not be deployed).
    """
    from jobs.errors import InvalidConfigError
    from jobs.iglu.resolver import EmbeddedRepository, Resolver

    config = root / IGLU_RESOLVER
    if not config.is_file():
        raise SystemExit(f"{config}: missing; allowed: an Iglu resolver config (the shred job's default on EMR)")
    try:
        resolver = Resolver.from_config(config.read_text(encoding="utf-8"), str(config), label="iglu config")
    except InvalidConfigError as err:
        raise SystemExit(str(err)) from None
    folder = root / IGLU_DIR
    local = [
        repo
        for repo in resolver.repositories
        if isinstance(repo, EmbeddedRepository) and "://" not in repo.path and not repo.path.startswith("file:")
    ]
    for repo in local:
        if not Path(repo.path).resolve().is_relative_to(folder.resolve()):
            raise SystemExit(
                f"iglu config {config}: repository {repo.name!r} is the local folder {repo.path}, which is not "
                f"deployed; allowed: a folder under {folder} (relative to the config), an s3:// URI, or an http "
                "repository"
            )
    return sorted(
        path.relative_to(root).as_posix()
        for path in folder.rglob("*")
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    )


def copy_files(names: list[str], out_dir: Path, root: Path = ROOT) -> None:
    """Copy files (paths relative to `root`) to the same paths under `out_dir`: content only, no times or modes."""
    for name in names:
        target = out_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((root / name).read_bytes())


def pip_install_command(requirements: Path, target: Path, platform: str) -> list[str]:
    """pip installing wheels for EMR's Python and platform into `target` (never building from source)."""
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--target",
        str(target),
        "--requirement",
        str(requirements),
        "--only-binary=:all:",
        "--platform",
        platform,
        "--python-version",
        PYTHON_VERSION,
        "--implementation",
        "cp",
    ]


def build_deps_archive(out: Path, requirements: Path, platform: str = "manylinux2014_x86_64") -> None:
    """Install the job dependencies into a folder and archive its content (tar.gz, reproducible)."""
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "deps"
        subprocess.run(pip_install_command(requirements, target, platform), check=True)
        compiled = sorted(p.name for p in target.rglob("*") if p.suffix in {".so", ".pyd", ".dylib"})
        if compiled:
            raise SystemExit(f"{requirements}: compiled files {compiled[:5]} found; allowed: pure-Python packages only")
        write_tar(out, target)


def write_tar(out: Path, folder: Path) -> None:
    """Archive the content of `folder` (paths relative to it) with fixed owners and times."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(folder.rglob("*")):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            info = tarfile.TarInfo(path.relative_to(folder).as_posix())
            info.size = path.stat().st_size
            info.mode = 0o644
            with path.open("rb") as handle:
                tar.addfile(info, handle)
    with out.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(buffer.getvalue())


def build(
    out_dir: Path, *, requirements: Path | None, platform: str = "manylinux2014_x86_64", root: Path = ROOT
) -> dict[str, object]:
    """Build every artifact into `out_dir` (emptied first); `requirements=None` archives no dependencies.

    Returns:
        The build info written to build.json.
    """
    iglu = iglu_files(root)  # checked before anything is removed or built
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    build_package_zip(out_dir / PACKAGE_ZIP, root)
    shutil.copyfile(root / "jobs" / "entrypoints" / ENTRYPOINT, out_dir / ENTRYPOINT)
    copy_files(iglu, out_dir, root)
    if requirements is None:
        with tempfile.TemporaryDirectory() as empty:
            write_tar(out_dir / DEPS_ARCHIVE, Path(empty))
    else:
        build_deps_archive(out_dir / DEPS_ARCHIVE, requirements, platform)
    info: dict[str, object] = {
        "jobs_version": jobs_version(root),
        "dependencies": requirements.name if requirements else None,
        "sha256": {
            name: hashlib.sha256((out_dir / name).read_bytes()).hexdigest()
            for name in (PACKAGE_ZIP, DEPS_ARCHIVE, ENTRYPOINT, *iglu)
        },
    }
    (out_dir / BUILD_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.package_jobs", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "package", help="default: dist/package")
    parser.add_argument("--requirements", type=Path, default=ROOT / "requirements-jobs.txt")
    parser.add_argument("--platform", default="manylinux2014_x86_64", help="pip --platform of the EMR workers")
    args = parser.parse_args(argv)
    info = build(args.out, requirements=args.requirements, platform=args.platform)
    print(
        f"built {args.out}: jobs {info['jobs_version']}, {len(package_files())} package files, "
        f"{len(iglu_files())} iglu files"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
