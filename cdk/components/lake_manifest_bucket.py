"""The lake manifest's bucket: where dedup keeps the Parquet events manifest (`lake:s3://<bucket>/lake`, laid out
as jobs/contract.py says) when `manifest.backend` is lake."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_s3 as s3
from constructs import Construct

from cdk.components.secure_bucket import SecureBucket, SecureBucketProps
from jobs.contract import LAKE_SEGMENTS

LAKE_PREFIX = "lake"
"""The manifest's folder in the bucket: the job reads, lists, creates, writes and deletes only under it."""
SEGMENTS_BACKSTOP_DAYS = 30
"""How long after `jobs.manifest.ttl_days` a segment's files are expired by the lifecycle rule."""
NONCURRENT_VERSION_DAYS = 7
"""How long an overwritten or deleted object's older version is kept (a week to restore it by hand)."""
ABORT_UPLOADS_AFTER_DAYS = 1
"""A multipart upload still incomplete after a day belongs to a run that failed or was cancelled."""


def lake_manifest_uri(bucket_name: str) -> str:
    """What the state machine passes to dedup as `--manifest`: `lake:s3://<bucket>/lake`."""
    return f"lake:s3://{bucket_name}/{LAKE_PREFIX}"


@dataclass(frozen=True, kw_only=True)
class LakeManifestBucketProps:
    """Props of `LakeManifestBucket`."""

    bucket_name: str
    """The bucket's name (see cdk/naming.py)."""
    retain: bool
    """RETAIN the bucket on stack deletion (true in prod); false: DESTROY it with its objects."""
    access_logs: s3.IBucket
    """Where the server access logs go (under `manifest/`)."""
    ttl_days: int
    """`jobs.manifest.ttl_days`: how long the job counts an entry; the segments' backstop expiry follows it."""


class LakeManifestBucket(Construct):
    """A `SecureBucket` (encrypted, private, TLS only, access-logged), versioned, with lifecycle rules: segment
    files expire `ttl_days` + 30 days after they were written, older versions after 7 days, and incomplete
    multipart uploads are aborted after a day."""

    def __init__(self, scope: Construct, construct_id: str, props: LakeManifestBucketProps) -> None:
        super().__init__(scope, construct_id)
        # A backstop, not the TTL: the job drops a segment itself a week after every entry in it has expired
        # (RETAIN_AFTER_EXPIRY_DAYS in jobs/manifest/lake.py, for redos), and reads only segments with live
        # entries. A segment's files are written after the entries in them were delivered (a compaction writes
        # new files), so a file is never older than its entries, and one older than ttl_days + 30 holds only
        # entries expired for 30 days or more: what a crashed run left uncommitted (no commit names it, the job
        # never deletes it), or an expired segment no run has dropped since. (Lowering ttl_days by more than
        # 23 days takes that margin away from the entries written before.)
        segments = s3.LifecycleRule(
            id="ExpireAbandonedSegments",
            prefix=f"{LAKE_PREFIX}/{LAKE_SEGMENTS}/",
            expiration=Duration.days(props.ttl_days + SEGMENTS_BACKSTOP_DAYS),
        )
        # Deletes leave delete markers; once a marker's older versions have expired it is removed too, or the
        # markers of every dropped segment and released lease would pile up under the prefix the job lists.
        noncurrent = s3.LifecycleRule(
            id="ExpireNoncurrentVersions",
            noncurrent_version_expiration=Duration.days(NONCURRENT_VERSION_DAYS),
            expired_object_delete_marker=True,
        )
        self.bucket = SecureBucket(
            self,
            "Bucket",
            SecureBucketProps(
                bucket_name=props.bucket_name,
                retain=props.retain,
                access_logs=props.access_logs,
                access_log_prefix="manifest/",
                versioned=True,
                abort_uploads_after_days=ABORT_UPLOADS_AFTER_DAYS,
                lifecycle_rules=(segments, noncurrent),
            ),
        ).bucket
