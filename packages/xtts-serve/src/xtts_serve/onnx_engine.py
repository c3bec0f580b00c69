"""`OnnxEngine`: an exported voice folder (`xtts-train export --format onnx`) served by
onnxruntime, without TensorFlow (`xtts-serve --runtime onnx`).

The decoder runs in `EngineConfig.slots` slots (`xtts_runtime.Slots`: the folder's
`slots-{b}` step, its state bound in place). A request's text is read as the runtime
reads it (`text_pieces`, the pieces the export's `decode.split_symbols` cuts); its pieces
take one slot in turn. A whole request's pieces each run, once ended, through `finish`
and the vocoder whole, followed by its pause: the audio of `xtts-runtime speak`. A
stream's audio comes as the decoder steps, its first chunk `CHUNK_FRAMES` frames
(`xtts_runtime.PieceStream`, TensorFlow's streams' rules: the `window` program's mel,
vocoder windows with their context, later ones longer), the same audio up to float
rounding; a folder without a `window` program (a postfilter that needs the whole
utterance) streams a piece at a time. A request's audio is exactly what it gets alone
from the same engine, whatever its neighbours or its slot; against `xtts-runtime speak`
(one row, the cache of its text's bucket) it differs by float rounding.
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from xtts_audio import pcm16
from xtts_data.pieces import Encoded
from xtts_runtime import InputError, Row, Slots, VoiceError
from xtts_runtime import Voice as VoiceFolder
from xtts_runtime.loop import conditioning, stop_length
from xtts_runtime.streaming import PieceStream
from xtts_serve.config import EngineConfig
from xtts_serve.errors import ConfigError, RequestError
from xtts_serve.scheduling import Heard, Speaking, Utterance, alone, caught, read_text
from xtts_serve.voices import RUN_VOICE, VoiceStore, hide_path, load_voices

__all__ = ["STEPS", "OnnxEngine", "RowScheduler", "RowSpeech"]

_log = logging.getLogger(__name__)

# Decoder steps a scheduler step runs (fewer once a request has audio): a joining piece
# waits at most that many (a step of 8 rows took ~0.3 ms on this project's 2-core CPU).
STEPS = 8


class RowSpeech:
    """One request's decoding through `Slots`: its pieces in turn. A stream's audio comes
    as the decoder steps (`PieceStream`, where the folder has its `window` program; else a
    piece at a time), a whole request's at its end (each piece through `finish` and the
    vocoder whole, as `xtts-runtime speak`).

    Args:
        utterance: the request, prepared (`OnnxEngine.prepare`).
        folder: the voice folder's programs.
        pauses: float32 [samples] of silence after each piece.
        stream: hand out int16 chunks as they come; else float32 [samples], the whole
            audio, at the end.

    Attributes:
        finished: its last audio was handed out.
    """

    def __init__(self, utterance: Utterance, *, folder: VoiceFolder, pauses: list[np.ndarray],
                 stream: bool) -> None:  # fmt: skip
        self.utterance, self.stream, self._folder, self._pauses = utterance, stream, folder, pauses
        self.row: Row | None = None  # the piece decoding now
        self.piece, self.finished = 0, False
        self._chunks: PieceStream | None = None  # the piece's stream, in chunks
        self._audio: list[np.ndarray] = []

    @property
    def waiting(self) -> bool:
        """Its next piece waits for a free slot."""
        return not self.finished and self.row is None

    def join(self, slots: Slots, voice: dict[str, np.ndarray]) -> None:
        """Its next piece joins a free slot of `slots`, spoken in `voice`."""
        ids = self.utterance.pieces[self.piece].ids
        self.row = slots.join(voice, ids)
        if self.stream and self._folder.programs.window is not None:
            self._chunks = PieceStream(self._folder.programs, self._folder.manifest, voice,
                                       count=len(ids))  # fmt: skip

    def advance(self) -> list[np.ndarray]:
        """A stream's int16 chunks that the steps of its piece so far made final."""
        if self._chunks is None:
            return []
        decoded = min(self.row.t * self._r, self._chunks.buffer)
        return self._out(self._chunks.advance(self.row.frames, decoded))

    def take(self, slots: Slots, row: Row) -> list[np.ndarray]:
        """Its audio once the piece decoding in `row` ended: a stream's int16 chunks of
        the rest of the piece and its pause; a whole request's float32 [samples] after
        its last piece; else nothing."""
        if self._chunks is not None:
            length = stop_length(self._folder.manifest, row.probs, row.count)
            audio = [*self._chunks.finish(row.frames, length), self._pauses[self.piece]]
        else:
            audio = [slots.spoken(row).audio, self._pauses[self.piece]]
        self.row, self._chunks, self.piece = None, None, self.piece + 1
        self.finished = self.piece == len(self.utterance.pieces)
        if self.stream:
            return self._out(audio)
        self._audio += audio
        return [np.concatenate(self._audio)] if self.finished else []

    @property
    def _r(self) -> int:
        return self._folder.manifest["reduction_factor"]

    @staticmethod
    def _out(audio: list[np.ndarray]) -> list[np.ndarray]:
        """A stream's chunks as int16, the empty ones left out."""
        return [pcm16(a) for a in audio if len(a)]


