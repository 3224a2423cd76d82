"""The jobs' log4j2 configuration (`log4j2.properties` beside this module) for local sessions; EMR gets the same
expected-warning loggers from `jobs.contract.expected_warning_loggers`."""

from __future__ import annotations

from jobs.contract import LOG4J2_CONFIG

__all__ = ["LOG4J2_CONFIG", "VERBOSE_JAVA_OPTION"]

# Shows the warnings log4j2.properties silences as expected in our plans, and Spark's task failures (`--verbose`).
VERBOSE_JAVA_OPTION = "-Dwinnow.expected.level=warn -Dwinnow.task.level=warn"
