"""What the server's decoding thread and routes need of an engine, whichever runtime
decodes (`Engine`: TensorFlow's programs; `OnnxEngine`: an exported voice in
onnxruntime): the `Scheduler` it drives and the `Speaker` the routes call. Imports no
runtime.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from xtts_data.errors import XttsDataError
from xtts_data.pieces import Encoded, text_pieces
from xtts_data.text import TextConfig, Tokenizer
from xtts_serve.config import EngineConfig
from xtts_serve.errors import RequestError
from xtts_serve.voices import Voice, VoiceStore, check_name, upload_reference

__all__ = ["Heard", "Request", "Scheduler", "Speaker", "Speaking", "Utterance", "alone",
           "caught", "read_text"]  # fmt: skip

_log = logging.getLogger(__name__)

# What a step hands a request: its audio arrays, or the exception its audio raised.
Heard = list[np.ndarray] | Exception


@dataclasses.dataclass(frozen=True)
class Utterance:
    """A text and a voice, checked and ready to decode (`Speaker.prepare`).

    Attributes:
        text: the text as sent.
        voice: the voice's id.
        pieces: what the model reads, piece by piece (`text_pieces`).
        reference: float32 [frames, n_mels], the voice's conditioning mel.
    """

    text: str
    voice: str
    pieces: tuple[Encoded, ...]
    reference: np.ndarray = dataclasses.field(repr=False)


class Request(Protocol):
    """One request's decoding (`Speaker.speech`): `finished` once its last audio was
    handed out."""

    finished: bool


class Scheduler(Protocol):
    """What the decoding thread drives: requests admitted while there is `room`, then
    `step` after `step` until each is finished."""

    @property
    def room(self) -> bool: ...

    @property
    def busy(self) -> int: ...

    def admit(self, speech: Request) -> None: ...

    def step(self) -> list[tuple[Request, Heard]]: ...

    def cancel(self, speech: Request) -> None: ...


class Speaker(Protocol):
    """An engine as the app and its routes use it (`create_app`)."""

    config: EngineConfig
    voices: VoiceStore
    sample_rate: int
    max_frames: int
    max_symbols: int
    stream_refusal: str | None
    scheduler: Scheduler | None

    @property
    def slots(self) -> int: ...

    @property
    def programs(self) -> int: ...

    def warm_up(self) -> float: ...

    def prepare(self, text: str, *, voice: str | None = None,
                language: str | None = None) -> Utterance: ...  # fmt: skip

    def speech(self, utterance: Utterance, *, stream: bool) -> Request: ...

    def add_voice(self, clip: bytes, *, name: str | None = None) -> Voice: ...

    def resample(self, samples: np.ndarray, rate: int) -> np.ndarray: ...


class Speaking:
    """What both engines do alike on their own `prepare`, `speech`, `warm_up`, `scheduler`,
    `read_clip`, `voices`, `config` and workspace (`_workspace`): speak a text whole or
    streamed without HTTP, one request alone, and keep an uploaded voice."""

    def speak(self, text: str, *, voice: str | None = None,
              language: str | None = None) -> np.ndarray:  # fmt: skip
        """float32 [samples] in [-1, 1] at `sample_rate`: `text` spoken whole (`prepare`'s
        arguments and errors; the warm-up first if it has not run)."""
        return self.speak_prepared(self.prepare(text, voice=voice, language=language))

    def stream(self, text: str, *, voice: str | None = None,
               language: str | None = None) -> Iterator[np.ndarray]:  # fmt: skip
        """int16 [samples_i] chunks of `text`'s audio at `sample_rate`, each as soon as
        it is vocoded; joined, `speak`'s audio up to float rounding (`prepare`'s arguments
        and errors; a stream the engine refuses raised as a RequestError)."""
        return self.stream_prepared(self.prepare(text, voice=voice, language=language))

    def speak_prepared(self, utterance: Utterance) -> np.ndarray:
        """`speak` of a prepared utterance."""
        self.warm_up()
        (wave,) = self._alone(self.speech(utterance, stream=False))
        return wave

    def stream_prepared(self, utterance: Utterance) -> Iterator[np.ndarray]:
        """`stream` of a prepared utterance.

        Raises:
            RequestError: a stream the engine refuses, when the call is made.
        """
        speech = self.speech(utterance, stream=True)
        self.warm_up()
        return self._alone(speech)

    def add_voice(self, clip: bytes, *, name: str | None = None) -> Voice:
        """A voice from an uploaded clip (WAV, FLAC or OGG bytes), its mel read now by
        the engine's `read_clip` and kept (`voices`).

        Raises:
            RequestError: a bad name, or a clip that is empty, not audio, longer than
                `config.max_clip_seconds`, silent or too short (or at a rate an exported
                voice does not read).
        """
        check_name(name)
        reference = upload_reference(clip, read=self.read_clip,
                                     max_seconds=self.config.max_clip_seconds,
                                     workspace=Path(self._workspace.name))  # fmt: skip
        return self.voices.add(reference, name=name)

    def _alone(self, speech: Request) -> Iterator[np.ndarray]:
        """`speech`'s audio, decoded alone by `scheduler` (no other request in it)."""
        return alone(self.scheduler, speech)


