"""The job's session: a running session keeps its settings (a job run in-process does not change them)."""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.config import SparkConfig
from jobs.runtime.session import LOCAL_CONF, REQUIRED_CONF, spark_session


def test_a_running_session_keeps_its_settings_and_gets_the_required_ones(spark: SparkSession) -> None:
    before = spark.conf.get("spark.sql.shuffle.partitions")
    assert before != LOCAL_CONF["spark.sql.shuffle.partitions"]  # the test session's own setting

    given = spark_session(SparkConfig(conf={"spark.sql.shuffle.partitions": "7"}), app_name="winnow-dedup")

    assert given is spark
    assert spark.conf.get("spark.sql.shuffle.partitions") == before
    assert {key: spark.conf.get(key) for key in REQUIRED_CONF} == REQUIRED_CONF
