"""The small exception hierarchy every job raises; the command line turns these into one-line errors."""

from __future__ import annotations


class WinnowError(Exception):
    """Base class: an error the user can act on (bad config, bad arguments, unusable input or output)."""


class InvalidConfigError(WinnowError):
    """A config file or a config value is wrong: names the key, what was given and what is allowed."""


class InvalidArgumentError(WinnowError):
    """A command-line argument is wrong: names the option, what was given and what is allowed."""


class InputNotFoundError(WinnowError):
    """The input path does not exist or holds no readable files."""
