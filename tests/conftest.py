"""Shared fixtures: one Spark session for the whole test run (local mode, loopback only, UTC)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Before any Spark JVM starts: bind to loopback, and run Python workers with this interpreter.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# Tests never reach AWS: dummy credentials and a fixed region (moto, in-process or on 127.0.0.1).
for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                    "AWS_DEFAULT_REGION": "eu-west-1", "AWS_REGION": "eu-west-1"}.items():  # fmt: skip
    os.environ[name] = value
os.environ.pop("AWS_PROFILE", None)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one Spark session of the test run, built the way the jobs build theirs locally."""
    from jobs.config import SparkConfig
    from jobs.runtime.session import SERIAL_GC, SMALL_INPUT_CONF, local_conf, spark_session

    # Every test's input is small: its plans run interpreted and the JVM collects with one thread, as a job's own
    # session runs a small input (without the quick JIT, which slows a session that lasts the whole suite).
    java_options = f"{local_conf(SparkConfig())['spark.driver.extraJavaOptions']} {SERIAL_GC}"
    conf = {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "2g", **SMALL_INPUT_CONF,
            "spark.driver.extraJavaOptions": java_options}  # fmt: skip
    session = spark_session(SparkConfig(master="local[2]", conf=conf), app_name="winnow-tests")
    yield session
    session.stop()


# Fixtures that tell a test's cost: whoever uses them gets the marker.
FIXTURE_MARKERS = {
    "spark": "spark",
    "synthesized": "synth",
    "dev": "synth",
    "prod": "synth",
    "build_dir": "synth",
    "audit_venv": "audit",
}
# Modules whose tests talk to moto get `aws`: they import it, or the loopback DynamoDB server built on it.
AWS_MODULES = ("moto", "tests.pipeline.manifest_server")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers by cost, so `make test-fast` can leave out Spark, synth and slow tests (see pyproject.toml); then the
    modules costliest first (`make test` runs each module's tests in one process: `--dist loadfile`)."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        markers = sorted({marker for fixture, marker in FIXTURE_MARKERS.items() if fixture in fixtures})
        for name in markers:
            item.add_marker(name)
        module = getattr(item, "module", None)
        if module is not None and any(
            str(getattr(value, "__module__", getattr(value, "__name__", ""))).startswith(AWS_MODULES)
            for value in vars(module).values()
        ):
            item.add_marker(pytest.mark.aws)
    items[:] = costliest_modules_first(items)


def costliest_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The modules in the order of what their tests cost by their markers (each module's tests in their order), so
    the test processes of `make test` do not end on a long module alone."""
    cost: dict[str, int] = {}
    for item in items:
        marks = {mark.name for mark in item.iter_markers()}
        module = item.nodeid.split("::")[0]
        cost[module] = cost.get(module, 0) + (
            30 if "slow" in marks else 5 if marks & {"spark", "synth", "audit"} else 0
        )
    order = {module: rank for rank, module in enumerate(sorted(cost, key=lambda module: -cost[module]))}
    return sorted(items, key=lambda item: order[item.nodeid.split("::")[0]])
