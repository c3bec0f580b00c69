"""Streaming decoding: one text's mel in chunks, each yielded as soon as no frame decoded
later can change it.

`Streaming` compiles three programs of `TextToMel` at static shapes: `stream_start` (the
text and reference encoded, empty caches) and `stream_advance` (`infer`'s decoding loop,
from a state up to a given step) once per text bucket, and `mel_window` (the postnet over
one chunk and its context) once. The postnet reads `Postnet.context_frames` frames each
side, so a chunk of frames `[a, b)` is final once frames up to `b + context_frames` are
decoded, or the utterance stopped (the postnet then sees zeros after the stop, as in
`infer`), or the buffer is full. A chunk costs the decoder steps that reach it and one
postnet window: the prefix is never run again. Joined, the chunks are `Decoding`'s mel
(`infer`'s) up to float rounding.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from xtts_audio.windows import CHUNK_FRAMES, chunk_stop
from xtts_train.compile import compile_cache
from xtts_train.compile.compiler import resolve
from xtts_train.compile.memory import check_decoding_memory
from xtts_train.config import DecodeConfig, ModelConfig
from xtts_train.models.text_to_mel.decoding import Ending, check_sizes, decoding_inputs, ending
from xtts_train.models.text_to_mel.frames import groups
from xtts_train.models.text_to_mel.free_running import mel_window, stream_advance, stream_start
from xtts_train.models.text_to_mel.generation import Context, State, finish, stop_lengths
from xtts_train.models.text_to_mel.model import TextToMel
from xtts_train.models.text_to_mel.postfilters import check_streamable

__all__ = ["CHUNK_FRAMES", "MelStream", "Streaming", "chunk_stop", "stream_end", "stream_ending"]


class _BucketPrograms(NamedTuple):
    """The concrete functions of one text bucket."""

    start: tf.types.experimental.ConcreteFunction
    advance: tf.types.experimental.ConcreteFunction
    mel: tf.types.experimental.ConcreteFunction


class Streaming:
    """`TextToMel`'s decoding compiled to stream one text at a time, `chunk_frames` frames
    a chunk, for a reference of `cond_frames` frames and a `max_frames` buffer.

    Args:
        model: the trained model.
        decode: how it decodes (a run's `decode` section), without a postfilter that needs
            the whole utterance (`postfilters.check_streamable`).
        cond_frames: frames of the reference mel the model conditions on.
        max_frames: the decoding buffer; speech longer than this is cut.
        chunk_frames: frames of each chunk (the last one: the rest).
        compiler: `auto`, `xla` or `graph`, as `Decoding`'s.

    Attributes:
        compiler: `"xla"` or `"graph"`, as `compiler` resolved for this device.

    Raises:
        XttsTrainError: a size that is not an int >= 1.
        ConfigError: a buffer too large for this machine's memory, or a model that cannot
            stream (`postfilters.check_streamable`).
    """

    def __init__(self, model: TextToMel, *, decode: DecodeConfig, cond_frames: int,
                 max_frames: int, chunk_frames: int = CHUNK_FRAMES,
                 compiler: str = "auto") -> None:  # fmt: skip
        check_sizes(cond_frames=cond_frames, max_frames=max_frames, chunk_frames=chunk_frames)
        check_decoding_memory(model.config, max_frames)
        check_streamable(decode)
        self.model, self.cond_frames = model, cond_frames
        self.max_frames, self.chunk_frames = max_frames, chunk_frames
        self.compiler = resolve(compiler, "decode")
        xla = self.compiler == "xla"

        # Closures, not keyword arguments: a concrete function is called with the tensors
        # alone, and `decode` (a config, not a tensor) is part of what each program is.
        def start(tokens, token_mask, cond_mel, cond_lengths):
            return stream_start(model, tokens, token_mask, cond_mel, cond_lengths,
                                max_frames=max_frames, decode=decode)  # fmt: skip

        def advance(context, state, until):
            return stream_advance(model, context, state, until, decode=decode)

        def mel(before, stats, lengths, first):
            return mel_window(model, before, stats, lengths, first, frames=chunk_frames)

        self._start = tf.function(start, jit_compile=xla, autograph=False)
        self._advance = tf.function(advance, jit_compile=xla, autograph=False)
        self._mel = tf.function(mel, jit_compile=xla, autograph=False)
        self._programs: dict[int, _BucketPrograms] = {}

    @property
    def traces(self) -> dict[str, int]:
        """Traces of each program so far: `start` and `advance` one per text bucket used,
        `mel` one."""
        functions = {"start": self._start, "advance": self._advance, "mel": self._mel}
        return {name: f.experimental_get_tracing_count() for name, f in functions.items()}

    def __call__(self, ids: Sequence[int], reference: np.ndarray, *,
                 min_frames: int = 0) -> MelStream:  # fmt: skip
        """The mel stream of one text, its programs compiled (and run once: XLA compiles a
        program at its first run) before it starts.

        Args:
            ids: token ids of the text (ending with `<eos>`).
            reference: float32 [frames, n_mels] mel of the voice (cut to `cond_frames`).
            min_frames: stream at least this many frames (at most `max_frames`), past the
                stop token if it fires earlier (`infer`'s frames there).

        Returns:
            A `MelStream`: nothing is decoded before its first chunk is asked for.
        """
        inputs = decoding_inputs([ids], [reference], batch_size=1, cond_frames=self.cond_frames)
        return MelStream(self, self._compiled(inputs), inputs, symbols=len(ids),
                         min_frames=min(min_frames, self.max_frames))  # fmt: skip

    def _compiled(self, inputs: list[tf.Tensor]) -> _BucketPrograms:
        """The programs of the inputs' text bucket, traced and run once the first time."""
        text = inputs[0].shape[1]
        if text not in self._programs:
            check_decoding_memory(self.model.config, self.max_frames, text_len=text)
            name = f"stream 1x{text}x{self.cond_frames}x{self.max_frames}x{self.chunk_frames}"
            with compile_cache.collect(), compile_cache.stable_names(name):
                start = self._start.get_concrete_function(*inputs)
                context, state = start(*inputs)
                until, first = tf.constant(0), tf.constant(0)  # no step: a run to compile
                advance = self._advance.get_concrete_function(context, state, until)
                state = advance(context, state, until)
                lengths = tf.constant([self.max_frames])
                mel = self._mel.get_concrete_function(state.frames, context.stats, lengths, first)
                mel(state.frames, context.stats, lengths, first)
            self._programs[text] = _BucketPrograms(start, advance, mel)
        return self._programs[text]


class MelStream:
    """One text's mel from `Streaming`, chunk by chunk: an iterator of float32
    [<= chunk_frames, n_mels] chunks in the features' scale, each yielded once final.

    Chunk `[a, b)` is yielded once frames up to `b + Postnet.context_frames` are decoded
    (the decoding runs just that far first), or the utterance stopped or filled the
    buffer; the chunks end at the stop token's frame + 1, or at `min_frames` if later.

    Attributes:
        decoded: frames decoded so far.
        advances: runs of the decoding program so far.
        ending: how the decoding ended (`Ending`), once the last chunk was yielded.
    """

    def __init__(self, streaming: Streaming, programs: _BucketPrograms,
                 inputs: list[tf.Tensor], *, symbols: int, min_frames: int) -> None:  # fmt: skip
        self.decoded, self.advances = 0, 0
        self.ending: Ending | None = None
        self._programs, self._symbols, self._min_frames = programs, symbols, min_frames
        self._config, self._reach = streaming.model.config, streaming.model.postnet.context_frames
        self._max_frames, self._chunk = streaming.max_frames, streaming.chunk_frames
        self._lengths = tf.constant([self._max_frames])  # no stop yet: every frame is real
        self._chunks = self._run(inputs)

    def __iter__(self) -> Iterator[np.ndarray]:
        return self

    def __next__(self) -> np.ndarray:
        return next(self._chunks)

    def _run(self, inputs: list[tf.Tensor]) -> Iterator[np.ndarray]:
        """Chunks from frame 0 to the end, decoding only as far as each one needs."""
        context, state = self._programs.start(*inputs)
        first, end = 0, None  # end: the last frame + 1, once the decoding ended
        while True:
            if end is None:
                state = self._advance(context, state, first + self._chunk + self._reach)
                end = self._end(state)
            stop = chunk_stop(first, self._chunk, end)
            if stop <= first:
                break
            mel = self._programs.mel(state.frames, context.stats, self._lengths,
                                     tf.constant(first))  # fmt: skip
            yield mel[0, : stop - first].numpy()
            first = stop
        self.ending = stream_ending(state, self._config, self._max_frames, self._lengths,
                                    self._symbols)  # fmt: skip

    def _advance(self, context: Context, state: State, needed: int) -> State:
        """`state` decoded up to frame `needed` (at most the buffer), if it is not yet."""
        needed = min(needed, self._max_frames)
        if self.decoded >= needed:
            return state
        r = self._config.reduction_factor
        state = self._programs.advance(context, state, tf.constant(groups(needed, r)))
        self.advances += 1
        self.decoded = min(int(state.t) * r, self._max_frames)
        return state

    def _end(self, state: State) -> int | None:
        """The last frame + 1 to stream once the decoding ended (the utterance stopped or
        the buffer is full), else None; sets the stop length the postnet masks from."""
        if not (bool(state.done[0]) or self.decoded == self._max_frames):
            return None
        self._lengths, end = stream_end(state.probs, self._max_frames, self._min_frames)
        return end


def stream_end(probs: tf.Tensor, max_frames: int, min_frames: int) -> tuple[tf.Tensor, int]:
    """A streamed decoding that ended (it stopped or filled its buffer), from its stop
    probabilities float32 [1, >= max_frames]: the stop length int32 [1] the postnet masks
    from (`stop_lengths`), and the last frame + 1 to stream (at least `min_frames`)."""
    lengths = stop_lengths(probs[:, :max_frames], max_frames)
    return lengths, max(int(lengths[0]), min_frames)


def stream_ending(state: State, config: ModelConfig, max_frames: int, lengths: tf.Tensor,
                  symbols: int) -> Ending:  # fmt: skip
    """How a streamed decoding of one row (`state`, batch 1) ended, its stop `lengths`
    int32 [1] from `stream_end` and its text `symbols` tokens long."""
    _, probs, attention = finish(state, config, max_frames)
    result = {"lengths": lengths.numpy(), "stop_probs": probs.numpy(),
              "attention": attention.numpy()}  # fmt: skip
    return ending(result, 0, symbols)
