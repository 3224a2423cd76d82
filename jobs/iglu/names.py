"""Names derived from schema keys, as schema-ddl derives them."""

from __future__ import annotations

import re

_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(key: str) -> str:
    """schema-ddl's `StringUtils.snakeCase`: `fooBar` -> `foo_bar`, `HTTPServer` -> `http_server`, `-` -> `_`."""
    return _WORD.sub(r"\1_\2", _ACRONYM.sub(r"\1_\2", key)).replace("-", "_").lower()
