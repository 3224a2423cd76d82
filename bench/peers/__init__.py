"""Peer implementations for the benchmark harness: the same work as Winnow's jobs, on other engines."""
