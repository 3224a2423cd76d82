"""What the shred formats do with each entity type of a run: TSV (columns from its schema), JSON, skipped, or
failed (its schema is not found or cannot be flattened: the events holding it become `loader_iglu_error` bad rows;
a registry outage is no such answer: the lookup raises RegistryOutageError and the run stops).

Decided on the driver, once per run, from the run's distinct entity types: each schema is looked up once (the
resolver caches), then the per-row work is Spark expressions built from the plan.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from pyspark.sql import Column
from pyspark.sql import functions as F

from jobs.config import ShredConfig
from jobs.config import read_text as config_read_text
from jobs.errors import InvalidArgumentError, InvalidConfigError
from jobs.iglu.criterion import SchemaCriterion
from jobs.iglu.resolver import LOOKUP_DEADLINE_SECONDS, InvalidSchema, Resolver, SchemaKey
from jobs.iglu.tsv import TsvColumn, UnusableSchemaError, tsv_columns

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShredPlan:
    """Per Iglu URI: its TSV columns, or its failure (as `loader_iglu_error` failure JSON); JSON otherwise."""

    tsv: dict[str, list[TsvColumn]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    """URI -> the failure object's compact JSON."""
    skip: tuple[SchemaCriterion, ...] = ()
    notes: tuple[str, ...] = ()
    """One line per failed schema, for the log and the summary."""


def read_text(path: str) -> str | None:
    """A file's text, local or `s3://bucket/key` (read on the driver); None when it does not exist. Another
    failure (e.g. S3 access denied) is an OSError: an outage of that repository, asked again until the deadline."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return config_read_text(path.removeprefix("file://") if path.startswith("file://") else path)
    except FileNotFoundError:
        return None
    except (BotoCoreError, ClientError) as err:
        raise OSError(f"{path}: {err}") from err


def open_resolver(source: str, lookup_deadline_seconds: int = LOOKUP_DEADLINE_SECONDS) -> Resolver:
    """The resolver of an Iglu resolver config file (local or s3://).

    Raises:
        InvalidConfigError: the file does not exist or is not a valid resolver config.
    """
    try:
        text = read_text(source)
    except OSError as err:
        raise InvalidConfigError(f"--iglu-config {source}: cannot be read: {err}") from None
    if text is None:
        raise InvalidConfigError(f"--iglu-config {source}: no such file")
    return Resolver.from_config(text, source, read_text, lookup_deadline_seconds=lookup_deadline_seconds)


def skip_criteria(config: ShredConfig) -> tuple[SchemaCriterion, ...]:
    """`shred.skip` parsed (validated when the config was loaded)."""
    return tuple(SchemaCriterion.parse(text) for text in config.skip)


def needs_resolver(output_format: str, config: ShredConfig) -> bool:
    """Whether a shred run must look schemas up: TSV shredding needs each TSV type's columns."""
    return output_format == "shred-tsv" or (output_format == "shred" and bool(config.tsv))


def check_resolver(output_format: str, config: ShredConfig) -> Resolver | None:
    """The run's resolver (None without `iglu_config`), failing fast when the format needs one and none is set.

    Raises:
        InvalidArgumentError: TSV shredding asked for without a resolver config.
        InvalidConfigError: the resolver config is unusable.
    """
    if config.iglu_config is None:
        if needs_resolver(output_format, config):
            what = "--format shred-tsv" if output_format == "shred-tsv" else "shred.tsv"
            raise InvalidArgumentError(
                f"{what} needs the entities' schemas; allowed: give an Iglu resolver config with --iglu-config FILE "
                "or shred.iglu_config"
            )
        return None
    return open_resolver(config.iglu_config, config.iglu_lookup_deadline_seconds)


def plan_types(
    uris: Iterable[str], output_format: str, config: ShredConfig, resolver: Resolver | None, run_time: datetime
) -> ShredPlan:
    """The plan for a run's entity types (Iglu URIs of its good events' entities).

    A type is TSV when the format is `shred-tsv` and no `shred.json` criterion matches it, or the format is
    `shred` and a `shred.tsv` criterion matches it; skipped when a `shred.skip` criterion matches (skip wins).
    `lastAttempt` in a failure is the run's time, so a rerun writes the same bad rows.
    """
    skip = skip_criteria(config)
    as_json = [SchemaCriterion.parse(text) for text in config.json]
    as_tsv = [SchemaCriterion.parse(text) for text in config.tsv]
    last_attempt = last_attempt_text(run_time)
    tsv: dict[str, list[TsvColumn]] = {}
    failures: dict[str, str] = {}
    notes: list[str] = []
    for uri in sorted(set(uris)):
        key = SchemaKey.parse(uri)
        parts = (key.vendor, key.name, key.format, key.version)
        if any(criterion.matches(*parts) for criterion in skip):
            continue
        wanted = (
            not any(criterion.matches(*parts) for criterion in as_json)
            if output_format == "shred-tsv"
            else any(criterion.matches(*parts) for criterion in as_tsv)
        )
        if not wanted:
            continue
        assert resolver is not None  # check_resolver made sure
        found = resolver.lookup(key)
        if isinstance(found, dict):
            try:
                tsv[uri] = tsv_columns(found)
                continue
            except UnusableSchemaError as err:
                found = InvalidSchema(key, f"cannot be flattened to TSV columns: {err}")
        failures[uri] = json.dumps(found.failure_json(last_attempt), separators=(",", ":"))
        notes.append(found.describe())
        log.warning("iglu: %s", found.describe())
    return ShredPlan(tsv, failures, skip, tuple(notes))


def last_attempt_text(run_time: datetime) -> str:
    """A failure's `lastAttempt`: the run's time (not the clock's), so a rerun writes the same bad rows."""
    return run_time.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def is_skipped(uri: Column, skip: tuple[SchemaCriterion, ...]) -> Column:
    """Whether an entity's Iglu URI matches a skip criterion."""
    skipped = F.lit(False)
    for criterion in skip:
        skipped = skipped | uri.rlike(criterion.regex())
    return skipped


def iglu_failures(uris: Column, plan: ShredPlan) -> Column:
    """The `loader_iglu_error` failure array (JSON text) of an event from its entities' URIs; null when none fails."""
    if not plan.failures:
        return F.lit(None).cast("string")
    texts = F.create_map(*(F.lit(part) for uri, text in sorted(plan.failures.items()) for part in (uri, text)))
    failed = F.array_distinct(F.array_compact(F.transform(uris, lambda uri: F.try_element_at(texts, uri))))
    return F.when(F.size(failed) > 0, F.concat(F.lit("["), F.array_join(failed, ","), F.lit("]")))
