"""The update's transforms, each alone on a few variables (no model, no compile): the
gradient source, loss scaling, the non-finite gate, clipping, AdamW, and their chain."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from xtts_train.training.optim import AdamW
from xtts_train.training.transforms import (
    FiniteGate,
    LossScale,
    Update,
    accumulated_gradients,
    adamw,
    chain,
    clip_by_global_norm,
    per_objective,
)

NAN = float("nan")


def _update(*grads, loss: float = 1.0, apply: bool = True) -> Update:
    return Update(tuple(tf.constant(g, tf.float32) for g in grads), tf.constant(loss),
                  tf.constant(apply))  # fmt: skip


def _values(update: Update) -> list[np.ndarray]:
    return [g.numpy() for g in update.grads]


def test_chain_applies_its_transforms_in_order():
    def add(k):
        return lambda update, hyper: update.replace(grads=tuple(g * 10 + k for g in update.grads))

    out = chain(add(1), add(2), add(3))(_update([0.0]), {})
    np.testing.assert_array_equal(_values(out), [[123.0]])  # ((0*10+1)*10+2)*10+3


@pytest.mark.parametrize("parts", [1, 2, 4])
def test_accumulated_gradients_are_the_whole_batch_gradient(parts):
    w = tf.Variable([1.0, -2.0])
    unused = tf.Variable(3.0)  # reaches no loss: a zero gradient, not None
    x = tf.constant(np.arange(8, dtype=np.float32).reshape(4, 2))

    def loss_fn(micro):  # a mean over rows: micro-batch means average to the whole mean
        return {"loss": tf.reduce_mean(tf.square(tf.linalg.matvec(micro["tokens"], w)))}

    grads, losses = accumulated_gradients(loss_fn, [w, unused], {"tokens": x}, parts=parts)
    with tf.GradientTape() as tape:
        whole = loss_fn({"tokens": x})["loss"]
    np.testing.assert_allclose(grads[0].numpy(), tape.gradient(whole, w).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(grads[1].numpy(), 0.0)
    np.testing.assert_allclose(float(losses["loss"]), float(whole), rtol=1e-6)


def test_accumulated_gradients_are_scaled_by_the_loss_scale():
    w = tf.Variable(2.0)
    grads, _ = accumulated_gradients(lambda micro: {"loss": w * micro["tokens"][0]}, [w],
                                     {"tokens": tf.constant([3.0])}, parts=1, scale=8.0)  # fmt: skip
    assert float(grads[0]) == 24.0


def test_loss_scale_unscales_and_keeps_its_scale_while_finite():
    scale = LossScale(initial=8.0, growth_interval=3)
    out = scale(_update([16.0, -8.0]), {})
    np.testing.assert_array_equal(_values(out), [[2.0, -1.0]])
    assert float(scale.scale) == 8.0
    assert int(scale.good_steps) == 1


def test_loss_scale_measures_the_unscaled_norm_for_the_gate_to_reuse():
    out = LossScale(initial=8.0)(_update([24.0], [32.0]), {})
    assert float(out.grad_norm) == 5.0
    gate = FiniteGate()
    reused = gate(_update([3.0, 4.0]).replace(grad_norm=tf.constant(NAN)), {})
    assert not bool(reused.apply)  # the norm it was given, not its own measurement
    assert int(gate.skipped) == 1


def test_loss_scale_halves_on_overflow_and_grows_after_its_interval():
    scale = LossScale(initial=8.0, growth_interval=2)
    scale(_update([float("inf")]), {})
    assert float(scale.scale) == 4.0
    assert int(scale.good_steps) == 0
    scale(_update([1.0]), {})
    scale(_update([1.0]), {})  # the second finite update in a row: doubled
    assert float(scale.scale) == 8.0
    assert int(scale.good_steps) == 0
    scale(_update([1.0], loss=NAN), {})  # a non-finite loss counts as an overflow
    assert float(scale.scale) == 4.0


def test_loss_scale_never_falls_below_one_and_a_closed_gate_changes_nothing():
    scale = LossScale(initial=1.0)
    scale(_update([NAN]), {})
    assert float(scale.scale) == 1.0
    scale = LossScale(initial=8.0)
    scale(_update([NAN], apply=False), {})
    scale(_update([1.0], apply=False), {})
    assert float(scale.scale) == 8.0
    assert int(scale.good_steps) == 0


def test_finite_gate_counts_skips_and_resets_the_run_after_a_finite_update():
    gate = FiniteGate()
    out = gate(_update([3.0, 4.0]), {})
    assert bool(out.apply)
    assert float(out.grad_norm) == 5.0
    for grads, loss in (([NAN, 0.0], 1.0), ([1.0, 0.0], NAN)):
        assert not bool(gate(_update(grads, loss=loss), {}).apply)
    assert int(gate.skipped) == 2
    assert int(gate.consecutive) == 2
    gate(_update([1.0]), {})
    assert int(gate.skipped) == 2
    assert int(gate.consecutive) == 0


def test_finite_gate_does_not_count_an_update_that_was_not_to_apply():
    gate = FiniteGate()  # warm-up runs with the gate closed
    assert not bool(gate(_update([NAN], apply=False), {}).apply)
    assert int(gate.skipped) == 0


@pytest.mark.parametrize(("clip", "expected"), [(10.0, [3.0, 4.0]), (1.0, [0.6, 0.8])])
def test_clip_by_global_norm_scales_down_only_above_the_limit(clip, expected):
    out = clip_by_global_norm()(_update([3.0], [4.0]), {"clip_norm": tf.constant(clip)})
    np.testing.assert_allclose(np.concatenate(_values(out)), expected, rtol=1e-6)


def test_clip_uses_the_norm_the_gate_measured():
    update = _update([3.0], [4.0]).replace(grad_norm=tf.constant(50.0))
    out = clip_by_global_norm()(update, {"clip_norm": tf.constant(5.0)})
    np.testing.assert_allclose(np.concatenate(_values(out)), [0.3, 0.4], rtol=1e-6)


def test_adamw_applies_unless_the_gate_is_closed():
    w = tf.Variable([1.0, 1.0])
    optimizer = AdamW([w])
    step = adamw(optimizer, [w])
    hyper = {"learning_rate": tf.constant(0.1), "weight_decay": tf.constant(0.0)}
    step(_update([1.0, -1.0], apply=False), hyper)
    np.testing.assert_array_equal(w.numpy(), [1.0, 1.0])
    assert int(optimizer.iterations) == 0
    step(_update([1.0, -1.0]), hyper)
    np.testing.assert_allclose(w.numpy(), [0.9, 1.1], rtol=1e-4)  # Adam's first step: lr
    assert int(optimizer.iterations) == 1


def test_the_chain_skips_a_nan_update_whole():
    w = tf.Variable([1.0, 2.0])
    optimizer, gate = AdamW([w]), FiniteGate()
    update = chain(gate, clip_by_global_norm(), adamw(optimizer, [w]))
    hyper = {"learning_rate": tf.constant(0.1), "weight_decay": tf.constant(0.01),
             "clip_norm": tf.constant(1.0)}  # fmt: skip
    update(_update([NAN, 1.0]), hyper)
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(optimizer.momentum.numpy(), [0.0, 0.0])
    assert int(optimizer.iterations) == 0
    assert int(gate.skipped) == 1


def test_accumulated_gradients_of_two_objectives_differentiate_each_loss_by_its_own():
    a, b = tf.Variable(2.0), tf.Variable(3.0)

    def loss_fn(micro):  # both losses read both variables
        x = micro["tokens"][0]
        return {"loss": a * b * x, "critic": b * b + a * x}

    grads, losses = accumulated_gradients(loss_fn, [("loss", [a]), ("critic", [b])],
                                          {"tokens": tf.constant([5.0, 5.0])}, parts=2)  # fmt: skip
    np.testing.assert_allclose([g.numpy() for g in grads], [3.0 * 5.0, 2 * 3.0])  # d/da, d/db
    np.testing.assert_allclose([float(losses["loss"]), float(losses["critic"])], [30.0, 19.0])


def _objectives(clip: float = 100.0):
    a, b = tf.Variable([1.0, 1.0]), tf.Variable([1.0])
    optimizers = AdamW([a]), AdamW([b])
    update = chain(FiniteGate(), per_objective([
        (1, chain(clip_by_global_norm(), adamw(optimizers[0], [a]))),
        (1, chain(clip_by_global_norm(), adamw(optimizers[1], [b]))),
    ]))  # fmt: skip
    hyper = {"learning_rate": tf.constant(0.1), "weight_decay": tf.constant(0.0),
             "clip_norm": tf.constant(clip)}  # fmt: skip
    return update, hyper, (a, b), optimizers


def test_each_objective_is_clipped_by_its_own_norm_and_applied_by_its_own_optimizer():
    update, hyper, (a, b), optimizers = _objectives(clip=1.0)
    out = update(_update([30.0, 40.0], [0.5]), hyper)  # norms 50 and 0.5: one clipped
    np.testing.assert_allclose(_values(out)[0], [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(_values(out)[1], [0.5], rtol=1e-6)
    assert [int(o.iterations) for o in optimizers] == [1, 1]
    np.testing.assert_allclose(a.numpy(), [0.9, 0.9], rtol=1e-5)  # Adam's first step: -lr
    np.testing.assert_allclose(b.numpy(), [0.9], rtol=1e-5)


def test_a_non_finite_gradient_of_one_objective_skips_every_objective():
    update, hyper, (a, _), optimizers = _objectives()
    out = update(_update([1.0, 1.0], [NAN]), hyper)
    assert not bool(out.apply)
    assert [int(o.iterations) for o in optimizers] == [0, 0]
    np.testing.assert_array_equal(a.numpy(), [1.0, 1.0])
