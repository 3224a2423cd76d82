"""Another pyspark beside the pinned one (`--other-pyspark 4.1.1`: EMR's emr-spark-8.1.0 pair): a venv of its own
under `bench/`, the jobs run from this checkout, so both Sparks run the same code on the same input in one bench.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^pyspark==\S+$", re.MULTILINE)


def requirements_with(version: str) -> str:
    """requirements.txt with its pyspark pin replaced by `version` (everything else as pinned)."""
    text = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    if not PIN.search(text):
        raise ValueError("requirements.txt: no pyspark==… line to replace")
    return PIN.sub(f"pyspark=={version}", text)


def python_with(version: str) -> Path:
    """The python of a venv holding pyspark `version` (made once, kept in bench/), with its own class archive."""
    venv = ROOT / "bench" / f"venv-pyspark-{version}"
    python = venv / "bin" / "python"
    done = venv / ".installed"
    if not done.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        requirements = venv / "requirements.txt"
        requirements.write_text(requirements_with(version), encoding="utf-8")
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-r",
                        str(requirements)], check=True)  # fmt: skip
        # Its own archive, as `make setup` gives the pinned venv: both Sparks start the same way.
        subprocess.run([str(python), "-m", "jobs.tools.build_class_archive"], check=True, cwd=ROOT)
        done.touch()
    return python
