"""Iglu: schema resolution (resolver.py: the lookup across repositories; repositories.py: keys, answers, deadlines
and embedded folders; http_repository.py: Iglu servers; resolver_config.py: the resolver config), TSV columns
(tsv.py) and typed Parquet columns (parquet/) from JSON Schemas; schema criteria (criterion.py) and schema-ddl
names (names.py)."""
