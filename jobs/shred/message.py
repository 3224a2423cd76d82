"""The message that tells Snowplow RDB Loader a shredded run folder is ready to load: `shredding_complete` 2-0-1.

RDB Loader 6.x loads a folder only when this message reaches its queue, so the encoding follows upstream's
`LoaderMessage` encoders field for field (key order, enum spellings, `Instant.toString` timestamps): what
`LoaderMessage.fromString` decodes is all that counts. No Spark here: the driver sends it once the run folder
is written, before `_SUCCESS`, so a run whose message was not sent is rerun and sends it then.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlparse

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from jobs.contract import parse_queue
from jobs.errors import LoaderMessageError

# The vendor is `...storage.rdbloader` (what the loader matches), although iglu-central files the schema under
# `com.snowplowanalytics.snowplow.storage`.
SCHEMA_URI = "iglu:com.snowplowanalytics.snowplow.storage.rdbloader/shredding_complete/jsonschema/2-0-1"
PROCESSOR_ARTIFACT = "winnow"
# Upstream's transformer sends with this group id; FIFO targets need one, standard ones refuse it.
MESSAGE_GROUP_ID = "shredding"
MAX_ATTEMPTS = 10

Transformation = Literal["SHREDDED", "WIDEROW"]
Entity = Literal["CONTEXT", "SELF_DESCRIBING_EVENT"]
ShreddedFormat = Literal["JSON", "TSV"]
WideRowFormat = Literal["JSON", "PARQUET"]

# Upstream's order of entities (`wideRowTypeOrdering`): contexts first.
_ENTITY_ORDER = {"CONTEXT": 0, "SELF_DESCRIBING_EVENT": 1}
_SCHEMA_KEY = re.compile(r"iglu:([^/]+)/([^/]+)/([^/]+)/(\d+)-(\d+)-(\d+)")
_COLLECTOR_TSTAMP = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?")
# RFC 3986 sub-delims, ":" and "@": allowed in a URI path as they are (`Path.as_uri` would escape "=").
_URI_PATH_DELIMS = "!$&'()*+,;=:@"


@dataclass(frozen=True, kw_only=True)
class LoaderType:
    """One entity type of the run, as the loader needs it to create or migrate its table or column."""

    schema_key: str
    """Iglu URI, e.g. `iglu:com.acme/x/jsonschema/1-0-0`."""
    entity: Entity
    format: ShreddedFormat | None = None
    """The shredded file format (SHREDDED types only; None for WIDEROW types)."""

    def __post_init__(self) -> None:
        if not _SCHEMA_KEY.fullmatch(self.schema_key):
            raise ValueError(f"schema_key: given {self.schema_key!r}; allowed: iglu:VENDOR/NAME/FORMAT/M-R-A")

    def sort_key(self) -> tuple[Any, ...]:
        """Upstream's ordering: entity (contexts first), then vendor, name, format and version numerically."""
        match = _SCHEMA_KEY.fullmatch(self.schema_key)
        assert match is not None  # checked in __post_init__
        vendor, name, fmt, *version = match.groups()
        return (_ENTITY_ORDER[self.entity], vendor, name, fmt, *map(int, version), self.format or "")

    def encoded(self) -> dict[str, str]:
        """Upstream's `Shredded.Type` (with format) or `WideRow.Type` (without)."""
        if self.format is None:
            return {"schemaKey": self.schema_key, "snowplowEntity": self.entity}
        return {"schemaKey": self.schema_key, "format": self.format, "snowplowEntity": self.entity}


def shredding_complete(
    *,
    base: str,
    transformation: Transformation,
    file_format: WideRowFormat | None = None,
    types: Iterable[LoaderType],
    job_started: datetime,
    job_completed: datetime,
    min_tstamp: str | None,
    max_tstamp: str | None,
    compression: Literal["gzip", "none"],
    processor_version: str,
    good: int | None,
    bad: int | None,
    processor_artifact: str = PROCESSOR_ARTIFACT,
) -> dict[str, Any]:
    """The self-describing `shredding_complete` message of one run folder, keys in upstream's order.

    Args:
        base: the run folder's URI, ending in "/" (see `base_uri`).
        transformation: SHREDDED (types carry their format) or WIDEROW (types do not; `file_format` is set).
        file_format: the wide-row file format; None for SHREDDED.
        types: the run's entity types; de-duplicated and sorted as `LoaderType.sort_key` says, so the same
            run always gives the same message.
        job_started: when the job started (timezone-aware; rendered to the millisecond).
        job_completed: when the job finished (timezone-aware; rendered to the millisecond).
        min_tstamp: the earliest collector timestamp, `yyyy-MM-dd HH:mm:ss[.fraction]` UTC; None when unknown.
        max_tstamp: the latest collector timestamp, likewise.
        compression: the output files' compression.
        processor_version: Winnow's version.
        good: good events in the run; None (with `bad`) makes `count` null, "could not be counted".
        bad: bad rows in the run.
        processor_artifact: the processor's name; only upstream's examples need another.

    Returns:
        `{"schema": SCHEMA_URI, "data": {...}}`, ready for `message_text`.

    Raises:
        ValueError: the types or file format do not fit the transformation, or a timestamp is malformed.
    """
    unique = sorted(set(types), key=LoaderType.sort_key)
    shredded = transformation == "SHREDDED"
    if shredded == (file_format is not None) or any(shredded == (t.format is None) for t in unique):
        raise ValueError(
            f"{transformation}: file_format {file_format!r}, type formats {sorted({str(t.format) for t in unique})}; "
            "allowed: SHREDDED with a format on every type and no file_format, "
            "WIDEROW with a file_format and no type formats"
        )
    types_info: dict[str, Any] = {"transformation": transformation}
    if file_format is not None:
        types_info["fileFormat"] = file_format
    types_info["types"] = [t.encoded() for t in unique]
    return {
        "schema": SCHEMA_URI,
        "data": {
            "base": base,
            "typesInfo": types_info,
            "timestamps": {
                "jobStarted": instant_text(job_started),
                "jobCompleted": instant_text(job_completed),
                "min": None if min_tstamp is None else collector_instant(min_tstamp),
                "max": None if max_tstamp is None else collector_instant(max_tstamp),
            },
            "compression": compression.upper(),
            "processor": {"artifact": processor_artifact, "version": processor_version},
            "count": None if good is None or bad is None else {"good": good, "bad": bad},
        },
    }


