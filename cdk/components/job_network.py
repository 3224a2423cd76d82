"""The network of the EMR Serverless application's workers when `emr.vpc` asks for one (cdk/vpc_config.py).

A created VPC has private isolated subnets only: no internet gateway and no NAT, so nothing leaves it but what its
gateway endpoints route (S3 and DynamoDB, free of charge). The jobs need nothing else: they read and write S3, call
the DynamoDB manifest, and log to S3 (the application's S3 monitoring configuration); the state machine, not the jobs,
calls SQS, SNS and CloudWatch. docs/deploy.md ("Network") has the AWS sources.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk.audit import acknowledge_checkov, acknowledge_provider_lambda
from cdk.config_check import EnvConfigError

VPC_CIDR = "10.0.0.0/16"
SUBNET_MASK = 20
"""4,091 addresses per subnet: each worker takes one (EMR Serverless gives every worker a network interface)."""
HTTPS = 443
RESTRICT_DEFAULT_SG_PROVIDER = "Custom::VpcRestrictDefaultSGCustomResourceProvider"
"""CDK's one Lambda per stack that removes the rules of a VPC's default security group."""
FLOW_LOGS_WITHOUT_CMK = (
    "CloudWatch Logs encrypts every log group at rest; a customer managed key would add a key policy for the logs "
    "service and a monthly cost, for flow records (addresses, ports, byte counts; no payload)"
)


@dataclass(frozen=True, kw_only=True)
class JobPlacement:
    """Where the workers' network interfaces go: the application's `NetworkConfiguration`."""

    subnet_ids: Sequence[str]
    security_group_ids: Sequence[str]


@dataclass(frozen=True, kw_only=True)
class JobNetworkProps:
    """Props of `JobNetwork`."""

    max_azs: int = 2
    """Availability Zones of the VPC, one isolated subnet each (an environment-agnostic stack gets at most 2)."""
    retain_logs: bool = True
    """Keep the flow logs' log group when the stack is deleted."""


class JobNetwork(Construct):
    """A VPC for the job runs: isolated subnets, S3 and DynamoDB gateway endpoints, flow logs, and a security group
    with no inbound rule that lets the workers out only to HTTPS (which only the endpoints route) and the VPC."""

    def __init__(self, scope: Construct, construct_id: str, props: JobNetworkProps) -> None:
        super().__init__(scope, construct_id)
        self.flow_logs = logs.LogGroup(
            self,
            "FlowLogs",
            retention=logs.RetentionDays.THREE_MONTHS,
            removal_policy=RemovalPolicy.RETAIN if props.retain_logs else RemovalPolicy.DESTROY,
        )
        acknowledge_checkov(self.flow_logs, "CKV_AWS_158", FLOW_LOGS_WITHOUT_CMK)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(VPC_CIDR),
            max_azs=props.max_azs,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="Jobs", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=SUBNET_MASK)
            ],
            gateway_endpoints={
                "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3),
                "DynamoDB": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.DYNAMODB),
            },
            flow_logs={
                "All": ec2.FlowLogOptions(destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_logs))
            },
            restrict_default_security_group=True,  # nothing may use the default group's open rules
        )
        self.security_group = ec2.SecurityGroup(
            self,
            "Workers",
            vpc=self.vpc,
            description="Winnow job runs: no inbound; out to HTTPS (the S3 and DynamoDB endpoints) and the VPC",
            allow_all_outbound=False,
        )
        # 0.0.0.0/0 on 443 reaches only what the route tables send somewhere: the gateway endpoints' prefix lists
        # (their ids are not known to CloudFormation, so they cannot be named here).
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(HTTPS), "HTTPS to S3 and DynamoDB through their gateway endpoints"
        )
        self.security_group.add_egress_rule(
            ec2.Peer.ipv4(self.vpc.vpc_cidr_block), ec2.Port.all_traffic(), "within the VPC (between workers)"
        )
        self.placement = JobPlacement(
            subnet_ids=[subnet.subnet_id for subnet in self.vpc.isolated_subnets],
            security_group_ids=[self.security_group.security_group_id],
        )
        self._acknowledge_default_sg_handler()

    def _acknowledge_default_sg_handler(self) -> None:
        """checkov's findings of CDK's Lambda that empties the default security group (library code, run by
        CloudFormation when the VPC is created; cdk-nag and parliament report none)."""
        provider = Stack.of(self).node.find_child(RESTRICT_DEFAULT_SG_PROVIDER)
        handler = provider.node.find_child("Handler")
        acknowledge_provider_lambda(handler, "CDK's restrict-default-security-group Lambda", "EC2's API")


def remote_registries(iglu_config: str | None, build_dir: Path) -> list[str]:
    """The HTTP repositories (`name (http URI)`) of the Iglu resolver config the deployed jobs read, as far as synth
    can know it: a relative `jobs.shred.iglu_config` names a file of the build (next to `config.json`); an s3:// or
    absolute one, or a file the build lacks, is not read (empty list).

    Raises:
        EnvConfigError: the build's resolver config is not one (no `data.repositories` with their connections).
    """
    if iglu_config is None or "://" in iglu_config or iglu_config.startswith(("/", "file:")):
        return []
    path = build_dir / iglu_config
    if not path.is_file():
        return []
    # The repositories only, read here (cdk/ does not import the jobs' resolver): the jobs check the whole config.
    try:
        repositories = json.loads(path.read_text(encoding="utf-8"))["data"]["repositories"]
        return [
            f"{repository['name']} (http {repository['connection']['http']['uri']})"
            for repository in repositories
            if "http" in repository["connection"]
        ]
    except (ValueError, KeyError, TypeError) as error:
        raise EnvConfigError(
            f"jobs.shred.iglu_config: given {json.dumps(iglu_config)}, whose file in the build is no Iglu resolver "
            f"config ({type(error).__name__}: {error}); allowed: a resolver-config 1-0-* document"
        ) from error


def check_registries_reachable(iglu_config: str | None, build_dir: Path) -> None:
    """A created VPC has no route to the internet: the shred job's resolver config may name no HTTP registry.

    Raises:
        EnvConfigError: it does, naming them.
    """
    remote = remote_registries(iglu_config, build_dir)
    if remote:
        raise EnvConfigError(
            f"jobs.shred.iglu_config: given {json.dumps(iglu_config)}, whose resolver config names HTTP registries "
            f"({'; '.join(remote)}); allowed: embedded repositories only while emr.vpc.create is true (the created "
            "VPC has no route to the internet), or emr.vpc with your own subnets that route to the registries "
            "(a NAT gateway), or emr.vpc null"
        )
