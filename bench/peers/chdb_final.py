"""ClickHouse peer of `python -m jobs table … --engine replacing` + `table select --final`, on chdb (embedded).

Loads the same rows as `table insert` into a `ReplacingMergeTree(version)` table `ORDER BY` the key, then times
`SELECT … FINAL`, written to a file as `table select --final --output OUT` does (or only counted without
`--output`). Each `--input` is one insert, in the order given, as one `table insert` each; the files of an input
are inserted in sorted path order, as Winnow orders them. Prints one JSON object: rows loaded, rows and parts
stored after the load, the FINAL row count, load_seconds (CREATE + INSERTs), final_seconds, seconds (wall).

    .venv/bin/python -m jobs.tools.keyed_records --output /tmp/peers/k100k --rows 100000      # Spark, csv
    .venv/bin/python -m bench.peers.chdb_final --input /tmp/peers/k100k --key id --version ver \\
        --output /tmp/peers/ch_final [--output-format parquet|csv|jsonl] [--threads N] [--parallel-load]

Where the semantics match Winnow's (checked: the same surviving rows on the generated input):
  - per key the row with the highest version survives; ties on equal versions, and every row when there is no
    `--version`, go to the last row in merge order: the later insert, then the later file (sorted paths), then
    the later line. ClickHouse keeps "the last inserted row": its parts are ordered by insert and an insert's
    rows are sorted stably by the key. That holds only when an insert is written in file order, so by default
    each file is inserted with max_threads=1 and max_insert_threads=1. `--parallel-load` uses ClickHouse's
    default threads instead: faster to load, but an insert split into several parts by several threads may
    order them differently from the file (seen here with small insert blocks: in some runs every tie of a
    100k-row file went to another row), so ties may then keep another row than Winnow;
  - csv is read with its header and every column as text (Nullable(String) except the key and version
    columns), as Winnow reads csv; parquet keeps its types; the output has the input's columns.

Where they do not:
  - the version: ClickHouse needs an unsigned integer (or a date). `--version-type uint64` (default) casts it
    with accurateCast, failing the load on a negative, fractional or non-numeric version, which Winnow accepts
    (its version is decimal(38,6)). `--version-type decimal` maps decimal(38,6) order-preservingly onto UInt128
    (same order as Winnow for any version Winnow takes), but digits past the 6th decimal are truncated by
    ClickHouse where Spark rounds half up, and ClickHouse rejects surrounding spaces that Spark's cast trims;
  - a null or empty key: Winnow rejects the insert; here an empty csv key is the key '' and a null parquet
    key becomes the type's default. A bad version fails the load here too, but only the INSERT that meets it
    (earlier inserts stay);
  - ClickHouse collapses duplicates inside each insert already (optimize_on_insert=1, its default; the JSON's
    stored_rows shows it), so FINAL has fewer rows to merge than Winnow's select, which reads every stored row.
    `--no-optimize-on-insert` keeps them all;
  - not mirrored: is_deleted, the collapsing engines, insert tokens and the dedup window, jsonl input;
  - `jobs keyed` without expiry keeps the *first* record of each key; FINAL keeps one row per key too, so its
    row count equals keyed's `unique` count (valid keys), but the row kept is the highest version or the last.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chdb
from chdb import session

from bench.peers import UsageError, input_files, peer_main

INPUT_FORMATS = {"csv": "CSVWithNames", "parquet": "Parquet"}
OUTPUT_FORMATS = {"parquet": ("Parquet", "parquet"), "csv": ("CSVWithNames", "csv"), "jsonl": ("JSONEachRow", "json")}
VERSION_COLUMN = "__w_ver"
# decimal(38,6) holds |v| < 10^32: shifted by 10^32 and scaled by 10^6 it is an integer in [0, 2 * 10^38) < 2^128.
DECIMAL_VERSION = (
    "toUInt128((toDecimal256({column}, 6) + toDecimal256('100000000000000000000000000000000', 6)) * 1000000)"
)
SUCCESS_MARKER = "_SUCCESS"


@dataclass(frozen=True)
class Column:
    name: str
    type: str


def quote_string(text: str) -> str:
    """A ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_name(name: str) -> str:
    """A ClickHouse identifier."""
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def execute(sess: session.Session, sql: str) -> Any:
    """Run `sql`; chdb's result object (`bytes()`, `rows_written()`)."""
    return sess.query(sql, "TabSeparated")


def query(sess: session.Session, sql: str) -> str:
    """Run `sql`; its result as tab-separated text."""
    return bytes(execute(sess, sql).bytes()).decode("utf-8")


