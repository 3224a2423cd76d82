"""Winnow's constructs, one per AWS concern, each configured by a frozen props dataclass."""
