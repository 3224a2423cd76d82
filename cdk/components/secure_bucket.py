"""An S3 bucket with Winnow's baseline: encrypted, private, TLS only, access-logged, retained when asked."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct


@dataclass(frozen=True, kw_only=True)
class SecureBucketProps:
    """Props of `SecureBucket`."""

    bucket_name: str
    """The bucket's name (see cdk/naming.py)."""
    retain: bool
    """RETAIN the bucket on stack deletion (true in prod); false: DESTROY it with its objects."""
    access_logs: s3.IBucket | None
    """Where server access logs go; None only for the access-log bucket itself."""
    access_log_prefix: str = ""
    """Key prefix of this bucket's access logs in `access_logs`."""
    versioned: bool = False
    """Keep object versions (the artifacts bucket: nothing deployed is ever lost)."""
    expire_after_days: int | None = None
    """Delete objects this many days after creation; None: keep them."""
    abort_uploads_after_days: int = 7
    """Abort multipart uploads left incomplete this many days after they started."""
    lifecycle_rules: tuple[s3.LifecycleRule, ...] = ()
    """More lifecycle rules, after `Expire` and before `AbortIncompleteUploads`."""


class SecureBucket(Construct):
    """A bucket with SSE-S3, all public access blocked, TLS enforced, server access logs and a lifecycle."""

    def __init__(self, scope: Construct, construct_id: str, props: SecureBucketProps) -> None:
        super().__init__(scope, construct_id)
        rules = []
        if props.expire_after_days is not None:
            rules.append(s3.LifecycleRule(id="Expire", expiration=Duration.days(props.expire_after_days)))
        rules.extend(props.lifecycle_rules)
        rules.append(
            s3.LifecycleRule(
                id="AbortIncompleteUploads",
                abort_incomplete_multipart_upload_after=Duration.days(props.abort_uploads_after_days),
            )
        )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            bucket_name=props.bucket_name,
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            versioned=props.versioned,
            server_access_logs_bucket=props.access_logs,
            server_access_logs_prefix=props.access_log_prefix or None,
            lifecycle_rules=rules,
            removal_policy=RemovalPolicy.RETAIN if props.retain else RemovalPolicy.DESTROY,
            # Emptying a bucket on delete needs CDK's custom-resource Lambda: only where data is disposable.
            auto_delete_objects=not props.retain,
        )
