"""Errors raised by xtts_data.

Bad corpus *rows* are not errors: they are skipped and reported with a reason (see
`xtts_data.corpus.Skipped`). These are raised for problems the user must fix before
anything useful can happen: a bad config, an unreadable corpus layout, a damaged cache.
"""

__all__ = ["CacheError", "ConfigError", "CorpusError", "EmptySplitError", "LockError",
           "OutputExistsError", "XttsDataError"]  # fmt: skip


class XttsDataError(Exception):
    """Base class of every error xtts_data raises itself."""

    # Keep Exception's constructor so AutoGraph re-raises it as this type while tracing.
    __init__ = Exception.__init__


class ConfigError(XttsDataError, ValueError):
    """A configuration value is invalid: the message names the field, the value and the rule."""


class EmptySplitError(ConfigError):
    """A split of the corpus holds no utterance a batch can take (e.g. a small corpus whose
    hash split held none out for validation)."""


class CorpusError(XttsDataError, ValueError):
    """The corpus as a whole cannot be read (no metadata, unknown layout, no usable rows)."""


class CacheError(XttsDataError, RuntimeError):
    """A feature cache is missing, damaged, or was built with other settings."""


class LockError(XttsDataError, RuntimeError):
    """Another live process is writing the same cache folder or work dir."""


class OutputExistsError(XttsDataError, FileExistsError):
    """A folder to write exists and is not empty, and replacing it was not asked for."""
