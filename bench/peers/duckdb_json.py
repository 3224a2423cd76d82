"""Single-machine peer of the shred job's JSON step: the three JSON fields of every enriched line parsed by DuckDB.

The cheapest peer of what `shred` cannot skip: each of `contexts`, `unstruct_event` and `derived_contexts` parsed
as its envelope (lines of 131 fields; a field that is not JSON gives no entity) (`{"schema", "data": [...]}` or `{"schema", "data": {"schema", "data"}}`), every entity's schema
and data taken out, the data as JSON text (what the shredded lines carry). Nothing is checked, nothing written:
it prints one JSON object with the lines, the entities found and the characters of their data (which forces
every value to be built), and the wall time. Lines are read as `duckdb_dedup` reads them.

    .venv/bin/python -m bench.peers.duckdb_json --input bench/data/events-1000000 [--threads N]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import duckdb

from bench.peers import input_files, peer_main
from bench.peers.duckdb_dedup import CSV_OPTIONS, field
from jobs.enriched.fields import FIELD_COUNT, FIELD_INDEX

CONTEXTS = '{"schema": "VARCHAR", "data": [{"schema": "VARCHAR", "data": "JSON"}]}'
UNSTRUCT = '{"schema": "VARCHAR", "data": {"schema": "VARCHAR", "data": "JSON"}}'


def entities_query() -> str:
    """SQL: one row per entity of the three JSON fields, `(schema, data)`, data as JSON text."""
    fields = ", ".join(f"{field(FIELD_INDEX[name])} AS {name}" for name in ("contexts", "unstruct_event",
                                                                              "derived_contexts"))  # fmt: skip
    tabs = f"strlen(line) - strlen(replace(line, chr(9), '')) = {FIELD_COUNT - 1}"
    lines = f"SELECT {fields} FROM read_csv($files, {CSV_OPTIONS}) WHERE {tabs}"
    contexts = " UNION ALL ".join(
        f"SELECT unnest(try(json_transform(nullif({name}, ''), '{CONTEXTS}')).data, recursive := true) FROM lines"
        for name in ("contexts", "derived_contexts")
    )
    unstruct = f"SELECT unnest(try(json_transform(nullif(unstruct_event, ''), '{UNSTRUCT}')).data) FROM lines"
    return f"WITH lines AS ({lines}) SELECT * FROM ({contexts} UNION ALL {unstruct})"


def run(input_folder: Path, threads: int | None) -> dict[str, object]:
    started = time.monotonic()
    files = [str(path) for path in input_files(input_folder)]
    con = duckdb.connect()
    try:
        if threads is not None:
            con.execute(f"SET threads = {threads}")
        row = con.execute(
            f"SELECT count(*), sum(strlen(schema) + strlen(data::VARCHAR)) FROM ({entities_query()}) WHERE schema "
            "IS NOT NULL",
            {"files": files},
        ).fetchone()
    finally:
        con.close()
    entities, characters = (int(row[0]), int(row[1] or 0)) if row else (0, 0)
    return {
        "entities": entities,
        "characters": characters,
        "seconds": round(time.monotonic() - started, 3),
        "duckdb": duckdb.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.duckdb_json", description=__doc__.splitlines()[0])
    parser.add_argument("--input", required=True, type=Path, metavar="DIR", help="folder of enriched TSV files")
    parser.add_argument("--threads", type=int, metavar="N", help="DuckDB threads (default: DuckDB's, all cores)")
    args = parser.parse_args(argv)
    return peer_main("duckdb_json", args.threads, lambda: run(args.input, args.threads), (duckdb.Error, OSError))


if __name__ == "__main__":
    raise SystemExit(main())
