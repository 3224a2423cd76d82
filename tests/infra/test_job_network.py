"""`emr.vpc`: its validation, the application's NetworkConfiguration, the created VPC (isolated subnets, S3 and
DynamoDB gateway endpoints, flow logs, the workers' security group) and the Iglu registries it cannot reach."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest

from cdk.artifact_layout import IGLU_RESOLVER
from cdk.components.job_network import check_registries_reachable, remote_registries
from cdk.config import CONFIG_DIR, EnvConfigError, config_from_data
from cdk.pipeline import build_pipeline, cdk_json_context
from tests.infra.conftest import EXISTING_VPC
from tests.infra.helpers import Synthesized, only, resources

SHAPES = (
    'null (no VPC), {"subnet_ids": [...], "security_group_ids": [...]} (an existing VPC) or {"create": true, '
    '"max_azs": 2} (a VPC the stack creates)'
)
SUBNET = "subnet-0123456789abcdef0"
GROUP = "sg-0123456789abcdef0"


def dev_with_vpc(vpc: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CONFIG_DIR / "dev.json").read_text(encoding="utf-8"))
    data["emr"]["vpc"] = vpc
    return data


@pytest.mark.parametrize(
    ("vpc", "message"),
    [
        ({}, f"emr.vpc.subnet_ids: given []; allowed: 1 to 16 ids like subnet-0123456789abcdef0; or emr.vpc {SHAPES}"),
        (
            {"subnet_ids": [SUBNET]},
            f"emr.vpc.security_group_ids: given []; allowed: 1 to 5 ids like sg-0123abcd; or emr.vpc {SHAPES}",
        ),
        (
            {"subnet_ids": [f"subnet-{i:017x}" for i in range(17)], "security_group_ids": [GROUP]},
            "emr.vpc.subnet_ids: given ["
            + ", ".join(f'"subnet-{i:017x}"' for i in range(17))
            + f"]; allowed: 1 to 16 ids like subnet-0123456789abcdef0; or emr.vpc {SHAPES}",
        ),
        (
            {"subnet_ids": [SUBNET], "security_group_ids": [f"sg-{i:08x}" for i in range(6)]},
            "emr.vpc.security_group_ids: given ["
            + ", ".join(f'"sg-{i:08x}"' for i in range(6))
            + f"]; allowed: 1 to 5 ids like sg-0123abcd; or emr.vpc {SHAPES}",
        ),
        (
            {"subnet_ids": ["subnet-1", SUBNET], "security_group_ids": [GROUP]},
            'emr.vpc.subnet_ids: given ["subnet-1"]; allowed: ids like subnet-0123456789abcdef0',
        ),
        (
            {"subnet_ids": [SUBNET], "security_group_ids": ["default"]},
            'emr.vpc.security_group_ids: given ["default"]; allowed: ids like sg-0123abcd',
        ),
        (
            {"subnet_ids": [SUBNET, SUBNET], "security_group_ids": [GROUP]},
            f'emr.vpc.subnet_ids: given ["{SUBNET}"]; allowed: each id once',
        ),
        (
            {"subnet_ids": [SUBNET], "security_group_ids": [GROUP], "max_azs": 3},
            "emr.vpc.max_azs: given 3; allowed: null unless create is true",
        ),
        (
            {"create": True, "subnet_ids": [SUBNET]},
            f'emr.vpc.subnet_ids: given ["{SUBNET}"]; allowed: none with create: true (the stack creates its own)',
        ),
        (
            {"create": True, "security_group_ids": [GROUP]},
            f'emr.vpc.security_group_ids: given ["{GROUP}"]; allowed: none with create: true (the stack creates its '
            "own)",
        ),
        ({"create": True, "max_azs": 1}, "emr.vpc.max_azs: given 1; allowed: 2 to 6"),
        ({"create": True, "max_azs": 7}, "emr.vpc.max_azs: given 7; allowed: 2 to 6"),
        ({"create": "yes"}, 'emr.vpc.create: given "yes"; allowed: true or false'),
        ({"subnet_ids": SUBNET}, f'emr.vpc.subnet_ids: given "{SUBNET}"; allowed: a list'),
        (True, f"emr.vpc: expected an object, given true; allowed: {SHAPES}"),
        (
            {"create": True, "cidr": "10.0.0.0/16"},
            "unknown key 'emr.vpc.cidr'; allowed keys in emr.vpc: create, max_azs, security_group_ids, subnet_ids",
        ),
    ],
)
def test_a_bad_vpc_names_what_was_given_and_what_is_allowed(vpc: Any, message: str) -> None:
    with pytest.raises(EnvConfigError) as raised:
        config_from_data("dev", dev_with_vpc(vpc))
    assert str(raised.value) == message


def test_no_vpc_by_default_and_the_two_shapes_load() -> None:
    assert config_from_data("dev", dev_with_vpc(None)).emr.vpc is None
    existing = config_from_data("dev", dev_with_vpc(EXISTING_VPC)).emr.vpc
    assert existing is not None and (existing.subnet_ids, existing.security_group_ids, existing.create) == (
        tuple(EXISTING_VPC["subnet_ids"]),
        tuple(EXISTING_VPC["security_group_ids"]),
        False,
    )
    created = config_from_data("dev", dev_with_vpc({"create": True})).emr.vpc
    assert created is not None and (created.create, created.azs) == (True, 2)


def network_configuration(synth: Synthesized) -> Any:
    return only(synth.template("Processing"), "AWS::EMRServerless::Application")["Properties"]["NetworkConfiguration"]


def test_existing_subnets_and_groups_are_the_applications_network_and_nothing_is_created(dev_vpc: Synthesized) -> None:
    assert network_configuration(dev_vpc) == {
        "SubnetIds": EXISTING_VPC["subnet_ids"],
        "SecurityGroupIds": EXISTING_VPC["security_group_ids"],
    }
    template = dev_vpc.template("Processing").to_json()
    assert [r["Type"] for r in template["Resources"].values() if r["Type"].startswith("AWS::EC2::")] == []


def test_a_created_vpc_has_isolated_subnets_the_two_gateway_endpoints_and_no_route_out(
    dev_new_vpc: Synthesized,
) -> None:
    template = dev_new_vpc.template("Processing")
    subnets = resources(template, "AWS::EC2::Subnet")
    assert sorted(subnets) == ["NetworkVpcJobsSubnet1Subnet3984A621", "NetworkVpcJobsSubnet2Subnet5AC43A10"]
    assert {s["Properties"]["MapPublicIpOnLaunch"] for s in subnets.values()} == {False}
    assert {s["Properties"]["CidrBlock"] for s in subnets.values()} == {"10.0.0.0/20", "10.0.16.0/20"}
    assert network_configuration(dev_new_vpc) == {
        "SubnetIds": [f"${{{logical_id}}}" for logical_id in sorted(subnets)],
        "SecurityGroupIds": ["${NetworkWorkersCDCB61FD.GroupId}"],
    }
    route_tables = sorted(f"${{{logical_id}}}" for logical_id in resources(template, "AWS::EC2::RouteTable"))
    endpoints = {
        e["Properties"]["ServiceName"]: (e["Properties"]["VpcEndpointType"], sorted(e["Properties"]["RouteTableIds"]))
        for e in resources(template, "AWS::EC2::VPCEndpoint").values()
    }
    assert endpoints == {
        "com.amazonaws.${AWS::Region}.s3": ("Gateway", route_tables),
        "com.amazonaws.${AWS::Region}.dynamodb": ("Gateway", route_tables),
    }
    # No way to the internet: no internet gateway, no NAT, no route besides the endpoints' (added by the service).
    for type_name in ("AWS::EC2::InternetGateway", "AWS::EC2::NatGateway", "AWS::EC2::Route", "AWS::EC2::EIP"):
        assert resources(template, type_name) == {}, type_name


def test_the_workers_group_lets_nothing_in_and_only_https_and_the_vpc_out(dev_new_vpc: Synthesized) -> None:
    group = only(dev_new_vpc.template("Processing"), "AWS::EC2::SecurityGroup")["Properties"]
    assert "SecurityGroupIngress" not in group
    assert group["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": "HTTPS to S3 and DynamoDB through their gateway endpoints",
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        },
        {
            "CidrIp": "${NetworkVpc7FB7348F.CidrBlock}",
            "Description": "within the VPC (between workers)",
            "IpProtocol": "-1",
        },
    ]
    # CDK's custom resource strips the default group's rules, so nothing can fall back on them.
    assert len(resources(dev_new_vpc.template("Processing"), "Custom::VpcRestrictDefaultSG")) == 1


def test_a_created_vpc_logs_every_flow_for_90_days(dev_new_vpc: Synthesized) -> None:
    template = dev_new_vpc.template("Processing")
    flow_log = only(template, "AWS::EC2::FlowLog")["Properties"]
    assert {key: flow_log[key] for key in ("ResourceType", "ResourceId", "TrafficType", "LogDestinationType")} == {
        "ResourceType": "VPC",
        "ResourceId": "${NetworkVpc7FB7348F}",
        "TrafficType": "ALL",
        "LogDestinationType": "cloud-watch-logs",
    }
    (log_group_id,) = [i for i in resources(template, "AWS::Logs::LogGroup") if i.startswith("NetworkFlowLogs")]
    log_group = resources(template, "AWS::Logs::LogGroup")[log_group_id]
    assert flow_log["LogGroupName"] == f"${{{log_group_id}}}"
    assert (log_group["Properties"]["RetentionInDays"], log_group["DeletionPolicy"]) == (90, "Delete")  # dev


RESOLVER = {
    "schema": "iglu:com.snowplowanalytics.iglu/resolver-config/jsonschema/1-0-3",
    "data": {
        "cacheSize": 500,
        "repositories": [
            {"name": "Embedded", "priority": 0, "vendorPrefixes": [], "connection": {"embedded": {"path": "embedded"}}},
            {
                "name": "Iglu Central",
                "priority": 1,
                "vendorPrefixes": ["com.snowplowanalytics"],
                "connection": {"http": {"uri": "http://iglucentral.com"}},
            },
        ],
    },
}


@pytest.fixture
def http_build(build_dir: Path, tmp_path: Path) -> Path:
    """The test build with a resolver config that names Iglu Central besides the embedded schemas."""
    build = tmp_path / "package"
    shutil.copytree(build_dir, build)
    (build / IGLU_RESOLVER).write_text(json.dumps(RESOLVER), encoding="utf-8")
    return build


def test_the_shipped_resolver_names_no_remote_registry(build_dir: Path) -> None:
    assert remote_registries("iglu/resolver.json", build_dir) == []
    check_registries_reachable("iglu/resolver.json", build_dir)


def test_a_remote_registry_with_a_created_vpc_fails_the_synth_naming_it(http_build: Path) -> None:
    assert remote_registries("iglu/resolver.json", http_build) == ["Iglu Central (http http://iglucentral.com)"]
    config = config_from_data("dev", dev_with_vpc({"create": True}))
    with pytest.raises(EnvConfigError) as raised:
        build_pipeline(cdk.App(context=cdk_json_context()), config, http_build)
    assert str(raised.value) == (
        'jobs.shred.iglu_config: given "iglu/resolver.json", whose resolver config names HTTP registries (Iglu '
        "Central (http http://iglucentral.com)); allowed: embedded repositories only while emr.vpc.create is true "
        "(the created VPC has no route to the internet), or emr.vpc with your own subnets that route to the "
        "registries (a NAT gateway), or emr.vpc null"
    )


def test_a_resolver_config_synth_cannot_read_is_not_checked(http_build: Path) -> None:
    """An s3:// or absolute config is read at run time only (docs/deploy.md says to check it by hand)."""
    for iglu_config in (None, "s3://bucket/resolver.json", "/etc/resolver.json", "missing/resolver.json"):
        assert remote_registries(iglu_config, http_build) == []