def table_columns(sess: session.Session, first_file: Path, fmt: str, roles: list[str]) -> list[Column]:
    """The table's columns: csv all text (`roles`, the key and version columns, not nullable), parquet as typed.

    Raises:
        UsageError: a key or version column is not in the input.
    """
    described = query(sess, f"DESCRIBE file({quote_string(str(first_file))}, {INPUT_FORMATS[fmt]})")
    columns = []
    for line in described.splitlines():
        name, inferred = line.split("\t")[:2]
        kind = "String" if fmt == "csv" else strip_nullable(inferred)
        columns.append(Column(name, kind if name in roles else f"Nullable({kind})"))
    missing = [name for name in roles if name not in [c.name for c in columns]]
    if missing:
        raise UsageError(
            f"--key/--version: field(s) {missing} are not in the input; the input's fields are: "
            + ", ".join(c.name for c in columns)
        )
    return columns


def strip_nullable(kind: str) -> str:
    return kind[len("Nullable(") : -1] if kind.startswith("Nullable(") else kind


def create_table(
    sess: session.Session, columns: list[Column], key: list[str], version: str | None, version_type: str
) -> None:
    definitions = [f"{quote_name(c.name)} {c.type}" for c in columns]
    engine = "ReplacingMergeTree()"
    if version is not None:
        source = quote_name(version)
        expression = (
            f"accurateCast({source}, 'UInt64')" if version_type == "uint64" else DECIMAL_VERSION.format(column=source)
        )
        kind = "UInt64" if version_type == "uint64" else "UInt128"
        definitions.append(f"{VERSION_COLUMN} {kind} MATERIALIZED {expression}")
        engine = f"ReplacingMergeTree({VERSION_COLUMN})"
    order_by = ", ".join(quote_name(name) for name in key)
    query(sess, f"CREATE TABLE t ({', '.join(definitions)}) ENGINE = {engine} ORDER BY ({order_by})")


def insert_settings(fmt: str, ordered: bool, optimize_on_insert: bool) -> str:
    settings = [f"optimize_on_insert = {int(optimize_on_insert)}"]
    if fmt == "csv":
        settings.append("input_format_csv_trim_whitespaces = 0")  # Spark keeps spaces around csv values
    if ordered:
        settings += ["max_threads = 1", "max_insert_threads = 1"]
    return ", ".join(settings)


def load(sess: session.Session, inputs: list[list[Path]], fmt: str, columns: list[Column], settings: str) -> int:
    """One INSERT per file, inputs in the order given, each input's files in sorted order; returns the rows read."""
    structure = quote_string(", ".join(f"{quote_name(c.name)} {c.type}" for c in columns))
    names = ", ".join(quote_name(c.name) for c in columns)
    rows = 0
    for files in inputs:
        for path in files:
            source = f"file({quote_string(str(path))}, {INPUT_FORMATS[fmt]}, {structure})"
            result = execute(sess, f"INSERT INTO t ({names}) SELECT {names} FROM {source} SETTINGS {settings}")
            rows += int(result.rows_written())
    return rows


def prepare_output(output: Path) -> None:
    """Replace `output`, but only an empty folder or one this peer (or Winnow's select) wrote.

    Raises:
        UsageError: `output` is a file, or a non-empty folder without a `_SUCCESS` marker.
    """
    if output.is_file():
        raise UsageError(f"--output: {output} is a file; give a folder")
    if output.is_dir() and any(output.iterdir()):
        if not (output / SUCCESS_MARKER).exists():
            raise UsageError(f"--output: {output} is not empty and holds no {SUCCESS_MARKER}; not replacing it")
        shutil.rmtree(output)
    output.mkdir(parents=True, exist_ok=True)


def select_final(
    sess: session.Session, columns: list[Column], output: Path | None, output_format: str, threads: str
) -> int | None:
    """`SELECT … FINAL`, written to `output`/part-00000.EXT; without `output` only counted (returns the count)."""
    if output is None:
        return int(query(sess, f"SELECT count() FROM t FINAL SETTINGS {threads}").strip())
    names = ", ".join(quote_name(c.name) for c in columns)
    ch_format, extension = OUTPUT_FORMATS[output_format]
    target = quote_string(str(output / f"part-00000.{extension}"))
    query(sess, f"INSERT INTO FUNCTION file({target}, {ch_format}) SELECT {names} FROM t FINAL SETTINGS {threads}")
    (output / SUCCESS_MARKER).touch()
    return None


