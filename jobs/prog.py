"""How a printed way out starts the command line: `local_prog()`.

A way out is pasted into a shell, often from another folder, by someone whose `python` may be another interpreter
(or none) and who has no `PYTHONPATH` set. So it names this interpreter by its absolute path, and the source tree
when the package runs from it (`make demo`, a checkout) instead of being installed.
"""

from __future__ import annotations

import os
import shlex
import sys
import sysconfig

import jobs

LOCAL_PROG = "python -m jobs"
"""The command line's name in its usage, and in a way out read away from the process that prints it (EMR's
driver): run it in the project's environment."""


def launched_by_spark_submit() -> bool:
    """True when spark-submit started this Python process (it hands over its JVM through this variable)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def local_prog() -> str:
    """The start of a command that runs the command line from any folder: `/abs/python -m jobs`, after
    `PYTHONPATH=<source tree>` when `jobs` is not installed in that interpreter; under spark-submit (EMR, a
    cluster) `LOCAL_PROG`, since the driver's interpreter is not where the line is read."""
    if launched_by_spark_submit():
        return LOCAL_PROG
    interpreter = f"{shlex.quote(sys.executable)} -m jobs"
    source = os.path.dirname(os.path.dirname(os.path.abspath(jobs.__file__)))
    installed = {os.path.abspath(sysconfig.get_paths()[kind]) for kind in ("purelib", "platlib")}
    return interpreter if source in installed else f"PYTHONPATH={shlex.quote(source)} {interpreter}"
