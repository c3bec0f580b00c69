"""The flat AdamW and its schedule against Keras's AdamW + CosineDecay, step by step."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from xtts_train.training.optim import AdamW, warmup_cosine


@pytest.mark.parametrize("warmup", [0, 3])
def test_schedule_matches_keras_cosine_decay(warmup):
    total, peak, ratio = 12, 2e-3, 0.1
    keras_schedule = keras.optimizers.schedules.CosineDecay(
        0.0 if warmup else peak, decay_steps=max(total - warmup, 1), alpha=ratio,
        warmup_target=peak if warmup else None, warmup_steps=warmup,
    )  # fmt: skip
    ours = warmup_cosine(peak=peak, warmup_steps=warmup, total_steps=total, min_ratio=ratio)
    for step in range(total + 3):  # past the end too: constant at the floor
        np.testing.assert_allclose(ours(step), float(keras_schedule(step)), rtol=1e-6)


def _variables(seed):
    rng = np.random.default_rng(seed)
    return [tf.Variable(rng.standard_normal(shape).astype("float32"))
            for shape in [(3, 4), (4,), (2, 2, 5)]]  # fmt: skip


def test_updates_match_keras_adamw():
    schedule = dict(peak=1e-2, warmup_steps=2, total_steps=6, min_ratio=0.2)
    ours_vars, theirs_vars = _variables(0), _variables(0)
    ours, rate = AdamW(ours_vars), warmup_cosine(**schedule)
    theirs = keras.optimizers.AdamW(
        learning_rate=keras.optimizers.schedules.CosineDecay(
            0.0, decay_steps=4, alpha=0.2, warmup_target=1e-2, warmup_steps=2
        ),
        weight_decay=0.05,
    )
    theirs.build(theirs_vars)
    rng = np.random.default_rng(1)
    for step in range(6):
        grads = [tf.constant(rng.standard_normal(v.shape).astype("float32")) for v in ours_vars]
        ours.apply(grads, ours_vars, learning_rate=rate(step), weight_decay=0.05)
        theirs.apply(grads, theirs_vars)
        for a, b in zip(ours_vars, theirs_vars, strict=True):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-5, atol=1e-7)
    assert int(ours.iterations) == 6


def test_closed_gate_changes_nothing_and_compiles():
    variables = _variables(2)
    optimizer = AdamW(variables)
    before = [v.numpy() for v in variables]
    grads = [tf.fill(v.shape, float("nan")) for v in variables]  # a non-finite update

    @tf.function(jit_compile=True)
    def step(grads, gate):
        optimizer.apply(grads, variables, learning_rate=0.1, weight_decay=0.1, gate=gate)

    step(grads, tf.constant(False))
    for value, old in zip(variables, before, strict=True):
        np.testing.assert_array_equal(value.numpy(), old)
    assert int(optimizer.iterations) == 0
    assert not np.any(optimizer.momentum.numpy())
    assert not np.any(optimizer.velocity.numpy())
    step([tf.ones_like(g) for g in grads], tf.constant(True))
    assert int(optimizer.iterations) == 1
    assert not np.allclose(variables[0].numpy(), before[0])


def test_rejects_variables_of_other_shapes():
    optimizer = AdamW(_variables(0))
    others = [tf.Variable(tf.zeros([2]))]
    with pytest.raises(ValueError, match="Expected variables of shapes"):
        optimizer.apply([tf.zeros([2])], others, learning_rate=0.1)
