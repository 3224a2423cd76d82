"""The jobs' configuration: typed, validated, loaded from one JSON file (`--config FILE`).

Every key has a default here, so a file holds only what differs; `configs/README.md` documents each key.
An unknown key or a value of the wrong type or range is an `InvalidConfigError` that names the key,
what was given and what is allowed.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from jobs.contract import parse_queue
from jobs.enriched.fields import DEFAULT_FINGERPRINT_FIELDS, FIELD_INDEX
from jobs.errors import InvalidConfigError

SyntheticStrategy = Literal["reid", "quarantine", "keep-first", "keep-last", "drop", "off"]
SYNTHETIC_STRATEGIES: tuple[str, ...] = get_args(SyntheticStrategy)
Compression = Literal["none", "gzip"]
ShredFormat = Literal["shred", "shred-tsv", "widerow", "widerow-parquet"]
SHRED_FORMATS: tuple[str, ...] = get_args(ShredFormat)
# rdb: Snowplow's RDB transformer 6.x conventions (loader_parsing_error bad rows); legacy: the R30-era shapes.
Layout = Literal["rdb", "legacy"]
LAYOUTS: tuple[str, ...] = get_args(Layout)
ShredLayout = Layout
SHRED_LAYOUTS = LAYOUTS


@dataclass(frozen=True)
class DedupConfig:
    """How the dedup job decides which copies to keep."""

    synthetic: SyntheticStrategy = "reid"
    """What to do with events that share an event_id but not a fingerprint."""
    fingerprint_fields: tuple[str, ...] = DEFAULT_FINGERPRINT_FIELDS
    """Fields hashed into a fingerprint when an event has no event_fingerprint."""

    def __post_init__(self) -> None:
        unknown = [name for name in self.fingerprint_fields if name not in FIELD_INDEX]
        if unknown:
            raise InvalidConfigError(
                f"dedup.fingerprint_fields: {unknown} are not enriched-event fields; "
                "allowed: the field names of a Snowplow enriched event (jobs/enriched/fields.py)"
            )
        if not self.fingerprint_fields:
            raise InvalidConfigError("dedup.fingerprint_fields: given an empty list; allowed: one field or more")
        if "event_id" in self.fingerprint_fields or "event_fingerprint" in self.fingerprint_fields:
            raise InvalidConfigError(
                "dedup.fingerprint_fields: event_id and event_fingerprint cannot be part of the fingerprint"
            )


@dataclass(frozen=True)
class ManifestConfig:
    """The events manifest: cross-batch dedup against what earlier runs delivered."""

    uri: str | None = None
    """sqlite:PATH, dynamodb://TABLE or lake:PATH; null: in-batch dedup only. `--manifest` overrides it."""
    ttl_days: int = 180
    """How long a delivered event is remembered."""
    cross_batch_synthetic: bool = True
    """Also look up other fingerprints of an id (one Query per event id): cross-batch synthetic dedup."""
    concurrency: int = 16
    """DynamoDB requests in flight per Spark task."""
    max_attempts: int = 10
    """DynamoDB attempts per request, the first included (botocore adaptive retry mode)."""
    throttle_patience_seconds: int = 3600
    """How long one DynamoDB request may stay throttled or keep meeting transient server errors (500, 503), waited
    out after botocore's attempts, before the run stops."""
    buckets: int = 64
    """Lake manifest: hash buckets of a manifest `--create` makes (then fixed): each bucket is one task of the
    check and one file per segment; aim for 2-50 million live entries a bucket."""

    def __post_init__(self) -> None:
        limits = (("ttl_days", 1, 36_500), ("concurrency", 1, 256), ("max_attempts", 1, 100),
                  ("throttle_patience_seconds", 1, 86_400), ("buckets", 1, 100_000))  # fmt: skip
        for name, low, high in limits:
            value = getattr(self, name)
            if not low <= value <= high:
                raise InvalidConfigError(
                    f"manifest.{name}: given {value}; allowed: a whole number from {low} to {high}"
                )


