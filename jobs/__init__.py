"""Winnow: deduplicate and shred event data on Spark."""

from __future__ import annotations

__version__ = "0.1.0"
