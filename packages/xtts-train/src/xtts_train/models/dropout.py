"""Dropout from 8 random bits per element instead of 32.

Keras's dropout (`tf.nn.experimental.stateless_dropout`) draws one float32 per element
from Philox. On this project's CPU, drawing the masks was 28 of the tiny train step's
177 ms (`xtts-bench profile`), while a keep-or-drop decision needs far fewer bits. Here
every 32-bit word Philox makes decides four elements: the words are reinterpreted as bytes
(`tf.bitcast`, no copy) and a byte at or above `256 * rate` keeps its element. The rate is
therefore a multiple of 1/256 (`quantized_rate`: 0.1 → 26/256 = 0.1016, 0.5 exactly), and
the kept values are scaled by `1 / (1 - quantized_rate)`, so the expectation is unchanged.

The seeds come from a Keras `SeedGenerator`, as Keras's own dropout's do: each call moves
its state, the trainer checkpoints it (`seed_states`), and a resumed run draws the same
masks.
"""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from xtts_train.errors import ConfigError

__all__ = [
    "Dropout",
    "dropped",
    "keep_mask",
    "next_seed",
    "quantized_rate",
    "seed_states",
    "seeded_keep_mask",
]

_LEVELS = 256  # one byte per element


def seed_states(model: keras.Model) -> list[tf.Variable]:
    """The seed states of `model`'s dropout layers, which Keras keeps out of the model's
    checkpoint: each call of the model in training moves them (none without dropout)."""
    return [v.value for v in model.variables if v.path.endswith("seed_generator_state")]


def quantized_rate(rate: float) -> float:
    """The rate `keep_mask` draws with: `rate` rounded to a multiple of 1/256 (below 1)."""
    return min(round(rate * _LEVELS), _LEVELS - 1) / _LEVELS


def keep_mask(shape: tf.TensorShape | list[int], rate: float,
              seed_generator: keras.random.SeedGenerator) -> tf.Tensor:  # fmt: skip
    """Which elements dropout keeps: bool `shape` (static), each False with probability
    `quantized_rate(rate)`; moves `seed_generator` by one."""
    with tf.name_scope("dropout_mask"):
        return seeded_keep_mask(shape, rate, next_seed(seed_generator))


def dropped(inputs: tf.Tensor, keep: tf.Tensor, rate: float) -> tf.Tensor:
    """Inverted dropout of `inputs` by a `keep_mask`: dropped elements 0, the rest scaled by
    `1 / (1 - quantized_rate(rate))`.

    A product, not `tf.where(keep, x, zeros_like(x))`: Grappler folds the zeros of `where`'s
    gradient into a constant of the activation's static shape, kept by every compiled
    program (2 GB for 8 shapes of 160-290 rows: measured).
    """
    scale = tf.cast(1.0 / (1.0 - quantized_rate(rate)), inputs.dtype)
    return inputs * (tf.cast(keep, inputs.dtype) * scale)


def next_seed(seed_generator: keras.random.SeedGenerator) -> tf.Tensor:
    """The next stateless seed int32 [2] of `seed_generator` (which moves by one)."""
    seed = seed_generator.next()
    if seed.dtype != tf.int32:  # stateless ops want int32 seeds under XLA (as Keras does)
        seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    return seed


def seeded_keep_mask(shape: tf.TensorShape | list[int], rate: float,
                     seed: tf.Tensor) -> tf.Tensor:  # fmt: skip
    """`keep_mask` from a stateless seed int32 [2]: the same seed draws the same mask, which
    a recomputed block of attention needs (`xtts_train.models.attention`)."""
    shape = tf.TensorShape(shape)
    count = shape.num_elements()
    words = tf.random.stateless_uniform([-(-count // 4)], seed, minval=None, maxval=None,
                                        dtype=tf.uint32)  # fmt: skip
    bytes_ = tf.reshape(tf.bitcast(words, tf.uint8), [-1])[:count]  # (4 * words,) → (N,)
    threshold = tf.constant(round(quantized_rate(rate) * _LEVELS), tf.uint8)
    return tf.reshape(bytes_ >= threshold, shape)


class Dropout(keras.layers.Layer):
    """Inverted dropout (identity unless `training`) with masks from `keep_mask`.

    Args:
        rate: share of elements zeroed, in [0, 1); drawn as `quantized_rate(rate)`.
    """

    def __init__(self, rate: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ConfigError(f"Expected a dropout rate in [0, 1), received: rate={rate!r}")
        self.rate = rate
        self.seed_generator = keras.random.SeedGenerator() if rate > 0 else None
        self.supports_masking = True
        self.built = True

    def call(self, inputs: tf.Tensor, training: bool = False) -> tf.Tensor:
        """inputs: any static shape → the same, with dropped elements 0 and the rest scaled."""
        if not training or self.seed_generator is None or quantized_rate(self.rate) == 0:
            return inputs
        return dropped(inputs, keep_mask(inputs.shape, self.rate, self.seed_generator),
                       self.rate)  # fmt: skip
