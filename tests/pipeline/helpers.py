"""Helpers shared by the pipeline tests: enriched-event lines, entity JSON, and reading what a run wrote."""

from __future__ import annotations

import gzip
import json
import shlex
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from jobs.enriched.fields import FIELD_COUNT, FIELD_INDEX
from jobs.fs.run_folder import RunFolder
from jobs.manifest import open_manifest
from jobs.prog import local_prog
from jobs.runtime.cli import main

# The embedded copy of Iglu Central shipped with the jobs.
IGLU_CENTRAL = Path(__file__).resolve().parents[2] / "iglu" / "embedded"

DEFAULTS = {
    "app_id": "shop",
    "platform": "web",
    "etl_tstamp": "2026-11-01 10:00:05.000",
    "collector_tstamp": "2026-11-01 10:00:00.000",
    "dvce_created_tstamp": "2026-11-01 09:59:59.500",
    "event": "page_view",
    "v_tracker": "js-4.1.0",
    "v_collector": "ssc-3.2.0",
    "v_etl": "enrich-5.1.0",
    "page_url": "https://shop.example/",
    "event_fingerprint": "fp-1",
}

RUN_ID = "2026-11-22-03-00-00"
# How every printed local way out starts: this interpreter, with the checkout on PYTHONPATH (`jobs.prog`).
PROG = local_prog()


def job_words(command: str) -> list[str]:
    """The words of a printed command after `PROG`, as a shell splits them: what `main` is given."""
    words, prog = shlex.split(command), shlex.split(PROG)
    assert words[: len(prog)] == prog, command
    return words[len(prog) :]


ID_A = "a0000000-0000-4000-8000-000000000001"
ID_B = "b0000000-0000-4000-8000-000000000002"
ID_C = "c0000000-0000-4000-8000-000000000003"


def event(event_id: str = ID_A, **fields: str) -> str:
    """A 131-field enriched line with `DEFAULTS`, the given id and the given fields."""
    values = [""] * FIELD_COUNT
    for name, value in {**DEFAULTS, "event_id": event_id, **fields}.items():
        values[FIELD_INDEX[name]] = value
    return "\t".join(values)


def fields_of(line: str) -> dict[str, str]:
    """The named fields of a 131-field line."""
    values = line.split("\t")
    assert len(values) == FIELD_COUNT, f"expected {FIELD_COUNT} fields, found {len(values)}"
    return {name: values[index] for name, index in FIELD_INDEX.items()}


OUTPUTS = ("good", "bad", "duplicates", "quarantine")


def read_lines(folder: Path) -> list[str]:
    """Every line of every data file under `folder` (plain or gzip), sorted."""
    lines: list[str] = []
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.startswith((".", "_")):
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", encoding="utf-8", newline="\n") as handle:
                lines.extend(handle.read().splitlines())
    return sorted(lines)


def run_folder_content(run: Path) -> dict[str, list[str]]:
    return {name: read_lines(run / name) for name in OUTPUTS}


CONTEXTS = "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-0"
UNSTRUCT = "iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0"

WEB_PAGE = '{"schema":"iglu:org.schema/WebPage/jsonschema/1-0-0","data":{"genre":"blog","keywords":["a","b"],"n":7}}'
SP_WEB_PAGE = '{"schema":"iglu:com.snowplowanalytics.snowplow/web_page/jsonschema/1-0-0","data":{"id":"p-1"}}'
LINK_CLICK = '{"schema":"iglu:com.snowplowanalytics.snowplow/link_click/jsonschema/1-0-1","data":{"targetUrl":"https://shop.example/a","elementId":"nav"}}'
DUPLICATE = f'{{"schema":"iglu:com.snowplowanalytics.snowplow/duplicate/jsonschema/1-0-0","data":{{"originalEventId":"{ID_B}"}}}}'
UA_PARSER = '{"schema":"iglu:com.snowplowanalytics.snowplow/ua_parser_context/jsonschema/1-0-0","data":{"useragentFamily":"Firefox","useragentMajor":"120"}}'


def contexts(*entities: str, envelope: str = CONTEXTS) -> str:
    return f'{{"schema":"{envelope}","data":[{",".join(entities)}]}}'


def unstruct(entity: str, envelope: str = UNSTRUCT) -> str:
    return f'{{"schema":"{envelope}","data":{entity}}}'


def hierarchy(event_id: str, tstamp: str, name: str) -> str:
    return (
        f'"hierarchy":{{"rootId":"{event_id}","rootTstamp":"{tstamp}","refRoot":"events",'
        f'"refTree":["events","{name}"],"refParent":"events"}}'
    )


