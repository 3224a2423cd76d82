"""The job's session: a running session keeps its settings (a job run in-process does not change them); a session
the job starts maps the class archive when there is a whole one."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from pyspark.sql import SparkSession

from jobs.config import SparkConfig
from jobs.runtime import class_archive
from jobs.runtime import session as session_module
from jobs.runtime.class_archive import java_options, record_of, usable_archive
from jobs.runtime.cli import is_small_input, out_of_memory
from jobs.runtime.log4j2 import VERBOSE_JAVA_OPTION
from jobs.runtime.session import (
    LOCAL_CONF,
    REQUIRED_CONF,
    SMALL_INPUT_CONF,
    SMALL_INPUT_JAVA_OPTIONS,
    STARTUP_CONF,
    local_conf,
    spark_session,
)


def test_a_running_session_keeps_its_settings_and_gets_the_required_ones(spark: SparkSession) -> None:
    before = spark.conf.get("spark.sql.shuffle.partitions")
    assert before != LOCAL_CONF["spark.sql.shuffle.partitions"]  # the test session's own setting

    given = spark_session(SparkConfig(conf={"spark.sql.shuffle.partitions": "7"}), app_name="winnow-dedup")

    assert given is spark
    assert spark.conf.get("spark.sql.shuffle.partitions") == before
    assert {key: spark.conf.get(key) for key in REQUIRED_CONF} == REQUIRED_CONF


def test_a_session_the_jobs_start_has_the_startup_settings(spark: SparkSession) -> None:
    """The test session is started as a job starts its own (`spark_session`)."""
    assert {key: spark.conf.get(key) for key in STARTUP_CONF} == STARTUP_CONF


class RecordingBuilder:
    """Stands in for `SparkSession.builder`: keeps the settings given, later ones winning, as Spark's does."""

    def __init__(self) -> None:
        self.conf: dict[str, str] = {}

    def appName(self, name: str) -> RecordingBuilder:
        return self

    def master(self, master: str) -> RecordingBuilder:
        return self

    def config(self, key: str, value: str) -> RecordingBuilder:
        self.conf[key] = value
        return self

    def getOrCreate(self) -> dict[str, str]:
        return self.conf


def test_a_local_configs_spark_conf_may_set_the_startup_settings_but_not_the_required_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    builder = RecordingBuilder()
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)  # started as a local job, not by spark-submit
    monkeypatch.setattr(session_module, "SparkSession", SimpleNamespace(getActiveSession=lambda: None, builder=builder))
    own = {"spark.python.sql.dataFrameDebugging.enabled": "true", "spark.sql.session.timeZone": "Europe/Paris"}
    started: Any = spark_session(SparkConfig(conf=own), app_name="winnow-dedup")
    assert started["spark.python.sql.dataFrameDebugging.enabled"] == "true"
    assert started["spark.sql.session.timeZone"] == "UTC"
    assert {key: started[key] for key in REQUIRED_CONF} == REQUIRED_CONF


