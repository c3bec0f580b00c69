"""`xtts_train.models.dropout`: byte-drawn masks keep the rate, the expectation and the seeds'
determinism of Keras's dropout, and compile under XLA."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from xtts_train import ConfigError
from xtts_train.models.attention import MultiHeadAttention
from xtts_train.models.dropout import Dropout, keep_mask, quantized_rate


@pytest.mark.parametrize(("rate", "expected"), [(0.0, 0.0), (0.1, 26 / 256), (0.5, 0.5),
                                                (0.001, 0.0), (0.999, 255 / 256)])  # fmt: skip
def test_quantized_rate_rounds_to_a_byte_level_below_one(rate, expected):
    assert quantized_rate(rate) == expected


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_keep_mask_drops_the_quantized_share(rate):
    keep = keep_mask([256, 257], rate, keras.random.SeedGenerator(3)).numpy()  # odd count
    assert keep.shape == (256, 257)
    assert keep.dtype == bool
    # 65,792 draws: the binomial's standard deviation is below 0.002.
    assert abs((~keep).mean() - quantized_rate(rate)) < 0.01


def test_dropout_keeps_the_expectation_and_is_identity_outside_training():
    layer = Dropout(0.1)
    x = tf.ones([128, 512])
    y = layer(x, training=True).numpy()
    kept = y[y != 0]
    np.testing.assert_allclose(kept, 1 / (1 - 26 / 256), rtol=1e-6)
    assert abs(y.mean() - 1.0) < 0.01
    assert layer(x, training=False) is x
    assert Dropout(0.0)(x, training=True) is x


def test_the_same_seed_state_draws_the_same_mask_and_each_call_moves_it():
    layer = Dropout(0.3)
    x = tf.ones([64, 64])
    state = layer.seed_generator.state.numpy()
    first, second = layer(x, training=True).numpy(), layer(x, training=True).numpy()
    assert not np.array_equal(first, second)
    layer.seed_generator.state.assign(state)
    np.testing.assert_array_equal(layer(x, training=True).numpy(), first)


def test_dropout_compiles_under_xla_with_the_same_rate():
    layer = Dropout(0.5)
    step = tf.function(lambda x: layer(x, training=True), jit_compile=True)
    y = step(tf.ones([200, 300])).numpy()
    assert abs((y == 0).mean() - 0.5) < 0.01
    assert set(np.unique(y)) == {0.0, 2.0}


@pytest.mark.parametrize("rate", [-0.1, 1.0])
def test_dropout_refuses_a_rate_outside_zero_to_one(rate):
    with pytest.raises(ConfigError, match="rate in \\[0, 1\\)"):
        Dropout(rate)


def test_attention_probabilities_are_dropped_by_byte_dropout():
    layer = MultiHeadAttention(2, 4, dropout=0.5)
    x = tf.random.stateless_normal([2, 6, 8], seed=[0, 1])
    out = layer(x, x, training=False)
    assert isinstance(layer._dropout_layer, Dropout)
    assert not np.allclose(layer(x, x, training=True).numpy(), out.numpy())
    np.testing.assert_array_equal(layer(x, x, training=False).numpy(), out.numpy())
