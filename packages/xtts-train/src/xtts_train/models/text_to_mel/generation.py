"""`TextToMel`'s autoregressive decoding loop: a `tf.while_loop` over a fixed-size frame
buffer, so that `TextToMel.infer` compiles with XLA at static shapes.

Step `t` runs the decoder at position `t` alone (`Decoder.step`): every block keeps the
keys and values of the positions before in a fixed-size cache (written in place,
`dynamic_update_slice`), so a step costs the same at the end of a long buffer as at its
start, and decoding is linear in the frames. Step `t` writes frames `t*r .. t*r + r - 1`
(r = `reduction_factor`); the loop ends when every utterance has stopped. With the
inference window on (`ModelConfig.infer_window_ahead`), step `t` attends only to the text
symbols around the furthest alignment peak of the steps before it (and to every speaker
latent). The prenet's dropout is off unless `ModelConfig.infer_prenet_dropout`, so the
same inputs decode to the same frames.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf
from tensorflow.compiler.tf2xla.python.xla import dynamic_update_slice

from xtts_train.config import ModelConfig
from xtts_train.models.text_to_mel.frames import groups, per_frame
from xtts_train.models.text_to_mel.layers import Decoder

__all__ = ["Heads", "generate", "stop_lengths"]

# hidden (B, S, D), frames → standardised frames (B, frames, M) and stop logits (B, frames).
Heads = Callable[[tf.Tensor, int], tuple[tf.Tensor, tf.Tensor]]


def generate(
    decoder: Decoder, heads: Heads, config: ModelConfig, memory: tf.Tensor,
    memory_mask: tf.Tensor, *, text_shape: tf.TensorShape, max_frames: int,
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:  # fmt: skip
    """Decode `max_frames` frames from the decoder's memory.

    The buffers hold `steps * r` frames; step `t` reads the last frame of group `t - 1`
    (zeros at step 0), writes frames `t*r .. t*r + r - 1` and ends the loop for an
    utterance when any of them has stop probability > 0.5.

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
    caches, memory_kvs = decoder.start(memory, steps)

    def step(t, frame, frames, probs, attention, caches, focus, done):
        mask = window(focus) if windowed else memory_mask  # (B, 1, S)
        keep_t = tf.gather(keep, tf.reshape(t, [1]), axis=2)  # (2, B, 1, P)
        hidden, row, caches = decoder.step(frame, t, keep_t, caches, memory_kvs, mask)
        group, logits = heads(hidden, r)  # (B, r, M), (B, r)
        prob = tf.sigmoid(logits)  # (B, r)
        frames = dynamic_update_slice(frames, group, [0, t * r, 0])
        probs = dynamic_update_slice(probs, prob, [0, t * r])
        attention = dynamic_update_slice(attention, row, [0, t, 0])
        peak = tf.argmax(row[:, 0, :text_len], axis=1, output_type=tf.int32)
        stopped = tf.reduce_any(prob > 0.5, axis=1)
        return (t + 1, group[:, -1:], frames, probs, attention, caches,
                tf.maximum(focus, peak), done | stopped)  # fmt: skip

    count, width = steps * r, memory.shape[1]
    start = (
        tf.constant(0), tf.zeros([batch, 1, config.n_mels]),
        tf.zeros([batch, count, config.n_mels]), tf.zeros([batch, count]),
        tf.zeros([batch, steps, width]), caches,
        tf.zeros([batch], tf.int32), tf.zeros([batch], tf.bool),
    )  # fmt: skip
    _, _, frames, probs, attention, *_ = tf.while_loop(
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
