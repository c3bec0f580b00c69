"""Decoder slots: `Streaming`'s decoding compiled for a fixed batch of rows that decode
different texts side by side, each joining at any step and leaving at its stop
(continuous batching, as LLM servers decode).

`SlotDecoding` compiles four programs at static shapes, once: `join` (a text and its
reference encoded, batch 1, the text padded to `text_len` tokens), `admit` (that decoding
written into one row of the slots), `advance` (`count` steps of every live row, each at
its own step: `generation.advance_rows`) and `mel` (one row's chunk through the postnet:
`Streaming`'s window program). `Slots` runs them: a text joins a free row, every live
row steps together, and each row's chunks come out as soon as they are final, by
`MelStream`'s rule (frames up to the chunk's end plus `Postnet.context_frames` decoded,
or the row stopped or filled its buffer).

A row computes what it would alone: no operation mixes rows, so a text decodes to the
same chunks in its row beside any others, whatever steps they are at, bit for bit. In
another row its last bits may differ (measured: ~1e-6 after 5 steps, from the row's index
alone; the kernels' vectorised loops, not other rows' values). Against `Streaming`, which
pads a text only to its own `TEXT_BUCKET`, the chunks differ by float rounding (attention
sums over a wider padding).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from xtts_train.compile import compile_cache
from xtts_train.compile.compiler import resolve
from xtts_train.compile.memory import check_decoding_memory
from xtts_train.config import DecodeConfig
from xtts_train.errors import XttsTrainError
from xtts_train.models.text_to_mel.decoding import (
    TEXT_BUCKET,
    Ending,
    check_sizes,
    decoding_inputs,
)
from xtts_train.models.text_to_mel.frames import groups
from xtts_train.models.text_to_mel.free_running import mel_window, stream_start
from xtts_train.models.text_to_mel.generation import Context, State, advance_rows
from xtts_train.models.text_to_mel.model import TextToMel
from xtts_train.models.text_to_mel.postfilters import check_streamable
from xtts_train.models.text_to_mel.streaming import (
    CHUNK_FRAMES,
    chunk_stop,
    stream_end,
    stream_ending,
)

__all__ = ["SlotDecoding", "SlotStream", "Slots"]


class _SlotPrograms(NamedTuple):
    """The concrete functions of the slots."""

    join: tf.types.experimental.ConcreteFunction
    admit: tf.types.experimental.ConcreteFunction
    advance: tf.types.experimental.ConcreteFunction
    mel: tf.types.experimental.ConcreteFunction


class SlotDecoding:
    """`TextToMel`'s decoding compiled for `slots` rows of texts up to `text_len` tokens,
    a reference of `cond_frames` frames and a `max_frames` buffer each, read out in
    `chunk_frames`-frame chunks.

    Args:
        model: the trained model.
        decode: how it decodes, without a postfilter that needs the whole utterance
            (`postfilters.check_streamable`).
        cond_frames, max_frames, chunk_frames, compiler: as `Streaming`'s.
        text_len: tokens of the longest text (with its `<eos>`), padded up to a multiple
            of `TEXT_BUCKET`.
        slots: rows decoded side by side.

    Raises:
        XttsTrainError: a size that is not an int >= 1.
        ConfigError: buffers too large for this machine's memory, or a model that cannot
            stream.
    """

    def __init__(self, model: TextToMel, *, decode: DecodeConfig, cond_frames: int,
                 max_frames: int, text_len: int, slots: int,
                 chunk_frames: int = CHUNK_FRAMES, compiler: str = "auto") -> None:  # fmt: skip
        check_sizes(cond_frames=cond_frames, max_frames=max_frames, text_len=text_len,
                    slots=slots, chunk_frames=chunk_frames)  # fmt: skip
        self.text_len = -(-text_len // TEXT_BUCKET) * TEXT_BUCKET
        check_decoding_memory(model.config, max_frames, slots, text_len=self.text_len)
        check_streamable(decode)
        self.model, self.slots, self.cond_frames = model, slots, cond_frames
        self.max_frames, self.chunk_frames = max_frames, chunk_frames
        self.compiler = resolve(compiler, "decode")
        xla = self.compiler == "xla"

        def join(tokens, token_mask, cond_mel, cond_lengths):
            return stream_start(model, tokens, token_mask, cond_mel, cond_lengths,
                                max_frames=max_frames, decode=decode)  # fmt: skip

        def advance(context, state, count):
            return advance_rows(model.decoder, model.heads, model.config, decode, context, state,
                                count, text_len=self.text_len)  # fmt: skip

        def mel(frames, stats, row, lengths, first):  # one row: `Streaming`'s window program
            return mel_window(model, frames[row][None], stats[row][None], lengths, first,
                              frames=chunk_frames)  # fmt: skip

        self._join = tf.function(join, jit_compile=xla, autograph=False)
        self._admit = tf.function(_admit, jit_compile=xla, autograph=False)
        self._advance = tf.function(advance, jit_compile=xla, autograph=False)
        self._mel = tf.function(mel, jit_compile=xla, autograph=False)
        self._programs: _SlotPrograms | None = None
        self._empty: tuple[Context, State] | None = None

    @property
    def traces(self) -> dict[str, int]:
        """Traces of each program so far: one each once compiled."""
        functions = {"join": self._join, "admit": self._admit, "advance": self._advance,
                     "mel": self._mel}  # fmt: skip
        return {name: f.experimental_get_tracing_count() for name, f in functions.items()}

    def inputs(self, ids: Sequence[int], reference: np.ndarray) -> list[tf.Tensor]:
        """`join`'s inputs: `ids` (ending with `<eos>`) padded to `text_len` tokens, the
        reference cut or padded to `cond_frames`.

        Raises:
            XttsTrainError: a text longer than `text_len` tokens.
        """
        if len(ids) > self.text_len:
            raise XttsTrainError(f"Expected a text of at most {self.text_len} tokens for these "
                                 f"slots, received: {len(ids)} tokens")  # fmt: skip
        padded = [*ids, *[0] * (self.text_len - len(ids))]
        return decoding_inputs([padded], [reference], batch_size=1, cond_frames=self.cond_frames)

    def programs(self) -> _SlotPrograms:
        """The four programs, traced and run once the first time (XLA compiles a program
        at its first run)."""
        if self._programs is None:
            name = (f"slots {self.slots}x{self.text_len}x{self.cond_frames}x{self.max_frames}"
                    f"x{self.chunk_frames}")  # fmt: skip
            with compile_cache.collect(), compile_cache.stable_names(name):
                self._programs = self._compile()
        return self._programs

    def empty(self) -> tuple[Context, State]:
        """The slots with every row free (done, at step 0, zeros)."""
        self.programs()
        return self._empty

    def _compile(self) -> _SlotPrograms:
        inputs = self.inputs([1], np.zeros([1, self.model.config.n_mels], np.float32))
        join = self._join.get_concrete_function(*inputs)
        one = join(*inputs)
        context, state = tf.nest.map_structure(
            lambda x: tf.zeros([self.slots, *x.shape[1:]], x.dtype), one)  # fmt: skip
        state = state._replace(t=tf.zeros([self.slots], tf.int32),
                               done=tf.ones([self.slots], tf.bool))  # fmt: skip
        row, count, first = tf.constant(0), tf.constant(0), tf.constant(0)
        admit = self._admit.get_concrete_function(context, state, *one, row)
        admit(context, state, *one, row)
        advance = self._advance.get_concrete_function(context, state, count)
        advance(context, state, count)
        lengths = tf.constant([self.max_frames])
        mel = self._mel.get_concrete_function(state.frames, context.stats, row, lengths, first)
        mel(state.frames, context.stats, row, lengths, first)
        self._empty = (context, state)
        return _SlotPrograms(join, admit, advance, mel)


def _admit(context: Context, state: State, one_context: Context, one_state: State,
           row: tf.Tensor) -> tuple[Context, State]:  # fmt: skip
    """The slots' `context` and `state` with row `row` (int32 scalar) replaced by a batch-1
    decoding before its first step (`stream_start`'s)."""
    one_state = one_state._replace(t=tf.reshape(one_state.t, [1]))
    at = tf.reshape(row, [1, 1])

    def put(rows: tf.Tensor, new: tf.Tensor) -> tf.Tensor:
        if rows.shape.num_elements() == 0:  # (no alignment layer's keys): nothing to write
            return rows
        return tf.tensor_scatter_nd_update(rows, at, tf.broadcast_to(new, [1, *rows.shape[1:]]))

    return (tf.nest.map_structure(put, context, one_context),
            tf.nest.map_structure(put, state, one_state))  # fmt: skip


class SlotStream:
    """One text's mel from `Slots`, chunk by chunk (`Slots.step` hands them out).

    Attributes:
        row: the slot it decodes in; None once it left.
        decoded: frames decoded so far.
        ending: how the decoding ended (`Ending`), once its last chunk was handed out.
    """

    def __init__(self, row: int, *, symbols: int, min_frames: int, max_frames: int) -> None:
        self.row, self.symbols, self.min_frames = row, symbols, min_frames
        self.decoded, self.first, self.end = 0, 0, None  # end: last frame + 1, once known
        self.lengths = tf.constant([max_frames])  # no stop yet: every frame is real
        self.ending: Ending | None = None

    @property
    def finished(self) -> bool:
        """Its last chunk was handed out."""
        return self.ending is not None


class Slots:
    """The rows of a `SlotDecoding` and the texts decoding in them.

    Used by one thread at a time.

    Args:
        decoding: the compiled slots (compiled now if they are not yet).
        min_steps: decoder steps a `step` runs at least (while a row is live): a call of
            `advance` copies every row's state, so a few steps a call cost less than one;
            a text joining waits at most that many steps.
    """

    def __init__(self, decoding: SlotDecoding, *, min_steps: int = 1) -> None:
        check_sizes(min_steps=min_steps)
        self.decoding, self.min_steps = decoding, min_steps
        self._programs = decoding.programs()
        self._context, self._state = decoding.empty()
        self._rows: list[SlotStream | None] = [None] * decoding.slots
        self._reach = decoding.model.postnet.context_frames
        self._r = decoding.model.config.reduction_factor

    @property
    def free(self) -> int:
        """Rows no text decodes in."""
        return self._rows.count(None)

    @property
    def busy(self) -> int:
        """Rows a text decodes in."""
        return len(self._rows) - self.free

    def join(self, ids: Sequence[int], reference: np.ndarray, *,
             min_frames: int = 0) -> SlotStream:  # fmt: skip
        """Start decoding a text in a free row, from the next `step`.

        Args:
            ids: token ids of the text (ending with `<eos>`), at most `text_len`.
            reference: float32 [frames, n_mels] mel of the voice.
            min_frames: stream at least this many frames, as `Streaming`'s.

        Raises:
            XttsTrainError: no free row, or a text too long for the slots.
        """
        if not self.free:
            raise XttsTrainError(f"Expected a free slot, received: all {len(self._rows)} busy")
        row = self._rows.index(None)
        one = self._programs.join(*self.decoding.inputs(ids, reference))
        self._context, self._state = self._programs.admit(self._context, self._state, *one,
                                                          tf.constant(row))  # fmt: skip
        stream = SlotStream(row, symbols=len(ids), max_frames=self.decoding.max_frames,
                            min_frames=min(min_frames, self.decoding.max_frames))  # fmt: skip
        self._rows[row] = stream
        return stream

    def leave(self, stream: SlotStream) -> None:
        """Free `stream`'s row now (a client that went away); its chunks end."""
        if stream.row is None:
            return
        done = tf.tensor_scatter_nd_update(self._state.done, [[stream.row]], [True])
        self._state = self._state._replace(done=done)
        self._rows[stream.row], stream.row = None, None

    def step(self) -> list[tuple[SlotStream, np.ndarray | None]]:
        """Decode every live row as far as the nearest next chunk needs (at least
        `min_steps` steps), and hand out the chunks now final.

        Returns:
            (stream, chunk float32 [<= chunk_frames, n_mels]) in order, and (stream, None)
            after a stream's last chunk (its row is free again). Empty when no row is busy.
        """
        streams = [s for s in self._rows if s is not None]
        decoding = [s for s in streams if s.end is None]
        if decoding:
            needs = [groups(self._target(s), self._r) - groups(s.decoded, self._r)
                     for s in decoding]  # fmt: skip
            count = tf.constant(max(self.min_steps, min(needs)))
            self._state = self._programs.advance(self._context, self._state, count)
            t, done = self._state.t.numpy(), self._state.done.numpy()
            for s in decoding:
                self._ended(s, int(t[s.row]), bool(done[s.row]))
        out = []
        for s in streams:
            out.extend((s, chunk) for chunk in self._chunks(s))
            if s.end is not None and s.first >= s.end:
                s.ending = self._ending(s)
                self._rows[s.row], s.row = None, None
                out.append((s, None))
        return out

    def _target(self, s: SlotStream) -> int:
        """Frames `s` needs decoded for its next chunk."""
        return min(s.first + self.decoding.chunk_frames + self._reach, self.decoding.max_frames)

    def _ended(self, s: SlotStream, t: int, done: bool) -> None:
        """Record a row's progress; once it stopped or filled its buffer, its end."""
        max_frames = self.decoding.max_frames
        s.decoded = min(t * self._r, max_frames)
        if done or s.decoded == max_frames:
            probs = self._state.probs[s.row : s.row + 1]
            s.lengths, s.end = stream_end(probs, max_frames, s.min_frames)

    def _chunks(self, s: SlotStream) -> list[np.ndarray]:
        """The chunks of `s` now final, by `MelStream`'s rule."""
        chunks, chunk = [], self.decoding.chunk_frames
        while True:
            if s.end is None and s.decoded < self._target(s):
                return chunks
            stop = chunk_stop(s.first, chunk, s.end)
            if stop <= s.first:
                return chunks
            row, first = tf.constant(s.row), tf.constant(s.first)
            mel = self._programs.mel(self._state.frames, self._context.stats, row, s.lengths,
                                     first)  # fmt: skip
            chunks.append(mel[0, : stop - s.first].numpy())
            s.first = stop

    def _ending(self, s: SlotStream) -> Ending:
        row = tf.nest.map_structure(lambda x: x[s.row : s.row + 1], self._state)
        return stream_ending(row, self.decoding.model.config, self.decoding.max_frames,
                             s.lengths, s.symbols)  # fmt: skip
