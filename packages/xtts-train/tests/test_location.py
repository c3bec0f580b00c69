"""Location-relative alignment (`models/text_to_mel/location.py`), the forward-sum
alignment loss and the beta-binomial prior (`alignment.py`): known values, the position's
rules, and how training uses them."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import tensorflow as tf
from test_model import DETERMINISTIC, RELATIVE, make_batch, tiny_model

from xtts_train.config import DecodeConfig, ModelConfig, TextToMelConfig
from xtts_train.errors import ConfigError
from xtts_train.models.text_to_mel.alignment import beta_binomial_prior, forward_sum_loss
from xtts_train.models.text_to_mel.free_running import infer
from xtts_train.models.text_to_mel.location import REACH, Aligner, move_limit, relative_bias
from xtts_train.models.text_to_mel.losses import total_loss
from xtts_train.tasks.text_to_mel import TextToMelTask


def test_a_bias_table_is_read_by_linear_interpolation_and_held_at_its_ends():
    table = tf.range(2 * REACH + 1, dtype=tf.float32) * 10.0  # distance d -> 10 (d + REACH)
    distance = tf.constant([[[-1.0, 0.0, 0.25, 2.5, REACH + 3.0, -REACH - 7.0]]])
    bias = relative_bias(table, distance).numpy()[0, 0]
    expected = 10.0 * (np.array([-1.0, 0.0, 0.25, 2.5, REACH, -REACH]) + REACH)
    np.testing.assert_allclose(bias, expected, rtol=1e-6)
    heads = tf.stack([table, -table])  # (N, K): one table a head -> (B, N, Q, T)
    both = relative_bias(heads, distance).numpy()
    assert both.shape == (1, 2, 1, 6)
    np.testing.assert_allclose(both[0, 1, 0], -expected, rtol=1e-6)


def _aligner(r: int = 1) -> Aligner:
    aligner = Aligner(ModelConfig.from_preset("tiny", reduction_factor=r, **RELATIVE))
    aligner.read(tf.zeros([1, 1, 128]), tf.zeros([1, 1, 64]))  # builds the projections
    return aligner


@pytest.mark.parametrize("r", [1, 4])
def test_the_position_moves_only_forward_by_at_most_the_limit_and_stops_at_the_last_symbol(r):
    aligner, limit = _aligner(r), move_limit(r)
    assert limit == max(1.0, 0.5 * r)
    aligner.rate.bias.assign([3.0])  # moves near the limit: the end comes within the steps
    keys = tf.constant(np.random.default_rng(0).normal(size=(2, 8, 64)), tf.float32)
    text_mask = tf.constant([[True] * 6 + [False] * 2, [True] * 8])
    rng = np.random.default_rng(1)
    position, places = tf.zeros([2]), []
    for _ in range(40):  # decoder states that pull anywhere
        hidden = tf.constant(rng.normal(0.0, 5.0, (2, 1, 128)), tf.float32)
        weights, moved = aligner.step(hidden, keys, text_mask, position)
        step = (moved - position).numpy()
        assert (step >= 0).all()
        assert (step <= limit + 1e-6).all()
        np.testing.assert_allclose(weights.numpy().sum(axis=-1), 1.0, rtol=1e-5)
        assert (weights.numpy()[0, :, 6:] == 0).all()  # padding never attended
        position = moved
        places.append(moved.numpy())
    places = np.array(places)  # (steps, B)
    before_the_end = places[:-1] < [5.0, 7.0]
    assert (np.diff(places, axis=0)[before_the_end] > 0).all()  # a move every step
    assert places[-1].tolist() == [5.0, 7.0]  # each row's last symbol, never past it


def test_teacher_forcing_runs_the_moves_decoding_runs():
    aligner = _aligner()
    hidden = tf.constant(np.random.default_rng(1).normal(size=(2, 7, 128)), tf.float32)
    keys = tf.constant(np.random.default_rng(2).normal(size=(2, 5, 64)), tf.float32)
    text_mask = tf.constant([[True] * 5, [True] * 3 + [False] * 2])
    weights, places = aligner(hidden, keys, text_mask)  # (B, S, T), (B, S)
    position = tf.zeros([2])
    for s in range(7):  # one step at a time, as the decoding loop runs it
        np.testing.assert_allclose(position, places[:, s], atol=1e-5)
        row, position = aligner.step(hidden[:, s : s + 1], keys, text_mask, position)
        np.testing.assert_allclose(row[:, 0], weights[:, s], atol=1e-6)


def test_a_relative_model_s_alignment_is_its_alignment_layer_s_and_trains_every_table():
    model = tiny_model(**DETERMINISTIC, **RELATIVE, reduction_factor=2)
    batch = make_batch(model.config)
    with tf.GradientTape() as tape:
        outputs = model(batch, training=True)
        loss = total_loss(outputs, batch, guided_weight=1.0)["loss"]
    attention = outputs["attention"].numpy()  # (B, F, T): the layer's rows, one a step
    np.testing.assert_allclose(attention[0].sum(axis=1), 1.0, rtol=1e-5)
    assert (attention[1, :, 5:] == 0).all()  # row 1 has 5 real symbols
    aligner = model.decoder.aligner
    grads = tape.gradient(loss, [aligner.table, aligner.cross_tables, aligner.ending])
    assert all(float(tf.norm(g)) > 0 for g in grads)


def test_the_symbols_left_vector_is_read_by_linear_interpolation_and_zero_past_the_end():
    aligner = _aligner()
    table = np.random.default_rng(3).normal(size=aligner.ending.shape).astype(np.float32)
    aligner.ending.assign(table)
    text_mask = tf.constant([[True] * 12, [True] * 4 + [False] * 8])  # last symbols 11, 3
    positions = tf.constant([[0.0, 8.5, 11.0], [0.0, 2.25, 3.0]])
    left = aligner.left(positions, text_mask).numpy()  # (B, Q, D)
    np.testing.assert_allclose(left[0, 0], table[REACH], rtol=1e-6)  # 11 left: held at REACH
    np.testing.assert_allclose(left[0, 1], 0.5 * table[2] + 0.5 * table[3], atol=1e-6)
    np.testing.assert_allclose(left[:, 2], [table[0], table[0]], rtol=1e-6)  # at the end
    np.testing.assert_allclose(left[1, 0], table[3], rtol=1e-6)
    np.testing.assert_allclose(left[1, 1], 0.25 * table[0] + 0.75 * table[1], atol=1e-6)


def test_the_stop_gate_of_a_relative_model_waits_for_the_position():
    model = tiny_model(**DETERMINISTIC, **RELATIVE, reduction_factor=2)
    batch = make_batch(model.config)
    model(batch)
    model.stop_head.bias.assign([20.0, 20.0])  # the stop token fires at every frame
    model.decoder.aligner.rate.bias.assign([-30.0])  # the position stays at symbol 0
    args = [batch[k] for k in ("tokens", "token_mask", "cond_mel", "cond_lengths")]
    free = infer(model, *args, max_frames=12)
    gated = infer(model, *args, max_frames=12, decode=DecodeConfig(stop_gate=2))
    assert free["lengths"].numpy().tolist() == [1, 1]
    assert gated["lengths"].numpy().tolist() == [12, 12]  # symbol 0 is never near the end


def _paths(steps: int, symbols: int) -> int:
    """Monotonic paths from symbol 0 to symbol `symbols - 1` in `steps` steps of 0-2 moves."""
    return sum(sum(m) == symbols - 1 for m in itertools.product((0, 1, 2), repeat=steps - 1))


def test_the_forward_sum_is_zero_on_a_one_hot_diagonal_and_counts_every_path():
    ones = tf.ones
    assert float(forward_sum_loss(tf.eye(4)[None], ones([1, 4]), ones([1, 4]))) == 0.0
    uniform = tf.fill([1, 5, 3], 1 / 3)  # every path has probability 3^-5
    expected = -(math.log(_paths(5, 3)) - 5 * math.log(3)) / 3  # per symbol
    assert float(forward_sum_loss(uniform, ones([1, 3]), ones([1, 5]))) == pytest.approx(
        expected, rel=1e-5)  # fmt: skip
    # padded steps and symbols change nothing; with r = 2 one row in two is a step's
    padded = np.zeros([1, 7, 5], np.float32)
    padded[0, :5, :3] = 1 / 3
    masks = tf.constant([[1, 1, 1, 0, 0.0]]), tf.constant([[1.0] * 5 + [0.0] * 2])
    assert float(forward_sum_loss(padded, *masks)) == pytest.approx(expected, rel=1e-5)
    repeated = tf.repeat(uniform, 2, axis=1)  # (1, 10, 3)
    value = forward_sum_loss(repeated, ones([1, 3]), ones([1, 10]), reduction_factor=2)
    assert float(value) == pytest.approx(expected, rel=1e-5)


def test_the_forward_sum_rewards_a_monotonic_alignment_over_one_that_jumps_back():
    forward = np.eye(6)[[0, 1, 2, 3, 4, 5]][None] * 0.9 + 0.1 / 6
    back = np.eye(6)[[0, 1, 4, 2, 3, 5]][None] * 0.9 + 0.1 / 6
    ones = tf.ones
    kept, lost = (float(forward_sum_loss(x, ones([1, 6]), ones([1, 6]))) for x in (forward, back))
    assert kept < lost / 5  # measured 0.064 against 0.62


def _betabinom_logpmf(k: int, n: int, a: float, b: float) -> float:
    def log_beta(x: float, y: float) -> float:
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)

    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + log_beta(k + a, n - k + b) - log_beta(a, b))  # fmt: skip


def test_the_prior_is_the_beta_binomial_of_each_step_over_the_real_symbols():
    token_mask = tf.constant([[1, 1, 1, 1, 1, 0, 0.0]])
    mel_mask = tf.constant([[1.0] * 9 + [0.0] * 3])  # 9 real frames: 5 steps of 2
    prior = beta_binomial_prior(token_mask, mel_mask, reduction_factor=2).numpy()[0]
    assert prior.shape == (6, 7)
    expected = [[_betabinom_logpmf(k, 4, i, 5 - i + 1) for k in range(5)] for i in range(1, 6)]
    np.testing.assert_allclose(prior[:5, :5], expected, atol=1e-5)
    np.testing.assert_allclose(np.exp(prior[:5, :5]).sum(axis=1), 1.0, rtol=1e-5)
    assert (prior[5:] == 0).all()  # padded steps and symbols: nothing added
    assert (prior[:, 5:] == 0).all()
    assert np.argmax(prior[0, :5]) == 0  # a soft diagonal
    assert np.argmax(prior[4, :5]) == 4


@pytest.mark.parametrize("overrides", [{}, RELATIVE], ids=["content", "relative"])
def test_the_prior_moves_the_alignment_toward_the_diagonal(overrides):
    model = tiny_model(**DETERMINISTIC, **overrides)
    batch = make_batch(model.config)
    free, guided = (model(batch, prior=prior)["attention"].numpy()[0] for prior in (False, True))
    symbols = np.arange(8)
    diagonal = np.arange(16) * 8 / 16  # row 0: 16 frames over 8 symbols

    def distance(attention: np.ndarray) -> float:  # expected symbol's distance from it
        expected = (attention * symbols).sum(axis=1) / attention.sum(axis=1)
        return float(np.abs(expected - diagonal).mean())

    assert distance(guided) < distance(free)


def test_the_task_adds_the_forward_sum_and_the_prior_only_when_asked():
    model = tiny_model(**DETERMINISTIC, **RELATIVE, dropout=0.0)  # two calls, the same
    batch = make_batch(model.config)
    off = TextToMelTask(model, TextToMelConfig())
    on = TextToMelTask(model, TextToMelConfig(forward_sum_weight=0.5, alignment_prior=True))
    assert "forward_sum" not in off.losses(batch, off.settings(), training=True)
    losses = on.losses(batch, on.settings(), training=True)
    plain = total_loss(model(batch, training=True, prior=True), batch,
                       **_weights(on.settings()))  # fmt: skip
    assert float(losses["forward_sum"]) > 0
    assert float(losses["loss"]) == pytest.approx(
        float(plain["loss"]) + 0.5 * float(losses["forward_sum"]), rel=1e-5
    )
    evaluated = on.losses(batch, on.settings(), training=False)  # no prior in evaluation
    np.testing.assert_allclose(
        evaluated["mel_before"], total_loss(model(batch), batch)["mel_before"]
    )
    assert on.trace_settings()["forward_sum"]
    assert on.trace_settings()["alignment_prior"]
    assert "forward_sum" not in off.trace_settings()


def _weights(values: dict[str, float]) -> dict[str, float]:
    return dict(stop_weight=values["stop_weight"], pos_weight=values["stop_pos_weight"],
                guided_weight=values["guided_attention_weight"],
                guided_sigma=values["guided_attention_sigma"])  # fmt: skip


@pytest.mark.parametrize(("overrides", "match"), [
    (dict(forward_sum_weight=-1.0), "forward_sum_weight=-1.0"),
    (dict(alignment_prior="yes"), "alignment_prior='yes'"),
])  # fmt: skip
def test_bad_alignment_settings_are_named(overrides, match):
    with pytest.raises(ConfigError, match=match):
        TextToMelConfig(**overrides)


def test_own_frames_feed_some_steps_the_model_s_own_prediction():
    batch_model = tiny_model(**DETERMINISTIC, **RELATIVE, dropout=0.0, reduction_factor=2)
    batch = make_batch(batch_model.config)
    plain = batch_model(batch, training=True)
    own = tiny_model(**DETERMINISTIC, **RELATIVE, dropout=0.0, reduction_factor=2,
                     own_frames=0.5)  # fmt: skip
    own(batch)  # built: the same weights as the plain model's
    own.set_weights(batch_model.get_weights()[: len(own.get_weights())])
    mixed = own(batch, training=True)["mel_before"].numpy()
    teacher = own(batch, training=False)["mel_before"].numpy()  # no first pass out of training
    np.testing.assert_allclose(teacher, batch_model(batch)["mel_before"], atol=1e-5)
    assert not np.allclose(mixed, plain["mel_before"], atol=1e-4)  # some inputs were its own
    with tf.GradientTape() as tape:
        loss = total_loss(own(batch, training=True), batch)["loss"]
    grads = tape.gradient(loss, own.trainable_variables)
    assert all(g is not None for g in grads)
    with pytest.raises(ConfigError, match="own_frames"):
        ModelConfig(own_frames=1.0)