@dataclass(frozen=True)
class InputConfig:
    """How input files are read."""

    skip_unreadable: bool = False
    """Skip input files that do not read whole (corrupt gzip, unreadable) and list them in summary.json; by
    default such a file stops the run before it writes anything."""
    since: str | None = None
    """Incremental runs: read only files whose time (from `run=…/` or `YYYY/MM/DD/HH/` in the path, else the
    modification time) is at or after this ISO 8601 time (UTC unless an offset is given). `--since` overrides."""
    until: str | None = None
    """Incremental runs: only files whose time is before this. `--until` overrides."""
    max_files: int | None = None
    """Incremental runs: at most this many files per run (oldest first); a backlog takes several runs."""
    max_bytes: int | None = None
    """Incremental runs: at most this many bytes per run (at least one file is always read)."""
    skip_changed: bool = False
    """Incremental runs: leave out, and list in summary.json, files that changed after a run read them; by
    default such a file stops the run before it writes anything."""

    def __post_init__(self) -> None:
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None:
                try:
                    datetime.fromisoformat(value)
                except ValueError:
                    raise InvalidConfigError(
                        f"input.{name}: given {json.dumps(value)}; allowed: an ISO 8601 date or time, "
                        "e.g. 2026-11-01 or 2026-11-01T06:00:00Z"
                    ) from None
        for name in ("max_files", "max_bytes"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InvalidConfigError(f"input.{name}: given {value}; allowed: a whole number of 1 or more, or null")


@dataclass(frozen=True)
class OutputConfig:
    """How output files are written."""

    compression: Compression = "none"
    """Compression of the text outputs (good, duplicates, quarantine, bad, the shredded files)."""
    queue: str | None = None
    """Where shred (rdb layout) sends its `shredding_complete` message for RDB Loader: `sqs://QUEUE_NAME` or
    `sns://TOPIC_ARN`; null: the message is only written to the run folder."""

    def __post_init__(self) -> None:
        if self.queue is not None:
            parse_queue(self.queue)  # raises InvalidConfigError naming what is allowed


@dataclass(frozen=True)
class ShredConfig:
    """What the shred job writes (`--format` and `--layout` override)."""

    format: ShredFormat = "shred"
    """shred: the atomic events and one JSON line per entity, a folder per type (RDB Loader's Redshift loader);
    shred-tsv: the same with entities as TSV lines whose columns come from their schemas (needs `iglu_config`);
    widerow: one JSON line per event (its Snowflake and Databricks loaders); widerow-parquet: the same in Parquet,
    entity columns typed from their schemas when `iglu_config` is set."""
    layout: ShredLayout = "rdb"
    """rdb: what RDB Loader 6.x reads, with the shredding_complete message; legacy: the R30-era RDB Shredder's.
    Also the shape of dedup's bad rows (rdb: `loader_parsing_error`, as shred's; legacy: `{line, errors, …}`)."""
    iglu_config: str | None = None
    """An Iglu resolver config (`iglu:com.snowplowanalytics.iglu/resolver-config/jsonschema/1-0-*`), a local path
    or s3:// URI; `--iglu-config` overrides. Needed for TSV shredding and typed wide-row Parquet."""
    iglu_lookup_deadline_seconds: int = 60
    """How long one schema lookup keeps asking a registry that does not answer (refused, timed out, 5xx, 429)
    before the run stops with nothing sealed; only a "not found" answer makes `loader_iglu_error` bad rows."""
    tsv: tuple[str, ...] = ()
    """Schema criteria (`iglu:V/N/F/M-R-A`, `*` for M, R or A) shredded as TSV by `--format shred`."""
    json: tuple[str, ...] = ()
    """Schema criteria shredded as JSON by `--format shred-tsv`."""
    skip: tuple[str, ...] = ()
    """Schema criteria whose entities the shred formats do not write (the wide rows keep them)."""

    def __post_init__(self) -> None:
        from jobs.iglu.criterion import SchemaCriterion

        if not 1 <= self.iglu_lookup_deadline_seconds <= 3600:
            raise InvalidConfigError(
                f"shred.iglu_lookup_deadline_seconds: given {self.iglu_lookup_deadline_seconds}; "
                "allowed: a whole number from 1 to 3600"
            )
        for name in ("tsv", "json", "skip"):
            for i, text in enumerate(getattr(self, name)):
                try:
                    SchemaCriterion.parse(text)
                except ValueError as err:
                    raise InvalidConfigError(f"shred.{name}[{i}]: {err}") from None


@dataclass(frozen=True)
class SparkConfig:
    """The Spark session, when the job starts it (locally). Under spark-submit the submit settings win."""

    master: str = "local[*]"
    """Spark master used when none is set by spark-submit."""
    conf: dict[str, str] = field(default_factory=dict)
    """Extra Spark settings, e.g. {"spark.driver.memory": "4g"}."""
    small_input_mb: int = 64
    """An `--input` of this many MiB or less (a compressed file counted unpacked, about ten times its size) runs with
    the session's small-input settings (jobs/runtime/session.py); 0: never."""

    def __post_init__(self) -> None:
        bad = [key for key in self.conf if not key.startswith("spark.")]
        if bad:
            raise InvalidConfigError(f"spark.conf: keys {bad} are not Spark settings; allowed: keys starting 'spark.'")
        if not 0 <= self.small_input_mb <= 1_000_000:
            raise InvalidConfigError(
                f"spark.small_input_mb: given {self.small_input_mb}; allowed: a whole number from 0 to 1000000"
            )


@dataclass(frozen=True)
class JobConfig:
    """All settings of the jobs."""

    dedup: DedupConfig = field(default_factory=DedupConfig)
    input: InputConfig = field(default_factory=InputConfig)
    manifest: ManifestConfig = field(default_factory=ManifestConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    shred: ShredConfig = field(default_factory=ShredConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)


def load_config(path: str | Path | None) -> JobConfig:
    """Load and validate a job config file; `None` gives the built-in defaults.

    Raises:
        InvalidConfigError: the file is missing, is not JSON, or holds an unknown key or a bad value.
    """
    if path is None:
        return JobConfig()
    source = str(path)
    try:
        data = json.loads(read_text(source))
    except FileNotFoundError:
        raise InvalidConfigError(f"config file {source} does not exist") from None
    except json.JSONDecodeError as err:
        raise InvalidConfigError(f"config file {source} is not valid JSON: {err}") from None
    except RecursionError:
        raise InvalidConfigError(f"config file {source} nests too deeply to be a job config") from None
    try:
        config = config_from_dict(JobConfig, data)
    except InvalidConfigError as err:
        raise InvalidConfigError(f"{source}: {err}") from None
    except RecursionError:
        raise InvalidConfigError(f"config file {source} nests too deeply to be a job config") from None
    iglu_config = config.shred.iglu_config
    if iglu_config is not None and not _is_absolute(iglu_config):
        # relative to the config file: a deployed config.json names the resolver config deployed beside it
        resolved = relative_to(source, iglu_config)
        config = dataclasses.replace(config, shred=dataclasses.replace(config.shred, iglu_config=resolved))
    return config


def _is_absolute(path: str) -> bool:
    return "://" in path or path.startswith(("/", "file:"))


def relative_to(source: str, path: str) -> str:
    """`path` relative to the folder of the file `source` (a local path or an `s3://` URI)."""
    if "://" in source:
        folder = source.rsplit("/", 1)[0]
        parts = folder.split("/")
        for part in path.split("/"):
            if part == "..":
                parts.pop()
            elif part not in ("", "."):
                parts.append(part)
        return "/".join(parts)
    return str((Path(source).parent / path).resolve())


def read_text(source: str) -> str:
    """A local file, or an `s3://bucket/key` object (how EMR runs get the config, and the Iglu resolver config and
    schemas, deployed with the code). Raises FileNotFoundError when it does not exist."""
    if source.startswith("s3://"):
        import boto3

        bucket, _, key = source.removeprefix("s3://").partition("/")
        s3 = boto3.client("s3")
        try:
            body: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except s3.exceptions.NoSuchKey:
            raise FileNotFoundError(source) from None
        return body.decode("utf-8")
    return Path(source).read_text(encoding="utf-8")


T = typing.TypeVar("T")


def config_from_dict(cls: type[T], data: Any, where: str = "") -> T:
    """Build the dataclass `cls` from parsed JSON, checking every key and value against its type hints."""
    if not isinstance(data, dict):
        raise InvalidConfigError(f"{where or 'the config'}: expected an object, given {json.dumps(data)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - fields)
    if unknown:
        raise InvalidConfigError(
            f"unknown key {_join(where, unknown[0])!r}; allowed keys{' in ' + where if where else ''}: "
            + ", ".join(sorted(fields))
        )
    values = {name: _convert(hints[name], value, _join(where, name)) for name, value in data.items()}
    return cls(**values)


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _convert(hint: Any, value: Any, where: str) -> Any:
    origin = get_origin(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return config_from_dict(hint, value, where)
    if origin is Literal:
        allowed = get_args(hint)
        if value not in allowed:
            raise InvalidConfigError(f"{where}: given {json.dumps(value)}; allowed: {', '.join(allowed)}")
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise InvalidConfigError(f"{where}: given {json.dumps(value)}; allowed: a list")
        (item_hint, _) = get_args(hint)
        return tuple(_convert(item_hint, item, f"{where}[{i}]") for i, item in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise InvalidConfigError(f"{where}: given {json.dumps(value)}; allowed: an object")
        (_, value_hint) = get_args(hint)
        return {key: _convert(value_hint, item, f"{where}.{key}") for key, item in value.items()}
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in get_args(hint):
            return None
        (inner,) = [arg for arg in get_args(hint) if arg is not type(None)]
        return _convert(inner, value, where)
    # bool is a subclass of int: check it explicitly so `true` is no number and `1` no boolean.
    if hint is bool and isinstance(value, bool):
        return value
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is str and isinstance(value, str):
        return value
    kind = {bool: "true or false", int: "a whole number", str: "a string"}.get(hint, str(hint))
    raise InvalidConfigError(f"{where}: given {json.dumps(value)}; allowed: {kind}")
