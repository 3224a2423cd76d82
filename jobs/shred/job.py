"""The shred job: deduplicated enriched events -> atomic-events TSV + shredded-types JSON (or wide rows).

Layout of `OUT/run=ID/` (DESIGN §3, the R30-era Snowplow layout):
  atomic-events/                                   one 128-column TSV line per good event
  shredded-types/vendor=V/name=N/format=F/version=M-R-A/   one JSON line per entity
  bad/                                             DESIGN bad rows, one per rejected input line
  summary.json, then _SUCCESS last
With `--format widerow` (`widerow-parquet`): `widerow/` (JSON lines or Parquet) instead of the first two.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, get_args
from urllib.parse import unquote

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from jobs import __version__
from jobs.config import JobConfig
from jobs.enriched.parse import bad_row_json, field, parse_events
from jobs.errors import InvalidArgumentError
from jobs.lake import SUMMARY, FileSystem, RunFolder, absolute, check_apart, open_input, require_input
from jobs.runs import SUCCESS_MARKER, run_timestamp
from jobs.shred.entities import (
    JSON_FIELDS,
    KIND_ORDER,
    atomic_line,
    field_entities,
    field_errors,
    parse_json_fields,
    root_tstamp,
    shredded_line,
    typed_entities,
)  # fmt: skip
from jobs.shred.widerow import WIDEROW_FOLDER
from jobs.summary import table

ShredFormat = Literal["shred", "widerow", "widerow-parquet"]
SHRED_FORMATS: tuple[str, ...] = get_args(ShredFormat)
TYPE_COLUMNS = ("vendor", "name", "format", "version")
ATOMIC_EVENTS, SHREDDED_TYPES = "atomic-events", "shredded-types"

Progress = Callable[[str], None]
# The type of `typed_entities`, for the empty array of bad lines.
_TYPED = "array<struct<kind:string,vendor:string,name:string,format:string,version:string,model:string,data:string>>"


def shred_events(parsed: DataFrame) -> DataFrame:
    """Decide every parsed line (from `parse_events`): good with its entities, or bad with all its errors.

    Returns one row per input line: `line`, `errors` (parser errors, then JSON-field errors; empty when
    good), `event_id`, `root_tstamp` and `entities` (`typed_entities`, empty for bad lines). An event is
    good only when every one of its JSON fields and entities is, so it is written whole or not at all.
    """
    valid = F.size("errors") == 0
    line = F.col("line")
    raw_fields = (F.when(valid, field(line, name)).alias(name) for name in JSON_FIELDS)
    with_raw = parsed.select("line", "errors", "event_id", "collector_tstamp", *raw_fields)
    with_json = with_raw.select("*", *parse_json_fields({name: F.col(name) for name in JSON_FIELDS}))
    # Each field's entities once, in their own column: the checks and the output both read them.
    with_entities = with_json.select(
        "line", "errors", "event_id", "collector_tstamp", *JSON_FIELDS, *(f"{name}_env" for name in JSON_FIELDS),
        *(field_entities(name).alias(f"{name}_entities") for name in JSON_FIELDS),
    )  # fmt: skip
    no_errors = F.array().cast("array<string>")
    errors = F.concat(
        F.col("errors"),
        *(
            F.when(valid, field_errors(name, F.col(name), F.col(f"{name}_entities"))).otherwise(no_errors)
            for name in JSON_FIELDS
        ),
    )
    checked = with_entities.select(
        "line",
        errors.alias("errors"),
        "event_id",
        F.when(valid, root_tstamp(F.col("collector_tstamp"))).alias("root_tstamp"),
        F.concat(*(F.col(f"{name}_entities") for name in KIND_ORDER)).alias("entities"),
    )
    is_good = F.size("errors") == 0
    return checked.select(
        "line",
        "errors",
        "event_id",
        "root_tstamp",
        F.when(is_good, typed_entities(F.col("entities"))).otherwise(F.array().cast(_TYPED)).alias("entities"),
    )


def run(
    spark: SparkSession,
    config: JobConfig,
    input_path: str,
    output_path: str,
    run_id: str,
    progress: Progress = lambda message: None,
    output_format: ShredFormat = "shred",
) -> dict[str, Any]:
    """Run the shred job and return its summary (also written as `summary.json`).

    Args:
        spark: the session.
        config: job config; `output.compression` applies to the text outputs.
        input_path: a file or folder of enriched TSV (typically a dedup run's `good/`).
        output_path: the output folder; the run writes `OUT/run=ID/`.
        run_id: the run id (`YYYY-MM-DD-HH-MM-SS`).
        progress: called with a short message at each step.
        output_format: `shred` (atomic-events + shredded-types), `widerow` (JSON lines) or `widerow-parquet`.

    Returns:
        The summary: `counts.input == counts.good + counts.bad`; `entities` (entity lines in all) and
        `shredded_types` (entity lines per `vendor/name/format/version`).

    Raises:
        InvalidArgumentError: `output_format` is not one of `SHRED_FORMATS`.
        InputNotFoundError: the input path does not exist.
    """
    if output_format not in SHRED_FORMATS:
        raise InvalidArgumentError(f"--format: given {output_format!r}; allowed: {', '.join(SHRED_FORMATS)}")
    started_at, started = datetime.now(UTC), time.monotonic()
    run_time = run_timestamp(run_id)
    input_path, output_path = shred_input(spark, absolute(input_path)), absolute(output_path)
    require_input(spark, input_path)
    check_apart("--output", output_path, {"--input": input_path})
    folder = RunFolder(spark, output_path, run_id, "shred", [ATOMIC_EVENTS, SHREDDED_TYPES, WIDEROW_FOLDER, "bad"])
    with folder.writing():
        progress(f"reading every input file under {input_path} once")
        source = open_input(spark, input_path, config.input.skip_unreadable)
        parsed = parse_events(source.lines(spark), config.dedup.fingerprint_fields).select(
            "line", "errors", "event_id", "collector_tstamp"
        )
        folder.clear()
        progress(f"reading and shredding {input_path}")
        if output_format == "shred":
            counts, types = _write_shredded(folder, shred_events(parsed), run_time, config.output.compression)
        else:
            counts, types = _write_wide_rows(folder, shred_events(parsed), run_time, config, output_format, progress)

        good_count, bad_count = counts.get(True, 0), counts.get(False, 0)
        summary: dict[str, Any] = {
            "counts": {"input": good_count + bad_count, "good": good_count, "bad": bad_count},
            "entities": sum(types.values()),
            "shredded_types": dict(sorted(types.items())),
            "job": "shred",
            "version": __version__,
            "run_id": run_id,
            "format": output_format,
            "input": input_path,
            "input_files": source.summary(),
            "output": folder.path,
            "started_at": started_at.isoformat(timespec="seconds"),
            "wall_time_seconds": round(time.monotonic() - started, 3),
        }
        folder.write_json("summary.json", summary)
        folder.seal()
    return summary


def shred_input(spark: SparkSession, path: str) -> str:
    """What shred reads for `--input`: a dedup run folder means its `good/` (its other outputs are not events).

    Raises:
        InvalidArgumentError: an incomplete dedup run folder (no `_SUCCESS`), or a folder of run folders.
    """
    fs = FileSystem(spark)
    if fs.exists(f"{path}/{SUMMARY}"):
        job = json.loads(fs.read_text(f"{path}/{SUMMARY}")).get("job")
        if job != "dedup":
            raise InvalidArgumentError(f"--input: {path} is a {job} run folder; allowed: enriched TSV or a dedup run")
        if not fs.exists(f"{path}/{SUCCESS_MARKER}"):
            raise InvalidArgumentError(
                f"--input: {path} is a dedup run without {SUCCESS_MARKER} (incomplete or being written); "
                "allowed: a complete dedup run: rerun it first"
            )
        return f"{path}/good"
    runs = [name for name in fs.children(path) if name.startswith("run=")]
    if runs:
        raise InvalidArgumentError(
            f"--input: {path} holds run folders ({', '.join(runs[:3])}{', …' if len(runs) > 3 else ''}), whose "
            "duplicates/ and bad/ are not events; allowed: one run folder, or its good/"
        )
    return path


def _write_shredded(
    folder: RunFolder, decided: DataFrame, run_time: datetime, compression: str
) -> tuple[dict[bool, int], dict[str, int]]:
    """atomic-events/, shredded-types/ and bad/ in one pass over the input: each line becomes its output lines.

    Good and bad are counted while written (`observe`); entity lines per type are counted from the files
    written (one small aggregation per file), so nothing is persisted or read twice.
    """
    is_good = F.size("errors") == 0
    observation = Observation("shred counts")
    observed = decided.observe(observation, F.count_if(is_good).alias("good"), F.count_if(~is_good).alias("bad"))
    written = shredded_outputs(observed, run_time)
    folder.write_text_split(written, [ATOMIC_EVENTS, SHREDDED_TYPES, "bad"], compression, "folder")
    counted = observation.get
    per_type = _lines_per_type(decided.sparkSession, f"{folder.path}/{SHREDDED_TYPES}")
    return {True: counted["good"], False: counted["bad"]}, per_type


def shredded_outputs(decided: DataFrame, run_time: datetime) -> DataFrame:
    """The output lines of the decided events (`shred_events`): `folder` (under the run folder) and `text`.

    A good event gives its atomic-events line and one shredded-types line per entity; a bad one its bad row.
    """
    is_good = F.size("errors") == 0
    entity_lines = F.transform(
        F.col("entities"),
        lambda e: F.struct(
            F.concat(
                F.lit(f"{SHREDDED_TYPES}/"),
                *(F.concat(F.lit(f"{'/' if i else ''}{name}="), e[name]) for i, name in enumerate(TYPE_COLUMNS)),
            ).alias("folder"),
            shredded_line(e, F.col("event_id"), F.col("root_tstamp")).alias("text"),
        ),
    )
    atomic = F.array(F.struct(F.lit(ATOMIC_EVENTS).alias("folder"), atomic_line(F.col("line")).alias("text")))
    bad = F.array(
        F.struct(F.lit("bad").alias("folder"), bad_row_json(F.col("line"), F.col("errors"), run_time).alias("text"))
    )
    outputs = F.when(is_good, F.concat(atomic, entity_lines)).otherwise(bad)
    return decided.select(F.explode(outputs).alias("out")).select("out.folder", "out.text")


def _lines_per_type(spark: SparkSession, shredded: str) -> dict[str, int]:
    """Entity lines per `vendor/name/format/version`, from the files under shredded-types/ (counted per file)."""
    files = (
        spark.read.option("recursiveFileLookup", "true")
        .text(shredded)
        .select(F.col("_metadata.file_path").alias("path"))
    )
    types: dict[str, int] = {}
    for row in files.groupBy("path").count().collect():
        parts = dict(
            unquote(part).split("=", 1) for part in row["path"].split("/") if part.split("=", 1)[0] in TYPE_COLUMNS
        )
        name = "/".join(parts[column] for column in TYPE_COLUMNS)
        types[name] = types.get(name, 0) + row["count"]
    return types


def _write_wide_rows(
    folder: RunFolder,
    decided: DataFrame,
    run_time: datetime,
    config: JobConfig,
    output_format: ShredFormat,
    progress: Progress,
) -> tuple[dict[bool, int], dict[str, int]]:
    """widerow/ and bad/: the entity types are needed before writing (they are the columns), so the decided
    lines are persisted and read for the counts, the types, the rows and the bad rows."""
    from jobs.shred import widerow

    decided = decided.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        is_good = F.size("errors") == 0
        good, bad = decided.where(is_good), decided.where(~is_good)
        counts = {row["good"]: row["count"] for row in decided.groupBy(is_good.alias("good")).count().collect()}
        type_rows = (
            good.select(F.explode("entities").alias("e"))
            .groupBy(*(F.col("e")[name].alias(name) for name in ("kind", *TYPE_COLUMNS)))
            .count()
            .collect()
        )
        types: dict[str, int] = {}
        for row in type_rows:
            name = "{vendor}/{name}/{format}/{version}".format(**row.asDict())
            types[name] = types.get(name, 0) + row["count"]
        families = widerow.entity_families(type_rows)
        progress(f"writing widerow/ ({output_format}, {len(families)} entity columns)")
        widerow.write(folder, good, families, output_format, config.output.compression)
        progress("writing bad/")
        folder.write_text(
            "bad", bad.select(bad_row_json(F.col("line"), F.col("errors"), run_time)), config.output.compression
        )
    finally:
        decided.unpersist()
    return counts, types


def render(summary: dict[str, Any]) -> str:
    """A plain-text table of a shred summary."""
    return table(f"Winnow shred  run {summary['run_id']}", shred_rows(summary), [f"  output: {summary['output']}"])


def shred_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The labelled figures of a shred summary, values already formatted (shared with `run`'s table)."""
    counts = summary["counts"]
    rows = [
        ("input lines", f"{counts['input']:,}"),
        ("good events", f"{counts['good']:,}"),
        ("bad", f"{counts['bad']:,}"),
        ("entities", f"{summary['entities']:,}"),
    ]
    rows.extend((f"  {name}", f"{count:,}") for name, count in summary["shredded_types"].items())
    rows.append(("wall time", f"{summary['wall_time_seconds']:.1f} s"))
    return rows
