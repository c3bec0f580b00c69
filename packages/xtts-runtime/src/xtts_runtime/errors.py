"""Errors raised by xtts_runtime: a voice folder refused, input it cannot speak."""

__all__ = ["InputError", "VoiceError", "XttsRuntimeError"]


class XttsRuntimeError(Exception):
    """Base class of every error xtts_runtime raises itself."""


class VoiceError(XttsRuntimeError, ValueError):
    """A voice folder that cannot be spoken: not one, another format's or version's, or a
    file missing or changed since the export (its SHA-256 in voice.json)."""


class InputError(XttsRuntimeError, ValueError):
    """A text with nothing to say, a language the voice lacks, or a reference clip that is
    not audio or gives no voice (silent, too short, a rate the voice does not read)."""
