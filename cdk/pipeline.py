"""One environment's stacks, named and tagged: what app.py (and the tests) build."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk

from cdk.config import EnvConfig
from cdk.naming import PROJECT
from cdk.stacks.orchestration_stack import OrchestrationStack
from cdk.stacks.processing_stack import ProcessingStack
from cdk.stacks.storage_stack import StorageStack

EMR_APPLICATION = "AWS::EMRServerless::Application"

CDK_JSON = Path(__file__).resolve().parent.parent / "cdk.json"


@dataclass(frozen=True)
class Pipeline:
    """The stacks of one environment."""

    storage: StorageStack
    processing: ProcessingStack
    orchestration: OrchestrationStack


def stack_name(env: str, part: str) -> str:
    """`Winnow-<env>-<part>`: every stack name carries the env."""
    return f"Winnow-{env}-{part}"


def cdk_json_context() -> dict[str, Any]:
    """The context of cdk.json (feature flags), for apps not started by the CDK CLI (tests, `python app.py`)."""
    context: dict[str, Any] = json.loads(CDK_JSON.read_text(encoding="utf-8"))["context"]
    return context


def build_pipeline(app: cdk.App, config: EnvConfig, build_dir: Path, account: str | None = None) -> Pipeline:
    """Add the Storage, Processing and Orchestration stacks of `config.env` to `app`.

    Args:
        app: the CDK app.
        config: the validated env config.
        build_dir: the job artifacts `make package` built.
        account: the account when the config names none (dev: the CLI's current account).
    """
    env = cdk.Environment(account=config.account or account, region=config.region)
    storage = StorageStack(
        app,
        stack_name(config.env, "Storage"),
        config=config,
        env=env,
        termination_protection=config.retain_data,
        description=f"Winnow {config.env}: manifest table and buckets (stateful)",
    )
    processing = ProcessingStack(
        app,
        stack_name(config.env, "Processing"),
        config=config,
        storage=storage,
        build_dir=build_dir,
        env=env,
        description=f"Winnow {config.env}: EMR Serverless application, job role, job artifacts",
    )
    orchestration = OrchestrationStack(
        app,
        stack_name(config.env, "Orchestration"),
        config=config,
        storage=storage,
        processing=processing,
        env=env,
        description=f"Winnow {config.env}: pipeline state machine, schedule, alarm, dashboard",
    )
    pipeline = Pipeline(storage, processing, orchestration)
    for stack in (storage, processing, orchestration):
        tags = cdk.Tags.of(stack)
        tags.add("project", PROJECT)
        tags.add("env", config.env)
        # The configurable tags change with the config; a change to the EMR application fails while it is STARTED
        # (during runs and its idle timeout), so it keeps only the fixed project and env tags.
        for key, value in config.tags.items():
            tags.add(key, value, exclude_resource_types=[EMR_APPLICATION])
    return pipeline
