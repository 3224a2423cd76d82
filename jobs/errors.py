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


class InvalidInputError(WinnowError):
    """Input records that cannot be read as records (keyed and table inputs): the command is refused, nothing
    written."""


class LoaderMessageError(WinnowError):
    """The "shredding_complete" message could not be sent (exit 1): the run folder has no `_SUCCESS`, so a rerun
    of the same run id sends it again."""

    exit_code = 1


class DamagedFileError(WinnowError):
    """A file of the run's state or input is damaged (cut, emptied, not what its name says) or cannot be written
    (a full disk): names the file, the cause and the way out (exit 1)."""

    exit_code = 1
