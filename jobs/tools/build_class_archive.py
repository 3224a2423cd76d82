"""`python -m jobs.tools.build_class_archive`: build the class-data sharing archive that local Spark jobs start with
(`jobs.runtime.class_archive`). `make setup` runs it once; run it again after changing the JDK or pyspark.

The archive holds the classes a JVM loaded in a small `run` (dedup against a SQLite manifest, then shred): a
first run writes it at its exit, a second run must start with it (the JVM refuses to start otherwise), and only
then does it replace the archive in place, with the record that lets jobs use it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from jobs.errors import WinnowError
from jobs.runtime.class_archive import ARCHIVE, RECORD, record_of
from jobs.runtime.session import LOCAL_CONF
from jobs.tools.generate import GenerateOptions, generate

RUN_ID = "2026-01-01-00-00-00"
# A bound for a run that hangs (each takes well under a minute), so `make setup` never waits for ever.
TIMEOUT_SECONDS = 600
# Starts a session with the archive and runs one query: the JVM refuses to start when it cannot map it.
STARTS_WITH_IT = """
import sys
from jobs.config import SparkConfig
from jobs.runtime.session import spark_session
conf = {"spark.driver.extraJavaOptions": sys.argv[1]}
assert spark_session(SparkConfig(master="local[1]", conf=conf), "class-archive-check").range(3).count() == 3
"""


class ClassArchiveError(WinnowError):
    """The archive could not be built or did not start a JVM; jobs then start without one, as before."""

    exit_code = 1


def driver_options(options: str) -> str:
    """`options` after the driver JVM options every local job starts with (the log4j2 configuration)."""
    return f"{LOCAL_CONF['spark.driver.extraJavaOptions']} {options}"


def checked(command: list[str], what: str, seconds: float = TIMEOUT_SECONDS) -> None:
    """Run `command`; raises ClassArchiveError, naming `what`, when it fails or takes over `seconds`."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=seconds)
    except subprocess.TimeoutExpired:
        raise ClassArchiveError(f"class archive: {what} took over {seconds:g} s, stopped") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ClassArchiveError(f"class archive: {what} failed (exit {done.returncode}): {last}")


def run_dumping(work: Path, archive: Path) -> None:
    """A small `run` in a JVM of its own that writes the classes it loaded into `archive` at its exit."""
    config = work / "config.json"
    conf = {"spark.driver.extraJavaOptions": driver_options(f"-XX:ArchiveClassesAtExit={archive}"),
            "spark.sql.shuffle.partitions": "2"}  # fmt: skip
    config.write_text(json.dumps({"spark": {"master": "local[2]", "conf": conf}}))
    checked([sys.executable, "-m", "jobs", "run", "--input", str(work / "in"), "--output", str(work / "out"),
             "--run-id", RUN_ID, "--manifest", f"sqlite:{work / 'manifest.db'}", "--create", "--config", str(config)],
            "the run that writes it")  # fmt: skip


def build(archive: Path = ARCHIVE, record: Path = RECORD) -> Path:
    """Build the archive and put it in place (with its record); returns its path.

    Raises:
        ClassArchiveError: a run failed, wrote no archive, or could not start with it.
    """
    archive.parent.mkdir(parents=True, exist_ok=True)
    dumped = archive.with_name(f".{archive.name}.{os.getpid()}")  # beside it, so the rename is atomic
    try:
        with tempfile.TemporaryDirectory(prefix="winnow-class-archive-") as folder:
            work = Path(folder)
            generate(work / "in", GenerateOptions(events=200, seed=1, files=2))
            run_dumping(work, dumped)
        if not dumped.exists():
            raise ClassArchiveError(f"class archive: the JVM wrote no {dumped} at its exit")
        starts = driver_options(f"-XX:SharedArchiveFile={dumped} -Xshare:on")
        checked([sys.executable, "-c", STARTS_WITH_IT, starts], "a session started with it")
        recorded = json.dumps(record_of(dumped)) + "\n"
        record.unlink(missing_ok=True)  # no record names the archive while it is being replaced
        os.replace(dumped, archive)
        record.write_text(recorded, encoding="utf-8")
    finally:
        dumped.unlink(missing_ok=True)
    return archive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.tools.build_class_archive", description=__doc__.splitlines()[0]
    )
    parser.parse_args(argv)
    try:
        path = build()
    except ClassArchiveError as err:
        print(f"error: {err}; local jobs start without it", file=sys.stderr)
        return err.exit_code
    print(f"class archive: {path} ({path.stat().st_size / 1e6:,.0f} MB), used by the jobs' local Spark sessions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
