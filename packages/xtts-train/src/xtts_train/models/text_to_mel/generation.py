"""`TextToMel`'s autoregressive decoding loop: a `tf.while_loop` over a fixed-size frame
buffer, so that `TextToMel.infer` compiles with XLA at static shapes.

Step `t` runs the decoder over the whole buffer (causal, so later steps do not matter) and
writes frames `t*r .. t*r + r - 1` (r = `reduction_factor`); the loop ends when every
utterance has stopped. With the inference window on (`ModelConfig.infer_window_ahead`),
step `t` attends only to the text symbols around the furthest alignment peak of the steps
before it (and to every speaker latent). The prenet's dropout is off unless
`ModelConfig.infer_prenet_dropout`, so the same inputs decode to the same frames.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from xtts_train.config import ModelConfig
from xtts_train.models.text_to_mel.frames import groups, per_frame, step_inputs
from xtts_train.models.text_to_mel.layers import Decoder

__all__ = ["Heads", "generate", "stop_lengths"]

# hidden (B, S, D), frames → standardised frames (B, frames, M) and stop logits (B, frames).
Heads = Callable[[tf.Tensor, int], tuple[tf.Tensor, tf.Tensor]]


def generate(
    decoder: Decoder, heads: Heads, config: ModelConfig, memory: tf.Tensor,
    memory_mask: tf.Tensor, *, text_shape: tf.TensorShape, max_frames: int,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:  # fmt: skip
    """Decode `max_frames` frames from the decoder's memory.

    The buffers hold `steps * r` frames; step `t` writes frames `t*r .. t*r + r - 1` and
    ends the loop for an utterance when any of them has stop probability > 0.5. With the
    inference window on, `masks` (B, steps, S) holds each step's key mask: row `t` is set
    from the focus before step `t` runs and kept after, so re-running the decoder over the
    buffer shows every past step the keys it had.

    Args:
        decoder: the model's decoder (built).
        heads: the model's mel and stop heads (`Heads`).
        config: the model's config (reduction factor, mel channels, inference window).
        memory: float [B, S, D], S = T + L: text encodings, then speaker latents.
        memory_mask: bool [B, 1, S], the memory's key mask.
        text_shape: (B, T) of the tokens, static.
        max_frames: frames of the buffer, a Python int.

    Returns:
        Standardised frames float32 [B, F, M], stop probabilities float32 [B, F] (0 after
        the loop ended) and the alignment head's attention over the memory float32
        [B, F, S] (0 after the loop ended), F = `max_frames`.
    """
    batch, text_len = text_shape
    r = config.reduction_factor
    steps = groups(max_frames, r)
    keep = decoder.prenet_keep(batch, steps, dropout=config.infer_prenet_dropout)
    windowed = config.infer_window_ahead > 0
    window = _window(config, memory, memory_mask, text_len)

    def step(t, frames, probs, attention, masks, focus, done):
        at_t = tf.one_hot(t, steps)[None]  # (1, steps)
        in_group = tf.repeat(at_t, r, axis=1)  # (1, steps * r): the frames step t writes
        if windowed:
            masks = tf.where(at_t[:, :, None] > 0, window(focus), masks)
        hidden, align = decoder(step_inputs(frames, r), memory, masks, keep)
        now = tf.reshape(t, [1])
        group, logits = heads(tf.gather(hidden, now, axis=1), r)  # (B, r, M), (B, r)
        prob = tf.sigmoid(logits)  # (B, r)
        frames = frames + in_group[:, :, None] * tf.tile(group, [1, steps, 1])
        probs = probs + in_group * tf.tile(prob, [1, steps])
        row = tf.gather(align, now, axis=1)  # (B, 1, S)
        attention = attention + at_t[:, :, None] * row
        peak = tf.argmax(row[:, 0, :text_len], axis=1, output_type=tf.int32)
        stopped = tf.reduce_any(prob > 0.5, axis=1)
        return (t + 1, frames, probs, attention, masks, tf.maximum(focus, peak),
                done | stopped)  # fmt: skip

    start = _start(config, memory, memory_mask, batch=batch, steps=steps, windowed=windowed)
    _, frames, probs, attention, *_ = tf.while_loop(
        lambda t, *state: ~tf.reduce_all(state[-1]), step, start,
        maximum_iterations=steps,
    )  # fmt: skip
    return frames[:, :max_frames], probs[:, :max_frames], per_frame(attention, max_frames, r)


def stop_lengths(probs: tf.Tensor, max_frames: int) -> tf.Tensor:
    """Stop probabilities float32 [B, F] → int32 [B]: the first frame with probability
    > 0.5, plus one, or `max_frames` where none has."""
    stopped = probs > 0.5  # (B, F)
    first = tf.argmax(tf.cast(stopped, tf.int32), axis=1, output_type=tf.int32)
    return tf.where(tf.reduce_any(stopped, axis=1), first + 1, max_frames)


def _window(config: ModelConfig, memory: tf.Tensor, memory_mask: tf.Tensor,
            text_len: int) -> Callable[[tf.Tensor], tf.Tensor]:  # fmt: skip
    """The inference window: focus int32 (B,), the furthest peak so far → key mask bool
    (B, 1, S) of the text symbols around it, every speaker latent, within `memory_mask`."""
    keys = tf.range(memory.shape[1])[None, :]  # (1, S)

    def window(focus: tf.Tensor) -> tf.Tensor:
        near = (keys >= focus[:, None] - config.infer_window_back) & (
            keys <= focus[:, None] + config.infer_window_ahead)  # fmt: skip
        return (near | (keys >= text_len))[:, None, :] & memory_mask

    return window


def _start(config: ModelConfig, memory: tf.Tensor, memory_mask: tf.Tensor, *, batch: int,
           steps: int, windowed: bool) -> tuple[tf.Tensor, ...]:  # fmt: skip
    """The loop's first state: step 0, empty buffers of `steps * r` frames, the key
    masks (one per step when windowed, (B, steps, S); else `memory_mask`), focus 0, and
    no utterance done."""
    masks = memory_mask
    if windowed:
        masks = tf.tile(memory_mask, [1, steps, 1])  # (B, steps, S)
    count = steps * config.reduction_factor
    return (
        tf.constant(0),
        tf.zeros([batch, count, config.n_mels]),
        tf.zeros([batch, count]),
        tf.zeros([batch, steps, memory.shape[1]]),
        masks,
        tf.zeros([batch], tf.int32),
        tf.zeros([batch], tf.bool),
    )
