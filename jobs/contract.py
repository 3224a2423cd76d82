"""Names other parts depend on: the manifests' item and file names, and the dedup run folder's layout.

One place for them, imported by the jobs and by `cdk/` (the table's keys, the lake's prefixes in IAM and
lifecycle rules), so the infrastructure and the code that reads and writes cannot drift apart.
"""

from __future__ import annotations

# The DynamoDB events manifest (Snowplow-compatible): one item per (event id, fingerprint).
DYNAMODB_PARTITION_KEY = "eventId"
DYNAMODB_SORT_KEY = "fingerprint"
DYNAMODB_ETL_TIME = "etlTime"
"""Epoch seconds of the run that first delivered the pair (N)."""
DYNAMODB_TTL = "ttl"
"""Epoch seconds after which the item no longer counts (N); the table's TTL attribute."""

# The lake manifest (`lake:PATH`): Parquet under PATH, visible only through its commits.
LAKE_DESCRIPTOR = "_manifest.json"
"""Written once by `--create`: format, version and the fixed bucket count."""
LAKE_COMMITS = "_commits"
"""One JSON object per commit, `_commits/NNNNNNNNNN.json`, each the whole state; the highest number is current."""
LAKE_SEGMENTS = "segments"
"""`segments/segment=NAME/`: a run's (or a compaction's) entries, one Parquet file per bucket."""
LAKE_LEASE = "_lease"
"""The writer lease: one dedup or populate run writes the manifest at a time."""
LAKE_COLUMNS = (("id_hi", "BIGINT"), ("id_lo", "BIGINT"), ("fingerprint", "BIGINT"), ("etl_time", "BIGINT"),
                ("ttl", "BIGINT"))  # fmt: skip
"""The entry's columns: the event id's 128 bits, the fingerprint's 64-bit xxHash, the delivering run's time, expiry."""

# The dedup run folder `OUT/run=ID/`.
GOOD, DUPLICATES, QUARANTINE, BAD = "good", "duplicates", "quarantine", "bad"
SUMMARY = "summary.json"
SUCCESS_MARKER = "_SUCCESS"