def output_rows(sess: session.Session, output: Path, output_format: str) -> int:
    """The rows `select_final` wrote (read back, outside the timing)."""
    ch_format, extension = OUTPUT_FORMATS[output_format]
    target = quote_string(str(output / f"part-00000.{extension}"))
    return int(query(sess, f"SELECT count() FROM file({target}, {ch_format})").strip())


def stored(sess: session.Session) -> tuple[int, int]:
    """(rows, parts) of the table's active parts."""
    text = query(
        sess,
        "SELECT sum(rows), count() FROM system.parts WHERE database = currentDatabase() AND table = 't' AND active",
    )
    rows, parts = text.split()
    return int(rows), int(parts)


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    inputs = [input_files(Path(path)) for path in args.input]
    key = parse_key(args.key)
    if args.output is not None:
        prepare_output(args.output)
    with tempfile.TemporaryDirectory(prefix="chdb-final-") as path:
        sess = session.Session(path)
        try:
            result = load_and_select(sess, args, inputs, key)
        finally:
            sess.close()
    return {**result, "seconds": round(time.monotonic() - started, 3)}


def load_and_select(
    sess: session.Session, args: argparse.Namespace, inputs: list[list[Path]], key: list[str]
) -> dict[str, Any]:
    """Create and load the table, then run FINAL: the figures of the JSON report."""
    roles = [*key, *([args.version] if args.version else [])]
    columns = table_columns(sess, inputs[0][0], args.format, roles)
    load_started = time.monotonic()
    create_table(sess, columns, key, args.version, args.version_type)
    settings = insert_settings(args.format, not args.parallel_load, args.optimize_on_insert)
    loaded = load(sess, inputs, args.format, columns, settings)
    load_seconds = time.monotonic() - load_started
    stored_rows, parts = stored(sess)
    final_started = time.monotonic()
    threads = f"max_threads = {args.threads or 0}"
    rows = select_final(sess, columns, args.output, args.output_format, threads)
    final_seconds = time.monotonic() - final_started
    if rows is None:
        rows = output_rows(sess, args.output, args.output_format)
    return {
        "rows_loaded": loaded,
        "stored_rows": stored_rows,
        "parts": parts,
        "rows": rows,
        "load_seconds": round(load_seconds, 3),
        "final_seconds": round(final_seconds, 3),
        "ordered_load": not args.parallel_load,
        "optimize_on_insert": args.optimize_on_insert,
        "output": str(args.output) if args.output else None,
        "chdb": chdb.__version__,
        "clickhouse": query(sess, "SELECT version()").strip(),
    }


def parse_key(text: str) -> list[str]:
    """`F1[,F2…]` as field names. Raises: UsageError: an empty name or a name given twice."""
    names = [name.strip() for name in text.split(",")]
    if any(not name for name in names) or len(set(names)) != len(names):
        raise UsageError(f"--key: given {text!r}; allowed: distinct field names separated by commas")
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers.chdb_final", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--input", required=True, action="append", metavar="PATH",
                        help="a file or folder of records; repeat for several inserts (in order)")  # fmt: skip
    parser.add_argument(
        "--format", default="csv", choices=sorted(INPUT_FORMATS), help="csv (with a header, the default) or parquet"
    )
    parser.add_argument("--key", required=True, metavar="F1[,F2…]", help="the sorting key columns")
    parser.add_argument("--version", metavar="F", help="the version column (default: none, the last row wins)")
    parser.add_argument("--version-type", default="uint64", choices=("uint64", "decimal"),
                        help="uint64 (default): accurateCast to UInt64; decimal: Winnow's decimal(38,6) order as UInt128")  # fmt: skip
    parser.add_argument(
        "--output", type=Path, metavar="DIR", help="write the FINAL rows to DIR (replaced); default: count them"
    )
    parser.add_argument(
        "--output-format", default="parquet", choices=sorted(OUTPUT_FORMATS), help="parquet (default), csv or jsonl"
    )
    parser.add_argument("--threads", type=int, metavar="N", help="max_threads of the FINAL query (default: all cores)")
    parser.add_argument("--parallel-load", action="store_true",
                        help="insert with ClickHouse's default threads (faster; ties may then differ from Winnow)")  # fmt: skip
    parser.add_argument("--no-optimize-on-insert", dest="optimize_on_insert", action="store_false",
                        help="keep every row at insert (ClickHouse collapses each insert's duplicates by default)")  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # chdb's ChdbError is a RuntimeError
    return peer_main("chdb_final", args.threads, lambda: run(args), (RuntimeError, OSError))


if __name__ == "__main__":
    raise SystemExit(main())
