"""The stateful stack: the manifest table, the buckets and the loader queue. Its lifecycle is the data's, not the
code's."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from cdk.components.lake_manifest_bucket import LakeManifestBucket, LakeManifestBucketProps
from cdk.components.loader_queue import LoaderQueue, LoaderQueueProps, loader_queue_name
from cdk.components.manifest_table import ManifestTable, ManifestTableProps
from cdk.components.secure_bucket import SecureBucket, SecureBucketProps
from cdk.config import EnvConfig
from cdk.naming import resource_names

INPUT_NONCURRENT_VERSION_DAYS = 30
"""How long an input object deleted or overwritten stays recoverable: the input is the one copy of the events."""


class StorageStack(Stack):
    """Manifest table; input and output buckets (created, or existing ones imported by name); artifacts,
    job-log and access-log buckets; with `manifest.backend` lake, the lake manifest's bucket (the table stays
    either way); with `loader.create_queue`, RDB Loader's queue. In prod (`retain_data`)
    everything is RETAINed and the table is protected from deletion. The other stacks refer to these by name
    (cdk/naming.py, `loader_queue_name`)."""

    def __init__(self, scope: Construct, construct_id: str, *, config: EnvConfig, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        retain = config.retain_data
        storage = config.storage
        names = resource_names(config, self.account)
        self.access_logs = SecureBucket(
            self,
            "AccessLogs",
            SecureBucketProps(
                bucket_name=names.access_logs_bucket,
                retain=retain,
                access_logs=None,
                expire_after_days=storage.access_log_retention_days,
                unversioned_reason="server access logs: written once by S3, expired by the lifecycle rule",
            ),
        ).bucket

        def bucket(construct_id: str, name: str, existing: bool, **props: Any) -> s3.IBucket:
            if existing:
                return s3.Bucket.from_bucket_name(self, construct_id, name)
            return SecureBucket(
                self,
                construct_id,
                SecureBucketProps(
                    bucket_name=name,
                    retain=retain,
                    access_logs=self.access_logs,
                    access_log_prefix=f"{construct_id.lower()}/",
                    **props,
                ),
            ).bucket

        # The input is the one copy of the events (everything else is made from it): a deleted or overwritten
        # object stays recoverable for a while.
        self.input_bucket = bucket(
            "Input",
            names.input_bucket,
            storage.input_bucket is not None,
            versioned=True,
            lifecycle_rules=(
                s3.LifecycleRule(
                    id="ExpireNoncurrentVersions",
                    noncurrent_version_expiration=Duration.days(INPUT_NONCURRENT_VERSION_DAYS),
                    expired_object_delete_marker=True,
                ),
            ),
        )
        self.output_bucket = bucket(
            "Output",
            names.output_bucket,
            storage.output_bucket is not None,
            unversioned_reason="the jobs' output is made again from the input by a rerun, which replaces a run "
            "folder's files: versions would keep every replaced Spark part file",
        )
        self.artifacts_bucket = bucket("Artifacts", names.artifacts_bucket, False, versioned=True)
        self.job_logs_bucket = bucket(
            "JobLogs",
            names.job_logs_bucket,
            False,
            expire_after_days=storage.job_log_retention_days,
            unversioned_reason="EMR job logs: written once, expired by the lifecycle rule",
        )
        manifest = config.manifest
        self.manifest_table: dynamodb.ITable = ManifestTable(
            self,
            "Manifest",
            ManifestTableProps(
                table_name=names.manifest_table,
                retain=retain,
                provisioned=None
                if manifest.read_capacity is None or manifest.write_capacity is None
                else (manifest.read_capacity, manifest.write_capacity),
            ),
        ).table
        self.manifest_bucket: s3.IBucket | None = None
        if manifest.backend == "lake":
            self.manifest_bucket = LakeManifestBucket(
                self,
                "LakeManifest",
                LakeManifestBucketProps(
                    bucket_name=names.manifest_bucket,
                    retain=retain,
                    access_logs=self.access_logs,
                    ttl_days=config.job_config.manifest.ttl_days,
                ),
            ).bucket
        self.loader_queue: sqs.IQueue | None = None
        if config.loader.create_queue:
            self.loader_queue = LoaderQueue(
                self, "LoaderQueue", LoaderQueueProps(queue_name=loader_queue_name(config.env), retain=retain)
            ).queue
            # What RDB Loader's config needs: `messageQueue` takes the name.
            for output_id, value in {
                "LoaderQueueName": self.loader_queue.queue_name,
                "LoaderQueueUrl": self.loader_queue.queue_url,
                "LoaderQueueArn": self.loader_queue.queue_arn,
            }.items():
                CfnOutput(self, output_id, value=value)
