"""`TextToMel`'s autoregressive decoding loop: a `tf.while_loop` over a fixed-size frame
buffer, so that `free_running.infer` compiles with XLA at static shapes.

Step `t` runs the decoder at position `t` alone (`Decoder.step`): every block keeps the
keys and values of the positions before in a fixed-size cache (written in place,
`dynamic_update_slice`), so a step costs the same at the end of a long buffer as at its
start, and decoding is linear in the frames. Step `t` writes frames `t*r .. t*r + r - 1`
(r = `reduction_factor`); the loop ends when every utterance has stopped. With the
inference window on (`DecodeConfig.window_ahead`), step `t` attends only to the text
symbols around the furthest alignment peak of the steps before it (and to every speaker
latent). With the stop gate on (`DecodeConfig.stop_gate`), a step's stop probabilities
are held at 0.5 (which does not stop) until that furthest peak is within the gate of the
text's last symbol. The prenet's dropout is off (training keeps it), so the same inputs
decode to the same frames.

The loop can stop and resume: `start` builds its `Context` (what every step reads) and
first `State` (what a step changes), `advance` runs it from a state to a given step, and
`finish` reads the buffers out. Both are nested tuples of tensors, so a decoding can
cross `tf.function` boundaries (streaming: `decoding.Streaming`); `generate` is `start`,
`advance` to the end and `finish`, the one loop of every decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import tensorflow as tf
from tensorflow.compiler.tf2xla.python.xla import dynamic_update_slice

from xtts_train.config import DecodeConfig, ModelConfig
from xtts_train.models.attention import write_rows
from xtts_train.models.text_to_mel.frames import denormalize_by, groups, identity_stats, per_frame
from xtts_train.models.text_to_mel.layers import Decoder

__all__ = [
    "Context", "Heads", "State", "advance", "advance_rows", "finish", "generate", "start",
    "step_apart", "stop_lengths",
]  # fmt: skip

# hidden (B, S, D), frames → standardised frames (B, frames, M) and stop logits (B, frames).
Heads = Callable[[tf.Tensor, int], tuple[tf.Tensor, tf.Tensor]]


class Context(NamedTuple):
    """What every step of a decoding reads and none changes (`start` builds it).

    Attributes:
        memory_kvs: per decoder block, the cross-attention's keys and values of the memory
            (`Decoder.start`).
        memory_mask: bool [B, 1, S], the memory's key mask.
        pitch_term: what every step's input frame gets added [B, 1, D] (`Decoder.pitch_term`).
        stats: the reference clip's statistics float32 [B, 2, M] that the frames of the
            `State` are normalised by (`frames.clip_stats`; identity statistics with
            `ModelConfig.voice_stats` off).
        align_keys: the alignment layer's keys of the text float32 [B, T, W]
            (`ModelConfig.alignment: relative`; [B, T, 0] without one).
    """

    memory_kvs: list
    memory_mask: tf.Tensor
    pitch_term: tf.Tensor
    stats: tf.Tensor
    align_keys: tf.Tensor


class State(NamedTuple):
    """The loop's variables: where a decoding stands after `t` steps.

    Attributes:
        t: int32 scalar, steps run.
        frame: float [B, 1, M], the next step's input (the last frame written).
        frames: frames float32 [B, steps * r, M] as the heads write them (standardised, and
            normalised by `Context.stats`), zeros not yet written.
        probs: stop probabilities float32 [B, steps * r], zeros not yet written.
        attention: the alignment head's rows float32 [B, steps, S], one per step.
        caches: per decoder block, its self-attention keys and values (`Decoder.step`).
        focus: int32 [B], the furthest alignment peak so far (the inference window's).
        done: bool [B], the utterance stopped.
        place: float32 [B], the next step's alignment position on the text, the sum of
            the moves of the steps run (`ModelConfig.alignment: relative`, `location`;
            stays 0 without it).
    """

    t: tf.Tensor
    frame: tf.Tensor
    frames: tf.Tensor
    probs: tf.Tensor
    attention: tf.Tensor
    caches: list
    focus: tf.Tensor
    done: tf.Tensor
    place: tf.Tensor


def generate(
    decoder: Decoder, heads: Heads, config: ModelConfig, decode: DecodeConfig,
    memory: tf.Tensor, memory_mask: tf.Tensor, *, text_shape: tf.TensorShape, max_frames: int,
    stats: tf.Tensor | None = None, pitch: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:  # fmt: skip
    """Decode `max_frames` frames from the decoder's memory: `start`, `advance` to the end,
    `finish`.

    The buffers hold `steps * r` frames; step `t` reads the last frame of group `t - 1`
    (zeros at step 0), writes frames `t*r .. t*r + r - 1` and ends the loop for an
    utterance when any of them has stop probability > 0.5.

    Args:
        decoder: the model's decoder (built).
        heads: the model's mel and stop heads (`Heads`).
        config: the model's config (reduction factor, mel channels).
        decode: the loop's settings (inference window, stop gate, prenet dropout).
        memory: float [B, S, D], S = T + L: text encodings, then speaker latents.
        memory_mask: bool [B, 1, S], the memory's key mask.
        text_shape: (B, T) of the tokens, static.
        max_frames: frames of the buffer, a Python int.
        stats: the reference clip's statistics float32 [B, 2, M] with
            `ModelConfig.voice_stats` (the heads write frames normalised by them).
        pitch: the clip's pitch float32 [B, 1, 2] with `ModelConfig.voice_pitch`
            (`frames.pitch_stats`).

    Returns:
        `finish`'s: standardised frames float32 [B, F, M] (moved back by `stats`), stop
        probabilities float32 [B, F] (0 after the loop ended) and the alignment head's
        attention over the memory float32 [B, F, S] (0 after the loop ended), F =
        `max_frames`.
    """
    context, state = start(decoder, config, decode, memory, memory_mask,
                           max_frames=max_frames, stats=stats, pitch=pitch)  # fmt: skip
    steps = groups(max_frames, config.reduction_factor)
    state = advance(decoder, heads, config, decode, context, state, steps,
                    text_len=text_shape[1])  # fmt: skip
    frames, probs, attention = finish(state, config, max_frames)
    if config.voice_stats != "off":
        frames = denormalize_by(frames, context.stats)
    return frames, probs, attention


def start(decoder: Decoder, config: ModelConfig, decode: DecodeConfig, memory: tf.Tensor,
          memory_mask: tf.Tensor, *, max_frames: int, stats: tf.Tensor | None = None,
          pitch: tf.Tensor | None = None) -> tuple[Context, State]:  # fmt: skip
    """A decoding of `max_frames` frames before its first step.

    Args:
        decoder: the model's decoder (built).
        config: the model's config.
        decode: the loop's settings (the prenet's dropout).
        memory: float [B, S, D]; memory_mask: bool [B, 1, S] (as `generate`'s).
        max_frames: frames of the buffer, a Python int.
        stats: the reference clip's statistics [B, 2, M] (None: identity statistics).
        pitch: the clip's pitch [B, 1, 2] with `ModelConfig.voice_pitch` (else None).

    Returns:
        The `Context` of every step and the `State` at step 0 (empty buffers and caches).
    """
    batch, width = memory.shape[0], memory.shape[1]
    r = config.reduction_factor
    steps = groups(max_frames, r)
    caches, memory_kvs, pitch_term, align_keys = decoder.start(memory, steps, pitch)
    state = State(
        t=tf.constant(0), frame=tf.zeros([batch, 1, config.n_mels]),
        frames=tf.zeros([batch, steps * r, config.n_mels]), probs=tf.zeros([batch, steps * r]),
        attention=tf.zeros([batch, steps, width]), caches=caches,
        focus=tf.zeros([batch], tf.int32), done=tf.zeros([batch], tf.bool),
        place=tf.zeros([batch]),
    )  # fmt: skip
    stats = identity_stats(batch, config.n_mels) if stats is None else stats
    return Context(memory_kvs, memory_mask, pitch_term, stats, align_keys), state


def advance(decoder: Decoder, heads: Heads, config: ModelConfig, decode: DecodeConfig,
            context: Context, state: State, until: tf.Tensor | int, *,
            text_len: int) -> State:  # fmt: skip
    """Run the decoding from `state` to step `until` (or the buffer's end), or until every
    utterance stopped.

    Args:
        decoder, heads, config, decode: as `generate`'s.
        context: what `start` returned with `state`'s decoding.
        state: where the decoding stands (`start`'s, or an earlier `advance`'s).
        until: int32 scalar: the step to stop before; a tensor, so one program serves any.
        text_len: T, the memory's text symbols (the rest are speaker latents), static.

    Returns:
        The `State` after the last step run.
    """
    r, steps = config.reduction_factor, state.attention.shape[1]
    guides = _guides(decode, context, text_len)

    def step(s: State) -> State:
        group, prob, row, caches, peak, place = _step(decoder, heads, config, context, s,
                                                      guides)  # fmt: skip
        return State(
            t=s.t + 1, frame=group[:, -1:],
            frames=dynamic_update_slice(s.frames, group, [0, s.t * r, 0]),
            probs=dynamic_update_slice(s.probs, prob, [0, s.t * r]),
            attention=dynamic_update_slice(s.attention, row, [0, s.t, 0]), caches=caches,
            focus=tf.maximum(s.focus, peak), done=s.done | tf.reduce_any(prob > 0.5, axis=1),
            place=place,
        )  # fmt: skip

    until = tf.minimum(until, steps)
    (state,) = tf.while_loop(
        lambda s: (s.t < until) & ~tf.reduce_all(s.done), lambda s: (step(s),), (state,),
        maximum_iterations=steps,
    )  # fmt: skip
    return state


def advance_rows(decoder: Decoder, heads: Heads, config: ModelConfig, decode: DecodeConfig,
                 context: Context, state: State, count: tf.Tensor | int, *,
                 text_len: int) -> State:  # fmt: skip
    """`advance` for rows that each stand at their own step (decoder slots: `state.t` int32
    [B]): `count` steps of every row not done, or fewer once every row is done. A row is
    done when its stop token fires or its buffer is full; a done row's buffers and step are
    not written (its cache may be), so a row decodes what `advance` decodes for it alone.

    Args:
        decoder, heads, config, decode, context, text_len: as `advance`'s.
        state: the rows' `State`, `t` and `done` a row each.
        count: int32 scalar, the steps to run; a tensor, so one program serves any.

    Returns:
        The `State` after the last step run.
    """
    r, steps = config.reduction_factor, state.attention.shape[1]
    guides = _guides(decode, context, text_len)

    def step(s: State) -> State:
        group, prob, row, caches, peak, place = _step(decoder, heads, config, context, s,
                                                      guides)  # fmt: skip
        live = ~s.done  # (B,)
        t = s.t + tf.cast(live, tf.int32)
        stopped = tf.reduce_any(prob > 0.5, axis=1) | (t >= steps)
        return State(
            t=t, frame=tf.where(live[:, None, None], group[:, -1:], s.frame),
            frames=write_rows(s.frames, group, s.t * r, live),
            probs=write_rows(s.probs, prob, s.t * r, live),
            attention=write_rows(s.attention, row, s.t, live), caches=caches,
            focus=tf.where(live, tf.maximum(s.focus, peak), s.focus),
            done=s.done | (live & stopped), place=tf.where(live, place, s.place),
        )  # fmt: skip

    (_, state) = tf.while_loop(
        lambda i, s: (i < count) & ~tf.reduce_all(s.done), lambda i, s: (i + 1, step(s)),
        (tf.constant(0), state), maximum_iterations=steps,
    )  # fmt: skip
    return state


def step_apart(decoder: Decoder, heads: Heads, config: ModelConfig, decode: DecodeConfig,
               context: Context, state: State, *,
               text_len: int) -> tuple[tf.Tensor, ...]:  # fmt: skip
    """One step of `advance`'s loop from `state`, its results apart, for a loop held by
    the caller (exported step programs): the group of frames float32 (B, r, M), its stop
    probabilities (B, r) (held by the stop gate), the alignment row float32 (B, 1, S),
    the caches with the step written, the row's alignment peak int32 (B,) and the next
    alignment position float32 (B,). The step reads `state`'s `t`, `frame`, `caches`,
    `focus` and `place` (its buffers may be None); `advance` writes the rest: `t + 1`,
    the group's last frame, `max(focus, peak)`, `done` where a probability > 0.5.

    Args:
        decoder, heads, config, decode, context, text_len: as `advance`'s.
        state: where the decoding stands.
    """
    return _step(decoder, heads, config, context, state, _guides(decode, context, text_len))


def finish(state: State, config: ModelConfig,
           max_frames: int) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:  # fmt: skip
    """A decoding's buffers cut to `max_frames` frames: frames float32 [B, F, M] as the
    heads wrote them (standardised, or normalised by `Context.stats`), stop probabilities
    float32 [B, F] and the alignment head's attention over the memory float32 [B, F, S],
    one row per frame (frames not decoded: zeros)."""
    attention = per_frame(state.attention, max_frames, config.reduction_factor)
    return state.frames[:, :max_frames], state.probs[:, :max_frames], attention


def stop_lengths(probs: tf.Tensor, max_frames: int) -> tf.Tensor:
    """Stop probabilities float32 [B, F] → int32 [B]: the first frame with probability
    > 0.5, plus one, or `max_frames` where none has."""
    stopped = probs > 0.5  # (B, F)
    first = tf.argmax(tf.cast(stopped, tf.int32), axis=1, output_type=tf.int32)
    return tf.where(tf.reduce_any(stopped, axis=1), first + 1, max_frames)


class _Guides(NamedTuple):
    """What steers each step of a decoding (`DecodeConfig`): the inference window and the
    stop gate (each None when off), and T, the memory's text symbols."""

    window: Callable[[tf.Tensor], tf.Tensor] | None
    gate: Callable[[tf.Tensor], tf.Tensor] | None
    text_len: int


def _guides(decode: DecodeConfig, context: Context, text_len: int) -> _Guides:
    return _Guides(_window(decode, context.memory_mask, text_len),
                   _stop_gate(decode, context.memory_mask, text_len), text_len)  # fmt: skip


def _step(decoder: Decoder, heads: Heads, config: ModelConfig, context: Context, s: State,
          guides: _Guides) -> tuple[tf.Tensor, ...]:  # fmt: skip
    """One decoder step from `s`: the group of frames (B, r, M), its stop probabilities
    (B, r) (held by the stop gate), the alignment row float32 (B, 1, S), the caches with
    the step written, the row's alignment peak int32 (B,) and the alignment position
    float32 (B,) (`s.place` without an aligner)."""
    window, gate, text_len = guides
    mask = context.memory_mask if window is None else window(s.focus)  # (B, 1, S)
    aligned = (context.align_keys, context.memory_mask[:, 0, :text_len], s.place)
    hidden, row, caches, place = decoder.step(s.frame, s.t, s.caches, context.memory_kvs,
                                              mask, context.pitch_term, aligned)  # fmt: skip
    group, logits = heads(hidden, config.reduction_factor)  # (B, r, M), (B, r)
    prob = tf.sigmoid(logits)  # (B, r)
    peak = tf.argmax(row[:, 0, :text_len], axis=1, output_type=tf.int32)
    if gate is not None:  # no stop before the focus (the position, if any) reaches the end
        reached = tf.maximum(s.focus, peak) if place is None else tf.cast(place, tf.int32)
        prob = tf.where(gate(reached)[:, None], prob, tf.minimum(prob, 0.5))
    return group, prob, row, caches, peak, s.place if place is None else place


def _stop_gate(decode: DecodeConfig, memory_mask: tf.Tensor,
               text_len: int) -> Callable[[tf.Tensor], tf.Tensor] | None:  # fmt: skip
    """The stop gate (None when off): focus int32 (B,), the furthest alignment peak so far
    (or the alignment position) → bool (B,), whether it is within `decode.stop_gate`
    symbols of the row's last real symbol (its `<eos>`), where the stop token may fire."""
    if decode.stop_gate == 0:
        return None
    last = tf.reduce_sum(tf.cast(memory_mask[:, 0, :text_len], tf.int32), axis=1) - 1  # (B,)

    def gate(focus: tf.Tensor) -> tf.Tensor:
        return focus >= last - decode.stop_gate

    return gate


def _window(decode: DecodeConfig, memory_mask: tf.Tensor,
            text_len: int) -> Callable[[tf.Tensor], tf.Tensor] | None:  # fmt: skip
    """The inference window (None when off): focus int32 (B,), the furthest peak so far →
    key mask bool (B, 1, S) of the text symbols around it, every speaker latent, within
    `memory_mask`."""
    if decode.window_ahead == 0:
        return None
    keys = tf.range(memory_mask.shape[-1])[None, :]  # (1, S)

    def window(focus: tf.Tensor) -> tf.Tensor:
        near = (keys >= focus[:, None] - decode.window_back) & (
            keys <= focus[:, None] + decode.window_ahead)  # fmt: skip
        return (near | (keys >= text_len))[:, None, :] & memory_mask

    return window
