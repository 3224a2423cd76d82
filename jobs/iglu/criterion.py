"""Schema criteria: `iglu:VENDOR/NAME/FORMAT/M-R-A` where M, R and A may be `*` (Iglu's SchemaCriterion), as the
RDB transformer's `formats.tsv`, `formats.json` and `formats.skip` lists use them."""

from __future__ import annotations

import re
from dataclasses import dataclass

_CRITERION = re.compile(
    r"^iglu:([a-zA-Z0-9_.-]+)/([a-zA-Z0-9_-]+)/([a-zA-Z0-9_-]+)/([1-9][0-9]*|\*)-(0|[1-9][0-9]*|\*)-(0|[1-9][0-9]*|\*)\Z"
)
ALLOWED = "iglu:VENDOR/NAME/FORMAT/M-R-A with * allowed for M, R and A (e.g. iglu:com.acme/checkout/jsonschema/1-*-*)"


@dataclass(frozen=True)
class SchemaCriterion:
    """Which schema keys a criterion matches; `None` for a `*` part."""

    vendor: str
    name: str
    format: str
    model: int | None
    revision: int | None
    addition: int | None

    @classmethod
    def parse(cls, text: str) -> SchemaCriterion:
        """Raises ValueError naming what was given and what is allowed."""
        found = _CRITERION.match(text) if isinstance(text, str) else None
        if not found:
            raise ValueError(f"given {text!r}; allowed: {ALLOWED}")
        vendor, name, schema_format, *version = found.groups()
        model, revision, addition = (None if part == "*" else int(part) for part in version)
        return cls(vendor, name, schema_format, model, revision, addition)

    def matches(self, vendor: str, name: str, schema_format: str, version: str) -> bool:
        """Whether the schema `vendor/name/format/version` (version `M-R-A`) is one this criterion selects."""
        if (vendor, name, schema_format) != (self.vendor, self.name, self.format):
            return False
        parts = [int(part) for part in version.split("-")]
        return all(
            want is None or want == part
            for want, part in zip((self.model, self.revision, self.addition), parts, strict=True)
        )

    def regex(self) -> str:
        """A Java regex matching the Iglu URIs (`iglu:V/N/F/M-R-A`) this criterion selects, for Spark's `rlike`."""
        version = "-".join(
            "[0-9]+" if part is None else str(part) for part in (self.model, self.revision, self.addition)
        )
        return "^" + re.escape(f"iglu:{self.vendor}/{self.name}/{self.format}/") + version + r"\z"