class RowScheduler:
    """Requests in the rows of `Slots`, stepped together (`Scheduler`).

    Args:
        slots: the voice's decoder slots.
        voice_of: a request → its voice (`conditioning`'s), computed when its first
            piece joins.
    """

    def __init__(self, slots: Slots, *,
                 voice_of: Callable[[RowSpeech], dict[str, np.ndarray]]) -> None:  # fmt: skip
        self.slots, self._voice_of = slots, voice_of
        self._speeches: list[RowSpeech] = []
        self._voices: dict[int, dict] = {}  # id(speech) → its voice

    @property
    def room(self) -> bool:
        """One more request can be admitted: it will have a slot at the next step."""
        return len(self._speeches) < self.slots.rows

    @property
    def busy(self) -> int:
        """Requests admitted and not finished (each holds a slot)."""
        return len(self._speeches)

    def admit(self, speech: RowSpeech) -> None:
        """`speech`'s first piece joins a slot at the next `step`.

        Raises:
            RequestError: no room (call only while `room`).
        """
        if not self.room:
            raise RequestError("Expected a free slot, received: every slot busy")
        self._speeches.append(speech)

    def step(self) -> list[tuple[RowSpeech, Heard]]:
        """Join the waiting pieces, run decoder steps until some request has audio (at
        most `STEPS`), and hand it out.

        Returns:
            (speech, its audio) for each request with audio, in order, or (speech, the
            exception) for one whose audio failed (it is cancelled; the others go on).

        Raises:
            Exception: the slots' step itself failed (every request in them with it).
        """
        for speech in self._speeches:
            if speech.waiting:
                voice = self._voices.get(id(speech))
                if voice is None:
                    voice = self._voices[id(speech)] = self._voice_of(speech)
                speech.join(self.slots, voice)
        out = []
        for _ in range(STEPS):
            ended = {id(row) for row in self.slots.step()}
            for speech in list(self._speeches):
                if speech.row is None:
                    continue
                if id(speech.row) in ended:
                    audio = caught(speech.take, self.slots, speech.row)
                else:
                    audio = caught(speech.advance)
                if isinstance(audio, Exception):
                    self.cancel(speech)
                if isinstance(audio, Exception) or audio:
                    out.append((speech, audio))
            if out:
                break
        for speech in self._speeches:
            if speech.finished:
                self._voices.pop(id(speech), None)
        self._speeches = [s for s in self._speeches if not s.finished]
        return out

    def cancel(self, speech: RowSpeech) -> None:
        """Stop decoding `speech` now (its client went away): its slot is free."""
        if speech.row is not None:
            self.slots.leave(speech.row)
            speech.row = None
        speech.finished = True
        self._voices.pop(id(speech), None)
        self._speeches = [s for s in self._speeches if s is not speech]


