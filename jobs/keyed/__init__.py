"""Generic keyed dedup (the Apex Deduper): unique / duplicate / expired / error, with a persistent bucket store.

`records` reads csv / jsonl / parquet input with each record's input position and writes outputs in the
same format; `period` parses expiry periods; `decide` holds the pure DataFrame decisions; `state` is the
bucket store; `job` runs it all. `storage` (Hadoop FileSystem listing and atomic writes) is shared with
`jobs.tables`.
"""

from __future__ import annotations
