"""Errors raised by xtts_audio at its boundaries (config and op entry).

Malformed audio *data* is found while a graph runs, so `decode_wav` reports it as
`tf.errors.InvalidArgumentError` (what TensorFlow raises for bad runtime input, also
inside `tf.data`); everything that can be checked before running raises these.
"""

__all__ = ["ConfigError", "InputError", "XttsAudioError"]


class XttsAudioError(Exception):
    """Base class of every error xtts_audio raises itself."""

    # AutoGraph re-raises an error met while tracing as its own type only when the class
    # keeps Exception's constructor; otherwise callers of a tf.function see a StagingError.
    __init__ = Exception.__init__


class ConfigError(XttsAudioError, ValueError):
    """A configuration value is invalid: the message names the field, the value and the rule."""


class InputError(XttsAudioError, ValueError):
    """A tensor argument has the wrong rank, shape or dtype for the op it was given to."""
