"""The jobs' log4j2 configuration (`log4j2.properties` beside this module), for local sessions and for EMR."""

from __future__ import annotations

import re
from pathlib import Path

LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")
# Shows the warnings log4j2.properties silences as expected in our plans (`--verbose`).
VERBOSE_JAVA_OPTION = "-Dwinnow.expected.level=warn"
EXPECTED_WARNINGS = "# Expected in our plans"
_DEFAULT_LEVEL = re.compile(r"\$\{sys:winnow\.expected\.level:-(\w+)\}")


def expected_warning_loggers() -> dict[str, str]:
    """The log4j2 settings that silence the warnings expected in our plans (log4j2.properties from its
    "Expected in our plans" comment on), levels at their default: what EMR's log4j2 classifications get."""
    text = LOG4J2_CONFIG.read_text()
    settings = {}
    for line in text[text.index(EXPECTED_WARNINGS) :].splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = (part.strip() for part in line.split("=", 1))
            settings[key] = _DEFAULT_LEVEL.sub(r"\1", value)
    return settings
