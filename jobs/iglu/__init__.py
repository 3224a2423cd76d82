"""Iglu: schema resolution (resolver.py), TSV columns (tsv.py) and typed Parquet columns (parquet/) from JSON Schemas;
schema criteria (criterion.py) and schema-ddl names (names.py)."""
