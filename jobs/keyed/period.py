"""Expiry periods and bucket spans.

Syntax (decided here, documented in README):

- a plain positive number (`10`, `2.5`, `86400`): the expiry key is an ordered number (a sequence or
  transaction id, or epoch seconds) compared as an exact decimal;
- one or more `<number><unit>` terms (`30d`, `12h`, `90s`, `1h30m`, `250ms`; units ms, s, m, h, d, w): the
  expiry key is a timestamp (a timestamp/date column, or an ISO-8601 string such as
  `2026-11-22T10:00:00Z` / `2026-11-22 10:00:00`), compared in seconds since the epoch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

from jobs.errors import InvalidArgumentError

Kind = Literal["number", "timestamp"]
UNIT_SECONDS = {"ms": Decimal("0.001"), "s": Decimal(1), "m": Decimal(60), "h": Decimal(3600), "d": Decimal(86400),
                "w": Decimal(604800)}  # fmt: skip
_TERM = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+")
# Expiry values are decimal(38,6): at most 6 fractional digits (microseconds for timestamps).
QUANTUM = Decimal("0.000001")


@dataclass(frozen=True)
class Period:
    """A period: its kind, its length (seconds for durations) and the text it was given as."""

    kind: Kind
    value: Decimal
    text: str


def parse_period(text: str, option: str) -> Period:
    """Parse a period or span given to `option`.

    Raises:
        InvalidArgumentError: not a positive number nor a duration such as 30d, 12h, 90s.
    """
    allowed = "allowed: a positive number (e.g. 10, 2.5) or a duration such as 30d, 12h, 90s, 1h30m, 250ms"
    stripped = text.strip()
    if _DURATION.fullmatch(stripped):
        value = sum((Decimal(n) * UNIT_SECONDS[u] for n, u in _TERM.findall(stripped)), Decimal(0))
        kind: Kind = "timestamp"
    else:
        try:
            value = Decimal(stripped)
        except InvalidOperation:
            raise InvalidArgumentError(f"{option}: given {text!r}; {allowed}") from None
        if not value.is_finite():
            raise InvalidArgumentError(f"{option}: given {text!r}; {allowed}")
        kind = "number"
    if value <= 0:
        raise InvalidArgumentError(f"{option}: given {text!r}, which is not positive; {allowed}")
    if value != value.quantize(QUANTUM):
        raise InvalidArgumentError(f"{option}: given {text!r}, finer than the 0.000001 resolution of expiry values")
    return Period(kind=kind, value=value.quantize(QUANTUM), text=stripped)
