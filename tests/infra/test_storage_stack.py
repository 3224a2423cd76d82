"""The Storage stack: the manifest table and the buckets (the lake manifest's too, with that backend), per environment."""

from __future__ import annotations

from typing import Any

from cdk.stacks.storage_stack import INPUT_NONCURRENT_VERSION_DAYS
from tests.infra.helpers import Synthesized, only, resources

BUCKETS = ("access-logs", "input", "output", "artifacts", "job-logs")


def bucket_name(env: str, purpose: str) -> str:
    account = "123456789012" if env == "prod" else "${AWS::AccountId}"  # dev names no account: the CLI's
    return f"winnow-{env}-{purpose}-{account}-eu-west-1"


def test_manifest_table_is_snowplow_compatible_with_ttl_pitr_and_encryption(dev: Synthesized) -> None:
    table = only(dev.template("Storage"), "AWS::DynamoDB::Table")["Properties"]
    assert table["TableName"] == "winnow-dev-manifest"
    assert table["KeySchema"] == [
        {"AttributeName": "eventId", "KeyType": "HASH"},
        {"AttributeName": "fingerprint", "KeyType": "RANGE"},
    ]
    assert table["AttributeDefinitions"] == [
        {"AttributeName": "eventId", "AttributeType": "S"},
        {"AttributeName": "fingerprint", "AttributeType": "S"},
    ]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["SSESpecification"] == {"SSEEnabled": True}  # KMS, AWS-managed key


def test_dev_table_is_on_demand_and_disposable(dev: Synthesized) -> None:
    table = only(dev.template("Storage"), "AWS::DynamoDB::Table")
    assert table["Properties"]["BillingMode"] == "PAY_PER_REQUEST"
    assert "ProvisionedThroughput" not in table["Properties"]
    assert table["Properties"]["DeletionProtectionEnabled"] is False
    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Delete", "Delete")


def test_prod_table_is_on_demand_protected_and_retained(prod: Synthesized) -> None:
    table = only(prod.template("Storage"), "AWS::DynamoDB::Table")
    # Sized for prod's 20 million events a run (configs/prod.json; the synth-time check in cdk/config.py).
    assert table["Properties"]["BillingMode"] == "PAY_PER_REQUEST"
    assert "ProvisionedThroughput" not in table["Properties"]
    assert table["Properties"]["DeletionProtectionEnabled"] is True
    assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert prod.pipeline.storage.termination_protection is True
    assert prod.pipeline.processing.termination_protection is False


def _buckets(synth: Synthesized) -> dict[str, dict[str, Any]]:
    by_name = {}
    for resource in resources(synth.template("Storage"), "AWS::S3::Bucket").values():
        by_name[resource["Properties"]["BucketName"]] = resource
    return by_name


def test_every_bucket_is_encrypted_private_logged_and_named_per_env(dev: Synthesized) -> None:
    buckets = _buckets(dev)
    assert sorted(buckets) == sorted(bucket_name("dev", purpose) for purpose in BUCKETS)
    access_logs = bucket_name("dev", "access-logs")
    for name, bucket in buckets.items():
        props = bucket["Properties"]
        assert props["BucketEncryption"] == {
            "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        }, name
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }, name
        if name != access_logs:
            assert props["LoggingConfiguration"]["DestinationBucketName"].startswith("${AccessLogsBucket"), name
    assert _buckets(dev)[bucket_name("dev", "artifacts")]["Properties"]["VersioningConfiguration"] == {
        "Status": "Enabled"
    }


def test_the_input_bucket_keeps_deleted_or_overwritten_objects_for_a_while(prod: Synthesized) -> None:
    """The input is the one copy of the events: versioned, older versions expire (checkov CKV_AWS_21)."""
    props = _buckets(prod)[bucket_name("prod", "input")]["Properties"]
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    (rule,) = [r for r in props["LifecycleConfiguration"]["Rules"] if r["Id"] == "ExpireNoncurrentVersions"]
    assert rule["NoncurrentVersionExpiration"] == {"NoncurrentDays": INPUT_NONCURRENT_VERSION_DAYS}
    assert rule["ExpiredObjectDeleteMarker"] is True


def test_every_bucket_denies_requests_without_tls(dev: Synthesized) -> None:
    policies = resources(dev.template("Storage"), "AWS::S3::BucketPolicy").values()
    assert len(policies) == len(BUCKETS)
    for policy in policies:
        denials = [
            {key: statement[key] for key in ("Action", "Condition", "Effect", "Principal")}
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
            if statement["Effect"] == "Deny"
        ]
        assert denials == [
            {
                "Action": "s3:*",
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
            }
        ]


def test_prod_retains_every_bucket_dev_deletes_them_with_their_objects(dev: Synthesized, prod: Synthesized) -> None:
    assert {b["DeletionPolicy"] for b in _buckets(prod).values()} == {"Retain"}
    assert {b["DeletionPolicy"] for b in _buckets(dev).values()} == {"Delete"}
    assert len(dev.template("Storage").find_resources("Custom::S3AutoDeleteObjects")) == len(BUCKETS)
    assert prod.template("Storage").find_resources("Custom::S3AutoDeleteObjects") == {}


def test_job_logs_and_access_logs_expire_after_the_configured_days(prod: Synthesized) -> None:
    buckets = _buckets(prod)

    def expiry(purpose: str) -> list[int]:
        rules = buckets[bucket_name("prod", purpose)]
        return [
            r["ExpirationInDays"]
            for r in rules["Properties"]["LifecycleConfiguration"]["Rules"]
            if "ExpirationInDays" in r
        ]

    assert (expiry("job-logs"), expiry("access-logs"), expiry("input")) == ([90], [365], [])


