"""Names other parts depend on: the manifests' item and file names, the dedup run folder's layout, and the
callback the jobs report their phases through.

One place for them, imported by the jobs and by `cdk/` (the table's keys, the lake's prefixes in IAM and
lifecycle rules), so the infrastructure and the code that reads and writes cannot drift apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from jobs.errors import InvalidConfigError

Progress = Callable[[str], None]
"""What a job calls with each phase's line (`jobs.runtime.progress` prints it)."""

# The DynamoDB events manifest (Snowplow-compatible): one item per (event id, fingerprint).
DYNAMODB_PARTITION_KEY = "eventId"
DYNAMODB_SORT_KEY = "fingerprint"
DYNAMODB_ETL_TIME = "etlTime"
"""Epoch seconds of the run that first delivered the pair (N)."""
DYNAMODB_TTL = "ttl"
"""Epoch seconds after which the item no longer counts (N); the table's TTL attribute."""
# A new on-demand table serves up to 4,000 write and 12,000 read request units per second (AWS: "On-demand
# capacity mode", initial throughput), more only after it has seen higher peaks.
DYNAMODB_ON_DEMAND_WRITE_UNITS, DYNAMODB_ON_DEMAND_READ_UNITS = 4_000, 12_000
# A manifest item is well under 1 KB: a put costs 1 write unit; an eventually consistent query of one id's
# items (under 4 KB) costs half a read unit.
DYNAMODB_QUERIES_PER_READ_UNIT = 2
DYNAMODB_MAX_PROVISIONED_UNITS = 40_000
"""The most read or write capacity units one provisioned table has by default (AWS: "Service quotas")."""

# The lake manifest (`lake:PATH`): Parquet under PATH, visible only through its commits.
LAKE_DESCRIPTOR = "_manifest.json"
"""Written once by `--create`: format, version and the fixed bucket count."""
LAKE_COMMITS = "_commits"
"""One JSON object per commit, `_commits/NNNNNNNNNN.json`, each the whole state; the highest number is current."""
LAKE_ANCHOR = "_latest"
"""The newest commit's number and SHA-256, written whole after each commit (version 2): a newest commit missing,
cut or replaced stops the run instead of the one before it deciding."""
LAKE_SEGMENTS = "segments"
"""`segments/segment=NAME/`: a run's (or a compaction's) entries, one Parquet file per bucket."""
LAKE_FILTERS = "filters-v2"
"""`filters-v2/segment=NAME/`: a past day's segment's filter (`jobs.manifest.lake_filter`)."""
LAKE_FILTERS_V1 = "filters"
"""The first filter layout's folder (one row a key): no longer read; its folders go once no kept commit names
them."""
LAKE_LEASE = "_lease"
"""The writer lease: one dedup or populate run writes the manifest at a time."""
LAKE_COLUMNS = (("id_hi", "BIGINT"), ("id_lo", "BIGINT"), ("fingerprint", "BIGINT"), ("etl_time", "BIGINT"),
                ("ttl", "BIGINT"))  # fmt: skip
"""The entry's columns: the event id's 128 bits, the fingerprint's 64-bit xxHash, the delivering run's time, expiry."""

# The dedup run folder `OUT/run=ID/`.
GOOD, DUPLICATES, QUARANTINE, BAD = "good", "duplicates", "quarantine", "bad"
SUMMARY = "summary.json"
SUCCESS_MARKER = "_SUCCESS"
# Left in the folder of a completed run that a redo is replacing, until the redo seals: a redo stopped halfway is
# still the redo of a completed run, whose manifest entries later runs may have decided against.
COMPLETED_BEFORE = "_COMPLETED_BEFORE"
# In the dedup output `OUT/`: for each manifest its runs used, the run that completed last (`jobs.dedup.stale`).
LAST_COMPLETED = "_LAST_COMPLETED.json"
# The `run` command's output `OUT/`: its dedup run folders under OUT/deduplicated/, its shred's under OUT/shredded/.
DEDUPLICATED, SHREDDED = "deduplicated", "shredded"

# Where shred (rdb layout) sends its shredding_complete message: the config's `shred.queue`, also checked by cdk/.
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_-]{1,75}\.fifo|[A-Za-z0-9_-]{1,80}")
_SNS_ARN = re.compile(r"arn:aws[a-z-]*:sns:([a-z0-9-]+):\d{12}:(?:[A-Za-z0-9_-]{1,251}\.fifo|[A-Za-z0-9_-]{1,256})")
ALLOWED_QUEUES = (
    "sqs://QUEUE_NAME (an SQS queue name, standard or .fifo) or "
    "sns://arn:aws:sns:REGION:ACCOUNT:TOPIC (an SNS topic ARN, standard or .fifo)"
)


@dataclass(frozen=True, kw_only=True)
class QueueTarget:
    """Where the message goes: an SQS queue (by name) or an SNS topic (by ARN)."""

    service: Literal["sqs", "sns"]
    name: str
    """The queue name or the topic ARN."""
    region: str | None = None
    """The topic's region (from its ARN); None for a queue: the usual AWS settings decide."""

    @property
    def fifo(self) -> bool:
        return self.name.endswith(".fifo")

    @property
    def uri(self) -> str:
        return f"{self.service}://{self.name}"


def parse_queue(uri: str) -> QueueTarget:
    """`sqs://QUEUE_NAME` or `sns://TOPIC_ARN` as a `QueueTarget`.

    Raises:
        InvalidConfigError: anything else; says what was given and what is allowed.
    """
    scheme, _, rest = uri.partition("://")
    if scheme == "sqs" and _QUEUE_NAME.fullmatch(rest):
        return QueueTarget(service="sqs", name=rest)
    if scheme == "sns" and (arn := _SNS_ARN.fullmatch(rest)):
        return QueueTarget(service="sns", name=rest, region=arn[1])
    raise InvalidConfigError(f"loader queue: given {json.dumps(uri)}; allowed: {ALLOWED_QUEUES}")


# Spark's warnings expected in our plans: silenced by jobs/runtime/log4j2.properties locally, and by the EMR
# application's log4j2 classifications (cdk/).
LOG4J2_CONFIG = Path(__file__).parent / "runtime" / "log4j2.properties"
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
