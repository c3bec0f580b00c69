"""The update of a train step as small composed transforms (optax's `chain`).

```
accumulated_gradients ─ Update(grads, loss, apply) ─ chain(
    LossScale       unscale the gradients; halve the scale on overflow, grow it after a run
    FiniteGate      close the gate on a non-finite loss or gradient norm; count the skips
    per_objective(  each objective's slice of the gradients (`Task.objectives`), in turn:
        chain(clip_by_global_norm, adamw)   ...its own clip and its own AdamW
    )
)
```
The gate is one for the whole step: a non-finite loss or gradient of any objective skips
every objective's update.

Each transform maps an `Update` to an `Update` inside the compiled step; the stateful ones
are `tf.Module`s whose variables are their typed state (checkpointed with them). A closed
gate (`apply` false: warm-up, or a non-finite step) changes no weight, no optimizer moment
and no counter but the gate's own, without a `tf.cond`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import tensorflow as tf

from xtts_train.training.optim import AdamW

__all__ = [
    "FiniteGate",
    "Hyper",
    "LossScale",
    "Transform",
    "Update",
    "accumulated_gradients",
    "adamw",
    "chain",
    "clip_by_global_norm",
    "per_objective",
]

Hyper = Mapping[str, tf.Tensor]
"""The step's scalar inputs besides the batch: `learning_rate`, `weight_decay`,
`clip_norm`, and the loss weights (see `xtts_train.training.step_functions.StepFunctions.hyper`)."""


@dataclasses.dataclass(frozen=True)
class Update:
    """What flows through the chain.

    Attributes:
        grads: float32 gradients, one per trainable variable (same order and shapes).
        loss: float32 scalar: the loss the gradients are of.
        apply: bool scalar: false skips the update (warm-up, or a gate closed it).
        grad_norm: float32 scalar: the global norm of `grads` once a transform has
            measured it (`LossScale` after unscaling, else `FiniteGate`), for the next to
            reuse; `clip_by_global_norm` keeps it as the norm before clipping.
    """

    grads: tuple[tf.Tensor, ...]
    loss: tf.Tensor
    apply: tf.Tensor
    grad_norm: tf.Tensor | None = None

    def replace(self, **changes) -> Update:
        return dataclasses.replace(self, **changes)


class Transform(Protocol):
    """One piece of the update: `Update` in, `Update` out, inside the compiled step."""

    def __call__(self, update: Update, hyper: Hyper) -> Update: ...


def chain(*transforms: Transform) -> Transform:
    """The transforms applied in order, as one transform."""

    def chained(update: Update, hyper: Hyper) -> Update:
        for transform in transforms:
            update = transform(update, hyper)
        return update

    return chained


def accumulated_gradients(
    loss_fn: Callable[[dict[str, tf.Tensor]], dict[str, tf.Tensor]],
    variables: Sequence[tf.Variable] | Sequence[tuple[str, Sequence[tf.Variable]]],
    batch: Mapping[str, tf.Tensor],
    *,
    parts: int,
    scale: tf.Tensor | float = 1.0,
) -> tuple[tuple[tf.Tensor, ...], dict[str, tf.Tensor]]:
    """Mean gradients and losses over `parts` equal micro-batches (a static unroll: each
    micro-batch has a static shape), the step's source of gradients.

    Args:
        loss_fn: a micro-batch to its float scalar losses.
        variables: the variables `"loss"` is differentiated with respect to, or
            (loss key, variables) pairs, one per objective: each loss with respect to its
            own variables, all from the one forward pass.
        batch: tensors of leading dimension B, divisible by `parts`.
        scale: multiplies the loss before differentiation (float16 loss scaling), so the
            gradients come out scaled by it: `LossScale` divides them back.

    Returns:
        (float32 gradients, one per variable, the pairs' in order (zeros where a variable
        does not reach its loss), the mean losses).
    """
    groups = list(variables)
    if not groups or not isinstance(groups[0], tuple):
        groups = [("loss", groups)]
    size = int(next(iter(batch.values())).shape[0]) // parts  # every field leads with B
    total_grads, total_losses = None, None
    for i in range(parts):
        micro = {name: value[i * size : (i + 1) * size] for name, value in batch.items()}
        with tf.GradientTape(persistent=len(groups) > 1) as tape:
            losses = loss_fn(micro)
            scaled = [tf.cast(losses[key], tf.float32) * scale for key, _ in groups]
        grads = [_dense(g, v)
                 for loss, (_, group) in zip(scaled, groups, strict=True)
                 for g, v in zip(tape.gradient(loss, group), group, strict=True)]  # fmt: skip
        if total_grads is None:
            total_grads, total_losses = grads, losses
        else:
            total_grads = [a + g for a, g in zip(total_grads, grads, strict=True)]
            total_losses = {k: total_losses[k] + losses[k] for k in losses}
    return (tuple(g / parts for g in total_grads),
            {k: v / parts for k, v in total_losses.items()})  # fmt: skip


def _dense(grad, variable: tf.Variable) -> tf.Tensor:
    """A float32 dense gradient (sums need no slices); zeros for a variable off the loss."""
    if grad is None:
        return tf.zeros_like(variable, tf.float32)
    return tf.convert_to_tensor(tf.cast(grad, tf.float32))


def _finite(update: Update, norm: tf.Tensor) -> tf.Tensor:
    return tf.math.is_finite(norm) & tf.math.is_finite(update.loss)


class LossScale(tf.Module):
    """Dynamic loss scaling for float16 gradients, which underflow unscaled.

    The gradient source multiplies the loss by `scale`; this transform divides the
    gradients by it, then (unless the update is skipped) halves the scale when the loss
    or a gradient is not finite, never below 1, and doubles it after `growth_interval`
    finite updates in a row. The scale is a power of two, so the division is exact.

    Attributes:
        scale: float32 variable: the factor the loss is multiplied by.
        good_steps: int64 variable: finite updates since the scale last changed.
    """

    def __init__(self, *, initial: float = 2.0**15, growth_interval: int = 2000,
                 name: str = "loss_scale") -> None:  # fmt: skip
        super().__init__(name=name)
        self.growth_interval = growth_interval
        self.scale = tf.Variable(initial, dtype=tf.float32, trainable=False, name="scale")
        self.good_steps = tf.Variable(0, dtype=tf.int64, trainable=False, name="good_steps")

    def __call__(self, update: Update, hyper: Hyper) -> Update:
        scale = self.scale.read_value()
        grads = tuple(g / scale for g in update.grads)
        norm = tf.linalg.global_norm(grads)
        finite = _finite(update, norm)
        good = tf.where(finite, self.good_steps + 1, tf.constant(0, tf.int64))
        grow = good >= self.growth_interval
        new = tf.where(finite, tf.where(grow, scale * 2, scale), tf.maximum(scale / 2, 1.0))
        self.scale.assign(tf.where(update.apply, new, scale))
        good = tf.where(grow, tf.constant(0, tf.int64), good)
        self.good_steps.assign(tf.where(update.apply, good, self.good_steps))
        return update.replace(grads=grads, grad_norm=norm)


class FiniteGate(tf.Module):
    """Closes the gate when the loss or the gradients' global norm is not finite, and
    counts the updates it skipped; sets `Update.grad_norm` (or reuses it).

    Attributes:
        skipped: int64 variable: updates skipped so far (closed gates of updates that were
            to apply; a warm-up's closed gate is not counted).
        consecutive: int64 variable: updates skipped in a row, 0 after any other.
    """

    def __init__(self, name: str = "finite_gate") -> None:
        super().__init__(name=name)
        self.skipped = tf.Variable(0, dtype=tf.int64, trainable=False, name="nonfinite")
        self.consecutive = tf.Variable(0, dtype=tf.int64, trainable=False, name="consecutive")

    def __call__(self, update: Update, hyper: Hyper) -> Update:
        norm = update.grad_norm
        if norm is None:
            norm = tf.linalg.global_norm(update.grads)
        finite = _finite(update, norm)
        skipped = tf.cast(update.apply & ~finite, tf.int64)
        self.skipped.assign_add(skipped)
        self.consecutive.assign((self.consecutive + skipped) * skipped)
        return update.replace(apply=update.apply & finite, grad_norm=norm)


def clip_by_global_norm() -> Transform:
    """Scale the gradients down to a global norm of at most `hyper["clip_norm"]` (reusing
    `Update.grad_norm` when set)."""

    def clip(update: Update, hyper: Hyper) -> Update:
        grads, _ = tf.clip_by_global_norm(update.grads, hyper["clip_norm"],
                                          use_norm=update.grad_norm)  # fmt: skip
        return update.replace(grads=tuple(grads))

    return clip


def per_objective(branches: Sequence[tuple[int, Transform]]) -> Transform:
    """Each objective's gradients through its own transforms: `branches` holds, in the
    order of the update's gradients, (how many of them are the objective's, its chain).
    A lone objective's chain reuses the norm measured before (the whole step's); with
    several, each measures its own."""

    def apply(update: Update, hyper: Hyper) -> Update:
        shared_norm = update.grad_norm if len(branches) == 1 else None
        grads, start = [], 0
        for size, transform in branches:
            part = update.replace(grads=update.grads[start : start + size], grad_norm=shared_norm)
            grads.extend(transform(part, hyper).grads)
            start += size
        if start != len(update.grads):
            raise ValueError(f"Expected {start} gradients (the objectives' variables), "
                             f"received: {len(update.grads)}")  # fmt: skip
        return update.replace(grads=tuple(grads))

    return apply


def adamw(optimizer: AdamW, variables: Sequence[tf.Variable]) -> Transform:
    """Apply the gradients to `variables` with `optimizer` at `hyper["learning_rate"]` and
    `hyper["weight_decay"]`, unless the gate is closed; the last transform of a chain."""

    def apply(update: Update, hyper: Hyper) -> Update:
        optimizer.apply(update.grads, variables, gate=update.apply,
                        learning_rate=hyper["learning_rate"],
                        weight_decay=hyper["weight_decay"])  # fmt: skip
        return update

    return apply
