"""Thin command-line entrypoints, one module per job (see `jobs.runtime.cli`)."""
