"""The body of `POST /v1/audio/speech` (OpenAI's request, and `stream` and `language`),
checked field by field: every field is used or refused, none ignored."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from xtts_serve.errors import RequestError
from xtts_serve.formats import MEDIA_TYPES, STREAM_FORMATS
from xtts_serve.openai_names import OPENAI_MODELS

__all__ = [
    "FIELDS",
    "FORMATS",
    "MODEL_ALIAS",
    "SpeechRequest",
    "model_names",
    "parse_speech",
]

FORMATS = tuple(MEDIA_TYPES)  # wav, pcm (16-bit mono), flac, mp3, opus
FIELDS = ("model", "input", "voice", "response_format", "speed", "stream", "language")
MODEL_ALIAS = "xtts"  # a model name every server answers to, besides its run's


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpeechRequest:
    """A speech request's fields, checked.

    Attributes:
        input: the text (its length and content are the engine's to check).
        voice: a voice's id or alias (`VoiceStore.get`); None: the run's own.
        response_format: one of `FORMATS`.
        stream: chunked, as the audio is decoded (`STREAM_FORMATS` only).
        language: the text's language (BCP-47) for a multilingual run; None: the run's.
    """

    input: str
    voice: str | None = None
    response_format: str = "wav"
    stream: bool = False
    language: str | None = None


def model_names(run: str, *, aliases: Sequence[str] = ()) -> tuple[str, ...]:
    """The `model` names a server answers to, each once: its run folder's name,
    `MODEL_ALIAS`, `OPENAI_MODELS` and `aliases` (`--model-alias`)."""
    return tuple(dict.fromkeys((run, MODEL_ALIAS, *OPENAI_MODELS, *aliases)))


def parse_speech(body: bytes, *, models: Sequence[str]) -> SpeechRequest:
    """Read a speech request's JSON body; absent or null optional fields take defaults.

    Args:
        body: the request's body.
        models: the `model` names this server answers to (`model_names`).

    Raises:
        RequestError: malformed JSON, not an object, an unknown field, a field of the
            wrong type, another model, a format other than `FORMATS` (or one that cannot
            stream, with `stream`), a speed other than 1.0 (each naming what was expected).
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as error:
        raise RequestError(f"Expected a JSON object body, received: malformed JSON "
                           f"({error})") from None  # fmt: skip
    if not isinstance(data, dict):
        raise RequestError(f"Expected a JSON object body, received: a JSON "
                           f"{type(data).__name__}")  # fmt: skip
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise RequestError(f"Expected only the fields {list(FIELDS)}, received: unknown "
                           f"field(s) {unknown}")  # fmt: skip
    fields = {k: v for k, v in data.items() if v is not None}
    if "input" not in fields:
        raise RequestError("Expected the field input: the text to speak, received: none")
    model = _typed(fields, "model", str, MODEL_ALIAS)
    if model not in models:
        raise RequestError(f"Expected model one of {list(models)}, received: {model!r}; the "
                           f"server's --model-alias NAME adds a name")  # fmt: skip
    response_format = _typed(fields, "response_format", str, "wav")
    if response_format not in FORMATS:
        raise RequestError(f"Expected response_format one of {list(FORMATS)}, received: "
                           f"{response_format!r}")  # fmt: skip
    speed = _typed(fields, "speed", (int, float), 1.0)
    if speed != 1.0:
        raise RequestError(f"Expected speed 1.0, received: {speed!r}; the model speaks at the "
                           f"pace it learned and cannot honour another")  # fmt: skip
    stream = _typed(fields, "stream", bool, False)
    if stream and response_format not in STREAM_FORMATS:
        raise RequestError(f"Expected response_format one of {list(STREAM_FORMATS)} with "
                           f"stream=true, received: {response_format!r}, whose encoder "
                           f"finishes its header only at the end; ask for it whole "
                           f"(stream=false)")  # fmt: skip
    return SpeechRequest(input=_typed(fields, "input", str, ""),
                         voice=_typed(fields, "voice", str, None),
                         response_format=response_format, stream=stream,
                         language=_typed(fields, "language", str, None))  # fmt: skip


def _typed(fields: dict, name: str, kind: type | tuple[type, ...], default):
    """`fields[name]` if it is of `kind` (a bool is not a number), `default` if absent.

    Raises:
        RequestError: a value of another type.
    """
    if name not in fields:
        return default
    value = fields[name]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        names = {str: "a string", bool: "true or false", (int, float): "a number"}
        raise RequestError(f"Expected {name} {names[kind]}, received: {json.dumps(value)}")
    return value
