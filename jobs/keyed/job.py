"""The keyed dedup job: read records, decide unique / duplicate / expired / error, write, update the state.

Order of writes (so that a failed run can simply be rerun with the same id): the four outputs, the run's
state files, the state commit (atomic, naming the run folder), `summary.json` (naming the commit), and `_SUCCESS`
last. Before any of them, the state and the output's completed runs are held to each other
(`jobs.keyed.completion`): a run stopped after its commit, or an older copy of the state, stops the run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from jobs import __version__
from jobs.contract import Progress
from jobs.errors import InvalidArgumentError
from jobs.fs.hadoop import FileSystem
from jobs.fs.input import listing_summary
from jobs.fs.lease import FileLease
from jobs.fs.paths import absolute, check_apart
from jobs.fs.run_folder import RunFolder
from jobs.keyed import completion
from jobs.keyed.decide import DUPLICATE, ERROR, EXPIRED, EXPIRY, OUTCOME, OUTCOMES, REASON, UNIQUE, decide, extract
from jobs.keyed.period import QUANTUM, Kind, parse_period
from jobs.keyed.records import (
    Format,
    check_fields,
    check_format,
    check_ranked,
    list_records,
    read_records,
    unranked,
    write_records,
)
from jobs.keyed.state import DEFAULT_BUCKET_COUNT, BucketStore, StateSettings
from jobs.runtime.summary import table


@dataclass(frozen=True)
class KeyedOptions:
    """The command line of `python -m jobs keyed`, as given."""

    input: str
    output: str
    format: str
    key: str
    state: str
    expiry_key: str | None = None
    expiry_period: str | None = None
    bucket_span: str | None = None
    bucket_count: int | None = None


def parse_key(text: str, option: str = "--key") -> tuple[str, ...]:
    """`F1[,F2…]` as a tuple of field names.

    Raises:
        InvalidArgumentError: an empty name or a name given twice.
    """
    names = tuple(name.strip() for name in text.split(","))
    if not names or any(not name for name in names):
        raise InvalidArgumentError(f"{option}: given {text!r}; allowed: one or more field names separated by commas")
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"{option}: given {text!r}, which names a field twice")
    return names


def settings_from(options: KeyedOptions) -> StateSettings:
    """Validate the expiry options and build the state settings.

    Raises:
        InvalidArgumentError: --expiry-key without --expiry-period (or the reverse), a bad period or span,
            a span of another kind than the period, or a bucket option that does not apply.
    """
    key = parse_key(options.key)
    if (options.expiry_key is None) != (options.expiry_period is None):
        given = "--expiry-key" if options.expiry_key is not None else "--expiry-period"
        raise InvalidArgumentError(f"{given} given alone; allowed: --expiry-key F and --expiry-period P together")
    if options.expiry_key is None:
        if options.bucket_span is not None:
            raise InvalidArgumentError("--bucket-span: only allowed with --expiry-key and --expiry-period")
        count = options.bucket_count or DEFAULT_BUCKET_COUNT
        if count < 1:
            raise InvalidArgumentError(f"--bucket-count: given {count}; allowed: a positive integer")
        return StateSettings(key=key, bucket_count=count)
    if options.bucket_count is not None:
        raise InvalidArgumentError("--bucket-count: only allowed without an expiry key (buckets are then time spans)")
    if not options.expiry_key.strip():
        raise InvalidArgumentError("--expiry-key: given an empty name; allowed: one field name")
    period = parse_period(options.expiry_period or "", "--expiry-period")
    span = period if options.bucket_span is None else parse_period(options.bucket_span, "--bucket-span")
    if span.kind != period.kind:
        raise InvalidArgumentError(
            f"--bucket-span: given {span.text!r} (a {span.kind} span) with --expiry-period {period.text!r} "
            f"(a {period.kind} period); allowed: both plain numbers or both durations"
        )
    return StateSettings(
        key=key, expiry_field=options.expiry_key.strip(), kind=period.kind, period=str(period.value),
        bucket_span=str(span.value),
    )  # fmt: skip


def run(
    spark: SparkSession, options: KeyedOptions, run_id: str, progress: Progress = lambda message: None
) -> dict[str, Any]:
    """Run the keyed deduper and return its summary (also written as `summary.json`).

    The run folder's and the state's leases are held throughout (one writer each: a second one fails fast).
    """
    input_path, output_path, state_uri = absolute(options.input), absolute(options.output), absolute(options.state)
    check_apart("--output", output_path, {"--input": input_path})
    folder = RunFolder(spark, output_path, run_id, "keyed", (UNIQUE, DUPLICATE, EXPIRED, ERROR))
    check_apart("--state", state_uri, {"--input": input_path, "the run folder": folder.path})
    # One writer per state too: two runs committing on one parent would fork it.
    state_lease = FileLease(
        spark, f"{state_uri.rstrip('/')}/_leases/writer.json", f"state {state_uri}", "keyed", run_id
    )
    with folder.writing(), state_lease:
        return _run(spark, options, run_id, progress, folder)


def _run(
    spark: SparkSession, options: KeyedOptions, run_id: str, progress: Progress, folder: RunFolder
) -> dict[str, Any]:
    started_at, started = datetime.now(UTC), time.monotonic()
    fmt: Format = check_format(options.format)
    given = settings_from(options)
    input_path, state_uri = absolute(options.input), absolute(options.state)

    store = BucketStore(spark, state_uri)
    parent = store.parent(run_id)
    # Before anything is written: the state and the output's completed runs must agree (jobs.keyed.completion).
    completion.require_sealed(store.log, absolute(options.output), parent)
    completion.require_current(store.log, absolute(options.output), run_id, parent)
    settings = store.settle(parent, given, options.bucket_span is not None, options.bucket_count is not None)
    listing = list_records(spark, input_path)
    records = read_records(spark, input_path, listing, fmt)
    fields = list(settings.key) + ([settings.expiry_field] if settings.expiry_field else [])
    check_fields(records, fmt, "--key/--expiry-key", fields)
    latest_before = None if parent is None or parent["latest_point"] is None else Decimal(parent["latest_point"])
    checked = store.check_files(parent)  # before Spark reads them: a lost or swapped file is named, not skipped
    state, buckets_read = store.read_live(parent)
    progress(f"state {state_uri}: parent run {parent['run_id'] if parent else 'none'}, {buckets_read} live bucket(s)")

    # Kept: the input is read once for the per-split maxima, the decisions and every output.
    extracted = extract(records, fmt, list(settings.key), settings.expiry_field, settings.kind)
    extracted = extracted.persist(StorageLevel.MEMORY_AND_DISK)
    decided = decide(extracted, settings.period_value, latest_before, state).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        progress(f"reading and deciding {input_path}")
        groups = (
            decided.groupBy(OUTCOME, REASON)
            .agg(F.count(F.lit(1)).alias("n"), F.max(EXPIRY).alias("max"), unranked().alias("unranked"))
            .collect()
        )
        check_ranked(sum(row["unranked"] for row in groups), input_path)
        folder.clear()
        progress("writing unique/, duplicate/, expired/")
        write_records(decided.where(F.col(OUTCOME) != ERROR), folder.staging, fmt, partition_by=OUTCOME)
        folder.move_staged(OUTCOME, (UNIQUE, DUPLICATE, EXPIRED))
        progress("writing error/")
        write_records(decided.where(F.col(OUTCOME) == ERROR), f"{folder.path}/{ERROR}", fmt, REASON)
        FileSystem(spark).mkdirs(f"{folder.path}/{ERROR}")  # an empty output is still a folder
        maxima = [row["max"] for row in groups if row[OUTCOME] != ERROR and row["max"] is not None]
        latest_after = max([*maxima, *([latest_before] if latest_before is not None else [])], default=None)
        latest_after = None if latest_after is None else Decimal(latest_after).quantize(QUANTUM)
        progress("writing the state")
        written = store.write_run(decided, settings, run_id, latest_after)
    finally:
        decided.unpersist()
        extracted.unpersist()

    arguments = redo_arguments(options, run_id)
    run = {"folder": folder.path, "arguments": arguments}
    commit, digest = store.commit(parent, settings, run_id, latest_after, written, checked, run)
    deleted = store.delete_retired(parent)

    counts = {outcome: 0 for outcome in OUTCOMES}
    reasons: dict[str, int] = {}
    for row in groups:
        counts[row[OUTCOME]] += row["n"]
        if row[REASON] is not None:
            reasons[row[REASON]] = reasons.get(row[REASON], 0) + row["n"]
    summary: dict[str, Any] = {
        "job": "keyed",
        "version": __version__,
        "run_id": run_id,
        "input": input_path,
        "output": folder.path,
        "format": fmt,
        "key": list(settings.key),
        "expiry": None
        if settings.expiry_field is None
        else {
            "field": settings.expiry_field,
            "kind": settings.kind,
            "period": settings.period,
            "bucket_span": settings.bucket_span,
        },
        "arguments": arguments,
        "input_files": listing_summary(listing),
        "counts": {"input": sum(counts.values()), **counts},
        "errors_by_reason": dict(sorted(reasons.items())),
        "state": {
            "uri": state_uri,
            "parent_run": None if parent is None else parent["run_id"],
            "parent_commit": completion.identity(parent),
            "commit": {"run_id": run_id, "depth": commit["depth"], "sha256": digest},
            "latest_point_before": _point(latest_before, settings.kind),
            "latest_point_after": _point(latest_after, settings.kind),
            "buckets_read": buckets_read,
            "buckets_written": len(written),
            "buckets_live": len(commit["buckets"]),
            "buckets_retired": len(commit["retired"]),
            "bucket_folders_deleted": deleted,
        },
        "started_at": started_at.isoformat(timespec="seconds"),
        "wall_time_seconds": round(time.monotonic() - started, 3),
    }
    folder.write_json("summary.json", summary)
    folder.seal()
    completion.record_completed(absolute(options.output), state_uri, run_id, digest)
    return summary


def redo_arguments(options: KeyedOptions, run_id: str) -> list[str]:
    """The arguments of this run as given, its paths absolute: what a redo of it runs (`jobs.keyed.completion`)."""
    arguments = ["--input", absolute(options.input), "--output", absolute(options.output), "--format", options.format]
    arguments += ["--key", options.key, "--state", absolute(options.state), "--run-id", run_id]
    for option, value in (
        ("--expiry-key", options.expiry_key), ("--expiry-period", options.expiry_period),
        ("--bucket-span", options.bucket_span), ("--bucket-count", options.bucket_count),
    ):  # fmt: skip
        if value is not None:
            arguments += [option, str(value)]
    return arguments


def _point(value: Decimal | None, kind: Kind | None) -> str | None:
    """A latest point for the summary: the decimal, or an ISO time for timestamp expiry."""
    if value is None:
        return None
    if kind == "timestamp":
        return datetime.fromtimestamp(float(value), UTC).isoformat()
    return str(value)


def render(summary: dict[str, Any]) -> str:
    """The summary as a small plain-text table."""
    counts, state = summary["counts"], summary["state"]
    rows: list[tuple[str, str]] = [(name, f"{counts[name]:,}") for name in ("input", *OUTCOMES)]
    rows.extend((f"  {reason}", f"{count:,}") for reason, count in summary["errors_by_reason"].items())
    rows.append(("latest point", str(state["latest_point_after"])))
    rows.append(
        (
            "state buckets",
            f"{state['buckets_read']} read, {state['buckets_written']} written, {state['buckets_live']} live",
        )
    )
    rows.append(("wall time", f"{summary['wall_time_seconds']:.1f} s"))
    return table(f"Winnow keyed  run {summary['run_id']}", rows, [f"  output: {summary['output']}"])
