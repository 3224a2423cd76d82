"""What the shred job's writers (rdb/legacy lines and wide rows) take, `ShredTarget`, and give back, `Written`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from jobs.config import Compression, JobConfig, ShredFormat
from jobs.config import ShredLayout as Layout
from jobs.contract import Progress
from jobs.fs.run_folder import RunFolder
from jobs.iglu.resolver import Resolver
from jobs.shred import message

# The decided lines, when TSV shredding or the wide rows read them more than once (types, then lines), are kept on
# disk only: a row holds the line, its fields and its entities (~4 KB), and Spark's in-memory cache of such rows ran
# the 4 GB local driver out of heap (1M events: OutOfMemoryError with MEMORY_AND_DISK for shred-tsv and
# widerow-parquet alike).
DECIDED_STORAGE = StorageLevel.DISK_ONLY


@dataclass(frozen=True)
class ShredTarget:
    """The decided lines of a shred run (`shred_events`) and where and how to write them."""

    folder: RunFolder
    decided: DataFrame
    run_time: datetime
    """The run's time (from its id): the failure time of its bad rows and Iglu failures."""
    config: JobConfig
    output_format: ShredFormat
    layout: Layout
    resolver: Resolver | None
    """The Iglu resolver, when the format needs the schemas (TSV shredding, typed wide-row Parquet)."""
    progress: Progress

    @property
    def compression(self) -> Compression:
        """The text outputs' compression (`output.compression`)."""
        return self.config.output.compression


@dataclass(frozen=True)
class Written:
    """What a shred run wrote, for its summary and the loader's message."""

    good: int
    bad: int
    shredded_types: dict[str, int]
    """Entity lines per `vendor/name/format/version`."""
    loader_types: list[message.LoaderType]
    """Each entity type with the kind of entity it is (context or self-describing event)."""
    min_tstamp: str | None
    max_tstamp: str | None
    """The earliest and latest collector_tstamp of the good events (as written; null without good events)."""
    iglu_bad: int = 0
    """Of `bad`: the events whose entity schemas could not be resolved (`loader_iglu_error` rows)."""
    skipped_entities: int = 0
    """Entities of good events not written: their type is on the `shred.skip` list."""
    iglu_notes: tuple[str, ...] = ()
    """One line per schema that could not be resolved or used."""


def loader_type_of(type_key: str, shredded_format: str | None) -> message.LoaderType:
    """The loader's type of a `type_key` (`ENTITY<TAB>iglu:…`, see `rdb_outputs`) in `shredded_format`."""
    entity, schema_key = type_key.split("\t")
    return message.LoaderType(schema_key=schema_key, entity=entity, format=shredded_format)  # type: ignore[arg-type]
