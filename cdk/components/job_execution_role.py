"""The role EMR Serverless job runs assume: exactly the data, manifest, artifacts and logs the jobs use.

No SQS or SNS: on EMR the state machine, not the shred job, sends RDB Loader's message (an application without
a VPC reaches S3, but is not documented to reach SQS or SNS), so the deployed job config has no `output.queue`.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk.nag import acknowledge, resource_finding

# Events are put and queried; GetItem, DeleteItem and UpdateItem: the writer lease and the register's own items
# (jobs/manifest/writer_lease.py, unfinished.py, completions.py), and a redo's or abandon's removal of its pairs;
# Scan: only a redo over a changed input, or an abandon, finds its own pairs (`DynamoDbManifest.own_pairs`).
MANIFEST_ACTIONS = (
    "dynamodb:PutItem", "dynamodb:Query", "dynamodb:GetItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem",
    "dynamodb:Scan", "dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive",
)  # fmt: skip
"""What the dedup job's DynamoDB manifest calls (`tests/infra/test_manifest_actions.py` checks the jobs' calls)."""
LAKE_MANIFEST_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload")
"""What the dedup job's lake manifest does under its prefix: read, create (conditional put) and write commits, the
lease and Spark's segment files (multipart uploads included), delete the lease and expired segments."""


@dataclass(frozen=True, kw_only=True)
class JobExecutionRoleProps:
    """Props of `JobExecutionRole`. Prefixes end in '/'."""

    input_bucket: s3.IBucket
    input_prefix: str
    """The jobs read enriched input only under this prefix."""
    output_bucket: s3.IBucket
    output_prefixes: tuple[str, ...]
    """The jobs read and write (and replace on rerun) only under these prefixes."""
    manifest_table: dynamodb.ITable | None = None
    """The DynamoDB manifest (`manifest.backend` dynamodb), the only table the jobs touch (`MANIFEST_ACTIONS`)."""
    manifest_bucket: s3.IBucket | None = None
    """Instead of the table, the lake manifest's bucket (`manifest.backend` lake): objects under `manifest_prefix`
    only, and no DynamoDB permission at all."""
    manifest_prefix: str = "lake/"
    """Where the lake manifest lies in `manifest_bucket`."""
    artifacts_bucket: s3.IBucket
    artifacts_prefix: str
    """Where the artifacts versions live (all of them: a run started before a deploy reads its own version)."""
    log_bucket: s3.IBucket
    log_prefix: str
    """Where EMR writes the job runs' logs."""

    def __post_init__(self) -> None:
        if (self.manifest_table is None) == (self.manifest_bucket is None):
            raise ValueError(
                f"job role manifest: given manifest_table {self.manifest_table is not None}, manifest_bucket "
                f"{self.manifest_bucket is not None}; allowed: exactly one (the env's manifest.backend)"
            )


class JobExecutionRole(Construct):
    """An IAM role for `emr-serverless.amazonaws.com` with one statement per thing the jobs touch."""

    def __init__(self, scope: Construct, construct_id: str, props: JobExecutionRoleProps) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("emr-serverless.amazonaws.com"),
            description="Winnow EMR Serverless job runs: read input, write output, the manifest "
            + ("table" if props.manifest_table is not None else "bucket")
            + ", own logs",
        )

        def objects(bucket: s3.IBucket, prefix: str) -> str:
            return bucket.arn_for_objects(f"{prefix}*")

        def folder(bucket: s3.IBucket, prefix: str) -> str:
            # Spark data folders: EMRFS also reads and writes a `<folder>_$folder$` marker next to a folder.
            return bucket.arn_for_objects(f"{prefix.rstrip('/')}*")

        statements = [
            ("ReadInput", ["s3:GetObject"], [folder(props.input_bucket, props.input_prefix)]),
            (
                "WriteOutput",
                ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
                [folder(props.output_bucket, prefix) for prefix in props.output_prefixes],
            ),
            ("ReadArtifacts", ["s3:GetObject"], [objects(props.artifacts_bucket, props.artifacts_prefix)]),
            ("WriteLogs", ["s3:PutObject"], [objects(props.log_bucket, props.log_prefix)]),
        ]
        if props.manifest_table is not None:
            statements.append(("Manifest", list(MANIFEST_ACTIONS), [props.manifest_table.table_arn]))
        if props.manifest_bucket is not None:
            # A Spark data folder like the outputs (the segments): the same EMRFS marker next to it.
            statements.append(
                ("Manifest", list(LAKE_MANIFEST_ACTIONS), [folder(props.manifest_bucket, props.manifest_prefix)])
            )
        for sid, actions, resources in statements:
            self.role.add_to_policy(iam.PolicyStatement(sid=sid, actions=actions, resources=resources))
            for resource in resources:
                if resource.endswith("*"):
                    acknowledge(
                        self,
                        "IAM5",
                        f"{sid}: the jobs' objects are only known as a key prefix; the "
                        "statement is limited to it and to the listed actions",
                        resource_finding(self, resource),
                    )
        # Listing is not scoped to the prefixes: without s3:ListBucket, S3 answers 403 instead of 404 for a
        # missing key, which Hadoop file systems report as an error (e.g. when checking an output folder); the
        # lake manifest, too, looks for keys that may not exist (its descriptor, `_commits` before the first one),
        # and so does the Iglu resolver in the deployed embedded schemas (a missing schema must be NotFound).
        buckets = {
            props.input_bucket.bucket_name: props.input_bucket,
            props.output_bucket.bucket_name: props.output_bucket,
            props.artifacts_bucket.bucket_name: props.artifacts_bucket,
        }
        if props.manifest_bucket is not None:
            buckets[props.manifest_bucket.bucket_name] = props.manifest_bucket
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ListData", actions=["s3:ListBucket"], resources=[bucket.bucket_arn for bucket in buckets.values()]
            )
        )
