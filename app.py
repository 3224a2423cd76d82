#!/usr/bin/env python3
"""The CDK app: `npx cdk synth|diff|deploy -c env=dev` (see README "Deploy").

env (context) → cdk/config.py load_config → configs/<env>.json → stacks; cdk-nag AwsSolutions checks every
stack, and an unacknowledged finding fails the synth.
"""

from __future__ import annotations

import os
from pathlib import Path

import aws_cdk as cdk
import cdk_nag

from cdk.config import load_config
from cdk.pipeline import build_pipeline, cdk_json_context

# The CDK CLI passes cdk.json's context; `python app.py` alone does not, so read it then.
app = cdk.App(
    context=None if "CDK_CONTEXT_JSON" in os.environ else cdk_json_context(),
    outdir=os.environ.get("CDK_OUTDIR", "cdk.out"),
)
config = load_config(str(app.node.try_get_context("env") or "dev"))
build_pipeline(
    app,
    config,
    build_dir=Path(str(app.node.try_get_context("@winnow/artifactsDir") or "dist/package")),
    account=os.environ.get("CDK_DEFAULT_ACCOUNT"),
)
cdk.Validations.of(app).add_plugins(cdk_nag.AwsSolutionsChecks(app, verbose=True))
app.synth()
