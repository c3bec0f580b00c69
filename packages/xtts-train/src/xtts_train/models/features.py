"""The fixed standardisation of the mel features both networks read: `(mel - MEL_MEAN) /
MEL_STD` in, its inverse out (`xtts_train.config`'s constants, one home for both)."""

from __future__ import annotations

import tensorflow as tf

from xtts_train.config import MEL_MEAN, MEL_STD

__all__ = ["from_standard", "standardize"]


def standardize(mel: tf.Tensor) -> tf.Tensor:
    """Mel in its units (B, F, M) → float32 standardised frames."""
    return (tf.cast(mel, tf.float32) - MEL_MEAN) / MEL_STD


def from_standard(frames: tf.Tensor) -> tf.Tensor:
    """Standardised frames (B, F, M) → mel units: `standardize`'s inverse."""
    return frames * MEL_STD + MEL_MEAN
