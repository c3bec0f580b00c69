"""AdamW over one flat parameter vector, and its warm-up + cosine learning-rate schedule.

Keras's `AdamW` builds its update variable by variable, and asks its schedule for the
learning rate once per variable (a `cond` each): for the tiny model's 146 weights that was
4-5 s of Python tracing and ~8 s of XLA compiling per batch shape, more than the model's
own forward and backward pass. Here the gradients and weights are concatenated into one
vector and the update is a handful of element-wise ops that XLA fuses into one loop; the
arithmetic is Keras's (`keras.optimizers.AdamW` with a `CosineDecay` warm-up schedule),
which the tests check step by step.

The learning rate and weight decay are inputs of the update, not constants in its
graph: the schedule is plain Python (`warmup_cosine`) evaluated on the host each step, so
a compiled step does not depend on `train.steps` or `train.learning_rate`, and changing
them reuses the compiled programs of the persistent compile cache.

The update is gated in the graph: with `gate` false nothing changes (weights, moments,
step count), so a non-finite gradient skips the update without a `tf.cond`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import tensorflow as tf

__all__ = ["AdamW", "Schedule", "warmup_cosine"]

Schedule = Callable[[int], float]


def warmup_cosine(*, peak: float, warmup_steps: int, total_steps: int,
                  min_ratio: float) -> Schedule:  # fmt: skip
    """Linear warm-up from 0 to `peak` over `warmup_steps`, then cosine decay to
    `peak * min_ratio` at `total_steps` (constant after it).

    Keras's `CosineDecay(0, decay_steps=max(total - warmup, 1), alpha=min_ratio,
    warmup_target=peak, warmup_steps=warmup)`.

    Returns:
        A function of the step (updates done so far) to the learning rate.
    """
    decay = max(total_steps - warmup_steps, 1)

    def rate(step: int) -> float:
        step = min(step, decay + warmup_steps)
        if step < warmup_steps:
            return peak * step / warmup_steps
        cosine = 0.5 * (1.0 + math.cos(math.pi * (step - warmup_steps) / decay))
        return peak * ((1.0 - min_ratio) * cosine + min_ratio)

    return rate


class AdamW(tf.Module):
    """Adam with decoupled weight decay, the state kept as two flat float32 vectors.

    Args:
        variables: the trainable variables it will update (their sizes fix the state's).
        beta_1, beta_2, epsilon: Adam's constants (Keras's defaults).

    Attributes:
        iterations: int64 variable, updates applied so far (Adam's bias correction).
        momentum, velocity: float32 [parameters] first and second moments.
    """

    def __init__(self, variables: Sequence[tf.Variable], *, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-7,
                 name: str = "adamw") -> None:  # fmt: skip
        super().__init__(name=name)
        size = sum(math.prod(v.shape) for v in variables)
        self._shapes = [tuple(v.shape) for v in variables]
        self._constants = (beta_1, beta_2, epsilon)
        self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False, name="iterations")
        self.momentum = tf.Variable(tf.zeros([size]), trainable=False, name="momentum")
        self.velocity = tf.Variable(tf.zeros([size]), trainable=False, name="velocity")

    def apply(self, grads: Sequence[tf.Tensor], variables: Sequence[tf.Variable], *,
              learning_rate: tf.Tensor | float, weight_decay: tf.Tensor | float = 0.0,
              gate: tf.Tensor | bool = True) -> None:  # fmt: skip
        """One update of `variables` by `grads` (same order and shapes as at construction),
        unless `gate` (a bool scalar) is false.

        Args:
            learning_rate: float32 scalar: this update's rate.
            weight_decay: float32 scalar: decoupled decay, scaled by the rate.
        """
        shapes = [tuple(v.shape) for v in variables]
        if shapes != self._shapes:
            raise ValueError(
                f"Expected variables of shapes {self._shapes}, received: shapes={shapes}"
            )
        beta_1, beta_2, epsilon = self._constants
        gate = tf.convert_to_tensor(gate, tf.bool)
        lr = tf.convert_to_tensor(learning_rate, tf.float32)
        decay = tf.convert_to_tensor(weight_decay, tf.float32)
        t = tf.cast(self.iterations + 1, tf.float32)
        alpha = lr * tf.sqrt(1.0 - beta_2**t) / (1.0 - beta_1**t)
        g = _flat(grads)  # (P,)
        w = _flat(variables)
        m = self.momentum + (g - self.momentum) * (1.0 - beta_1)
        v = self.velocity + (tf.square(g) - self.velocity) * (1.0 - beta_2)
        w_new = w - w * (decay * lr) - m * alpha / (tf.sqrt(v) + epsilon)
        self.momentum.assign(tf.where(gate, m, self.momentum))
        self.velocity.assign(tf.where(gate, v, self.velocity))
        w_new = tf.where(gate, w_new, w)
        offset = 0
        for variable in variables:
            size = math.prod(variable.shape)
            variable.assign(tf.reshape(w_new[offset : offset + size], variable.shape))
            offset += size
        self.iterations.assign_add(tf.cast(gate, tf.int64))


def _flat(tensors: Sequence[tf.Tensor]) -> tf.Tensor:
    return tf.concat([tf.reshape(tf.cast(x, tf.float32), [-1]) for x in tensors], axis=0)
