"""Errors raised by xtts_train at its boundaries (config, model entry, loss arguments).

Nothing here is raised inside a compiled step: shapes and settings are checked while a
function is traced, so a bad value fails once, before any step runs.
"""

__all__ = ["ConfigError", "MissingExtraError", "XttsTrainError"]


class XttsTrainError(Exception):
    """Base class of every error xtts_train raises itself."""

    # Keep Exception's constructor so AutoGraph re-raises it as this type while tracing;
    # otherwise callers of a tf.function see a StagingError.
    __init__ = Exception.__init__


class ConfigError(XttsTrainError, ValueError):
    """A config value or argument is invalid: the message names it, its value and the rule."""


class MissingExtraError(XttsTrainError, ImportError):
    """A package of an optional extra (e.g. `xtts-train[asr]`) is not installed: the
    message says how to install it."""
