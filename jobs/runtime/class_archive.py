"""A class-data sharing archive of the classes a Spark job loads, for the JVMs the jobs start themselves.

A JVM that maps the archive skips loading, parsing and verifying Spark's classes one by one: a local run starts
sooner and plans its first queries sooner (docs/benchmarks.md). `make setup` builds it once per environment
(`python -m jobs.tools.build_class_archive`) beside the Python that runs the jobs; under spark-submit (EMR) the
cluster's JVM options apply and this is not used.

The JVM checks that the archive fits its own build and class path, and runs without it when it does not; a
truncated archive, though, crashes it while mapping. So an archive is used only when its size is the one its
builder recorded after a run had used it, and the builder puts it in place with an atomic rename.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyspark

ARCHIVE = Path(sys.prefix) / "share" / "winnow" / "spark-classes.jsa"
RECORD = ARCHIVE.with_suffix(".json")
# The JVM says why an archive did not fit (another JDK build, another class path) and runs without it: not
# something a job's reader can act on, so not said.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def record_of(archive: Path) -> dict[str, object]:
    """What the builder records of an archive that a run has used: its size and the pyspark it holds."""
    return {"bytes": archive.stat().st_size, "pyspark": pyspark.__version__}


def usable_archive(archive: Path = ARCHIVE, record: Path = RECORD) -> Path | None:
    """The archive, when it is whole and of this pyspark; else None (the JVM then loads classes as usual)."""
    try:
        recorded = json.loads(record.read_text(encoding="utf-8"))
        return archive if recorded == record_of(archive) else None
    except (OSError, ValueError):
        return None


def java_options(archive: Path = ARCHIVE, record: Path = RECORD) -> str:
    """The driver JVM's options that map the archive, or "" when there is none to use."""
    usable = usable_archive(archive, record)
    return f"-XX:SharedArchiveFile={usable} {QUIET}" if usable else ""
