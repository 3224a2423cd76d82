"""Keyed tables with merge engines (ClickHouse's Replacing / Collapsing / VersionedCollapsing MergeTree).

A table is a folder (local or S3) of immutable Parquet parts plus a small commit log (`log`); `engines`
holds the merge rules as pure DataFrame functions; `job` runs create / insert / select / optimize.
"""

from __future__ import annotations
