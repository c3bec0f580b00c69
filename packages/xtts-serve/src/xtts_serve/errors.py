"""Errors raised by xtts_serve: one base class, and the request errors that carry the HTTP
status and the OpenAI error `type` they are answered with.

Standard library only: the console script imports it before TensorFlow loads.
"""

from __future__ import annotations

__all__ = [
    "AuthError",
    "BusyError",
    "ConfigError",
    "RequestError",
    "TooLargeError",
    "UnknownVoiceError",
    "XttsServeError",
]


class XttsServeError(Exception):
    """Base class of every error xtts_serve raises itself."""


class ConfigError(XttsServeError, ValueError):
    """A server or engine setting is invalid: the message names it, its value and the rule."""


class RequestError(XttsServeError, ValueError):
    """A request that cannot be served as asked: answered with `status` and a JSON body
    `{"error": {"message": str(error), "type": kind}}`; the server goes on serving.

    Args:
        message: what was expected, what was received, how to fix it.
        status: the HTTP status (4xx).
    """

    kind = "invalid_request_error"
    default_status = 400

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = self.default_status if status is None else status


class UnknownVoiceError(RequestError, LookupError):
    """A voice id that names no voice of the server (400 in a speech request, 404 in a
    `DELETE /v1/voices/{id}`)."""


class TooLargeError(RequestError):
    """A request body over its limit (413)."""

    default_status = 413


class AuthError(RequestError, PermissionError):
    """No API key, or a wrong one (401)."""

    kind = "authentication_error"
    default_status = 401


class BusyError(XttsServeError, RuntimeError):
    """The decoder's queue is full, or the server is shutting down: answered 503 with a
    `Retry-After` of `retry_after` seconds.

    Args:
        message: why, and what to do.
        retry_after: whole seconds after which a retry may find room.
    """

    kind = "server_busy"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
