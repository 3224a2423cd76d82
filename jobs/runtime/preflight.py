"""Checks that need no Spark, run before Spark starts (which takes seconds): a wrong path or URI is told in under a second.

Spark-side checks stay where they are (`jobs.fs.input.require_input`, `open_input`): they also cover `s3://` paths,
which are not looked at here, and a folder that changes between the two.
"""

from __future__ import annotations

import os

from jobs.config import JobConfig
from jobs.errors import InputNotFoundError
from jobs.fs import store
from jobs.fs.paths import absolute, check_apart


def require_local_input(path: str, option: str = "--input", holding_files: bool = True) -> None:
    """A local input path exists and (`holding_files`) holds a file to read; remote paths are left to Spark.

    Raises:
        InputNotFoundError: the path does not exist, or is a folder with no input file under it.
        InvalidArgumentError: a file under it has a name Hadoop cannot read (`store.unreadable_names`).
    """
    local = store.local_path(path)
    if local is None:
        return
    local = absolute(local)
    if not os.path.exists(local):
        raise InputNotFoundError(f"{option}: {local} does not exist")
    if not holding_files:
        return
    listing = store.list_input(local, option)  # the listing the run reads: hidden names and uploads left out
    if not listing.files:
        raise listing.nothing_to_read(option, local)


def check_manifest(config: JobConfig, create: bool) -> None:
    """The configured manifest URI names a manifest and, unless the run is to `create` it, the manifest is there
    and is a Winnow manifest (an SQLite file, a DynamoDB table, a lake folder: none needs Spark to look at).

    Raises:
        InvalidArgumentError: the URI is of no known form.
        ManifestError: no AWS region for DynamoDB; the manifest is missing, not ours, or cannot be reached (an
            outage past `manifest.throttle_patience_seconds`, exit 1: see `jobs.manifest.dynamodb`).
    """
    settings = config.manifest
    if settings.uri is not None:
        from jobs.manifest import open_manifest

        # The run's own patience: an outage stops the check as it would stop the run (the default waited 10 minutes).
        manifest = open_manifest(
            settings.uri,
            settings.concurrency,
            settings.max_attempts,
            settings.throttle_patience_seconds,
            settings.buckets,
        )
        if not create:
            manifest.check()


def check_paths(
    input_path: str, output_path: str | None = None, incremental: bool = False, empty_allowed: bool = False
) -> None:
    """The input is there to read, and the output (when the command writes one) is apart from it.

    An `incremental` run's input may hold no file yet: that run ends with "nothing to do", not an error; with
    `empty_allowed` (a completed dedup run's `good/`, for shred) no file is an input of no line.

    Raises:
        InputNotFoundError: see `require_local_input`.
        InvalidArgumentError: the output is, holds or lies inside the input.
    """
    require_local_input(input_path, holding_files=not (incremental or empty_allowed))
    if output_path is not None:
        check_apart("--output", absolute(output_path), {"--input": absolute(input_path)})
