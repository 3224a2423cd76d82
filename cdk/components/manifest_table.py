"""The DynamoDB events manifest: the table the dedup job checks and records every event in."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from cdk.audit import acknowledge_checkov
from jobs.contract import DYNAMODB_PARTITION_KEY, DYNAMODB_SORT_KEY, DYNAMODB_TTL


@dataclass(frozen=True, kw_only=True)
class ManifestTableProps:
    """Props of `ManifestTable`."""

    table_name: str
    """The table's name (see cdk/naming.py)."""
    retain: bool
    """RETAIN the table on stack deletion and turn deletion protection on (prod)."""
    provisioned: tuple[int, int] | None = None
    """(read, write) capacity units; None: on-demand billing."""


class ManifestTable(Construct):
    """The manifest table, Snowplow-compatible: `eventId` (S) + `fingerprint` (S), TTL on `ttl`.

    Point-in-time recovery and encryption with the AWS-managed KMS key are always on.
    """

    def __init__(self, scope: Construct, construct_id: str, props: ManifestTableProps) -> None:
        super().__init__(scope, construct_id)
        read, write = props.provisioned or (None, None)
        self.table = dynamodb.Table(
            self,
            "Table",
            table_name=props.table_name,
            partition_key=dynamodb.Attribute(name=DYNAMODB_PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=DYNAMODB_SORT_KEY, type=dynamodb.AttributeType.STRING),
            time_to_live_attribute=DYNAMODB_TTL,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=props.retain,
            removal_policy=RemovalPolicy.RETAIN if props.retain else RemovalPolicy.DESTROY,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST if read is None else dynamodb.BillingMode.PROVISIONED,
            read_capacity=read,
            write_capacity=write,
        )
        acknowledge_checkov(
            self.table,
            "CKV_AWS_119",
            "encrypted with the AWS managed KMS key (aws/dynamodb); a customer managed key pays off for cross-account "
            "access or revoking the key, which the manifest (read by the dedup job only) does not need",
        )
