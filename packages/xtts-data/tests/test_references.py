"""The reference bank: chosen per speaker, capped in size, never the row itself."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from xtts_data import _references as refs


def test_choose_prefers_early_shards_and_skips_lone_speakers():
    speakers = np.array([0, 0, 0, 1, 2, 2])
    order = np.array([5, 1, 3, 0, 2, 2])
    chosen = refs.choose_references(speakers, order, per_speaker=2)
    assert sorted(chosen.tolist()) == [1, 2, 4, 5]  # speaker 0: shards 1 and 3; 1 is alone


def test_per_speaker_limit_keeps_the_bank_small():
    assert refs.per_speaker_limit(4, 10, 128, 80) == 4
    many = refs.per_speaker_limit(4, 5000, 128, 80)
    assert many == 1  # 5000 speakers: one reference each, at least


def _bank():
    mels = [np.full((10, 3), float(i), np.float32) for i in range(4)]  # speaker 0: 0,1; 1: 2,3
    keys = np.array([100, 101, 102, 103])
    return refs.make_bank(mels, np.array([0, 0, 1, 1]), keys, 3, cond_frames=4, n_mels=3)


def test_bank_never_returns_the_row_itself():
    bank = _bank()
    for u in np.linspace(0, 0.99, 7):
        mel, lengths, found = refs.from_bank(
            bank, tf.constant([0, 1, 1]), tf.constant([100, 103, 999], tf.int64),
            tf.constant([u, u, u], tf.float32),
        )  # fmt: skip
        values = mel.numpy()[:, 0, 0]
        assert values[0] == 1.0  # speaker 0's other reference
        assert values[1] == 2.0
        assert values[2] in (2.0, 3.0)
        assert found.numpy().all()
        assert (lengths.numpy() == 4).all()


def test_speaker_without_references_is_not_found():
    _, _, found = refs.from_bank(
        _bank(), tf.constant([2]), tf.constant([5], tf.int64), tf.constant([0.5])
    )
    assert not found.numpy()[0]
