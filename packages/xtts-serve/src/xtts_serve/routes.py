"""The endpoints on an engine: speech (whole or streamed) and voices. Each reads what it
needs from `request.app.state` (`engine`, `worker`, `metrics`, `models`,
`upload_limiter`), set by `create_app`."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncIterator

import anyio
import numpy as np
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from xtts_audio import stream_wav_header
from xtts_serve.errors import BusyError, RequestError
from xtts_serve.formats import MEDIA_TYPES, encode
from xtts_serve.middleware import error_body
from xtts_serve.speech_request import parse_speech
from xtts_serve.worker import Finished, Job

__all__ = ["delete_voice", "list_voices", "speech", "upload_voice"]

_log = logging.getLogger(__name__)

_UPLOAD_FIELDS = ("file", "name")


async def speech(request: Request) -> Response:
    """`POST /v1/audio/speech`: the audio of a text, whole or streamed (`stream`)."""
    received = time.perf_counter()
    state = request.app.state
    engine, worker = state.engine, state.worker
    asked = parse_speech(await request.body(), models=state.models)
    utterance = engine.prepare(asked.input, voice=asked.voice, language=asked.language)
    if asked.stream and engine.stream_refusal is not None:
        raise RequestError(engine.stream_refusal)
    job = worker.submit(functools.partial(engine.speech, utterance, stream=asked.stream))
    try:
        first = await job.next()
    except Exception as error:
        if isinstance(error, RequestError | BusyError):
            raise
        return _server_error(error)  # logged by the worker; this request fails alone
    except BaseException:  # cancelled: the client went away, or the server stops
        job.cancel()
        raise
    state.metrics.first_audio.observe(time.perf_counter() - received)
    headers = {"X-Sample-Rate": str(engine.sample_rate)}
    media_type = MEDIA_TYPES[asked.response_format]
    if asked.stream:
        return StreamingResponse(_streamed(request, job, first, asked.response_format),
                                 media_type=media_type, headers=headers)  # fmt: skip
    try:
        done = await job.next()
    except Exception as error:
        return _server_error(error)
    state.metrics.spoken(audio_seconds=len(first) / engine.sample_rate,
                         decode_seconds=done.seconds)  # fmt: skip
    coded = functools.partial(encode, first, engine.sample_rate, asked.response_format,
                              resample=engine.resample)  # fmt: skip
    body, rate = await anyio.to_thread.run_sync(coded)  # MP3 and Opus take a while
    headers["X-Sample-Rate"] = str(rate)
    return Response(body, media_type=media_type, headers=headers)


async def _streamed(request: Request, job: Job, first: np.ndarray | Finished,
                    response_format: str) -> AsyncIterator[bytes]:  # fmt: skip
    """A stream's body: the WAV header (for `wav`), then each chunk's 16-bit PCM as the
    worker hands it over; the job is cancelled if the client goes away."""
    sample_rate, samples, event = request.app.state.engine.sample_rate, 0, first
    try:
        if response_format == "wav":
            yield stream_wav_header(sample_rate)
        while not isinstance(event, Finished):
            samples += len(event)
            yield np.asarray(event, "<i2").tobytes()
            event = await job.next()  # a failure now ends the response abruptly: the
            # status is sent, and a cut connection is the one signal a client still gets
        request.app.state.metrics.spoken(audio_seconds=samples / sample_rate,
                                         decode_seconds=event.seconds)  # fmt: skip
    finally:
        job.cancel()


def _server_error(error: Exception) -> Response:
    message = f"Expected the decoding to succeed, received: {type(error).__name__}: {error}"
    return Response(error_body(message, "server_error"), status_code=500,
                    media_type="application/json")  # fmt: skip


async def list_voices(request: Request) -> Response:
    """`GET /v1/audio/voices`: every voice, the one used when a request names none, and
    the aliases a request may name them by ({name: voice id})."""
    voices = request.app.state.engine.voices
    return JSONResponse({"voices": [v.to_dict() for v in voices.list()],
                         "default": voices.default, "aliases": voices.aliases})  # fmt: skip


async def upload_voice(request: Request) -> Response:
    """`POST /v1/voices`: a clip (multipart field `file`, optional `name`) becomes a voice;
    answers 201 with its id."""
    state = request.app.state
    async with request.form(max_files=1, max_fields=1) as form:
        fields = [key for key, _ in form.multi_items()]
        unknown = sorted(set(fields) - set(_UPLOAD_FIELDS))
        if unknown or len(fields) != len(set(fields)):
            raise RequestError(f"Expected the multipart fields {list(_UPLOAD_FIELDS)}, each at "
                               f"most once, received: {fields}")  # fmt: skip
        upload, name = form.get("file"), form.get("name")
        if not isinstance(upload, UploadFile):
            raise RequestError("Expected a multipart/form-data body with the clip as the file "
                               "field `file`, received: no such file")  # fmt: skip
        if name is not None and not isinstance(name, str):
            raise RequestError("Expected name a text field, received: a file")
        clip = await upload.read()
    add = functools.partial(state.engine.add_voice, clip, name=name)
    voice = await anyio.to_thread.run_sync(add, limiter=state.upload_limiter)
    return JSONResponse(voice.to_dict(), status_code=201)


async def delete_voice(request: Request) -> Response:
    """`DELETE /v1/voices/{voice_id}`: forget an uploaded voice."""
    voice = request.app.state.engine.voices.remove(request.path_params["voice_id"])
    return JSONResponse({"id": voice.id, "deleted": True})
