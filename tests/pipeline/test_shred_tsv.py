"""TSV shredding (`--format shred-tsv`) against upstream's tabular tests, and what happens when a schema is missing.

`tests/data/upstream/tabular/` holds the input lines and expected outputs of snowplow-rdb-loader's TabularOutputSpec,
NewlineSpec (batch transformer) and ShredTsvProcessingSpec (stream transformer, same TSV code); the schemas come from
the embedded copy of Iglu Central shipped with the jobs, `iglu/embedded/`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from jobs import __version__
from jobs.runtime.cli import main
from jobs.shred import rdb
from tests.pipeline.helpers import (
    ID_A,
    RUN_ID,
    WEB_PAGE,
    contexts,
    event,
    read_lines,
    resolver_config,
    shred,
    unstruct,
    written,
)

DATA = Path(__file__).resolve().parent.parent / "data"
TABULAR = DATA / "upstream" / "tabular"
SPECS: dict[str, dict[str, Any]] = json.loads((TABULAR / "specs.json").read_text())["specs"]
ATOMIC = f"{rdb.GOOD}/{rdb.ATOMIC_PATH}"
PARSING_ERRORS = f"{rdb.BAD}/{rdb.PARSING_ERROR_PATH}"
IGLU_ERRORS = f"{rdb.BAD}/{rdb.IGLU_ERROR_PATH}"
APPLICATION_ERROR = (
    '{"schema":"iglu:com.snowplowanalytics.snowplow/application_error/jsonschema/1-0-2",'
    '"data":{"programmingLanguage":"JAVA","message":"\\\\N","exceptionName":"a\\tb","isFatal":false,"lineNumber":7}}'
)


def stream_input(spec: str) -> list[str]:
    """A processing-spec's input lines, as upstream's stream tests read them (no comments, no empty lines)."""
    text = (TABULAR / "processing-spec" / spec / "input" / "events").read_text()
    return [line for line in text.split("\n") if line and not line.startswith("//")]


@pytest.fixture(scope="module")
def tabular(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """What one `shred-tsv` run writes for the input lines of every tabular spec together (each spec's lines are
    then told apart by their event id: an atomic line's 7th column, an entity line's 5th, its root_id)."""
    tmp_path = tmp_path_factory.mktemp("tabular")
    lines = [line for name in sorted(SPECS) for line in SPECS[name]["input"]]
    run = shred(tmp_path, lines, "--format", "shred-tsv", "--iglu-config", str(resolver_config(tmp_path)))
    return written(run)


def event_id_of(folder: str, line: str) -> str:
    return line.split("\t")[6 if folder == ATOMIC else 4]


def test_upstream_tabular_specs_together_give_exactly_their_lines(tabular: dict[str, list[str]]) -> None:
    expected: dict[str, list[str]] = {}
    for spec in SPECS.values():
        for path, lines in spec["good"].items():
            expected.setdefault(f"{rdb.GOOD}/{path}", []).extend(lines)
    assert tabular == {folder: sorted(lines) for folder, lines in expected.items()}  # no other folder, no other line


@pytest.mark.parametrize("name", sorted(SPECS))
def test_upstream_tabular_specs_give_exactly_their_lines(tabular: dict[str, list[str]], name: str) -> None:
    spec = SPECS[name]
    ids = {line.split("\t")[6] for line in spec["input"]}
    found = {
        folder: mine
        for folder, lines in tabular.items()
        if (mine := [line for line in lines if event_id_of(folder, line) in ids])
    }

    assert found == {f"{rdb.GOOD}/{path}": sorted(lines) for path, lines in spec["good"].items()}


def test_upstream_stream_spec_gives_its_tsv_atomic_and_bad_lines(spark: SparkSession, tmp_path: Path) -> None:
    expected = TABULAR / "processing-spec" / "1" / "output"
    run = shred(tmp_path, stream_input("1"), "--format", "shred-tsv", "--iglu-config", str(resolver_config(tmp_path)))
    found = written(run)

    def lines(name: str) -> list[str]:
        return sorted((expected / "good" / "tsv" / name).read_text().splitlines())

    assert found[ATOMIC] == lines("com.snowplowanalytics.snowplow-atomic")
    state = "vendor=com.optimizely/name=state/format=tsv/model=1/revision=0/addition=0"
    consent = "vendor=com.snowplowanalytics.snowplow/name=consent_document/format=tsv/model=1/revision=0/addition=0"
    assert found[f"{rdb.GOOD}/{state}"] == lines("com.optimizely-state")
    assert found[f"{rdb.GOOD}/{consent}"] == lines("com.snowplowanalytics.snowplow-consent_document")
    (bad,) = (expected / "bad").read_text().splitlines()
    upstream_bad = json.loads(bad)
    upstream_bad["data"]["processor"] = {"artifact": "winnow", "version": __version__}
    assert [json.loads(line) for line in found[PARSING_ERRORS]] == [upstream_bad]

    # every type upstream's message lists, with its format, and no other
    completion = json.loads((expected / "good" / "tsv" / "completion.json").read_text())
    message = json.loads((run / "shredding_complete.json").read_text())
    assert sorted(message["data"]["typesInfo"]["types"], key=json.dumps) == sorted(
        completion["data"]["typesInfo"]["types"], key=json.dumps
    )
    assert all(f.split("/format=")[1].startswith("tsv/") for f in found if f.startswith(f"{rdb.GOOD}/vendor="))


@pytest.mark.parametrize("output_format", ["shred-tsv", "widerow-parquet"])
def test_an_unresolvable_schema_makes_its_event_the_upstream_loader_iglu_error(
    spark: SparkSession, tmp_path: Path, output_format: str
) -> None:
    good, unresolvable = stream_input("3")
    run = shred(
        tmp_path, [good, unresolvable], "--format", output_format, "--iglu-config", str(resolver_config(tmp_path))
    )

    if output_format == "shred-tsv":
        found = written(run)
        assert sorted(found) == [IGLU_ERRORS, ATOMIC]
        assert len(found[ATOMIC]) == 1
        bad_lines = found[IGLU_ERRORS]
    else:  # the wide rows build the payload on their own path (the bad rows alone, the line split there)
        assert spark.read.parquet(str(run / rdb.GOOD)).count() == 1
        bad_lines = read_lines(run / rdb.BAD)
    (ours,) = [json.loads(line) for line in bad_lines]
    (theirs,) = [
        json.loads(line) for line in (TABULAR / "processing-spec" / "3" / "output" / "bad").read_text().splitlines()
    ]
    assert ours["data"]["failure"][0]["error"]["lookupHistory"][0].pop("lastAttempt") == "2026-11-22T03:00:00.000Z"
    theirs["data"]["failure"][0]["error"]["lookupHistory"][0].pop("lastAttempt")
    theirs["data"]["processor"] = {"artifact": "winnow", "version": __version__}
    assert ours == theirs

    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {"input": 2, "good": 1, "bad": 1}
    assert summary["bad_rows"] == {"loader_parsing_error": 0, "loader_iglu_error": 1}
    assert summary["iglu"]["failures"] == [
        "iglu:org.schema/some_unknown_name/jsonschema/1-0-0 not found in Iglu Client Embedded (NotFound)"
    ]
    message = json.loads((run / "shredding_complete.json").read_text())
    assert message["data"]["count"] == {"good": 1, "bad": 1}


def test_config_lists_choose_json_tsv_or_skip_per_schema(spark: SparkSession, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "shred": {
                    "iglu_config": str(resolver_config(tmp_path)),
                    "tsv": ["iglu:com.snowplowanalytics.snowplow/application_error/jsonschema/1-*-*"],
                    "skip": ["iglu:com.snowplowanalytics.snowplow/ua_parser_context/jsonschema/1-0-0"],
                }
            }
        )
    )
    ua = '{"schema":"iglu:com.snowplowanalytics.snowplow/ua_parser_context/jsonschema/1-0-0","data":{"useragentFamily":"x"}}'
    line = event(ID_A, event="unstruct", contexts=contexts(WEB_PAGE, ua), unstruct_event=unstruct(APPLICATION_ERROR))
    run = shred(tmp_path, [line], "--config", str(config))

    found = written(run)
    tsv = "vendor=com.snowplowanalytics.snowplow/name=application_error/format=tsv/model=1/revision=0/addition=2"
    json_path = "vendor=org.schema/name=WebPage/format=json/model=1/revision=0/addition=0"
    assert sorted(found) == sorted([ATOMIC, f"{rdb.GOOD}/{tsv}", f"{rdb.GOOD}/{json_path}"])
    # columns: message, programming_language (required), then the optional ones by name; a `\N` string is escaped,
    # a tab is a space
    assert found[f"{rdb.GOOD}/{tsv}"] == [
        "com.snowplowanalytics.snowplow\tapplication_error\tjsonschema\t1-0-2\t" + ID_A + "\t2026-11-01 10:00:00.000\t"
        'events\t["events","application_error"]\tevents\t\\\\N\tJAVA\t'
        + "\t".join(["\\N", "\\N", "a b", "\\N", "0", "\\N", "7", "\\N", "\\N", "\\N"])
    ]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["skipped_entities"] == 1
    assert summary["shredded_types"] == {
        "com.snowplowanalytics.snowplow/application_error/jsonschema/1-0-2": 1,
        "org.schema/WebPage/jsonschema/1-0-0": 1,
    }
    types = json.loads((run / "shredding_complete.json").read_text())["data"]["typesInfo"]["types"]
    assert [(t["schemaKey"].split("/")[1], t["format"]) for t in types] == [
        ("WebPage", "JSON"),
        ("application_error", "TSV"),
    ]


def test_shred_tsv_json_list_keeps_a_type_as_json(spark: SparkSession, tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"shred": {"json": ["iglu:org.schema/WebPage/jsonschema/1-0-*"]}}))
    line = event(ID_A, event="unstruct", contexts=contexts(WEB_PAGE), unstruct_event=unstruct(APPLICATION_ERROR))
    iglu = str(resolver_config(tmp_path))
    run = shred(tmp_path, [line], "--config", str(config), "--format", "shred-tsv", "--iglu-config", iglu)

    assert sorted(written(run)) == [
        f"{rdb.GOOD}/vendor=com.snowplowanalytics.snowplow/name=application_error/format=tsv/model=1/revision=0/addition=2",
        ATOMIC,
        f"{rdb.GOOD}/vendor=org.schema/name=WebPage/format=json/model=1/revision=0/addition=0",
    ]


def test_shred_tsv_without_a_resolver_fails_before_writing(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.tsv"
    source.write_text(event(ID_A) + "\n")
    argv = [
        "shred",
        "--input",
        str(source),
        "--output",
        str(tmp_path / "out"),
        "--run-id",
        RUN_ID,
        "--format",
        "shred-tsv",
    ]

    assert main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --format shred-tsv needs the entities' schemas; allowed: give an Iglu resolver config with "
        "--iglu-config FILE or shred.iglu_config"
    )
    assert not (tmp_path / "out").exists()

    bad = tmp_path / "bad-resolver.json"
    bad.write_text('{"schema": "iglu:com.acme/other/jsonschema/1-0-0", "data": {}}')
    assert main([*argv, "--iglu-config", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists()


def test_a_bad_schema_criterion_names_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"shred": {"skip": ["iglu:com.acme/x/jsonschema/1-0"]}}))
    source = tmp_path / "in.tsv"
    source.write_text(event(ID_A) + "\n")

    assert main(["shred", "--input", str(source), "--output", str(tmp_path / "out"), "--config", str(config)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: {config}: shred.skip[0]: given 'iglu:com.acme/x/jsonschema/1-0'; allowed: iglu:VENDOR/NAME/FORMAT/"
        "M-R-A with * allowed for M, R and A (e.g. iglu:com.acme/checkout/jsonschema/1-*-*)"
    )
