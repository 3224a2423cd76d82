"""The env config's error and its one check, shared by cdk/config.py and the config modules it imports."""

from __future__ import annotations

import json
from typing import Any

from jobs.errors import InvalidConfigError


class EnvConfigError(InvalidConfigError):
    """An env name or an env config file is wrong: names the key, what was given and what is allowed."""


def check(ok: bool, key: str, given: Any, allowed: str) -> None:
    """Raise `EnvConfigError` naming `key`, what was `given` (as JSON) and what is `allowed`, unless `ok`."""
    if not ok:
        raise EnvConfigError(f"{key}: given {json.dumps(given)}; allowed: {allowed}")
