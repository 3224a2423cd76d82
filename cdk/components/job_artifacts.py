"""Versioned, immutable job artifacts: the packaged jobs, dependencies, entry point, Iglu resolver config and
embedded schemas, and job config on S3."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import Stack, Token
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct, IConstruct

from cdk.artifact_layout import (
    BUILD_FILES,
    BUILD_INFO,
    CONFIG,
    DEPS_ARCHIVE,
    DEPS_DIR,
    ENTRYPOINT,
    IGLU_DIR,
    IGLU_RESOLVER,
    PACKAGE_ZIP,
)
from cdk.audit import LOGS_WITHOUT_CMK, acknowledge_checkov, acknowledge_parliament, acknowledge_provider_lambda
from cdk.errors import ArtifactsNotBuiltError
from cdk.nag import acknowledge, resource_finding


@dataclass(frozen=True, kw_only=True)
class JobArtifactsProps:
    """Props of `JobArtifacts`."""

    bucket: s3.IBucket
    """The artifacts bucket."""
    build_dir: Path
    """The output of `make package` (the files of `cdk.artifact_layout.BUILD_FILES` and the `iglu/` folder),
    uploaded as a whole."""
    job_config: Mapping[str, Any]
    """The jobs' config (the env config's validated `jobs` section), deployed as `config.json`."""
    key_prefix: str = "jobs/"
    """Versions live under `<key_prefix><version>/`."""


def built_files(build_dir: Path) -> list[str]:
    """The files of a build as paths relative to it: `BUILD_FILES`, then every other file under `iglu/` (sorted).

    Raises:
        ArtifactsNotBuiltError: `build_dir` lacks a file of the build (run `make package`).
    """
    missing = [name for name in BUILD_FILES if not (build_dir / name).is_file()]
    if missing:
        raise ArtifactsNotBuiltError(
            f"job artifacts in {build_dir}: missing {', '.join(missing)}; run `make package` first"
        )
    iglu = sorted(
        path.relative_to(build_dir).as_posix() for path in (build_dir / IGLU_DIR).rglob("*") if path.is_file()
    )
    return [*BUILD_FILES, *(name for name in iglu if name != IGLU_RESOLVER)]


def artifacts_version(build_dir: Path, job_config: Mapping[str, Any]) -> str:
    """`<jobs version>-<12 hex>`: the hash covers every built file (the Iglu schemas too) and the job config, so
    any change to code, dependencies, schemas or config is a new version, and an unchanged build keeps its version.

    Raises:
        ArtifactsNotBuiltError: `build_dir` lacks a file of the build (run `make package`).
    """
    digest = hashlib.sha256()
    for name in built_files(build_dir):
        digest.update(name.encode() + b"\0" + hashlib.sha256((build_dir / name).read_bytes()).digest())
    digest.update(json.dumps(job_config, sort_keys=True).encode())
    jobs_version = json.loads((build_dir / BUILD_INFO).read_text(encoding="utf-8"))["jobs_version"]
    return f"{jobs_version}-{digest.hexdigest()[:12]}"


class JobArtifacts(Construct):
    """Uploads one build under `s3://<bucket>/jobs/<version>/` and never deletes or overwrites a version.

    The version is content-addressed, so the state machine, which points at this exact prefix, switches
    code, dependencies and config together with the deploy; older versions stay for reruns and rollback.
    """

    def __init__(self, scope: Construct, construct_id: str, props: JobArtifactsProps) -> None:
        super().__init__(scope, construct_id)
        self.version = artifacts_version(props.build_dir, props.job_config)
        self.prefix = f"{props.key_prefix}{self.version}/"
        self.root = props.key_prefix
        """Where all versions live: runs started before a deploy (or redriven after it) read their own version."""
        self.deployment = s3deploy.BucketDeployment(
            self,
            "Upload",
            sources=[
                s3deploy.Source.asset(str(props.build_dir)),
                s3deploy.Source.json_data(CONFIG, dict(props.job_config)),
            ],
            destination_bucket=props.bucket,
            destination_key_prefix=self.prefix,
            extract=True,
            prune=False,  # other versions under jobs/ are never touched
            retain_on_delete=True,  # a deployed version stays when a later deploy replaces this resource
            memory_limit=512,
        )

        self._acknowledge_upload_handler(props.bucket)

        def uri(name: str) -> str:
            return props.bucket.s3_url_for_object(f"{self.prefix}{name}")

        self.entrypoint_uri = uri(ENTRYPOINT)
        self.package_uri = uri(PACKAGE_ZIP)
        self.deps_uri = uri(DEPS_ARCHIVE)
        self.config_uri = uri(CONFIG)
        self.package_zip = props.build_dir / PACKAGE_ZIP
        """The built package on this machine (the input planner's Lambda code)."""
        self.deps_dir = DEPS_DIR

    def _acknowledge_upload_handler(self, bucket: s3.IBucket) -> None:
        """The findings of CDK's own upload Lambda (one per stack, outside this construct's subtree)."""
        stack = Stack.of(self)
        (handler,) = [c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeployment")]
        why = "CDK's BucketDeployment handler (library code): "
        acknowledge(handler, "L1", why + "its Python runtime is pinned by aws-cdk-lib, updated with the library")
        self._acknowledge_audit(handler)
        acknowledge(
            handler,
            "IAM4",
            why + "it logs to CloudWatch with the AWS basic execution policy, as CDK defines it",
            "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
        )
        for action in ("s3:GetObject*", "s3:GetBucket*", "s3:List*", "s3:DeleteObject*", "s3:Abort*"):
            acknowledge(
                handler,
                "IAM5",
                why + "CDK's grant to copy the staged asset and write the artifacts bucket",
                f"Action::{action}",
            )

        def rendered(value: str) -> str:
            return resource_finding(self, value).removeprefix("Resource::") if Token.is_unresolved(value) else value

        # The CDK asset bucket of the bootstrap stack (DefaultStackSynthesizer's default name).
        assets = f"arn:{rendered(stack.partition)}:s3:::cdk-hnb659fds-assets-{rendered(stack.account)}-{rendered(stack.region)}/*"
        acknowledge(
            handler, "IAM5", why + "reads the staged build from the CDK bootstrap asset bucket", f"Resource::{assets}"
        )
        acknowledge(
            handler,
            "IAM5",
            why + "writes new versions under jobs/ (it never prunes: prune=False)",
            resource_finding(self, bucket.arn_for_objects("*")),
        )

    @staticmethod
    def _acknowledge_audit(handler: IConstruct) -> None:
        """checkov's and parliament's findings of CDK's upload Lambda (its function, log group and role policy)."""
        why = "CDK's BucketDeployment handler (library code, run by CloudFormation on deploy only): "
        acknowledge_provider_lambda(handler, "CDK's BucketDeployment handler", "S3's API")
        acknowledge_checkov(
            handler,
            "CKV_AWS_173",
            why + "its environment variables are settings, no secrets; Lambda encrypts them at rest anyway",
        )
        acknowledge_checkov(handler.node.find_child("LogGroup"), "CKV_AWS_158", LOGS_WITHOUT_CMK)
        policy = handler.node.find_child("ServiceRole").node.find_child("DefaultPolicy")
        for action in ("s3:GetObject*", "s3:List*"):
            acknowledge_parliament(
                policy,
                "RESOURCE_MISMATCH",
                action,
                why + f"CDK's grant writes {action} on the buckets and their objects; the actions it expands to that "
                "take other resources (access points, access grants, jobs) grant nothing on them",
            )