def message_text(message: dict[str, Any]) -> str:
    """The message as sent: compact JSON (circe's `noSpaces`), keys in order, non-ASCII kept as is."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


def instant_text(moment: datetime) -> str:
    """An aware datetime as Java's `Instant.toString`, truncated to the millisecond: `2020-09-17T11:32:21.145Z`."""
    if moment.utcoffset() is None:
        raise ValueError(f"given the naive datetime {moment.isoformat()}; allowed: a timezone-aware datetime")
    utc = moment.astimezone(UTC).replace(tzinfo=None)
    return _instant(utc.replace(microsecond=0).isoformat(), utc.microsecond // 1000 * 1_000_000)


def collector_instant(text: str) -> str:
    """A collector timestamp (`2014-05-29 18:16:35.9671`, UTC) as `Instant.toString`: `2014-05-29T18:16:35.967100Z`."""
    match = _COLLECTOR_TSTAMP.fullmatch(text)
    if match is None:
        raise ValueError(f"given the timestamp {text!r}; allowed: yyyy-MM-dd HH:mm:ss with up to 9 fraction digits")
    seconds = f"{match[1]}T{match[2]}"
    # The same ValueError for a day or hour out of range. Year 0 is a year to java.time (proleptic ISO, a leap year
    # as 2000 is) but not to Python's datetime: checked as 2000.
    datetime.fromisoformat(f"2000{seconds[4:]}" if seconds.startswith("0000") else seconds)
    return _instant(seconds, int((match[3] or "0").ljust(9, "0")))


def _instant(seconds: str, nanos: int) -> str:
    """`Instant.toString`'s fraction: none when zero, else the fewest of 3, 6 or 9 digits that hold it."""
    if nanos == 0:
        return f"{seconds}Z"
    digits = f"{nanos:09d}"
    while digits.endswith("000"):
        digits = digits[:-3]
    return f"{seconds}.{digits}Z"


def base_uri(path: str) -> str:
    """The run folder as the loader's `base`: an `s3://` URI (from s3, s3a or s3n) or a `file://` URI, with "/"."""
    parsed = urlparse(path)
    if parsed.scheme in ("s3", "s3a", "s3n"):
        uri = "s3://" + path.split("://", 1)[1]
    elif parsed.scheme in ("", "file"):
        local = Path(path.removeprefix("file://").removeprefix("file:")).resolve()
        uri = "file://" + quote(str(local), safe="/" + _URI_PATH_DELIMS)  # `run=X` stays readable
    else:
        uri = path
    return uri if uri.endswith("/") else uri + "/"


def send(queue_uri: str, body: str) -> str:
    """Send `body` to the queue or topic and return its message id.

    FIFO targets get upstream's group id and a deduplication id derived from the body, so a FIFO queue or
    topic works without content-based deduplication too; standard targets refuse both and get neither.

    Raises:
        InvalidConfigError: `queue_uri` is not a queue or topic (see `parse_queue`).
        LoaderMessageError: sending failed (no such target, access denied, no region or credentials,
            endpoint unreachable), after botocore's adaptive retries.
    """
    target = parse_queue(queue_uri)
    fifo = {"MessageGroupId": MESSAGE_GROUP_ID, "MessageDeduplicationId": hashlib.sha256(body.encode()).hexdigest()}
    extra = fifo if target.fifo else {}
    config = Config(retries={"mode": "adaptive", "total_max_attempts": MAX_ATTEMPTS})
    try:
        if target.service == "sqs":
            sqs = boto3.client("sqs", config=config)
            url = sqs.get_queue_url(QueueName=target.name)["QueueUrl"]
            return str(sqs.send_message(QueueUrl=url, MessageBody=body, **extra)["MessageId"])
        sns = boto3.client("sns", region_name=target.region, config=config)
        return str(sns.publish(TopicArn=target.name, Message=body, **extra)["MessageId"])
    except (BotoCoreError, ClientError) as err:
        detail = " ".join(str(err).split())
        raise LoaderMessageError(
            f"loader message to {target.uri} not sent: {detail}; the run folder has no _SUCCESS, "
            "so a rerun of the same run id sends it again"
        ) from err
