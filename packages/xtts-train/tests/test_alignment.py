"""The guided-attention loss and the alignment score: known values, and blind to padding
(the same utterance gives the same value in any bucket)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from test_model import DETERMINISTIC, make_batch, tiny_model

from xtts_train.models.text_to_mel.alignment import alignment_score, guided_attention_loss
from xtts_train.models.text_to_mel.losses import total_loss


def _diagonal(frames: int, tokens: int) -> np.ndarray:
    """Each frame on the token at the same share of the text: (1, F, T)."""
    peaks = np.arange(frames) * tokens // frames
    return np.eye(tokens)[peaks][None]


def _masks(frames: int, tokens: int, real_frames: int | None = None,
           real_tokens: int | None = None):  # fmt: skip
    real_frames = frames if real_frames is None else real_frames
    real_tokens = tokens if real_tokens is None else real_tokens
    token_mask = (np.arange(tokens) < real_tokens)[None].astype(np.float32)
    mel_mask = (np.arange(frames) < real_frames)[None].astype(np.float32)
    return token_mask, mel_mask


def _score(attention, token_mask, mel_mask) -> float:
    return float(alignment_score(tf.constant(attention, tf.float32), token_mask, mel_mask)[0])


def test_a_diagonal_scores_one_and_costs_almost_nothing():
    attention = _diagonal(40, 10)
    token_mask, mel_mask = _masks(40, 10)
    assert _score(attention, token_mask, mel_mask) == pytest.approx(1.0)
    loss = float(guided_attention_loss(attention, token_mask, mel_mask, sigma=0.2))
    assert loss < 0.05


@pytest.mark.parametrize(("name", "expected"), [("uniform", 1 / 10**2), ("stuck", 1 / 10)])
def test_spread_or_stuck_attention_scores_low(name, expected):
    token_mask, mel_mask = _masks(40, 10)
    attention = np.full((1, 40, 10), 0.1) if name == "uniform" else _diagonal(40, 1)
    if name == "stuck":
        attention = np.pad(attention, [(0, 0), (0, 0), (0, 9)])  # every frame on token 0
    assert _score(attention, token_mask, mel_mask) == pytest.approx(expected)


def test_attention_that_jumps_back_loses_monotonicity():
    token_mask, mel_mask = _masks(40, 10)
    reversed_ = _diagonal(40, 10)[:, ::-1]
    assert _score(reversed_, token_mask, mel_mask) < 0.1
    anti = float(guided_attention_loss(reversed_, token_mask, mel_mask, sigma=0.2))
    assert anti > 0.5


def test_attention_on_the_speaker_latents_costs_like_attention_off_the_diagonal():
    token_mask, mel_mask = _masks(40, 10)
    on_text = float(guided_attention_loss(_diagonal(40, 10), token_mask, mel_mask, sigma=0.2))
    half = float(guided_attention_loss(0.5 * _diagonal(40, 10), token_mask, mel_mask, sigma=0.2))
    assert half == pytest.approx(0.5 * on_text + 0.5)  # half of every row on the latents


def test_padding_changes_neither_value():
    attention = _diagonal(30, 7) * 0.8  # the rest of each row went to the speaker latents
    token_mask, mel_mask = _masks(30, 7)
    padded = np.pad(attention, [(0, 0), (0, 18), (0, 5)])
    padded[:, 30:] = 0.05  # whatever padded frames and tokens hold
    padded[:, :, 7:] = 0.01
    big_tokens, big_frames = _masks(48, 12, real_frames=30, real_tokens=7)
    for function in (_score, lambda *a: float(guided_attention_loss(*a, sigma=0.2))):
        assert function(attention, token_mask, mel_mask) == pytest.approx(
            function(padded, big_tokens, big_frames), rel=1e-6
        )


def _pad_batch(batch, text_len: int, frames: int):
    """The same utterances in a bigger bucket: zeros beyond the old shapes (stop targets 1)."""
    padded = {}
    for name, value in batch.items():
        value = value.numpy()
        widths = [(0, 0)] * value.ndim
        if name in ("tokens", "token_mask"):
            widths[1] = (0, text_len - value.shape[1])
        elif name in ("mel", "mel_mask", "stop_targets"):
            widths[1] = (0, frames - value.shape[1])
        fill = 1.0 if name == "stop_targets" else 0
        padded[name] = tf.constant(np.pad(value, widths, constant_values=fill), batch[name].dtype)
    return padded


@pytest.mark.parametrize("r", [1, 3])
def test_the_same_utterances_give_the_same_values_in_any_bucket(r):
    model = tiny_model(**DETERMINISTIC, reduction_factor=r)
    batch = make_batch(model.config, text_len=8, frames=16)
    bigger = _pad_batch(batch, text_len=13, frames=28)
    values = [total_loss(model(b), b, guided_weight=1.0) for b in (batch, bigger)]
    for name in ("guided_attention", "alignment", "loss"):
        assert float(values[0][name]) == pytest.approx(float(values[1][name]), rel=1e-4)
    assert float(values[0]["guided_attention"]) > 0