class OnnxEngine(Speaking):
    """An exported voice folder, loaded once, that speaks texts up to `config.max_chars`
    in `config.slots` decoder slots (`Speaker`).

    Args:
        config: what to load (`config.run`: the voice folder; `runtime` onnx) and the
            limits.

    Attributes:
        folder: the voice folder's programs (`xtts_runtime.Voice`).
        sample_rate: samples per second of the audio it speaks.
        max_frames: the decoding buffer of the longest piece.
        max_symbols: the longest piece the model reads, in symbols: the export's
            `decode.split_symbols`, or what its largest text bucket holds without them.
        stream_refusal: None: it streams (the folder holds its vocoder).
        voices: the voices it speaks in and their aliases (`VoiceStore`).
        scheduler: its `RowScheduler`, once warm; driven by one thread.

    Raises:
        ConfigError: not a voice folder, a file changed since the export, a folder
            exported without `config.slots` slots, or a voice `load_voices` refuses.
    """

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        threads = config.threads or len(os.sched_getaffinity(0))
        try:
            self.folder = VoiceFolder(config.run, threads=threads)
            slots = Slots(self.folder, rows=config.slots)
        except VoiceError as error:
            raise ConfigError(str(error)) from None
        manifest = self.folder.manifest
        self.sample_rate = self.folder.sample_rate
        self._split = manifest["split_symbols"]
        language = 1 if self.folder.tokenizer.language_tokens else 0
        self._extra = 1 + language  # <eos>, and a language's token
        self.max_symbols = self._split or manifest["text_len"] - self._extra
        self.max_frames = manifest["buffers"][-1]
        self.stream_refusal: str | None = None
        self.read_clip = functools.partial(_read_clip, self.folder)
        reference = self.folder.folder / "reference.npy"
        self.own_voice: np.ndarray | str = (np.load(reference) if reference.exists() else
                                            f"{config.run} holds no reference.npy")  # fmt: skip
        self.voices: VoiceStore = load_voices(config, own=self.own_voice, read=self.read_clip)
        self._slots = slots
        self._workspace = tempfile.TemporaryDirectory(prefix="xtts-serve-")
        self.scheduler: RowScheduler | None = None  # after the warm-up

    @property
    def ready(self) -> bool:
        """`warm_up` has run."""
        return self.scheduler is not None

    @property
    def slots(self) -> int:
        """Requests decoded side by side."""
        return self._slots.rows

    @property
    def programs(self) -> int:
        """Programs loaded: the folder's (those of the clips' rates once read) and the
        slots' step."""
        return self.folder.loaded + 1

    def warm_up(self) -> float:
        """Speak one short piece through every program once (onnxruntime sizes its
        buffers at a program's first run). Once; later calls return at once.

        Returns:
            Seconds it took (0 when already warm).
        """
        if self.scheduler is not None:
            return 0.0
        started = time.perf_counter()
        self.scheduler = RowScheduler(self._slots, voice_of=self._voice_of)
        voice = self.voices.list()[0]
        eos = Encoded(ids=[self.folder.tokenizer.EOS], text="", unknown={})  # ends at once
        list(alone(self.scheduler, self.speech(Utterance("", voice.id, (eos,), voice.reference),
                                               stream=True)))  # fmt: skip
        seconds = time.perf_counter() - started
        _log.info("warm: %d programs for %d slots, pieces of up to %d symbols in buffers of "
                  "up to %d frames, in %.1f s", self.programs, self.slots, self.max_symbols,
                  self.max_frames, seconds)  # fmt: skip
        return seconds

    def prepare(self, text: str, *, voice: str | None = None,
                language: str | None = None) -> Utterance:  # fmt: skip
        """Check a text and a voice, and read the text as the model will (`read_text`).

        Raises:
            RequestError: an empty or too long text, one with nothing the model can say,
                a language the voice was not trained on, an unknown voice.
        """
        return read_text(text, self.voices, voice=voice, language=language,
                         max_chars=self.config.max_chars, text_config=self.folder.text_config,
                         tokenizer=self.folder.tokenizer, split_symbols=self._split,
                         max_symbols=self.max_symbols, extra=self._extra)  # fmt: skip

    def speech(self, utterance: Utterance, *, stream: bool) -> RowSpeech:
        """A request's decoding, for `scheduler` to admit: its audio in int16 chunks as
        the slots step (`stream`), or whole, float32 [samples] in [-1, 1]."""
        pauses = [self.folder.pause(piece) for piece in utterance.pieces]
        return RowSpeech(utterance, folder=self.folder, pauses=pauses, stream=stream)

    def resample(self, samples: np.ndarray, rate: int) -> np.ndarray:
        """float32 [samples] of its audio, at `rate` (the folder's `resample-{rate}`).

        Raises:
            RequestError: a rate the voice was not exported to.
        """
        try:
            return self.folder.resample(samples, rate)
        except VoiceError as error:
            raise RequestError(str(error)) from None

    def _voice_of(self, speech: RowSpeech) -> dict[str, np.ndarray]:
        """A request's voice: its reference through the `conditioning` program (the run's
        own, computed when the folder loaded)."""
        folder = self.folder
        if speech.utterance.voice == RUN_VOICE and folder.voice is not None:
            return folder.voice
        return conditioning(folder.programs, folder.manifest, speech.utterance.reference)


def _read_clip(folder: VoiceFolder, path: Path, *, shown: str, max_seconds: float) -> np.ndarray:
    """`ReadClip` by the voice folder's programs (`xtts_runtime.Voice.clip`)."""
    try:
        return folder.clip(path, max_seconds=max_seconds)
    except InputError as error:
        raise RequestError(hide_path(error, path, shown)) from None
