"""Job config: every shipped file loads; unknown keys and bad values are errors that say what is allowed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.config import JobConfig, ManifestConfig, load_config
from jobs.errors import InvalidConfigError


def write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    return path


def test_the_local_profile_loads() -> None:
    config = load_config("configs/local.json")
    assert config.manifest == ManifestConfig(uri="sqlite:.winnow/manifest.db", ttl_days=180)
    assert config.spark.conf["spark.driver.memory"] == "4g"


def test_no_file_means_the_defaults() -> None:
    assert load_config(None) == JobConfig()


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {"manifest": {"ttl": 3}},
            "unknown key 'manifest.ttl'; allowed keys in manifest: buckets, concurrency, cross_batch_synthetic, max_attempts, throttle_patience_seconds, ttl_days, uri",
        ),
        ({"manifest": {"ttl_days": 0}}, "manifest.ttl_days: given 0; allowed: a whole number from 1 to 36500"),
        ({"manifest": {"ttl_days": "30"}}, 'manifest.ttl_days: given "30"; allowed: a whole number'),
        ({"manifest": {"cross_batch_synthetic": 1}}, "manifest.cross_batch_synthetic: given 1; allowed: true or false"),
        ({"manifest": {"concurrency": True}}, "manifest.concurrency: given true; allowed: a whole number"),
        (
            {"dedup": {"fingerprint_fields": ["app_id", "nope"]}},
            "dedup.fingerprint_fields: ['nope'] are not enriched-event fields",
        ),
        (
            {"dedup": {"fingerprint_fields": ["event_id"]}},
            "event_id and event_fingerprint cannot be part of the fingerprint",
        ),
        ({"dedup": {"fingerprint_fields": "app_id"}}, 'dedup.fingerprint_fields: given "app_id"; allowed: a list'),
        ({"manifest": {"uri": 5}}, "manifest.uri: given 5; allowed: a string"),
        ({"output": {"compression": "zstd"}}, 'output.compression: given "zstd"; allowed: none, gzip'),
        (
            {"shred": {"iglu_lookup_deadline_seconds": 0}},
            "shred.iglu_lookup_deadline_seconds: given 0; allowed: a whole number from 1 to 3600",
        ),
        ({"spark": {"conf": {"driver.memory": "4g"}}}, "spark.conf: keys ['driver.memory'] are not Spark settings"),
        ([], "the config: expected an object, given []"),
    ],
)
def test_bad_configs_say_what_is_allowed(tmp_path: Path, document: object, message: str) -> None:
    path = write(tmp_path, document)
    with pytest.raises(InvalidConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{path}: ")
    assert message in str(err.value)


def test_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="does not exist"):
        load_config(tmp_path / "none.json")