def caught(take: Callable, *args) -> Heard:
    """`take(*args)`, or the exception it raised (logged): one request's failure."""
    try:
        return take(*args)
    except Exception as error:
        _log.exception("a request's audio failed")
        return error


def alone(scheduler: Scheduler, speech: Request) -> Iterator[np.ndarray]:
    """`speech`'s audio, decoded alone by `scheduler` (no other request in it); raises
    what its audio raised."""
    scheduler.admit(speech)
    try:
        while not speech.finished:
            for _, audio in scheduler.step():
                if isinstance(audio, Exception):
                    raise audio
                yield from audio
    finally:
        if not speech.finished:  # the caller stopped reading
            scheduler.cancel(speech)


def read_text(text: str, voices: VoiceStore, *, voice: str | None, language: str | None,
              max_chars: int, text_config: TextConfig, tokenizer: Tokenizer,
              split_symbols: int, max_symbols: int, extra: int) -> Utterance:  # fmt: skip
    """A request's text and voice checked, and the text read as the model will
    (`xtts_data.pieces.text_pieces`): `Speaker.prepare`.

    Args:
        text: what to say, at most `max_chars` characters.
        voices: the engine's; voice: a voice's id or alias (None: the default one).
        language: the text's language (BCP-47; None: the run's).
        text_config, tokenizer: the run's.
        split_symbols: the longest piece a text is cut into (0: not cut).
        max_symbols: the longest piece the engine decodes, in symbols.
        extra: token ids a piece has besides its symbols (`<eos>`, a language's token).

    Raises:
        RequestError: an empty or too long text, one with nothing the model can say, a
            language the run was not trained on, an unknown voice.
    """
    if not isinstance(text, str) or not text.strip():
        raise RequestError(f"Expected input: a text to speak, received: {text!r}")
    if len(text) > max_chars:
        raise RequestError(f"Expected input of at most {max_chars} characters (--max-chars), "
                           f"received: {len(text)} characters; send it in several "
                           f"requests")  # fmt: skip
    if voice is None and voices.default is None:
        ids = [v.id for v in voices.list()]
        raise RequestError(f"Expected voice, one of {ids}: the run saved no voice of its "
                           f"own to speak in when none is named")  # fmt: skip
    chosen = voices.get(voices.default if voice is None else voice)
    try:
        pieces = text_pieces(text, text_config, tokenizer, name="input", language=language,
                             max_symbols=split_symbols)  # fmt: skip
    except XttsDataError as error:
        raise RequestError(str(error)) from None
    longest = max(len(p.ids) for p in pieces) - extra
    if longest > max_symbols:  # only without splitting: spelled-out text grows
        raise RequestError(f"Expected input of at most {max_symbols} symbols once numbers "
                           f"and abbreviations are spelled out, received: {longest}; send it "
                           f"in several requests")  # fmt: skip
    return Utterance(text, chosen.id, tuple(pieces), chosen.reference)
