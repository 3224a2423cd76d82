"""Errors of the infrastructure code (config errors are `cdk.config.EnvConfigError`)."""

from __future__ import annotations

from jobs.errors import WinnowError


class ArtifactsNotBuiltError(WinnowError):
    """The job artifacts to deploy are missing: names the folder and the files, and how to build them."""
