"""The frame arithmetic of `TextToMel`'s decoder: groups of `r` frames (`r` =
`ModelConfig.reduction_factor`) and the standardised mel scale it predicts in.

The decoder runs one step per group of `r` frames: step `s` reads the last frame of group
`s - 1` (`step_inputs`) and writes all `r` frames of group `s`; what it computes once per
step (an attention row) holds for each frame of the group (`per_frame`). Pure functions of
static shapes, shared by training (`TextToMel.call`) and decoding (`generation`).
"""

from __future__ import annotations

import tensorflow as tf

from xtts_train.config import ModelConfig

__all__ = ["from_standard", "groups", "per_frame", "shift_right", "standardize", "step_inputs"]


def groups(frames: int, r: int) -> int:
    """Decoder steps that cover `frames` frames, `r` per step: `ceil(frames / r)`."""
    return -(-frames // r)


def shift_right(frames: tf.Tensor) -> tf.Tensor:
    """Teacher forcing input: a zero go frame, then frames 0 .. F-2: (B, F, M) → (B, F, M)."""
    return tf.pad(frames, [[0, 0], [1, 0], [0, 0]])[:, :-1]


def step_inputs(frames: tf.Tensor, r: int) -> tf.Tensor:
    """Decoder inputs (B, F, M) → (B, S, M), S = ceil(F / r): a zero go frame, then the
    last frame of each group of `r` but the final one (r = 1: frames 0 .. F-2)."""
    if r == 1:
        return shift_right(frames)
    count, n_mels = frames.shape[1], frames.shape[2]
    steps = groups(count, r)
    padded = tf.pad(frames, [[0, 0], [0, steps * r - count], [0, 0]])  # (B, S * r, M)
    return shift_right(tf.reshape(padded, [-1, steps, r, n_mels])[:, :, -1])


def per_frame(attention: tf.Tensor, frames: int, r: int) -> tf.Tensor:
    """One attention row per decoder step (B, S, K) → one per frame (B, frames, K): the
    frames a step writes share its row."""
    return attention if r == 1 else tf.repeat(attention, r, axis=1)[:, :frames]


def standardize(mel: tf.Tensor, config: ModelConfig) -> tf.Tensor:
    """Mel in its units (B, F, M) → float32 standardised with the config's mean and std."""
    return (tf.cast(mel, tf.float32) - config.mel_mean) / config.mel_std


def from_standard(frames: tf.Tensor, config: ModelConfig) -> tf.Tensor:
    """Standardised frames (B, F, M) → mel units: `standardize`'s inverse."""
    return frames * config.mel_std + config.mel_mean
