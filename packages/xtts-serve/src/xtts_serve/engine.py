"""`Engine`: a run (and a vocoder) loaded once, every decoding program compiled before the
first request, then texts spoken whole or streamed, requests decoded together in slots.

The decoder runs in `EngineConfig.slots` slots (`xtts_train.SlotDecoding`): one static
batch whose rows decode different requests side by side, each joining at any step and
leaving at its stop. A request's text is read as `xtts-train synthesize` reads it
(`text_pieces`), its pieces decoded in turn in one slot and joined with their pauses
(`PieceMels`); a stream's chunks are vocoded as they come (`Waveforms.pushed`, the
windows of `synthesize --stream`), the new windows of all streams at a step in one batch
(`Waveforms.vocode`), a whole request's mel at its end (`Waveforms`). A request's audio is
exactly what it gets alone from the same engine, in any slot beside any others; against
`synthesize --max-frames <max_frames>` it differs by float rounding (the slots pad every
text to the longest piece's bucket, and batched arithmetic rounds differently from one
row's). A decoding that cannot stream (a postfilter that needs the
whole utterance) has no slots: requests are decoded one at a time, whole, by
`synthesize`'s own programs (`Decoding`, `speak_pieces`), the same bytes.

Every program is known at start-up (the slots' four, or one per text bucket and piece
batch, and the vocoder's window at each batch size, `vocoder_batches`) and compiled by
`warm_up`; a program traced after it is a `RetraceError`.

An `Engine` is used by one thread at a time (the server's decoding thread); `prepare`,
which only reads the text and the voices, may run in any.
"""

from __future__ import annotations

import functools
import logging
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

import xtts_audio as xa
from xtts_data import XttsDataError
from xtts_serve.config import EngineConfig
from xtts_serve.errors import ConfigError, RequestError
from xtts_serve.scheduling import Scheduler, Speaking, Utterance, alone, read_text
from xtts_serve.speech import SerialScheduler, SlotScheduler, Speech
from xtts_serve.voices import (
    ReadClip,
    VoiceStore,
    hide_path,
    load_voices,
)
from xtts_train import (
    CHUNK_FRAMES,
    MAX_PIECE_BATCH,
    TEXT_BUCKET,
    Decoding,
    RetraceError,
    SlotDecoding,
    Slots,
    Waveforms,
    XttsTrainError,
    check_buffer_frames,
    check_streamable,
    device_kind,
    load_reference,
    load_run,
    piece_batch,
    speak_pieces,
    text_buffer_frames,
)
from xtts_train import ConfigError as TrainConfigError

__all__ = ["GRIFFIN_LIM_STREAM", "MIN_STEPS", "Engine", "vocoder_batches"]

_log = logging.getLogger(__name__)

_EOS = 1  # the tokenizer's `<eos>` id: the warm-up's rows are made of it
# Decoder steps a step of the slots runs at least: each call copies every row's state, so
# in-process on 2 cores, 8 clients got 13.9 s of audio a second at 8 against 9.9 at 1, and
# one client's first audio came sooner (p95 68 ms against 92) (docs/bench/serve.md).
MIN_STEPS = 8
GRIFFIN_LIM_STREAM = (
    "Expected stream=false from a server without a vocoder, received: stream=true; it "
    "speaks through Griffin-Lim, which reconstructs the phases of the whole mel at once "
    "and cannot stream without audible joins: ask for the whole audio (stream=false), or "
    "start the server with --vocoder RUN"
)


