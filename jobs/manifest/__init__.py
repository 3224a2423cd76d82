"""The events manifest (cross-batch dedup): one interface; DynamoDB, embedded SQLite and lake (Parquet) backends."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from jobs.errors import InvalidArgumentError
from jobs.manifest.base import (
    IdResult,
    Manifest,
    ManifestCheck,
    ManifestClient,
    ManifestError,
    ManifestRun,
    ManifestStats,
)

__all__ = [
    "IdResult", "Manifest", "ManifestCheck", "ManifestClient", "ManifestError", "ManifestRun", "ManifestStats",
    "open_manifest",
]  # fmt: skip

URI_FORMS = (
    "sqlite:///abs/path.db, sqlite:relative/path.db, dynamodb://TABLE or lake:PATH (a folder or s3://bucket/prefix)"
)


def open_manifest(
    uri: str, concurrency: int = 16, max_attempts: int = 10, patience_seconds: float = 3600.0, buckets: int = 64
) -> Manifest:
    """The manifest a URI names. Nothing is contacted yet (see `Manifest.check`).

    Raises:
        InvalidArgumentError: the URI is of no known form.
    """
    parsed = urlparse(uri)
    if parsed.scheme == "lake":
        from jobs.manifest.lake import open_lake

        return open_lake(uri, buckets)
    if parsed.scheme == "sqlite":
        from jobs.manifest.sqlite import SqliteManifest

        if uri.startswith("sqlite:///"):
            path = uri.removeprefix("sqlite://")  # keeps the leading "/"
        elif uri.startswith("sqlite://"):
            path = ""  # sqlite://host/… names no local file
        else:
            path = uri.removeprefix("sqlite:")
        if not path:
            raise InvalidArgumentError(f"--manifest: given {uri!r}, which names no file; allowed: {URI_FORMS}")
        return SqliteManifest(uri=uri, path=os.path.abspath(path))
    if parsed.scheme == "dynamodb":
        from jobs.manifest.dynamodb import DynamoDbManifest

        if not parsed.netloc or parsed.path not in ("", "/"):
            raise InvalidArgumentError(f"--manifest: given {uri!r}, which names no table; allowed: {URI_FORMS}")
        import boto3

        # Region and endpoint as the driver resolves them (AWS_DEFAULT_REGION or profile, then AWS_REGION, which
        # boto3 itself does not read; AWS_ENDPOINT_URL), so every executor talks to the same table; credentials
        # are resolved by each executor itself.
        region = boto3.session.Session().region_name or os.environ.get("AWS_REGION")
        if not region:
            raise ManifestError(
                f"manifest {uri}: no AWS region; allowed: set AWS_REGION or AWS_DEFAULT_REGION, or a region in the "
                "AWS profile"
            )
        endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB") or os.environ.get("AWS_ENDPOINT_URL")
        return DynamoDbManifest(
            uri=uri, table=parsed.netloc, region=region, endpoint_url=endpoint,
            concurrency=concurrency, max_attempts=max_attempts, patience_seconds=patience_seconds,
        )  # fmt: skip
    raise InvalidArgumentError(f"--manifest: given {uri!r}; allowed: {URI_FORMS}")
