"""ASGI middleware of the server: the API key, body-size limits, and request counting.

Plain ASGI (not `BaseHTTPMiddleware`), so streamed responses pass through untouched.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Sequence

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from xtts_serve.errors import AuthError, RequestError, TooLargeError
from xtts_serve.metrics import ServeMetrics

__all__ = ["OPEN_PATHS", "ApiKey", "BodyLimit", "CountRequests", "error_body"]

# Answered without the API key: load balancers' probes, and the page (static; it asks the
# user for the key and sends it with each request of its own).
OPEN_PATHS = ("/", "/healthz")


def error_body(error: RequestError | str, kind: str | None = None) -> bytes:
    """The JSON error of a response: `{"error": {"message": ..., "type": ...}}`."""
    message = str(error)
    kind = kind or getattr(error, "kind", "invalid_request_error")
    return json.dumps({"error": {"message": message, "type": kind}}).encode()


async def _answer(send: Send, error: RequestError,
                  headers: Sequence[tuple[bytes, bytes]] = ()) -> None:  # fmt: skip
    """Answer `error` as JSON from a middleware (before the app sees the request)."""
    body = error_body(error)
    await send({"type": "http.response.start", "status": error.status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


class ApiKey:
    """Every request but `OPEN_PATHS` must carry `Authorization: Bearer KEY`, compared in
    constant time (`hmac.compare_digest`); else 401."""

    def __init__(self, app: ASGIApp, *, key: str) -> None:
        self.app, self._key = app, key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        given = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, token = given.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self._key):
            return await self.app(scope, receive, send)
        error = AuthError("Expected the header Authorization: Bearer KEY with the server's API "
                          "key, received: " + ("a wrong key" if given else "none"))  # fmt: skip
        await _answer(send, error, [(b"www-authenticate", b"Bearer")])


class BodyLimit:
    """Request bodies of at most `limit(path)` bytes: a larger Content-Length is answered
    413 at once; a body that grows past it while read raises `TooLargeError` (413)."""

    def __init__(self, app: ASGIApp, *, limit: Callable[[str], int]) -> None:
        self.app, self._limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self._limit(scope["path"])
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await _answer(send, _too_large(limit, int(declared)))
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _too_large(limit, seen)
            return message

        await self.app(scope, limited, send)


def _too_large(limit: int, size: int) -> TooLargeError:
    return TooLargeError(f"Expected a body of at most {limit} bytes, received: {size} bytes "
                         f"or more")  # fmt: skip


class CountRequests:
    """Counts each response by route template and status (`xtts_serve_requests_total`)."""

    def __init__(self, app: ASGIApp, *, metrics: ServeMetrics, routes: Sequence[BaseRoute]):
        self.app, self._metrics, self._routes = app, metrics, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        route = next((getattr(r, "path", "other") for r in self._routes
                      if r.matches(scope)[0] != Match.NONE), "other")  # fmt: skip

        started = False

        async def counted(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                self._metrics.requests.labels(route, str(message["status"])).inc()
            await send(message)

        try:
            await self.app(scope, receive, counted)
        except Exception:  # answered 500 further out (Starlette's ServerErrorMiddleware)
            if not started:
                self._metrics.requests.labels(route, "500").inc()
            raise
