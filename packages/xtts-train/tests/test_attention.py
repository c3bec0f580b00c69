"""Blocked self-attention (`model.attention_block`): the same loss and gradients as the
dense product, and a recomputation that draws the dropout masks the forward pass drew."""

import numpy as np
import pytest
import tensorflow as tf

from xtts_train.config import ModelConfig
from xtts_train.errors import ConfigError
from xtts_train.models.attention import MultiHeadAttention, blocked_attention
from xtts_train.models.text_to_mel.model import TextToMel, dummy_batch


def _batch(config: ModelConfig) -> dict:
    """Two rows, the second padded (text, reference and frames), 40 frames."""
    batch = dummy_batch(config, batch_size=2, text_len=10, frames=40, cond_frames=12)
    batch["tokens"] = tf.random.stateless_uniform([2, 10], [3, 4], minval=2, maxval=30,
                                                  dtype=tf.int32)  # fmt: skip
    batch["token_mask"] = tf.sequence_mask([10, 7], 10, tf.float32)
    batch["cond_mel"] = tf.random.stateless_normal([2, 12, config.n_mels], [5, 6]) - 5.0
    batch["cond_lengths"] = tf.constant([12, 9])
    batch["mel"] = tf.random.stateless_normal([2, 40, config.n_mels], [1, 2]) - 5.0
    batch["mel_mask"] = tf.sequence_mask([40, 31], 40, tf.float32)
    return batch


def _loss_and_gradients(model: TextToMel, batch: dict) -> tuple[float, list[np.ndarray]]:
    with tf.GradientTape() as tape:
        out = model(batch, training=True)
        loss = tf.reduce_mean(tf.square(out["mel_after"] - batch["mel"]))
        loss += tf.reduce_mean(tf.square(out["attention"]))
    grads = tape.gradient(loss, model.trainable_variables)
    return float(loss), [np.zeros(v.shape) if g is None else tf.convert_to_tensor(g).numpy()
                         for g, v in zip(grads, model.trainable_variables, strict=True)]  # fmt: skip


def test_blocked_attention_gives_the_dense_loss_and_gradients():
    # Blocks of 4: the text (10), the reference (12) and the frames (40, causal) all split,
    # into full blocks and a shorter last one, with padded keys in every encoder.
    dense_config = ModelConfig(dropout=0.0, prenet_dropout=0.0)
    blocked_config = ModelConfig(dropout=0.0, prenet_dropout=0.0, attention_block=4)
    batch = _batch(dense_config)
    dense, blocked = TextToMel(dense_config), TextToMel(blocked_config)
    dense(batch), blocked(batch)
    blocked.set_weights(dense.get_weights())
    loss, grads = _loss_and_gradients(dense, batch)
    blocked_loss, blocked_grads = _loss_and_gradients(blocked, batch)
    assert blocked_loss == pytest.approx(loss, rel=1e-6)
    # Absolute tolerance at float32 round-off of the largest gradient: the key biases' true
    # gradient is 0 (a softmax ignores a constant added to every score), so theirs is noise.
    scale = max(np.abs(g).max() for g in grads)
    for got, want in zip(blocked_grads, grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale)


def test_blocked_and_dense_outputs_agree_outside_training():
    # Attention dropout on (off outside training); the prenet's is on in any case.
    config = ModelConfig(prenet_dropout=0.0, attention_block=4)
    batch = _batch(config)
    dense, blocked = TextToMel(ModelConfig(prenet_dropout=0.0)), TextToMel(config)
    dense(batch), blocked(batch)
    blocked.set_weights(dense.get_weights())
    np.testing.assert_allclose(blocked(batch)["mel_after"].numpy(),
                               dense(batch)["mel_after"].numpy(), atol=1e-4)  # fmt: skip


@pytest.mark.parametrize("causal", [True, False])
def test_recomputed_blocks_draw_the_forward_pass_dropout_masks(causal):
    query, key, value = (tf.random.stateless_normal([2, 11, 2, 4], [i, 7]) for i in range(3))
    mask = tf.linalg.band_part(tf.ones([1, 11, 11], tf.bool), -1, 0) if causal else None
    seed = tf.constant([8, 9])

    def run(recompute: bool, rate: float) -> tuple[np.ndarray, list[np.ndarray]]:
        with tf.GradientTape() as tape:
            tape.watch([query, key, value])
            out = blocked_attention(query, key, value, mask, block=3, causal=causal,
                                    rate=rate, seed=seed, recompute=recompute)  # fmt: skip
            loss = tf.reduce_sum(out * tf.range(11, dtype=tf.float32)[None, :, None, None])
        return out.numpy(), [g.numpy() for g in tape.gradient(loss, [query, key, value])]

    out, grads = run(recompute=True, rate=0.5)
    kept_out, kept_grads = run(recompute=False, rate=0.5)
    np.testing.assert_allclose(out, kept_out, rtol=1e-6)
    for got, want in zip(grads, kept_grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(out, run(recompute=True, rate=0.0)[0])  # dropout did drop


def test_a_causal_blocked_layer_matches_keras_causal_attention():
    x = tf.random.stateless_normal([2, 9, 8], [1, 1])
    dense = MultiHeadAttention(2, 4, causal=True)
    blocked = MultiHeadAttention(2, 4, causal=True, block=2)
    dense(x, x, use_causal_mask=True), blocked(x, x, use_causal_mask=True)
    blocked.set_weights(dense.get_weights())
    np.testing.assert_allclose(blocked(x, x, use_causal_mask=True).numpy(),
                               dense(x, x, use_causal_mask=True).numpy(), atol=1e-6)  # fmt: skip


@pytest.mark.parametrize("block", [-1, 1.5, True])
def test_attention_block_is_an_int_at_least_zero(block):
    with pytest.raises(ConfigError, match="attention_block"):
        ModelConfig(attention_block=block)
    with pytest.raises(ConfigError, match="block"):
        MultiHeadAttention(2, 4, block=block)
