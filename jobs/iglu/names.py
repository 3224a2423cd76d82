"""Names derived from schema keys, as schema-ddl derives them."""

from __future__ import annotations

import re

_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL = re.compile(r"([^A-Z_])([A-Z])")
_WORD = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(key: str) -> str:
    """schema-ddl's `StringUtils.snakeCase`: `fooBar` -> `foo_bar`, `HTTPServer` -> `http_server`, `-` -> `_`."""
    return _WORD.sub(r"\1_\2", _ACRONYM.sub(r"\1_\2", key)).replace("-", "_").lower()


def column_name(kind: str, vendor: str, name: str, model: str) -> str:
    """The wide-row column of an entity family.

    Args:
        kind: `contexts` (custom and derived contexts) or `unstruct_event`.
        vendor: the schema's vendor, e.g. `org.w3`.
        name: the schema's name, e.g. `PerformanceTiming`.
        model: the schema's model (the M of M-R-A), e.g. `1`.

    Returns:
        E.g. `contexts_org_w3_performance_timing_1`: vendor `.`/`-` to `_`; name `.`/`-` to `_`, then
        `_` before each capital that follows a non-capital, non-underscore; both lower-cased.
    """
    vendor_part = re.sub(r"[.-]", "_", vendor).lower()
    name_part = _CAMEL.sub(r"\1_\2", re.sub(r"[.-]", "_", name)).lower()
    return f"{kind}_{vendor_part}_{name_part}_{model}"
