"""Building the class archive: a failed step says which and leaves the archive in place as it was, with its record.

(The whole build, two JVMs, is `make setup`'s; `test_session.py` checks that the test session maps what it built.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jobs.tools import build_class_archive
from jobs.tools.build_class_archive import ClassArchiveError, build, checked


def test_a_failing_step_is_named_with_its_last_line() -> None:
    with pytest.raises(ClassArchiveError, match=r"^class archive: the run that writes it failed \(exit 1\): boom$"):
        checked([sys.executable, "-c", "import sys; sys.exit('boom')"], "the run that writes it")


def test_a_step_that_hangs_is_stopped() -> None:
    with pytest.raises(ClassArchiveError, match=r"^class archive: a session started with it took over 0.5 s, stopped$"):
        checked([sys.executable, "-c", "import time; time.sleep(30)"], "a session started with it", seconds=0.5)


def test_a_run_that_writes_no_archive_leaves_the_one_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive, record = tmp_path / "spark-classes.jsa", tmp_path / "spark-classes.json"
    archive.write_bytes(b"the archive of an earlier build")
    record.write_text('{"bytes": 31, "pyspark": "4.0.2"}')
    monkeypatch.setattr(build_class_archive, "run_dumping", lambda work, dumped: None)  # a JVM that wrote nothing
    with pytest.raises(ClassArchiveError, match=r"the JVM wrote no .*\.spark-classes\.jsa\.\d+ at its exit$"):
        build(archive, record)
    assert archive.read_bytes() == b"the archive of an earlier build"
    assert record.read_text() == '{"bytes": 31, "pyspark": "4.0.2"}'
    assert sorted(path.name for path in tmp_path.iterdir()) == ["spark-classes.jsa", "spark-classes.json"]
