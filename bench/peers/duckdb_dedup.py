"""Single-machine peer of `python -m jobs dedup`: the warehouse dedup model on DuckDB.

Reads what Winnow reads, a folder of Snowplow enriched TSV files (131 tab-separated fields, no header, no
quoting), and runs the "Deduplicating the event ID in Redshift" model adapted to files:

1. lines that do not have exactly 131 fields go to `bad/`;
2. `tmp_ids_1`: the event ids that occur more than once among the valid lines;
3. `tmp_events`: the lines of those ids with natural copies collapsed, one row per (event_id, fingerprint),
   the fingerprint being `event_fingerprint` or, when it is empty, all columns except `etl_tstamp` (the model's
   GROUP BY over every column, which would otherwise keep a re-enriched copy apart). The copy kept is Winnow's
   "first": earliest etl_tstamp (empty last), then collector_tstamp, then the smallest line;
4. `tmp_ids_2`: the ids that are unique in `tmp_events`. Their row goes to `events/` with the valid lines of
   ids that never repeated; every row of the other ids (synthetic duplicates, one per fingerprint) goes to
   `duplicated_events/`.

Lines are written as they came, byte for byte (`events/`, `duplicated_events/`, `bad/`, TSV, one or more
`part-*.tsv` files each). Prints one JSON object: input, events, duplicated_events, bad, natural_copies_removed
(input = the sum of the other four) and the wall time in seconds.

Reading: each line is read as one VARCHAR by DuckDB's CSV reader (a delimiter byte that enriched events do not
contain, no quote, no escape), which is ~9x faster than read_text + string_split on 100k events. A line holding
that delimiter byte would be cut short, so the reader's byte total is checked against the files' sizes; on any
mismatch (that byte, or CRLF line ends) the exact but slower read_text path is used instead. Like Spark's text
reader, the CSV path also ends a line at a lone CR. Input must be UTF-8 (DuckDB's VARCHAR); gzip files (`.gz`)
are read too, without the byte check.

    .venv/bin/python -m bench.peers.duckdb_dedup --input /tmp/peers/g100k --output /tmp/peers/duck [--threads N]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from bench.peers import input_files, peer_main
from jobs.enriched.fields import FIELD_COUNT, FIELD_INDEX

OUTPUTS = ("events", "duplicated_events", "bad")
# A byte that enriched TSV does not hold: the CSV reader sees each line as one column.
LINE_DELIMITER = "\x1e"
CSV_OPTIONS = (
    f"columns={{'line': 'VARCHAR'}}, delim=chr({ord(LINE_DELIMITER)}), quote='', escape='', header=false, "
    "auto_detect=false, new_line='\\n', strict_mode=false, compression='auto'"
)
# COPY writes each value as it is: no quoting, no escaping, empty string for an empty line.
COPY_OPTIONS = "FORMAT csv, DELIMITER '\t', HEADER false, QUOTE '', ESCAPE '', NULLSTR ''"


@dataclass(frozen=True)
class Counts:
    input: int
    events: int
    duplicated_events: int
    bad: int
    natural_copies_removed: int


def expected_bytes(files: list[str]) -> int | None:
    """What the line reader must account for: each line plus its `\\n`; None when a file is compressed."""
    total = 0
    for name in files:
        if name.endswith(".gz"):
            return None
        size = Path(name).stat().st_size
        with open(name, "rb") as handle:
            ends_with_newline = size == 0 or (handle.seek(size - 1), handle.read(1))[1] == b"\n"
        total += size + (0 if ends_with_newline else 1)
    return total


def field(index: int) -> str:
    """SQL for field `index` (0-based) of a 131-field `line`.

    An anchored regexp_extract from the nearer end: about 3x faster than split_part, which splits the whole line.
    """
    if index < FIELD_COUNT // 2:
        return f"regexp_extract(line, '^(?:[^\\t]*\\t){{{index}}}([^\\t]*)', 1)"
    return f"regexp_extract(line, '([^\\t]*)(?:\\t[^\\t]*){{{FIELD_COUNT - 1 - index}}}$', 1)"


def load_lines(con: duckdb.DuckDBPyConnection, files: list[str]) -> str:
    """Create table `lines(line, ok, event_id)`; return which reader was used ("csv" or "text")."""
    tabs = "strlen(line) - strlen(replace(line, chr(9), '')) AS tabs"
    ok = f"tabs = {FIELD_COUNT - 1}"
    select = f"SELECT line, {ok} AS ok, CASE WHEN {ok} THEN {field(FIELD_INDEX['event_id'])} END AS event_id"
    con.execute(
        f"CREATE TEMP TABLE lines AS {select} FROM "
        f"(SELECT line, {tabs} FROM (SELECT coalesce(line, '') AS line FROM read_csv($files, {CSV_OPTIONS})))",
        {"files": files},
    )
    expected = expected_bytes(files)
    row = con.execute("SELECT coalesce(sum(strlen(line) + 1), 0) FROM lines").fetchone()
    if expected is None or (row is not None and row[0] == expected):
        return "csv"
    print(
        f"duckdb_dedup: the CSV line reader saw {row[0] if row else 0} of {expected} bytes (CRLF or a 0x1e byte in "
        "the input); reading again with read_text",
        file=sys.stderr,
    )
    con.execute("DROP TABLE lines")
    text_lines = (
        "SELECT unnest(CASE WHEN suffix(content, chr(10)) THEN string_split(content, chr(10))[:-2] "
        "ELSE string_split(content, chr(10)) END) AS line FROM read_text($files) WHERE content <> ''"
    )
    con.execute(f"CREATE TEMP TABLE lines AS {select} FROM (SELECT line, {tabs} FROM ({text_lines}))", {"files": files})
    return "text"


def dedup(con: duckdb.DuckDBPyConnection) -> None:
    """The model's temporary tables: `tmp_ids_1`, `tmp_events` (natural copies collapsed), `tmp_ids_2`."""
    etl, collector = field(FIELD_INDEX["etl_tstamp"]), field(FIELD_INDEX["collector_tstamp"])
    fingerprint = field(FIELD_INDEX["event_fingerprint"])
    etl_at = FIELD_INDEX["etl_tstamp"]
    # All columns but etl_tstamp: the line with that field emptied (its place is kept, so fields stay apart).
    without_etl = f"regexp_replace(line, '^((?:[^\\t]*\\t){{{etl_at}}})[^\\t]*', '\\1')"
    con.execute("CREATE TEMP TABLE tmp_ids_1 AS SELECT event_id FROM lines WHERE ok GROUP BY 1 HAVING count(*) > 1")
    con.execute(f"""
        CREATE TEMP TABLE tmp_events AS
        SELECT event_id, fp, count(*) AS copies, arg_min(line, (etl = '', etl, collector, line)) AS line
        FROM (
            SELECT line, event_id, {etl} AS etl, {collector} AS collector,
                   CASE WHEN {fingerprint} <> '' THEN {fingerprint} ELSE 'all-but-etl:' || md5({without_etl}) END AS fp
            FROM lines SEMI JOIN tmp_ids_1 USING (event_id)
            WHERE ok
        )
        GROUP BY event_id, fp
    """)  # fmt: skip
    con.execute("CREATE TEMP TABLE tmp_ids_2 AS SELECT event_id FROM tmp_events GROUP BY 1 HAVING count(*) = 1")


