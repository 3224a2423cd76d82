"""Per-environment infrastructure config: `configs/<env>.json` loaded into validated frozen dataclasses.

The one config path: `cdk deploy -c env=dev` → app.py → `load_config("dev")` → `configs/dev.json` → these
dataclasses → construct props. Every key has a default here, so a file holds only what differs;
`configs/README.md` ("Environment keys") documents each one. An unknown env or key, or a value of the wrong
type or range, is an `EnvConfigError` that names it, what was given and what is allowed.
The file's `jobs` section is the jobs' own config (`jobs.config.JobConfig`): it is validated here, at synth
time, and deployed as `config.json` next to the job artifacts.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from cdk.config_check import EnvConfigError as EnvConfigError  # re-exported: the config error callers import
from cdk.config_check import check as _check
from cdk.vpc_config import SHAPES as VPC_SHAPES
from cdk.vpc_config import VpcConfig
from jobs.config import JobConfig, config_from_dict
from jobs.contract import (
    DYNAMODB_MAX_PROVISIONED_UNITS,
    DYNAMODB_ON_DEMAND_READ_UNITS,
    DYNAMODB_ON_DEMAND_WRITE_UNITS,
    DYNAMODB_QUERIES_PER_READ_UNIT,
    parse_queue,
)
from jobs.errors import InvalidConfigError

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"
ENVIRONMENTS: tuple[str, ...] = ("dev", "prod")
"""The deployable environments, one `configs/<env>.json` each (`configs/local.json` is a local job config)."""

EMR_SPARK_VERSIONS: dict[str, str] = {
    "emr-7.12.0": "3.5.6",
    "emr-7.13.0": "3.5.6",
    "emr-spark-8.0.0": "4.0.2",
    "emr-spark-8.1.0": "4.1.1",
}
"""The Spark version each supported EMR release ships: the local `pyspark` pin must be the same version."""

BillingMode = Literal["on-demand", "provisioned"]
ManifestBackend = Literal["dynamodb", "lake"]
Architecture = Literal["X86_64", "ARM64"]

_ACCOUNT = re.compile(r"\d{12}")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_PREFIX = re.compile(r"([A-Za-z0-9!_.*'()-]+/)+")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_SCHEDULE = re.compile(r"(cron|rate)\(.+\)")
_KMS_KEY_ARN = re.compile(r"arn:aws[a-z-]*:kms:[a-z]{2}(-[a-z]+)+-\d:\d{12}:key/[A-Za-z0-9-]+")


@dataclass(frozen=True, kw_only=True)
class StorageConfig:
    """Where the data lives."""

    input_bucket: str | None = None
    """Existing bucket holding the enriched input, imported by name; null: the stack creates one."""
    input_prefix: str = "enriched/"
    """Key prefix of the enriched input; the jobs may read only under it."""
    output_bucket: str | None = None
    """Existing bucket for the outputs (`deduplicated/`, `shredded/`), imported by name; null: created."""
    access_log_retention_days: int = 90
    """Days the S3 server access logs are kept."""
    job_log_retention_days: int = 30
    """Days the EMR job logs are kept."""

    def __post_init__(self) -> None:
        for key, name in (("storage.input_bucket", self.input_bucket), ("storage.output_bucket", self.output_bucket)):
            _check(name is None or bool(_BUCKET.fullmatch(name)), key, name, "null or an S3 bucket name")
        _check(
            bool(_PREFIX.fullmatch(self.input_prefix)),
            "storage.input_prefix",
            self.input_prefix,
            "a key prefix ending in '/', e.g. \"enriched/\"",
        )
        for key, days in (
            ("storage.access_log_retention_days", self.access_log_retention_days),
            ("storage.job_log_retention_days", self.job_log_retention_days),
        ):
            _check(1 <= days <= 3650, key, days, "1 to 3650")


@dataclass(frozen=True, kw_only=True)
class ManifestConfig:
    """The events manifest dedup checks, and the DynamoDB manifest table (provisioned whatever the backend)."""

    backend: ManifestBackend = "dynamodb"
    """What the state machine passes as `--manifest`: `dynamodb` (the table) or `lake` (Parquet in the manifest
    bucket the Storage stack then creates)."""
    billing_mode: BillingMode = "on-demand"
    """`on-demand` (pay per request) or `provisioned` (then give both capacities)."""
    read_capacity: int | None = None
    """Read capacity units when provisioned."""
    write_capacity: int | None = None
    """Write capacity units when provisioned."""

    def __post_init__(self) -> None:
        backends = get_args(ManifestBackend)
        _check(self.backend in backends, "manifest.backend", self.backend, ", ".join(backends))
        capacities = {"manifest.read_capacity": self.read_capacity, "manifest.write_capacity": self.write_capacity}
        for key, units in capacities.items():
            if self.billing_mode == "provisioned":
                _check(
                    units is not None and 1 <= units <= DYNAMODB_MAX_PROVISIONED_UNITS,
                    key,
                    units,
                    f"1 to {DYNAMODB_MAX_PROVISIONED_UNITS} when provisioned",
                )
            else:
                _check(units is None, key, units, "null (or leave it out) when billing_mode is on-demand")


@dataclass(frozen=True, kw_only=True)
class EmrConfig:
    """The EMR Serverless Spark application and its job runs."""

    release_label: str = "emr-spark-8.0.0"
    """EMR release; must ship the Spark version of the local pyspark pin (see `EMR_SPARK_VERSIONS`)."""
    architecture: Architecture = "X86_64"
    """CPU architecture of the workers."""
    max_vcpu: int = 32
    """Application-wide cap on vCPUs (all running jobs together)."""
    max_memory_gb: int = 128
    """Application-wide cap on memory."""
    max_disk_gb: int = 500
    """Application-wide cap on disk."""
    idle_timeout_minutes: int = 15
    """The application stops after this many idle minutes (and starts again on the next job)."""
    job_timeout_minutes: int = 120
    """A job run is cancelled after this many minutes."""
    python: str = "/usr/bin/python3.11"
    """The Python the driver and executors run (the jobs need 3.11 or newer)."""
    spark_conf: dict[str, str] = field(
        default_factory=lambda: {
            "spark.driver.cores": "2",
            "spark.driver.memory": "4g",
            "spark.executor.cores": "4",
            "spark.executor.memory": "8g",
        }
    )
    """Spark settings passed with spark-submit (`--conf k=v`): driver and executor sizes belong here."""
    vpc: VpcConfig | None = None
    """The network the workers run in (cdk/vpc_config.py); null: none, as EMR Serverless runs it by default."""

    def __post_init__(self) -> None:
        _check(
            self.release_label in EMR_SPARK_VERSIONS,
            "emr.release_label",
            self.release_label,
            ", ".join(EMR_SPARK_VERSIONS),
        )
        _check(1 <= self.max_vcpu <= 4000, "emr.max_vcpu", self.max_vcpu, "1 to 4000")
        _check(1 <= self.max_memory_gb <= 20000, "emr.max_memory_gb", self.max_memory_gb, "1 to 20000")
        _check(20 <= self.max_disk_gb <= 200000, "emr.max_disk_gb", self.max_disk_gb, "20 to 200000")
        _check(
            1 <= self.idle_timeout_minutes <= 10080, "emr.idle_timeout_minutes", self.idle_timeout_minutes, "1 to 10080"
        )
        # Since EMR 7.11 a batch job's timeout is at most 7 days and may not be 0; moto wants 5 or more.
        _check(
            5 <= self.job_timeout_minutes <= 10080, "emr.job_timeout_minutes", self.job_timeout_minutes, "5 to 10080"
        )
        _check(self.python.startswith("/"), "emr.python", self.python, "an absolute path, e.g. /usr/bin/python3.11")
        bad = sorted(key for key in self.spark_conf if not key.startswith("spark."))
        _check(not bad, "emr.spark_conf", bad, "keys starting 'spark.'")


@dataclass(frozen=True, kw_only=True)
class ScheduleConfig:
    """The EventBridge Scheduler schedule that starts the pipeline."""

    enabled: bool = False
    """Whether the schedule starts runs (it exists either way, so it can be switched on in the console)."""
    expression: str = "cron(0 3 * * ? *)"
    """EventBridge Scheduler expression: `cron(...)` or `rate(...)`."""
    timezone: str = "UTC"
    """IANA time zone the cron expression is read in."""

    def __post_init__(self) -> None:
        _check(
            bool(_SCHEDULE.fullmatch(self.expression)),
            "schedule.expression",
            self.expression,
            'cron(...) or rate(...), e.g. "cron(0 3 * * ? *)"',
        )


@dataclass(frozen=True, kw_only=True)
class LoaderConfig:
    """Snowplow RDB Loader's input: where the state machine sends each shred run's `shredding_complete` message
    (the run folder's `shredding_complete.json`, rdb layout) once the shred job has succeeded."""

    create_queue: bool = False
    """Create the loader queue `winnow-<env>-shredding-complete.fifo` (SQS FIFO) in the Storage stack; the state
    machine sends to it. false: it sends to `jobs.output.queue` (an existing queue or topic), or nowhere when
    that is null."""
    kms_key_arn: str | None = None
    """The customer managed KMS key the existing queue or topic of `jobs.output.queue` is encrypted with: the state
    machine's role may use it (kms:GenerateDataKey, kms:Decrypt). null: SSE-SQS or an AWS managed key (nothing to
    grant)."""

    def __post_init__(self) -> None:
        _check(
            self.kms_key_arn is None or bool(_KMS_KEY_ARN.fullmatch(self.kms_key_arn)),
            "loader.kms_key_arn",
            self.kms_key_arn,
            "null or a KMS key ARN, e.g. arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        )


# The wait before a failed job run is retried; it doubles with each retry (the state machine's backoff rate 2).
RETRY_INTERVAL_SECONDS = 120

# Manifest sizing (see EnvConfig.check_manifest_capacity).
ON_DEMAND_WRITES_PER_SECOND = DYNAMODB_ON_DEMAND_WRITE_UNITS
ON_DEMAND_QUERIES_PER_SECOND = DYNAMODB_ON_DEMAND_READ_UNITS * DYNAMODB_QUERIES_PER_READ_UNIT
"""What a new on-demand table serves (`jobs.contract`)."""
MANIFEST_SHARE_OF_JOB = 0.5
"""The manifest pass must fit in this share of `emr.job_timeout_minutes` (the rest reads, decides and writes)."""
REQUESTS_PER_SECOND_IN_FLIGHT = 100
"""What one request in flight achieves: DynamoDB answers in single-digit milliseconds; 10 ms taken."""


@dataclass(frozen=True, kw_only=True)
class PipelineConfig:
    """How a pipeline run behaves."""

    timeout_minutes: int = 490
    """The whole run (both jobs, retries included) fails after this many minutes."""
    job_retries: int = 1
    """How many times a failed job run is retried (the jobs are rerun-safe), 0 to 3."""
    events_per_run: int = 1_000_000
    """The most events one run is sized for: the manifest table and the job timeout are checked against it."""

    def __post_init__(self) -> None:
        _check(10 <= self.timeout_minutes <= 10080, "pipeline.timeout_minutes", self.timeout_minutes, "10 to 10080")
        _check(0 <= self.job_retries <= 3, "pipeline.job_retries", self.job_retries, "0 to 3")
        _check(1 <= self.events_per_run <= 10**12, "pipeline.events_per_run", self.events_per_run, "1 to 10^12")


@dataclass(frozen=True, kw_only=True)
class AlarmConfig:
    """Who hears about failures."""

    emails: tuple[str, ...] = ()
    """Email addresses subscribed to the failure topic (each must confirm the subscription)."""

    def __post_init__(self) -> None:
        bad = [email for email in self.emails if not _EMAIL.fullmatch(email)]
        _check(not bad, "alarm.emails", bad, "email addresses")


@dataclass(frozen=True, kw_only=True)
class EnvSettings:
    """The keys of `configs/<env>.json` besides `jobs` (which `JobConfig` validates)."""

    account: str | None = None
    """AWS account id; null: the CLI's current account (`CDK_DEFAULT_ACCOUNT`), fine for dev only."""
    region: str = "eu-west-1"
    """AWS region."""
    retain_data: bool = True
    """Keep the table, buckets and logs when the stacks are destroyed (and protect the table from deletion)."""
    tags: dict[str, str] = field(default_factory=dict)
    """Extra tags on every resource (besides `project` and `env`)."""
    storage: StorageConfig = field(default_factory=StorageConfig)
    manifest: ManifestConfig = field(default_factory=ManifestConfig)
    emr: EmrConfig = field(default_factory=EmrConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    alarm: AlarmConfig = field(default_factory=AlarmConfig)
    loader: LoaderConfig = field(default_factory=LoaderConfig)


@dataclass(frozen=True, kw_only=True)
class EnvConfig(EnvSettings):
    """One environment's validated config: what app.py turns into stacks."""

    env: str
    """The environment's name (the file's name): part of every stack name and tag."""
    jobs: dict[str, Any] = field(default_factory=dict)
    """The jobs' config section as written (validated as a `JobConfig`), deployed as `config.json`."""
    job_config: JobConfig = field(default_factory=JobConfig)
    """The same section, parsed."""

    def __post_init__(self) -> None:
        _check(
            self.account is None or bool(_ACCOUNT.fullmatch(self.account)),
            "account",
            self.account,
            "null or a 12-digit account id",
        )
        _check(bool(_REGION.fullmatch(self.region)), "region", self.region, "an AWS region, e.g. eu-west-1")
        _check(
            self.env == "dev" or self.account is not None,
            "account",
            self.account,
            "an explicit 12-digit account id outside dev",
        )
        reserved = sorted({"project", "env"} & set(self.tags))
        _check(not reserved, "tags", reserved, "any tag key but project and env (set by the app)")
        # Run minutes must cover both jobs at their timeout, every retry and the waits between, or a slow run that
        # retries is cut short by the state machine.
        needed = self.minimum_pipeline_minutes()
        _check(
            self.pipeline.timeout_minutes >= needed,
            "pipeline.timeout_minutes",
            self.pipeline.timeout_minutes,
            f"at least {needed}: 2 jobs x (1 + pipeline.job_retries) x emr.job_timeout_minutes, plus the waits "
            "before retries",
        )

        if self.manifest.backend == "dynamodb":  # the lake's throughput is S3's and Spark's, not a table's
            self.check_manifest_capacity()
        self.check_loader_queue()

    def check_loader_queue(self) -> None:
        """`loader.create_queue` and `jobs.output.queue` exclude each other; a named queue or topic is FIFO (RDB
        Loader reads only those) and in a form the state machine's role can be scoped to; a KMS key goes with a
        named one. (On EMR the state machine sends; the deployed job config has no `output.queue`.)"""
        queue = self.job_config.output.queue
        if self.loader.create_queue:
            _check(
                queue is None,
                "jobs.output.queue",
                queue,
                "null while loader.create_queue is true: set one or the other (loader.create_queue creates the "
                "env's loader queue and the state machine sends to it; jobs.output.queue names an existing queue "
                "or topic)",
            )
            _check(
                self.loader.kms_key_arn is None,
                "loader.kms_key_arn",
                self.loader.kms_key_arn,
                "null while loader.create_queue is true (the created queue is encrypted with SQS-managed keys)",
            )
        elif queue is None:
            _check(
                self.loader.kms_key_arn is None,
                "loader.kms_key_arn",
                self.loader.kms_key_arn,
                "null while no queue is set (jobs.output.queue null, loader.create_queue false)",
            )
        else:
            # The job config's own check (`parse_queue`) already took its form; RDB Loader reads only FIFO.
            _check(
                parse_queue(queue).fifo,
                "jobs.output.queue",
                queue,
                "null, sqs://NAME of a FIFO queue in the env's account and region (NAME ends in .fifo), or "
                "sns://ARN of a FIFO topic (arn:aws:sns:REGION:ACCOUNT:NAME.fifo): RDB Loader reads only FIFO",
            )

    def manifest_rates(self) -> tuple[float, float, str]:
        """(puts, queries) a second the planned table serves, and what that comes from."""
        if self.manifest.billing_mode == "provisioned":
            assert self.manifest.read_capacity is not None and self.manifest.write_capacity is not None
            return (
                self.manifest.write_capacity,
                float(DYNAMODB_QUERIES_PER_READ_UNIT * self.manifest.read_capacity),
                "provisioned",
            )
        return ON_DEMAND_WRITES_PER_SECOND, ON_DEMAND_QUERIES_PER_SECOND, "on-demand (a new table's throughput)"

    def tasks_at_once(self) -> int:
        """Executors times task slots: how many tasks call the manifest at once."""
        conf = self.emr.spark_conf
        return int(conf["spark.dynamicAllocation.maxExecutors"]) * int(conf.get("spark.executor.cores", "4"))

    def check_manifest_capacity(self) -> None:
        """Reject a plan the manifest table cannot serve (`manifest.backend` dynamodb only).

        The jobs pace their requests to the table's capacity (jobs/manifest/dynamodb_client.py), so requests in flight
        no longer storm the table; what can still fail a run at 3 a.m. is a table too small for the volume (the
        manifest pass of `pipeline.events_per_run` events, one put per event and, with cross-batch synthetic
        dedup, one query, must fit in half the job timeout at the table's rate), or too few requests in flight
        to reach that rate (executors x cores x `manifest.concurrency`, each ~100 requests a second).
        """
        conf = self.emr.spark_conf
        _check(
            str(conf.get("spark.dynamicAllocation.maxExecutors", "")).isdigit(),
            "emr.spark_conf",
            "spark.dynamicAllocation.maxExecutors " + str(conf.get("spark.dynamicAllocation.maxExecutors")),
            'a whole number of executors in "spark.dynamicAllocation.maxExecutors" (the jobs divide the manifest '
            "table's capacity by executors x cores)",
        )
        events = self.pipeline.events_per_run
        writes, queries, source = self.manifest_rates()
        window = MANIFEST_SHARE_OF_JOB * self.emr.job_timeout_minutes * 60
        # name: (requests, requests/s the table serves, the capacity key, requests per capacity unit)
        needed = {"puts": (events, writes, "manifest.write_capacity", 1)}
        if self.job_config.manifest.cross_batch_synthetic:
            needed["queries"] = (events, queries, "manifest.read_capacity", 2)
        for name, (count, rate, key, per_unit) in needed.items():
            minutes = count / rate / 60
            _check(
                minutes <= window / 60,
                "manifest",
                f"{self.manifest.billing_mode}: {rate:,.0f} {name}/s",
                f"a table that serves the {count:,} {name} of pipeline.events_per_run within half of "
                f"emr.job_timeout_minutes ({window / 60:.0f} min); at {rate:,.0f}/s ({source}) they take "
                f"{minutes:,.0f} min. "
                + ("Raise " if self.manifest.billing_mode == "provisioned" else "Use billing_mode provisioned with ")
                + f"{key} {math.ceil(count / window / per_unit):,} or more, "
                + ("use billing_mode on-demand, " if self.manifest.billing_mode == "provisioned" else "")
                + "lower pipeline.events_per_run (and cap runs with jobs.input.max_files/max_bytes), or raise "
                "emr.job_timeout_minutes",
            )
        in_flight = self.tasks_at_once() * self.job_config.manifest.concurrency
        rate_needed = sum(count for count, *_ in needed.values()) / window
        _check(
            in_flight * REQUESTS_PER_SECOND_IN_FLIGHT >= rate_needed,
            "jobs.manifest.concurrency",
            self.job_config.manifest.concurrency,
            f"enough requests in flight for {rate_needed:,.0f} requests/s: executors x cores x concurrency = "
            f"{in_flight:,}, each ~{REQUESTS_PER_SECOND_IN_FLIGHT} requests/s; raise it, or "
            "spark.dynamicAllocation.maxExecutors",
        )

    def minimum_pipeline_minutes(self) -> int:
        """Both jobs at their timeout on every attempt, plus the retry waits (doubling from RETRY_INTERVAL_SECONDS)."""
        retries = self.pipeline.job_retries
        waits = RETRY_INTERVAL_SECONDS * ((1 << retries) - 1)  # 2, then 4, 8 … minutes
        per_job = (1 + retries) * self.emr.job_timeout_minutes * 60 + waits
        return math.ceil(2 * per_job / 60)


def load_config(env: str, config_dir: Path = CONFIG_DIR) -> EnvConfig:
    """Load and validate `configs/<env>.json`.

    Raises:
        EnvConfigError: the env is not one of `ENVIRONMENTS`, or its file is missing, not JSON, or holds an
            unknown key or a bad value (the message names the file and the key).
    """
    if env not in ENVIRONMENTS:
        raise EnvConfigError(f"unknown env {env!r}; allowed: {', '.join(ENVIRONMENTS)}")
    path = config_dir / f"{env}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EnvConfigError(f"env {env!r} has no config file {path}") from None
    except json.JSONDecodeError as err:
        raise EnvConfigError(f"{path} is not valid JSON: {err}") from None
    try:
        return config_from_data(env, data)
    except InvalidConfigError as err:
        raise EnvConfigError(f"{path}: {err}") from None


def config_from_data(env: str, data: Any) -> EnvConfig:
    """Validate parsed env config JSON (`load_config` without the file)."""
    if not isinstance(data, dict):
        raise EnvConfigError(f"expected an object, given {json.dumps(data)}")
    infra = {key: value for key, value in data.items() if key != "jobs"}
    jobs = data.get("jobs", {})
    try:
        parsed = config_from_dict(EnvSettings, infra)
    except EnvConfigError:
        raise
    except InvalidConfigError as err:
        raise EnvConfigError(_with_allowed(str(err))) from None
    try:
        job_config = config_from_dict(JobConfig, jobs, "jobs")
    except InvalidConfigError as err:
        raise EnvConfigError(str(err)) from None
    settings = {name: getattr(parsed, name) for name in EnvSettings.__dataclass_fields__}
    return EnvConfig(env=env, jobs=jobs, job_config=job_config, **settings)


def _with_allowed(message: str) -> str:
    """A type error of the settings, completed with what is allowed where the generic check does not say."""
    if "allowed" in message:
        return message
    if message.startswith("emr.vpc:"):
        return f"{message}; allowed: {VPC_SHAPES}"
    if "expected an object" in message:
        return f"{message}; allowed: an object"
    return f"{message}; allowed keys: jobs, " + ", ".join(EnvSettings.__dataclass_fields__)