def test_a_provisioned_table_takes_its_capacity_from_config() -> None:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    from cdk.components.manifest_table import ManifestTable, ManifestTableProps

    stack = cdk.Stack(cdk.App(), "Provisioned")
    ManifestTable(stack, "Manifest", ManifestTableProps(table_name="t", retain=False, provisioned=(50, 500)))
    (table,) = Template.from_stack(stack).find_resources("AWS::DynamoDB::Table").values()
    assert table["Properties"]["ProvisionedThroughput"] == {"ReadCapacityUnits": 50, "WriteCapacityUnits": 500}


def test_the_dynamodb_backend_creates_no_manifest_bucket(dev: Synthesized, prod: Synthesized) -> None:
    for synth in (dev, prod):
        assert synth.config.manifest.backend == "dynamodb"
        assert bucket_name(synth.config.env, "manifest") not in _buckets(synth)
        assert synth.pipeline.storage.manifest_bucket is None


def test_the_lake_backend_adds_a_hardened_versioned_manifest_bucket_and_keeps_the_table(dev_lake: Synthesized) -> None:
    buckets = _buckets(dev_lake)
    name = bucket_name("dev", "manifest")
    assert sorted(buckets) == sorted(bucket_name("dev", purpose) for purpose in (*BUCKETS, "manifest"))
    template = dev_lake.template("Storage")
    logical_ids = {b["Properties"]["BucketName"]: i for i, b in resources(template, "AWS::S3::Bucket").items()}
    bucket = buckets[name]
    assert (bucket["DeletionPolicy"], bucket["UpdateReplacePolicy"]) == ("Delete", "Delete")  # dev: retain_data false
    props = {key: value for key, value in bucket["Properties"].items() if key not in ("Tags", "LifecycleConfiguration")}
    assert props == {
        "BucketName": name,
        "BucketEncryption": {
            "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
        },
        "PublicAccessBlockConfiguration": {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        },
        "OwnershipControls": {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]},
        "VersioningConfiguration": {"Status": "Enabled"},
        "LoggingConfiguration": {
            "DestinationBucketName": f"${{{logical_ids[bucket_name('dev', 'access-logs')]}}}",
            "LogFilePrefix": "manifest/",
        },
    }
    assert len(template.find_resources("Custom::S3AutoDeleteObjects")) == len(BUCKETS) + 1
    (policy,) = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in resources(template, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == f"${{{logical_ids[name]}}}"
    ]
    assert {
        "Action": "s3:*",
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        "Effect": "Deny",
        "Principal": {"AWS": "*"},
    } in [{key: value for key, value in statement.items() if key != "Resource"} for statement in policy]
    # The table stays whatever the backend: switching back finds it as it was.
    assert only(template, "AWS::DynamoDB::Table")["Properties"]["TableName"] == "winnow-dev-manifest"


def test_the_lake_manifest_bucket_lifecycle_follows_the_ttl(dev_lake: Synthesized) -> None:
    rules = _buckets(dev_lake)[bucket_name("dev", "manifest")]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert dev_lake.config.job_config.manifest.ttl_days == 30
    assert rules == [
        # ttl_days + 30: only segment files whose entries all expired 30 days ago or more
        {"Id": "ExpireAbandonedSegments", "Prefix": "lake/segments/", "ExpirationInDays": 60, "Status": "Enabled"},
        {
            "Id": "ExpireNoncurrentVersions",
            "NoncurrentVersionExpiration": {"NoncurrentDays": 7},
            "ExpiredObjectDeleteMarker": True,
            "Status": "Enabled",
        },
        {
            "Id": "AbortIncompleteUploads",
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
            "Status": "Enabled",
        },
    ]


def test_the_lifecycle_prefix_is_where_the_job_writes_its_segments() -> None:
    """The job's own reading of the URI the state machine passes puts the segments under the rule's prefix."""
    from cdk.components.lake_manifest_bucket import lake_manifest_uri
    from jobs.contract import LAKE_SEGMENTS
    from jobs.manifest import open_manifest
    from jobs.manifest.lake import LakeManifest

    manifest = open_manifest(lake_manifest_uri("winnow-dev-manifest-123456789012-eu-west-1"))
    assert isinstance(manifest, LakeManifest)
    assert f"{manifest.root}/{LAKE_SEGMENTS}/" == "s3://winnow-dev-manifest-123456789012-eu-west-1/lake/segments/"


def test_a_retained_lake_manifest_bucket_is_kept_and_its_backstop_follows_ttl_days() -> None:
    import aws_cdk as cdk
    from aws_cdk import aws_s3 as s3
    from aws_cdk.assertions import Template

    from cdk.components.lake_manifest_bucket import LakeManifestBucket, LakeManifestBucketProps

    stack = cdk.Stack(cdk.App(), "Retained")
    logs = s3.Bucket.from_bucket_name(stack, "Logs", "logs")
    LakeManifestBucket(
        stack, "Lake", LakeManifestBucketProps(bucket_name="manifest", retain=True, access_logs=logs, ttl_days=180)
    )
    template = Template.from_stack(stack)
    (bucket,) = template.find_resources("AWS::S3::Bucket").values()
    assert (bucket["DeletionPolicy"], bucket["UpdateReplacePolicy"]) == ("Retain", "Retain")
    assert template.find_resources("Custom::S3AutoDeleteObjects") == {}
    (segments,) = [r for r in bucket["Properties"]["LifecycleConfiguration"]["Rules"] if "Prefix" in r]
    assert segments["ExpirationInDays"] == 210
