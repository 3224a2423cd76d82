"""An S3 bucket with Winnow's baseline: encrypted, private, TLS only, access-logged, retained when asked."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk.audit import acknowledge_checkov, acknowledge_parliament, acknowledge_provider_lambda

AUTO_DELETE_PROVIDER = "Custom::S3AutoDeleteObjectsCustomResourceProvider"
"""CDK's one auto-delete Lambda per stack (`auto_delete_objects`)."""


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
    unversioned_reason: str = ""
    """Why an unversioned bucket needs no versions (required then: checkov's CKV_AWS_21 acknowledgement)."""
    expire_after_days: int | None = None
    """Delete objects this many days after creation; None: keep them."""
    abort_uploads_after_days: int = 7
    """Abort multipart uploads left incomplete this many days after they started."""
    lifecycle_rules: tuple[s3.LifecycleRule, ...] = ()
    """More lifecycle rules, after `Expire` and before `AbortIncompleteUploads`."""

    def __post_init__(self) -> None:
        if self.versioned == bool(self.unversioned_reason.strip()):
            raise ValueError(
                f"bucket {self.bucket_name}: given versioned={self.versioned}, unversioned_reason="
                f"{self.unversioned_reason!r}; allowed: versioned, or unversioned with the reason"
            )


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
        self._acknowledge(props)

    def _acknowledge(self, props: SecureBucketProps) -> None:
        """checkov's and parliament's findings this baseline accepts, on the resources that cause them."""
        if not props.versioned:
            acknowledge_checkov(self.bucket, "CKV_AWS_21", props.unversioned_reason)
        if props.access_logs is None:
            acknowledge_checkov(
                self.bucket, "CKV_AWS_18", "the access-log bucket itself: logging its own access would log the logs"
            )
        if props.retain:
            return
        # CDK's auto-delete (dev): its Lambda empties the bucket when the stack is deleted, after putting a bucket
        # policy that denies new writes; the bucket policy lets only that Lambda's role do so.
        why = "CDK's auto-delete-objects (disposable data only): "
        policy = self.bucket.policy
        assert policy is not None  # enforce_ssl and auto-delete both make it
        acknowledge_parliament(
            policy,
            "RESOURCE_MISMATCH",
            "s3:List*",
            why + "its grant lists the bucket with a wildcard; the List actions that take no bucket (access points, "
            "access grants, jobs) grant nothing on it",
        )
        acknowledge_parliament(
            policy,
            "RESOURCE_POLICY_PRIVILEGE_ESCALATION",
            "s3:PutBucketPolicy",
            why + "its Lambda's role puts the deny-writes policy before it deletes the objects; no other principal "
            "gets s3:PutBucketPolicy",
        )
        handler = Stack.of(self).node.find_child(AUTO_DELETE_PROVIDER).node.find_child("Handler")
        acknowledge_provider_lambda(handler, "CDK's auto-delete-objects Lambda", "S3's API")
