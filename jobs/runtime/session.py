"""The Spark session: local mode when run with `python -m jobs`, the submitted one under spark-submit."""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.config import SparkConfig
from jobs.prog import launched_by_spark_submit
from jobs.runtime import class_archive
from jobs.runtime.log4j2 import LOG4J2_CONFIG, VERBOSE_JAVA_OPTION

# Settings every job relies on, whoever starts Spark.
REQUIRED_CONF = {
    # Timestamps are validated and formatted in UTC; a local time zone would reject times in DST gaps.
    "spark.sql.session.timeZone": "UTC",
    # Wide-row Parquet timestamps as RDB transformer writes them (INT64 micros), not Spark's default INT96.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    # Spark's own advice for HotSpot: a plan whose generated method is over 8,000 bytes of bytecode (which the JIT
    # never compiles: every row would run interpreted) falls back to per-expression code in small methods. The
    # shred job's 131-field checks and atomic line are such plans, and shred and dedup both run faster with it.
    "spark.sql.codegen.hugeMethodLimit": "8000",
}
# Settings of a session the jobs create (spark-submit's or their own): Spark fixes them when the session starts.
STARTUP_CONF = {
    # PySpark 4 records the Python call site of every Column function for its error messages: three more calls to
    # the JVM each, and the jobs build their plans from thousands of Column calls, on every run however small.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}
# Settings for a session the job starts itself (not under spark-submit).
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    # Plain-text logs at WARN from our log4j2 file, instead of Spark 4's structured JSON at INFO.
    "spark.log.structuredLogging.enabled": "false",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
    # One machine's cores, not a cluster's: Spark's 200 shuffle partitions made keyed and dedup slower on one
    # machine than 16 (make bench). A config's spark.conf still sets its own.
    "spark.sql.shuffle.partitions": "16",
}
# A small input (`spark.small_input_mb` at most, as listed before the JVM starts) is run with every plan interpreted,
# the JIT's quick tier only and the serial garbage collector: compiling code for each plan, optimizing Spark's own,
# and the parallel collector's threads cost more than they save on few rows (make bench, "small batches"). Bigger
# inputs keep Spark's and the JVM's defaults. A config's spark.conf still wins.
SMALL_INPUT_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
QUICK_JIT = "-XX:TieredStopAtLevel=1"
SERIAL_GC = "-XX:+UseSerialGC"
SMALL_INPUT_JAVA_OPTIONS = f"{QUICK_JIT} {SERIAL_GC}"


def spark_session(config: SparkConfig, app_name: str, verbose: bool = False, small_input: bool = False) -> SparkSession:
    """Get the session: a running one keeps its settings (plus REQUIRED_CONF); spark-submit's gets STARTUP_CONF and
    REQUIRED_CONF; otherwise a local one from STARTUP_CONF, `local_conf` and REQUIRED_CONF, in that order of
    precedence from lowest (`verbose`: with the warnings expected in our plans shown; `small_input`: the input is
    `spark.small_input_mb` at most)."""
    running = SparkSession.getActiveSession()
    if running is not None:
        # A session this process already runs (a test's, a notebook's): its settings win, as under spark-submit;
        # applying ours to it would change them for whoever else uses it.
        for key, value in REQUIRED_CONF.items():
            running.conf.set(key, value)
        return running
    builder = SparkSession.builder.appName(app_name)
    for key, value in STARTUP_CONF.items():
        builder = builder.config(key, value)
    if not launched_by_spark_submit():
        builder = builder.master(config.master)
        # a config's spark.conf may set STARTUP_CONF's keys
        for key, value in local_conf(config, verbose, small_input).items():
            builder = builder.config(key, value)
    for key, value in REQUIRED_CONF.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def local_conf(config: SparkConfig, verbose: bool = False, small_input: bool = False) -> dict[str, str]:
    """The settings of a session the job starts itself: LOCAL_CONF (with SMALL_INPUT_CONF and SMALL_INPUT_JAVA_OPTIONS
    for a small input), the driver JVM mapping the class archive when there is one to use, then the config's own
    `spark.conf` (which wins, key by key)."""
    local = {**LOCAL_CONF, **(SMALL_INPUT_CONF if small_input else {})}
    java_options = [local["spark.driver.extraJavaOptions"]]
    if small_input:
        java_options.append(SMALL_INPUT_JAVA_OPTIONS)
    if verbose:
        java_options.append(VERBOSE_JAVA_OPTION)
    if archive_options := class_archive.java_options():
        java_options.append(archive_options)
    local["spark.driver.extraJavaOptions"] = " ".join(java_options)
    return {**local, **config.conf}
