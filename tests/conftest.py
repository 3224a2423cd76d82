"""Shared fixtures: one Spark session for the whole test run (local mode, loopback only, UTC)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

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
    from jobs.runtime.session import SMALL_INPUT_CONF, SMALL_INPUT_JAVA_OPTIONS, local_conf, spark_session

    # Every test's input is small: the session runs as a job's own runs a small input (plans interpreted, the JIT's
    # quick tier, one collector thread). With the full JIT, compiling Spark's code with C2 took more of the JVM's
    # time than the tests did.
    java_options = f"{local_conf(SparkConfig())['spark.driver.extraJavaOptions']} {SMALL_INPUT_JAVA_OPTIONS}"
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
    items[:] = costliest_units_first(items)


# About what each costly module's tests took in `make test`, in seconds (a fresh clone, 2026-11-28). Only the order of the work
# depends on them, so that the test processes do not end on a long module alone: a stale figure costs balance, never
# a result. A module not listed counts its tests' markers (`estimated_seconds`).
MODULE_SECONDS = {
    "tests/pipeline/test_unfinished_runs.py": 94,
    "tests/pipeline/test_lake_manifest.py": 73,
    "tests/pipeline/test_run_identity.py": 70,
    "tests/pipeline/test_crossbatch.py": 64,
    "tests/pipeline/test_fixed_outputs.py": 63,
    "tests/pipeline/test_table.py": 56,
    "tests/pipeline/test_keyed.py": 51,
    "tests/pipeline/test_lake_filters.py": 44,
    "tests/pipeline/test_widerow.py": 42,
    "tests/pipeline/test_file_names.py": 36,
    "tests/pipeline/test_throttling.py": 34,
    "tests/infra/test_validators.py": 29,
    "tests/infra/test_app.py": 27,
    "tests/infra/test_state_machine_flow.py": 27,
    "tests/pipeline/test_data_safety.py": 25,
    "tests/pipeline/test_shred_typed_parquet.py": 24,
    "tests/pipeline/test_lake_integrity.py": 22,
    "tests/pipeline/test_shred_tsv.py": 22,
    "tests/pipeline/test_incremental.py": 20,
    "tests/pipeline/test_dedup_job.py": 19,
    "tests/pipeline/test_lake_equivalence.py": 17,
    "tests/infra/test_job_contract.py": 16,
}
INFRA = "tests/infra/"
"""The CDK modules are one unit of work (`make test`: `--dist loadfile`): one test process imports the CDK and
synthesizes each environment once for all of them."""


def work_unit(nodeid: str) -> str:
    """The unit of work of a test (`--dist loadfile`): its module, or `tests/infra/` for every CDK module."""
    module = nodeid.split("::")[0]
    return INFRA if module.startswith(INFRA) else module


def estimated_seconds(item: pytest.Item) -> int:
    """A test's cost by its markers, for a module not in MODULE_SECONDS."""
    marks = {mark.name for mark in item.iter_markers()}
    return 20 if "slow" in marks else 2 if marks & {"spark", "synth", "audit"} else 0


def costliest_units_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The units of work costliest first (each unit's tests in their order)."""
    estimated: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        estimated[module] = estimated.get(module, 0) + estimated_seconds(item)
    cost: dict[str, int] = {}
    for module, seconds in estimated.items():
        cost[work_unit(module)] = cost.get(work_unit(module), 0) + MODULE_SECONDS.get(module, seconds)
    order = {unit: rank for rank, unit in enumerate(sorted(cost, key=lambda unit: -cost[unit]))}
    return sorted(items, key=lambda item: order[work_unit(item.nodeid)])


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` by `work_unit`, in the order of the collection (costliest first), not by test count."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class WorkUnits(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False
    return WorkUnits(config, log)
