"""Resource names: the only place they are formed.

Buckets and the table have fixed names so the other stacks refer to them by name, in their own stack
(`Bucket.from_bucket_name`): IAM statements then render the same way whatever the account, and cdk-nag
acknowledgements of a finding stay exact. Bucket names are global, hence account and region in them.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdk.config import EnvConfig

PROJECT = "winnow"


@dataclass(frozen=True, kw_only=True)
class ResourceNames:
    """The names of one environment's stateful resources, as seen from one stack."""

    input_bucket: str
    output_bucket: str
    artifacts_bucket: str
    job_logs_bucket: str
    access_logs_bucket: str
    manifest_bucket: str
    """The lake manifest's bucket (created only with `manifest.backend` lake)."""
    manifest_table: str


def resource_names(config: EnvConfig, account: str) -> ResourceNames:
    """Names for `config.env`; `account` is the stack's account (a token when the stack has none)."""

    def bucket(purpose: str) -> str:
        return f"{PROJECT}-{config.env}-{purpose}-{account}-{config.region}"

    return ResourceNames(
        input_bucket=config.storage.input_bucket or bucket("input"),
        output_bucket=config.storage.output_bucket or bucket("output"),
        artifacts_bucket=bucket("artifacts"),
        job_logs_bucket=bucket("job-logs"),
        access_logs_bucket=bucket("access-logs"),
        manifest_bucket=bucket("manifest"),
        manifest_table=f"{PROJECT}-{config.env}-manifest",
    )