def atomic(line: str) -> str:
    """The expected atomic-events line: fields 52, 58 and 122 removed (the spec's indices, not the code's)."""
    values = line.split("\t")
    assert len(values) == 131
    del values[122], values[58], values[52]
    assert len(values) == 128
    return "\t".join(values)


def shred(tmp_path: Path, lines: list[str], *extra: str) -> Path:
    source = tmp_path / "in" / "part-0.tsv"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    assert (
        main(["shred", "--input", str(source.parent), "--output", str(tmp_path / "out"), "--run-id", RUN_ID, *extra])
        == 0
    )
    return tmp_path / "out" / f"run={RUN_ID}"


def resolver_config(tmp_path: Path, *repositories: dict[str, Any]) -> Path:
    """A resolver config file; by default one embedded repository (Iglu Central's copy, named as upstream's
    embedded registry, so its lookup history reads the same)."""
    repositories = repositories or (
        {
            "name": "Iglu Client Embedded",
            "priority": 0,
            "vendorPrefixes": [],
            "connection": {"embedded": {"path": str(IGLU_CENTRAL)}},
        },
    )
    path = tmp_path / "resolver.json"
    path.write_text(
        json.dumps(
            {
                "schema": "iglu:com.snowplowanalytics.iglu/resolver-config/jsonschema/1-0-3",
                "data": {"cacheSize": 500, "cacheTtl": 600, "repositories": list(repositories)},
            }
        )
    )
    return path


def written(run: Path) -> dict[str, list[str]]:
    """Lines per data folder under the run folder."""
    folders = sorted({path.parent for path in run.rglob("part-*")})
    return {folder.relative_to(run).as_posix(): read_lines(folder) for folder in folders}


def numbered_id(number: int) -> str:
    """An event id that says its number (`00000007-0000-4000-8000-000000000000`)."""
    return f"{number:08x}-0000-4000-8000-000000000000"


def numbered_events(numbers: Iterable[int]) -> list[str]:
    """An enriched line with `DEFAULTS` for each number, its id `numbered_id(number)`."""
    return [event(numbered_id(number)) for number in numbers]


def write_lines(path: Path, lines: list[str]) -> None:
    """`lines` as a file at `path` (its folders made), each ended by a newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The last line a command wrote to standard error (its one-line error)."""
    return capsys.readouterr().err.strip().splitlines()[-1]


@contextmanager
def spark_conf(spark: SparkSession, **settings: str) -> Iterator[None]:
    """Spark settings `settings` for the block, then the session's own again."""
    previous: dict[str, str | None] = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def killed_at_seal(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    """Run `argv`, failing at its seal: after its output and every manifest write (what `kill -9` there leaves: the
    manifest's pairs, the register entry, no `_SUCCESS`), the leases released on the way out as a failed run's are."""

    def dying(self: RunFolder) -> None:
        raise RuntimeError("killed at the seal")

    with monkeypatch.context() as patched:
        patched.setattr(RunFolder, "seal", dying)
        assert main(argv) == 1


def killed_after_clear(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    """Run `argv`, failing right after it cleared its run folder (what `kill -9` there leaves of a completed run's
    redo: `_COMPLETED_BEFORE` alone), the leases released on the way out as a failed run's are."""
    clear = RunFolder.clear

    def dying(self: RunFolder) -> None:
        clear(self)
        raise RuntimeError("killed after clearing the run folder")

    with monkeypatch.context() as patched:
        patched.setattr(RunFolder, "clear", dying)
        assert main(argv) == 1


def good_everywhere(output: Path) -> list[str]:
    """Every good line of every completed (`_SUCCESS`) run folder under `output`, sorted."""
    lines: list[str] = []
    for run in sorted(output.glob("run=*")):
        if (run / "_SUCCESS").exists():
            lines.extend(read_lines(run / "good"))
    return sorted(lines)


@contextmanager
def fresh_manifest(
    kind: str, base: Path, monkeypatch: pytest.MonkeyPatch, table: str = "events-manifest"
) -> Iterator[str]:
    """The URI of a fresh manifest of `kind` (sqlite, lake: under `base`; dynamodb: on a moto server on 127.0.0.1,
    stopped on exit, reached through the environment)."""
    if kind != "dynamodb":
        if kind == "lake":  # 4 bucket files a segment, not 64: quicker (a run's --create keeps a lake's count)
            open_manifest(f"lake:{base / 'manifest'}", buckets=4).create()
        yield f"{kind}:{base / 'manifest'}"
        return
    from tests.pipeline.manifest_server import Faults, dynamodb_on_loopback

    with dynamodb_on_loopback(Faults()) as endpoint:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        yield f"dynamodb://{table}"
