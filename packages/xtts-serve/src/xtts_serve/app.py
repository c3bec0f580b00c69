"""`create_app`: the Starlette application on an `Engine`: the routes, the decoding
thread started and stopped with the app (its lifespan), JSON errors for everything a
client can get wrong, the API key and body limits, and the metrics.

| route | |
| --- | --- |
| `POST /v1/audio/speech` | OpenAI's speech request, plus `stream` and `language` |
| `GET /v1/audio/voices` | the voices, the default one and the aliases |
| `POST /v1/voices`, `DELETE /v1/voices/{id}` | a voice from an uploaded clip; forget it |
| `GET /` | the web page: speak a text in a voice, upload one (no API key: it asks) |
| `GET /healthz` | 503 until the warm-up is done, then 200 (no API key needed) |
| `GET /metrics` | Prometheus text |
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from importlib import resources

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from xtts_serve.config import ServerConfig, json_body_limit
from xtts_serve.errors import BusyError, RequestError
from xtts_serve.metrics import CONTENT_TYPE, ServeMetrics
from xtts_serve.middleware import ApiKey, BodyLimit, CountRequests, error_body
from xtts_serve.routes import delete_voice, list_voices, speech, upload_voice
from xtts_serve.scheduling import Scheduler, Speaker
from xtts_serve.speech_request import model_names
from xtts_serve.worker import DecodeWorker

__all__ = ["UPLOAD_PATH", "create_app"]

UPLOAD_PATH = "/v1/voices"  # the one route whose body is bounded by max_upload_mb


def create_app(engine: Speaker, config: ServerConfig | None = None) -> Starlette:
    """The server's ASGI app on `engine` (run it with uvicorn). The engine's warm-up runs
    in the decoding thread once the app starts (its lifespan); until it is done,
    `GET /healthz` answers 503 and speech requests wait in the queue.

    Args:
        engine: a loaded engine (warm or not).
        config: the server's limits, API key and model aliases; None: `ServerConfig()`'s.
    """
    config = ServerConfig() if config is None else config
    worker = DecodeWorker(functools.partial(_start, engine), max_queue=config.max_queue,
                          slots=engine.slots)  # fmt: skip
    metrics = ServeMetrics(worker)
    routes = [
        Route("/", _page, methods=["GET"]),
        Route("/v1/audio/speech", speech, methods=["POST"]),
        Route("/v1/audio/voices", list_voices, methods=["GET"]),
        Route(UPLOAD_PATH, upload_voice, methods=["POST"]),
        Route(UPLOAD_PATH + "/{voice_id}", delete_voice, methods=["DELETE"]),
        Route("/healthz", _healthz, methods=["GET"]),
        Route("/metrics", _metrics, methods=["GET"]),
    ]  # fmt: skip
    json_limit = json_body_limit(engine.config.max_chars)
    middleware = [Middleware(CountRequests, metrics=metrics, routes=routes)]
    if config.api_key is not None:
        middleware.append(Middleware(ApiKey, key=config.api_key))
    middleware.append(Middleware(
        BodyLimit, limit=lambda path: config.max_upload_bytes if path == UPLOAD_PATH else json_limit
    ))  # fmt: skip
    handlers = {RequestError: _request_error, BusyError: _busy, HTTPException: _http_error}
    app = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers,
                    lifespan=_lifespan)  # fmt: skip
    app.state.engine, app.state.worker, app.state.metrics = engine, worker, metrics
    app.state.models = model_names(engine.config.run.resolve().name, aliases=config.model_aliases)
    return app


def _start(engine: Speaker) -> Scheduler:
    """The decoding thread's first task: the warm-up; then it drives the scheduler."""
    engine.warm_up()
    return engine.scheduler


@contextlib.asynccontextmanager
async def _lifespan(app: Starlette) -> AsyncIterator[None]:
    """Start the decoding thread (its warm-up first); at shutdown, once the server has
    finished the requests in flight, let it finish its job and end."""
    app.state.upload_limiter = anyio.CapacityLimiter(1)  # one clip decoded at a time
    app.state.worker.start()
    try:
        yield
    finally:
        await anyio.to_thread.run_sync(app.state.worker.stop)


_PAGE = resources.files("xtts_serve").joinpath("page.html")


async def _page(request: Request) -> Response:
    """`GET /`: the web page (static; it speaks through the API, with the key it is given)."""
    return HTMLResponse(_PAGE.read_text(encoding="utf-8"))


async def _healthz(request: Request) -> Response:
    state = request.app.state
    worker, engine = state.worker, state.engine
    if worker.failure is not None:
        return JSONResponse({"status": "failed", "error": worker.failure}, status_code=503)
    if not worker.ready:
        return JSONResponse({"status": "warming up"}, status_code=503)
    return JSONResponse({"status": "ready", "programs": engine.programs,
                         "max_frames": engine.max_frames, "max_symbols": engine.max_symbols,
                         "slots": engine.slots,
                         "streams": engine.stream_refusal is None})  # fmt: skip


async def _metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE)


def _json_error(body: bytes, status: int, headers: dict[str, str] | None = None) -> Response:
    return Response(body, status_code=status, media_type="application/json", headers=headers)


async def _request_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, RequestError)
    return _json_error(error_body(error), error.status)


async def _busy(request: Request, error: Exception) -> Response:
    assert isinstance(error, BusyError)
    return _json_error(error_body(error), 503, {"Retry-After": str(error.retry_after)})


async def _http_error(request: Request, error: Exception) -> Response:
    """Starlette's own refusals (an unknown route, a wrong method, a malformed multipart
    body) as JSON errors."""
    assert isinstance(error, HTTPException)
    message = f"{error.detail}: {request.method} {request.url.path}"
    return _json_error(error_body(message), error.status_code, error.headers)