class Engine(Speaking):
    """A text-to-mel run and its vocoder (or Griffin-Lim), loaded once and compiled for
    every text up to `config.max_chars`.

    Args:
        config: what to load and the limits (`EngineConfig`).

    Attributes:
        stack: the run's config, with `config.overrides` applied.
        sample_rate: samples per second of the audio it speaks.
        max_frames: the decoding buffer of every piece (what `synthesize --max-frames`
            must be given to speak the same audio).
        max_symbols: the longest piece the model reads, in symbols:
            `decode.split_symbols`, or `max_chars` when splitting is off.
        stream_refusal: why this engine cannot stream (no vocoder, or a postfilter that
            needs the whole utterance); None: it can.
        voices: the voices it speaks in and their aliases (`VoiceStore`).
        scheduler: what decodes the requests (`SlotScheduler`, or `SerialScheduler`
            without slots), once warm; driven by one thread.

    Raises:
        XttsTrainError: not a run, no checkpoint, a vocoder of other audio settings, an
            override of a setting other than `decode.*` (as `synthesize` refuses them).
        ConfigError: a buffer past `MAX_BUFFER_SECONDS` for the longest piece, a run with
            no saved reference and no `voices` folder, a folder clip refused, a voice alias
            refused (`load_voices`), or more than one slot for a decoding that cannot
            stream.
    """

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        run = config.run
        self.stack, model, self._tokenizer = load_run(run, overrides=config.overrides)
        self.read_clip: ReadClip = functools.partial(_read_clip, run, self.stack)
        try:
            self.own_voice: np.ndarray | str = load_reference(run, self.stack)
        except XttsTrainError as error:
            self.own_voice = str(error)
        self.voices: VoiceStore = load_voices(
            config, own=self.own_voice, read=self.read_clip
        )  # refused: before the rest
        stack, audio = self.stack, self.stack.audio
        self.sample_rate = audio.sample_rate
        self._waveforms = Waveforms(run, stack, vocoder=config.vocoder)
        try:
            check_streamable(stack.decode)
            whole_only = None
        except TrainConfigError as error:  # a postfilter needs the whole utterance
            whole_only = error
        self._stream_waveforms = None
        if config.vocoder is not None and whole_only is None:  # streams: CHUNK_FRAMES windows
            self._stream_waveforms = Waveforms(run, stack, vocoder=config.vocoder,
                                               chunk_frames=CHUNK_FRAMES,
                                               batches=_batches(config))  # fmt: skip
        self.max_symbols = stack.decode.split_symbols or config.max_chars
        language = 1 if self._tokenizer.language_tokens else 0
        self._max_ids = self.max_symbols + 1 + language  # <eos> and the language's token
        self.max_frames = text_buffer_frames(self._max_ids, stack)
        try:
            check_buffer_frames(self.max_frames, stack)
        except XttsTrainError as error:
            raise ConfigError(f"{error} (the longest piece: {self.max_symbols} symbols; lower "
                              f"--max-chars or set decode.split_symbols)") from None  # fmt: skip
        common = dict(decode=stack.decode, cond_frames=stack.reference_frames,
                      max_frames=self.max_frames, compiler=stack.train.compiler)  # fmt: skip
        self.stream_refusal = GRIFFIN_LIM_STREAM if config.vocoder is None else None
        self._slot_decoding, self._decodings = None, {}
        if whole_only is not None:
            if config.slots > 1:
                raise ConfigError(f"Expected --slots 1 for a decoding that cannot stream, "
                                  f"received: --slots {config.slots} (decoder slots decode a "
                                  f"text a chunk at a time; {whole_only}); serve it with "
                                  f"--slots 1, one request at a time, decoded whole")  # fmt: skip
            self.stream_refusal = self.stream_refusal or str(whole_only)
            self._decodings = {b: Decoding(model, batch_size=b, **common)
                               for b in _piece_batches(stack)}  # fmt: skip
        else:
            self._slot_decoding = SlotDecoding(model, text_len=self._max_ids, slots=config.slots,
                                               chunk_frames=CHUNK_FRAMES, **common)  # fmt: skip
        self._workspace = tempfile.TemporaryDirectory(prefix="xtts-serve-")
        self.scheduler: Scheduler | None = None  # after the warm-up
        self._traces: dict[str, int] | None = None  # after the warm-up

    @property
    def ready(self) -> bool:
        """Every program is compiled (`warm_up` has run)."""
        return self._traces is not None

    @property
    def slots(self) -> int:
        """Requests decoded side by side (1 without slots: one at a time, whole)."""
        return 1 if self._slot_decoding is None else self._slot_decoding.slots

    @property
    def programs(self) -> int:
        """Programs traced so far (after `warm_up`: every one the engine will run)."""
        return sum(self._trace_counts().values())

    def warm_up(self) -> float:
        """Compile (and run once) every decoding and vocoding program: the slots' four (or
        one per text bucket and piece batch, without slots) and the vocoder's windows.
        Once; later calls return at once.

        Returns:
            Seconds it took (0 when already warm).
        """
        if self._traces is not None:
            return 0.0
        started = time.perf_counter()
        if self._slot_decoding is not None:
            slots = Slots(self._slot_decoding, min_steps=MIN_STEPS)  # compiles them
            vocode = None if self._stream_waveforms is None else self._stream_waveforms.vocode
            self.scheduler = SlotScheduler(slots, vocode=vocode)
        else:
            self._warm_decodings()
            self.scheduler = SerialScheduler(self._speak_whole)
        for waveforms in (self._waveforms, self._stream_waveforms):
            if waveforms is not None:
                waveforms.warm_up()
        self._traces = self._trace_counts()
        seconds = time.perf_counter() - started
        batches = () if self._stream_waveforms is None else self._stream_waveforms.batches
        _log.info("warm: %d programs for %d slots (streams vocoded in batches of %s), pieces "
                  "of up to %d symbols in a %d-frame buffer, in %.1f s", self.programs,
                  self.slots, batches or "-", self.max_symbols, self.max_frames,
                  seconds)  # fmt: skip
        return seconds

    def prepare(self, text: str, *, voice: str | None = None,
                language: str | None = None) -> Utterance:  # fmt: skip
        """Check a text and a voice, and read the text as the model will.

        Args:
            text: what to say, at most `config.max_chars` characters.
            voice: a voice's id or alias (`voices`); None: the run's own.
            language: the text's language (BCP-47), for a multilingual run; None: the
                run's `data.text.language`.

        Raises:
            RequestError: an empty or too long text, one with nothing the model can say,
                a language the run was not trained on, an unknown voice.
        """
        return read_text(text, self.voices, voice=voice, language=language,
                         max_chars=self.config.max_chars, text_config=self.stack.data.text,
                         tokenizer=self._tokenizer, split_symbols=self.stack.decode.split_symbols,
                         max_symbols=self.max_symbols,
                         extra=self._max_ids - self.max_symbols)  # fmt: skip

    def speech(self, utterance: Utterance, *, stream: bool) -> Speech:
        """A request's decoding, for `scheduler` to admit: its audio in int16 chunks
        (`stream`) or whole, float32 [samples] in [-1, 1].

        Raises:
            RequestError: `stream` and `stream_refusal`.
        """
        if stream and self.stream_refusal is not None:
            raise RequestError(self.stream_refusal)
        if stream:
            return Speech(utterance, audio=self.stack.audio, max_frames=self.max_frames,
                          pushed=self._stream_waveforms.pushed())  # fmt: skip
        return Speech(utterance, audio=self.stack.audio, max_frames=self.max_frames,
                      whole=lambda features: self._waveforms(features).numpy())  # fmt: skip

    def resample(self, samples: np.ndarray, rate: int) -> np.ndarray:
        """float32 [samples] of its audio, at `rate` (`xtts_audio.resample`)."""
        return xa.resample(samples, orig_sr=self.sample_rate, target_sr=rate).numpy()

    def _alone(self, speech: Speech) -> Iterator[np.ndarray]:
        """`speech`'s audio, decoded alone by `scheduler` (no other request in it); no
        program traced since the warm-up."""
        yield from alone(self.scheduler, speech)
        self._check_traces()

    def _speak_whole(self, utterance: Utterance) -> np.ndarray:
        """Without slots: `synthesize`'s decoding, its pieces side by side, and its audio."""
        decoding = self._decodings[piece_batch(len(utterance.pieces))]
        spoken = speak_pieces(decoding, utterance.pieces, utterance.reference, self.stack.audio)
        return self._waveforms(spoken.features).numpy()

    def _warm_decodings(self) -> None:
        """Without slots: each `Decoding` compiled (and run) for every text bucket."""
        voices, audio = self.voices.list(), self.stack.audio
        reference = (voices[0].reference if voices else
                     np.zeros([self.stack.reference_frames, audio.n_mels], np.float32))  # fmt: skip
        for text in range(TEXT_BUCKET, -(-self._max_ids // TEXT_BUCKET) * TEXT_BUCKET + 1,
                          TEXT_BUCKET):  # fmt: skip
            for decoding in self._decodings.values():
                decoding([[_EOS] * text], reference)

    def _trace_counts(self) -> dict[str, int]:
        counts = {f"decode x{b}": d.programs for b, d in self._decodings.items()}
        if self._slot_decoding is not None:
            counts |= {f"slots {k}": v for k, v in self._slot_decoding.traces.items()}
        for name, waveforms in (("whole", self._waveforms), ("stream", self._stream_waveforms)):
            if waveforms is not None:
                counts |= {f"{k} ({name})": v for k, v in waveforms.traces.items()}
        return counts

    def _check_traces(self) -> None:
        """Raises RetraceError if a program was traced since the warm-up."""
        now = self._trace_counts()
        if now != self._traces:
            raise RetraceError(f"Expected no program traced after the warm-up, received: "
                               f"{now} (at the warm-up: {self._traces})")  # fmt: skip


def _read_clip(run: Path, stack, path: Path, *, shown: str, max_seconds: float) -> np.ndarray:
    """`ReadClip` by TensorFlow: the clip as `synthesize --reference` reads it
    (`load_reference`)."""
    try:
        return load_reference(run, stack, path, max_seconds=max_seconds)
    except XttsDataError as error:
        raise RequestError(
            f"Expected an audio clip (WAV, FLAC or OGG), received: {shown}, which does not "
            f"decode as audio ({hide_path(error, path, shown)})"
        ) from None
    except XttsTrainError as error:
        raise RequestError(hide_path(error, path, shown)) from None


def vocoder_batches(slots: int) -> tuple[int, ...]:
    """The vocoder window's batch sizes for `slots` streams vocoded together: 2, 4, ... up
    to the first power of two that holds them all (a lone window runs at 2, so that its
    samples are those it gets beside others); 1 for one slot, whose windows are its own.
    """
    if slots == 1:
        return (1,)
    return tuple(2**k for k in range(1, (slots - 1).bit_length() + 1))


def _batches(config: EngineConfig) -> tuple[int, ...]:
    """The stream vocoder's batch sizes: `vocoder_batches` when `config.vocoder_batching`
    is on (`auto`: with a GPU), else each window alone. On this project's 2-core CPU the
    small vocoder's window cost 11.9 ms alone and 8.1-8.8 ms a row in batches of 2-8, so
    batching gained 0-15% at 8 clients and added ~20 ms to a lone stream's first audio."""
    batching = config.vocoder_batching
    if batching == "auto":
        batching = "off" if device_kind() == "CPU" else "on"
    return vocoder_batches(config.slots) if batching == "on" else (1,)


def _piece_batches(stack) -> list[int]:
    """Rows of the `Decoding`s a text's pieces need: 1, 2 and 4 (1 without splitting)."""
    if not stack.decode.split_symbols:
        return [1]
    return sorted({piece_batch(n) for n in range(1, MAX_PIECE_BATCH + 1)})
