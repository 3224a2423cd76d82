"""The per-request backends (SQLite, DynamoDB): a check-and-set call per distinct pair, from the executors.

The only per-row Python in the jobs, because it is I/O: calls go out per partition, through one manifest client
per Python worker with bounded concurrency. The answers are persisted and materialized once, so each
(event_id, fingerprint) costs one put however often later steps read them; the pairs are recorded as they are
answered, so `record()` has only a redo's leftovers to remove: the pairs an earlier attempt of the run key
recorded and this attempt's batch does not have (its input shrank), found by the run key stored with each entry.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import asdict

from pyspark import AccumulatorParam, StorageLevel
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from jobs.manifest.base import (
    ANSWERS_SCHEMA,
    ID_SEEN_EARLIER,
    SEEN_EARLIER,
    Manifest,
    ManifestCheck,
    ManifestClient,
    ManifestRun,
    ManifestStats,
)  # fmt: skip

# One client per Python worker process and manifest: Spark reuses workers across tasks.
_clients: dict[Manifest, ManifestClient] = {}


class _StatsParam(AccumulatorParam[ManifestStats]):
    def zero(self, value: ManifestStats) -> ManifestStats:
        return ManifestStats()

    def addInPlace(self, value1: ManifestStats, value2: ManifestStats) -> ManifestStats:
        return value1.add(value2)


class RequestManifest(Manifest):
    """A manifest answered one (id, fingerprints) at a time by a client in each Python worker."""

    @abstractmethod
    def client(self) -> ManifestClient:
        """A new client; called once per Python worker."""

    @abstractmethod
    def own_pairs(self, run_key: str, legacy_etl_time: int | None = None) -> list[tuple[str, str]]:
        """The (event id, fingerprint) of every entry recorded under `run_key` (on the driver); with
        `legacy_etl_time`, also the entries of that second recorded without a run key (before run keys)."""

    @abstractmethod
    def remove_pairs(self, run_key: str, pairs: list[tuple[str, str]], legacy_etl_time: int | None = None) -> int:
        """Remove those of `pairs` still recorded under `run_key` (or, with `legacy_etl_time`, without a key at that
        second); how many were removed."""

    def _leftovers(self, pairs: DataFrame, run: ManifestRun) -> list[tuple[str, str]]:
        own = self.own_pairs(run.run_key)
        if not own:
            return []
        earlier = pairs.sparkSession.createDataFrame(own, "event_key string, fingerprint string")
        leftovers = earlier.join(pairs.select("event_key", "fingerprint"), ["event_key", "fingerprint"], "left_anti")
        return [(row[0], row[1]) for row in leftovers.collect()]

    def leftovers(self, pairs: DataFrame, run: ManifestRun) -> int:
        return len(self._leftovers(pairs, run))

    def remove_leftovers(self, pairs: DataFrame, run: ManifestRun) -> int:
        """Remove the entries an earlier attempt of `run` recorded and its batch (`pairs`) has not: they would count as
        delivered while their events are in no completed output. How many were removed."""
        leftovers = self._leftovers(pairs, run)
        return self.remove_pairs(run.run_key, leftovers) if leftovers else 0

    def check_pairs(self, pairs: DataFrame, run: ManifestRun, detect_synthetic: bool) -> ManifestCheck:
        spark = pairs.sparkSession
        stats = spark.sparkContext.accumulator(ManifestStats(), _StatsParam())
        ids = pairs.groupBy("event_key").agg(F.sort_array(F.collect_set("fingerprint")).alias("fingerprints"))
        manifest = self

        def partition(rows: Iterable[Row]) -> Iterator[tuple[str, str, str]]:
            if manifest not in _clients:
                _clients[manifest] = manifest.client()
            client = _clients[manifest]
            before = ManifestStats(**asdict(client.stats))
            checked = client.check_ids(
                ((row["event_key"], list(row["fingerprints"])) for row in rows), run.etl_time, run.ttl,
                detect_synthetic, run.run_key,
            )  # fmt: skip
            for event_id, fingerprints, result in checked:
                delivered_before = result.earlier_other or bool(result.seen)
                for fingerprint in fingerprints:
                    if fingerprint in result.seen or fingerprint in result.later:  # base.SEEN_LATER: a copy
                        yield event_id, fingerprint, SEEN_EARLIER
                    elif detect_synthetic and delivered_before:
                        yield event_id, fingerprint, ID_SEEN_EARLIER
            stats.add(ManifestStats(**{k: v - getattr(before, k) for k, v in asdict(client.stats).items()}))

        answers = spark.createDataFrame(ids.rdd.mapPartitions(partition), ANSWERS_SCHEMA).persist(
            StorageLevel.MEMORY_AND_DISK
        )
        answers.count()  # materialize now: the manifest is called once, here
        self.settle()

        def record() -> None:
            if run.replaces and run.run_key:
                manifest.remove_leftovers(pairs, run)

        def release() -> None:
            answers.unpersist()

        return ManifestCheck(answers=answers, stats=lambda: stats.value, record=record, release=release)
