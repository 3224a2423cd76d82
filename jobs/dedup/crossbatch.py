"""Cross-batch dedup: ask the events manifest about every event that survived in-batch natural dedup.

The only per-row Python in the jobs, because it is I/O: calls go out from the executors, per partition,
through one manifest client per Python worker with bounded concurrency. The answers are persisted and
materialized once, so each (event_id, fingerprint) costs one put however often later steps read them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict
from datetime import datetime
from typing import Any

from pyspark import AccumulatorParam, StorageLevel
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.dedup.inbatch import ID_SEEN_EARLIER, SEEN_EARLIER
from jobs.manifest import Manifest, ManifestClient, ManifestStats
from jobs.manifest.base import SECONDS_PER_DAY

RESULT_SCHEMA = "event_key string, fingerprint string, cross_batch string"

# One client per Python worker process and manifest: Spark reuses workers across tasks.
_clients: dict[Manifest, ManifestClient] = {}


def _client_for(manifest: Manifest) -> ManifestClient:
    if manifest not in _clients:
        _clients[manifest] = manifest.client()
    return _clients[manifest]


class _StatsParam(AccumulatorParam[ManifestStats]):
    def zero(self, value: ManifestStats) -> ManifestStats:
        return ManifestStats()

    def addInPlace(self, value1: ManifestStats, value2: ManifestStats) -> ManifestStats:
        return value1.add(value2)


def check_and_set(
    survivors: DataFrame, manifest: Manifest, run_time: datetime, ttl_days: int, detect_synthetic: bool
) -> tuple[DataFrame, Any]:
    """Record every distinct (event_key, fingerprint) in the manifest and say which an earlier run delivered.

    Returns the persisted, materialized answers (`RESULT_SCHEMA`: `cross_batch` is SEEN_EARLIER, ID_SEEN_EARLIER
    or null) and the accumulator holding the summed `ManifestStats`. The caller unpersists the answers.
    """
    spark = survivors.sparkSession
    etl_time = int(run_time.timestamp())
    ttl = etl_time + ttl_days * SECONDS_PER_DAY
    stats = spark.sparkContext.accumulator(ManifestStats(), _StatsParam())
    ids = survivors.groupBy("event_key").agg(F.sort_array(F.collect_set("fingerprint")).alias("fingerprints"))

    def partition(rows: Iterable[Row]) -> Iterator[tuple[str, str, str | None]]:
        client = _client_for(manifest)
        before = ManifestStats(**asdict(client.stats))
        checked = client.check_ids(
            ((row["event_key"], list(row["fingerprints"])) for row in rows), etl_time, ttl, detect_synthetic
        )
        for event_id, fingerprints, result in checked:
            delivered_before = result.earlier_other or bool(result.seen)
            for fingerprint in fingerprints:
                if fingerprint in result.seen:
                    yield event_id, fingerprint, SEEN_EARLIER
                elif detect_synthetic and delivered_before:
                    yield event_id, fingerprint, ID_SEEN_EARLIER
                else:
                    yield event_id, fingerprint, None
        stats.add(ManifestStats(**{k: v - getattr(before, k) for k, v in asdict(client.stats).items()}))

    answers = spark.createDataFrame(ids.rdd.mapPartitions(partition), RESULT_SCHEMA).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    answers.count()  # materialize now: the manifest is called once, here
    manifest.settle()
    return answers, stats
