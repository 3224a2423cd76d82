"""`emr.vpc` of the env config: the network the EMR Serverless application's workers run in.

null (the default): no VPC, as EMR Serverless runs an application without a network configuration. Else one of two
shapes: an existing VPC's subnets and security groups, or a VPC the Processing stack creates (private isolated
subnets, gateway endpoints for S3 and DynamoDB, no internet). docs/deploy.md ("Network") says what each reaches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cdk.config_check import check

SUBNET_ID = re.compile(r"subnet-[0-9a-f]{8}(?:[0-9a-f]{9})?")
SECURITY_GROUP_ID = re.compile(r"sg-[0-9a-f]{8}(?:[0-9a-f]{9})?")
MAX_SUBNETS = 16
MAX_SECURITY_GROUPS = 5
"""What an EMR Serverless application takes (API reference, `NetworkConfiguration`)."""
DEFAULT_AZS = 2
MAX_AZS = 6
"""A created VPC spans 2 to 6 Availability Zones (AWS recommends several: the subnets decide where workers run)."""
SHAPES = (
    'null (no VPC), {"subnet_ids": [...], "security_group_ids": [...]} (an existing VPC) or '
    '{"create": true, "max_azs": 2} (a VPC the stack creates)'
)


@dataclass(frozen=True, kw_only=True)
class VpcConfig:
    """The application's network: an existing VPC's subnets and security groups, or `create` one."""

    subnet_ids: tuple[str, ...] = ()
    """Private subnets of an existing VPC (1 to 16) that route to S3 and DynamoDB (gateway endpoints or NAT)."""
    security_group_ids: tuple[str, ...] = ()
    """Security groups of the workers' network interfaces (1 to 5), allowing HTTPS out."""
    create: bool = False
    """true: the Processing stack creates the VPC (no subnet or security group ids then)."""
    max_azs: int | None = None
    """With `create`: how many Availability Zones the created VPC spans, 2 to 6 (default 2)."""

    def __post_init__(self) -> None:
        if self.create:
            for key, ids in (("subnet_ids", self.subnet_ids), ("security_group_ids", self.security_group_ids)):
                check(not ids, f"emr.vpc.{key}", list(ids), "none with create: true (the stack creates its own)")
            check(
                self.max_azs is None or DEFAULT_AZS <= self.max_azs <= MAX_AZS,
                "emr.vpc.max_azs",
                self.max_azs,
                f"{DEFAULT_AZS} to {MAX_AZS}",
            )
            return
        check(self.max_azs is None, "emr.vpc.max_azs", self.max_azs, "null unless create is true")
        _check_ids("emr.vpc.subnet_ids", self.subnet_ids, SUBNET_ID, MAX_SUBNETS, "subnet-0123456789abcdef0")
        _check_ids(
            "emr.vpc.security_group_ids", self.security_group_ids, SECURITY_GROUP_ID, MAX_SECURITY_GROUPS, "sg-0123abcd"
        )

    @property
    def azs(self) -> int:
        """The Availability Zones a created VPC spans."""
        return self.max_azs or DEFAULT_AZS


def _check_ids(key: str, ids: tuple[str, ...], shape: re.Pattern[str], most: int, example: str) -> None:
    check(1 <= len(ids) <= most, key, list(ids), f"1 to {most} ids like {example}; or emr.vpc {SHAPES}")
    bad = [given for given in ids if not shape.fullmatch(given)]
    check(not bad, key, bad, f"ids like {example}")
    twice = sorted({given for given in ids if ids.count(given) > 1})
    check(not twice, key, twice, "each id once")