def test_a_local_session_maps_the_class_archive_and_the_configs_own_options_win(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = LOCAL_CONF["spark.driver.extraJavaOptions"]
    archive, record = tmp_path / "spark-classes.jsa", tmp_path / "spark-classes.json"
    options_of = class_archive.java_options
    monkeypatch.setattr(class_archive, "java_options", lambda: options_of(archive, record))  # an archive of its own
    assert local_conf(SparkConfig(), verbose=True)["spark.driver.extraJavaOptions"] == f"{base} {VERBOSE_JAVA_OPTION}"
    archive.write_bytes(b"\0" * 1000)
    record.write_text(json.dumps(record_of(archive)))
    mapped = f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"
    assert local_conf(SparkConfig())["spark.driver.extraJavaOptions"] == f"{base} {mapped}"
    own = SparkConfig(conf={"spark.driver.extraJavaOptions": "-Xss4m", "spark.sql.shuffle.partitions": "7"})
    assert local_conf(own) == {
        **LOCAL_CONF, "spark.driver.extraJavaOptions": "-Xss4m", "spark.sql.shuffle.partitions": "7"
    }  # fmt: skip


def test_a_small_input_is_run_interpreted_with_the_quick_jit_unless_the_config_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(class_archive, "java_options", lambda: "")
    base = LOCAL_CONF["spark.driver.extraJavaOptions"]
    assert local_conf(SparkConfig()) == LOCAL_CONF
    assert local_conf(SparkConfig(), small_input=True) == {
        **LOCAL_CONF, **SMALL_INPUT_CONF, "spark.driver.extraJavaOptions": f"{base} {SMALL_INPUT_JAVA_OPTIONS}"
    }  # fmt: skip
    own = SparkConfig(conf={"spark.sql.codegen.wholeStage": "true"})
    assert local_conf(own, small_input=True)["spark.sql.codegen.wholeStage"] == "true"


def test_an_input_is_small_up_to_its_limit_compressed_files_counted_unpacked(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    (folder / "hour=1").mkdir(parents=True)
    mib = 1024 * 1024
    (folder / "a.tsv").write_bytes(b"x" * (mib // 2))
    (folder / "_ignored").write_bytes(b"x" * (3 * mib))  # hidden: the job does not read it
    (folder / "late.tsv._COPYING_").write_bytes(b"x" * (3 * mib))  # an upload in progress: left for a later run
    assert is_small_input(Namespace(input=str(folder)), limit_mb=1)
    (folder / "hour=1" / "b.tsv").write_bytes(b"x" * (mib // 2))
    assert is_small_input(Namespace(input=str(folder)), limit_mb=1)  # 1 MiB: at the limit
    (folder / "hour=1" / "c.tsv.bz2").write_bytes(b"x" * 10)  # about 100 bytes unpacked
    assert not is_small_input(Namespace(input=str(folder)), limit_mb=1)
    assert is_small_input(Namespace(input=str(folder / "a.tsv")), limit_mb=1)
    assert not is_small_input(Namespace(input=str(folder / "a.tsv")), limit_mb=0)  # 0: never small
    assert not is_small_input(Namespace(input=None), limit_mb=1)  # a job without --input: Spark's defaults
    assert not is_small_input(Namespace(input="hdfs://namenode/in"), limit_mb=1)  # not listed: Spark's defaults
    # keyed and table: records, some 40 times smaller than events: 1/32 of the limit (32 KiB of 1 MiB)
    assert not is_small_input(Namespace(input=str(folder / "a.tsv"), job="keyed"), limit_mb=1)
    assert not is_small_input(Namespace(input=str(folder / "a.tsv"), job="table"), limit_mb=1)
    assert is_small_input(Namespace(input=str(folder / "a.tsv"), job="keyed"), limit_mb=32)


def test_an_s3_input_is_sized_as_the_job_lists_it() -> None:
    """Only the objects under the prefix's folder that the job reads: not a sibling prefix's, hidden or uploading."""
    from moto import mock_aws

    with mock_aws():
        s3 = boto3.client("s3", region_name="eu-west-1")
        s3.create_bucket(Bucket="raw-input", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
        for key, size in {"in/a.tsv": 100, "in-archive/old.tsv": 2 * 1024 * 1024, "in/_tmp/big": 2 * 1024 * 1024,
                          "in/.hidden": 2 * 1024 * 1024, "in/b.tsv._COPYING_": 2 * 1024 * 1024}.items():  # fmt: skip
            s3.put_object(Bucket="raw-input", Key=key, Body=b"x" * size)
        assert is_small_input(Namespace(input="s3://raw-input/in"), limit_mb=1)
        s3.put_object(Bucket="raw-input", Key="in/day=2/c.tsv.gz", Body=b"x" * 200 * 1024)  # about 2 MiB unpacked
        assert not is_small_input(Namespace(input="s3://raw-input/in/"), limit_mb=1)


def test_the_class_archive_is_used_only_when_whole_and_of_this_pyspark(tmp_path: Path) -> None:
    archive, record = tmp_path / "spark-classes.jsa", tmp_path / "spark-classes.json"
    assert java_options(archive, record) == ""  # none built
    archive.write_bytes(b"\0" * 1000)
    assert java_options(archive, record) == ""  # no record: its builder did not finish
    record.write_text(json.dumps(record_of(archive)))
    assert java_options(archive, record) == (f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off")
    with archive.open("r+b") as file:
        file.truncate(600)  # a truncated archive crashes the JVM that maps it: not used
    assert usable_archive(archive, record) is None
    record.write_text(json.dumps({"bytes": 600, "pyspark": "3.5.0"}))  # built for another pyspark
    assert usable_archive(archive, record) is None
    record.write_text("{")
    assert usable_archive(archive, record) is None


def test_a_session_the_jobs_start_maps_the_class_archive_setup_built(spark: SparkSession) -> None:
    """The test session is started as a job starts its own (`spark_session`): with `make setup`'s archive."""
    archive = usable_archive()
    if archive is None:
        pytest.skip("no class archive in this environment (make setup builds it)")
    jvm: Any = spark.sparkContext._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in arguments


# What a job that ran out of memory says (jobs/runtime/cli.py): the texts are those of the failures seen at 3 a.m.
# (typed wide-row Parquet of 1M events with Spark's default 1g driver: a task's OutOfMemoryError shut Spark down,
# and the job's collect failed with "cancelled because SparkContext was shut down").
SHUT_DOWN = (
    "An error occurred while calling o4300.collectToPython.\n: org.apache.spark.SparkException: Job 5 cancelled "
    "because SparkContext was shut down\n\tat org.apache.spark.scheduler.DAGScheduler.$anonfun$cleanUpAfterSchedulerStop$1"
)
HEAP = "An error occurred while calling o43.collectToPython.\n: java.lang.OutOfMemoryError: Java heap space"
WAY_OUT = (
    'nothing is lost: rerun with the same run id {more} (locally "spark.driver.memory" in the config\'s spark.conf: '
    "configs/local.json sets 4g; on EMR emr.spark_conf's spark.driver.memory or spark.executor.memory)"
)


def test_a_job_out_of_memory_says_so_and_how_to_rerun_it() -> None:
    assert out_of_memory(RuntimeError(HEAP), {"spark.driver.memory": "2g"}) == (
        "Spark ran out of memory (spark.driver.memory: 2g); " + WAY_OUT.format(more="and more memory")
    )
    assert out_of_memory(RuntimeError(SHUT_DOWN), {}) == (
        "Spark shut down during the run, most often out of memory (java.lang.OutOfMemoryError above; "
        "spark.driver.memory not set: Spark's default, 1g); " + WAY_OUT.format(more="with more memory if so")
    )
    assert (
        out_of_memory(RuntimeError("An error occurred while calling o1.save.\n: java.io.IOException: disk"), {}) is None
    )