def output_queries() -> dict[str, str]:
    """The lines of each output, as SQL."""
    return {
        "events": "SELECT line FROM lines ANTI JOIN tmp_ids_1 USING (event_id) WHERE ok "
        "UNION ALL SELECT line FROM tmp_events SEMI JOIN tmp_ids_2 USING (event_id)",
        "duplicated_events": "SELECT line FROM tmp_events ANTI JOIN tmp_ids_2 USING (event_id)",
        "bad": "SELECT line FROM lines WHERE NOT ok",
    }


def write_outputs(con: duckdb.DuckDBPyConnection, output: Path) -> dict[str, int]:
    """Write each output folder (replaced) as part-*.tsv; return the lines written per output."""
    written = {}
    for name, query in output_queries().items():
        target = output / name
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        row = con.execute(
            f"COPY ({query}) TO '{sql_string(str(target))}' "
            f"({COPY_OPTIONS}, PER_THREAD_OUTPUT true, FILENAME_PATTERN 'part-{{i}}', FILE_EXTENSION 'tsv', "
            "OVERWRITE_OR_IGNORE true)"
        ).fetchone()
        written[name] = int(row[0]) if row else 0
    return written


def sql_string(text: str) -> str:
    return text.replace("'", "''")


def count(con: duckdb.DuckDBPyConnection, query: str) -> int:
    row = con.execute(query).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def run(input_folder: Path, output: Path, threads: int | None) -> dict[str, object]:
    started = time.monotonic()
    files = [str(path) for path in input_files(input_folder)]
    with tempfile.TemporaryDirectory(prefix="duckdb-dedup-") as spill:
        con = duckdb.connect(config={"temp_directory": spill})
        try:
            if threads is not None:
                con.execute(f"SET threads = {threads}")
            reader = load_lines(con, files)
            dedup(con)
            written = write_outputs(con, output)
            total = count(con, "SELECT count(*) FROM lines")
            repeated = count(con, "SELECT count(*) FROM lines SEMI JOIN tmp_ids_1 USING (event_id) WHERE ok")
            collapsed = count(con, "SELECT count(*) FROM tmp_events")
            used_threads = count(con, "SELECT current_setting('threads')")
        finally:
            con.close()
    counts = Counts(total, written["events"], written["duplicated_events"], written["bad"], repeated - collapsed)
    check_accounted(counts)
    return {
        **counts.__dict__,
        "seconds": round(time.monotonic() - started, 3),
        "threads": used_threads,
        "reader": reader,
        "duckdb": duckdb.__version__,
    }


def check_accounted(counts: Counts) -> None:
    """Raises: RuntimeError: some input line is in no output, or in two."""
    total = counts.events + counts.duplicated_events + counts.bad + counts.natural_copies_removed
    if total != counts.input:
        raise RuntimeError(f"{counts.input} input lines but {total} accounted for: {counts}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers.duckdb_dedup", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--input", required=True, type=Path, metavar="DIR", help="folder of enriched TSV files")
    parser.add_argument("--output", required=True, type=Path, metavar="DIR",
                        help="writes DIR/events, DIR/duplicated_events and DIR/bad (each replaced)")  # fmt: skip
    parser.add_argument("--threads", type=int, metavar="N", help="DuckDB threads (default: DuckDB's, all cores)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return peer_main(
        "duckdb_dedup", args.threads, lambda: run(args.input, args.output, args.threads),
        (duckdb.Error, OSError, RuntimeError),
    )  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
