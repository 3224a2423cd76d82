"""The env configs: every file validates, errors name what was given and what is allowed, versions pair up."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from cdk.config import CONFIG_DIR, EMR_SPARK_VERSIONS, ENVIRONMENTS, EnvConfigError, config_from_data, load_config

ROOT = Path(__file__).resolve().parents[2]
JOB_CONFIGS = {"local.json"}  # job configs for local runs, not environments


def dev_data(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIG_DIR / "dev.json").read_text(encoding="utf-8"))
    data.update(changes)
    return data


def test_every_env_file_is_an_environment_and_loads() -> None:
    env_files = {path.stem for path in CONFIG_DIR.glob("*.json") if path.name not in JOB_CONFIGS}
    assert env_files == set(ENVIRONMENTS)
    for env in ENVIRONMENTS:
        assert load_config(env).env == env


def test_unknown_env_lists_the_allowed_ones() -> None:
    with pytest.raises(EnvConfigError, match=r"unknown env 'qa'; allowed: dev, prod"):
        load_config("qa")


def test_unknown_key_lists_the_allowed_keys() -> None:
    with pytest.raises(EnvConfigError, match=r"unknown key 'regoin'; allowed keys: account, alarm, emr, "):
        config_from_data("dev", dev_data(regoin="eu-west-1"))
    with pytest.raises(EnvConfigError, match=r"unknown key 'emr.max_cpu'; allowed keys in emr: architecture, "):
        config_from_data("dev", dev_data(emr={"max_cpu": 4}))


def test_a_bad_job_key_fails_at_synth_time() -> None:
    with pytest.raises(EnvConfigError, match=r"jobs.dedup.synthetic: given \"first\"; allowed: reid, quarantine"):
        config_from_data("dev", dev_data(jobs={"dedup": {"synthetic": "first"}}))
    with pytest.raises(EnvConfigError, match=r"unknown key 'jobs.dedupe'"):
        config_from_data("dev", dev_data(jobs={"dedupe": {}}))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"manifest": {"billing_mode": "provisioned"}}, r"manifest.read_capacity: given null; allowed: 1 to 40000"),
        ({"manifest": {"read_capacity": 5}}, r"manifest.read_capacity: given 5; allowed: null .* on-demand"),
        (
            {"manifest": {"billing_mode": "free"}},
            r"manifest.billing_mode: given \"free\"; allowed: on-demand, provisioned",
        ),
        ({"manifest": {"backend": "s3"}}, r"manifest.backend: given \"s3\"; allowed: dynamodb, lake"),
        ({"emr": {"release_label": "emr-6.15.0"}}, r"emr.release_label: given \"emr-6.15.0\"; allowed: emr-7.12.0"),
        ({"emr": {"spark_conf": {"driver.memory": "4g"}}}, r"emr.spark_conf: given \[\"driver.memory\"\]"),
        ({"emr": {"job_timeout_minutes": 0}}, r"emr.job_timeout_minutes: given 0; allowed: 5 to 10080"),
        ({"schedule": {"expression": "0 3 * * *"}}, r"schedule.expression: given \"0 3 \* \* \*\"; allowed: cron"),
        ({"storage": {"input_prefix": "enriched"}}, r"storage.input_prefix: given \"enriched\"; allowed: a key prefix"),
        ({"storage": {"input_bucket": "Bad_Bucket"}}, r"storage.input_bucket: given \"Bad_Bucket\""),
        ({"alarm": {"emails": ["ops"]}}, r"alarm.emails: given \[\"ops\"\]; allowed: email addresses"),
        ({"account": "12345"}, r"account: given \"12345\"; allowed: null or a 12-digit account id"),
        ({"tags": {"env": "x"}}, r"tags: given \[\"env\"\]"),
        (
            {"pipeline": {"timeout_minutes": 60}},
            r"pipeline.timeout_minutes: given 60; allowed: at least 244: 2 jobs x \(1 \+ pipeline.job_retries\)",
        ),
        ({"retain_data": "yes"}, r"retain_data: given \"yes\"; allowed: true or false"),
    ],
)
def test_bad_values_name_the_key_the_value_and_what_is_allowed(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(EnvConfigError, match=message):
        config_from_data("dev", dev_data(**changes))


def test_outside_dev_the_account_is_explicit() -> None:
    data = json.loads((CONFIG_DIR / "prod.json").read_text(encoding="utf-8"))
    data["account"] = None
    with pytest.raises(EnvConfigError, match=r"account: given null; allowed: an explicit 12-digit account id"):
        config_from_data("prod", data)


def test_load_config_names_the_file() -> None:
    with pytest.raises(EnvConfigError, match=r"dev.json: unknown key 'x'"):
        load_config("dev", config_dir=_write_config({"x": 1}))


def _write_config(data: dict[str, Any]) -> Path:
    import tempfile

    folder = Path(tempfile.mkdtemp())
    (folder / "dev.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def test_prod_retains_data_and_runs_on_schedule_dev_does_neither() -> None:
    prod, dev = load_config("prod"), load_config("dev")
    assert (prod.retain_data, prod.schedule.enabled) == (True, True)
    assert (dev.retain_data, dev.schedule.enabled) == (False, False)


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_emr_release_ships_the_spark_of_the_local_pyspark_pin(env: str) -> None:
    """The release label and `pyspark==` in requirements.txt are one pair (and the venv has that pyspark)."""
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.txt").read_text(encoding="utf-8"), re.M))
    spark = EMR_SPARK_VERSIONS[load_config(env).emr.release_label]
    assert (spark, spark) == (pins["pyspark"], version("pyspark"))


def test_the_pipeline_timeout_covers_every_retry_of_both_jobs() -> None:
    prod = load_config("prod")
    # 2 jobs x (1 + 1 retry) x 180 minutes + 2 minutes before each retry.
    assert prod.minimum_pipeline_minutes() == 724 <= prod.pipeline.timeout_minutes
    three = dev_data(emr={"job_timeout_minutes": 60}, pipeline={"timeout_minutes": 497, "job_retries": 3})
    with pytest.raises(EnvConfigError, match=r"pipeline.timeout_minutes: given 497; allowed: at least 508: "):
        config_from_data("dev", three)  # waits 2 + 4 + 8 minutes per job


def test_a_manifest_table_too_small_for_the_volume_is_rejected_with_the_capacity_it_needs() -> None:
    prod = json.loads((CONFIG_DIR / "prod.json").read_text())
    # The earlier prod plan: 50 read / 500 write units for 20 million events a run, half of 180 minutes.
    prod["manifest"] = {"billing_mode": "provisioned", "read_capacity": 50, "write_capacity": 500}
    with pytest.raises(EnvConfigError) as small:
        config_from_data("prod", prod)
    assert str(small.value) == (
        'manifest: given "provisioned: 500 puts/s"; allowed: a table that serves the 20,000,000 puts of '
        "pipeline.events_per_run within half of emr.job_timeout_minutes (90 min); at 500/s (provisioned) they take "
        "667 min. Raise manifest.write_capacity 3,704 or more, use billing_mode on-demand, lower "
        "pipeline.events_per_run (and cap runs with jobs.input.max_files/max_bytes), or raise emr.job_timeout_minutes"
    )
    prod["manifest"] = {"billing_mode": "provisioned", "read_capacity": 1000, "write_capacity": 4000}
    with pytest.raises(EnvConfigError, match=r"Raise manifest.read_capacity 1,852 or more"):
        config_from_data("prod", prod)  # queries: half a read unit each
    prod["jobs"]["manifest"]["cross_batch_synthetic"] = False  # one put per pair only: no queries to serve
    assert config_from_data("prod", prod).manifest_rates() == (4000, 2000.0, "provisioned")


def test_too_few_requests_in_flight_for_the_volume_are_rejected() -> None:
    data = dev_data(pipeline={"timeout_minutes": 250, "events_per_run": 5_000_000})
    data["jobs"] = {"manifest": {"concurrency": 2}}  # 3 executors x 4 cores x 2 = 24 in flight, ~2,400/s
    with pytest.raises(EnvConfigError, match=r"jobs.manifest.concurrency: given 2; allowed: enough requests in "
                       r"flight for 5,556 requests/s: executors x cores x concurrency = 24"):  # fmt: skip
        config_from_data("dev", data)
    data["pipeline"]["events_per_run"] = 10_000_000  # on demand, 4,000 puts/s: 42 min, more than half of 60
    with pytest.raises(EnvConfigError, match=r"they take 42 min. Use billing_mode provisioned with "
                       r"manifest.write_capacity 5,556 or more, lower pipeline.events_per_run"):  # fmt: skip
        config_from_data("dev", data)


def test_the_executors_the_manifest_is_shared_by_must_be_bounded() -> None:
    data = dev_data()
    del data["emr"]["spark_conf"]["spark.dynamicAllocation.maxExecutors"]
    with pytest.raises(EnvConfigError, match=r'emr.spark_conf: .* allowed: a whole number of executors in '
                       r'"spark.dynamicAllocation.maxExecutors"'):  # fmt: skip
        config_from_data("dev", data)


def test_the_manifest_backend_defaults_to_dynamodb_and_is_checked_when_built_directly() -> None:
    from cdk.config import ManifestConfig

    assert (load_config("dev").manifest.backend, load_config("prod").manifest.backend) == ("dynamodb", "dynamodb")
    assert ManifestConfig(backend="lake").backend == "lake"
    with pytest.raises(EnvConfigError) as bad:
        ManifestConfig(backend="Lake")  # type: ignore[arg-type]
    assert str(bad.value) == 'manifest.backend: given "Lake"; allowed: dynamodb, lake'


def test_the_table_capacity_checks_apply_to_the_dynamodb_backend_only() -> None:
    """With the lake manifest no table serves the run: a small table or unbounded executors are no reason to fail."""
    prod = json.loads((CONFIG_DIR / "prod.json").read_text())
    prod["manifest"] = {"billing_mode": "provisioned", "read_capacity": 50, "write_capacity": 500}
    with pytest.raises(EnvConfigError, match=r'manifest: given "provisioned: 500 puts/s"'):
        config_from_data("prod", prod)
    prod["manifest"]["backend"] = "lake"
    config = config_from_data("prod", prod)
    assert (config.manifest.backend, config.manifest.write_capacity) == ("lake", 500)  # the table is still sized
    del prod["emr"]["spark_conf"]["spark.dynamicAllocation.maxExecutors"]
    assert config_from_data("prod", prod).manifest.backend == "lake"
