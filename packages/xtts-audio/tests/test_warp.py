"""Frequency warping of mel features (`mel_warp_positions`, `warp_mel`)."""

from __future__ import annotations

import numpy as np
import pytest

from xtts_audio import InputError, MelConfig, mel_spectrogram, mel_warp_positions, warp_mel
from xtts_audio._filters import mel_edges, mel_to_hz

CONFIG = MelConfig.from_preset("xtts")


def test_a_factor_of_one_reads_every_bin_where_it_is(run):
    positions = mel_warp_positions(CONFIG, [1.0])
    np.testing.assert_allclose(positions[0], np.arange(CONFIG.n_mels), atol=1e-4)
    mel = np.random.default_rng(0).normal(size=[1, 7, CONFIG.n_mels]).astype(np.float32)
    np.testing.assert_allclose(run(warp_mel, mel, positions), mel, atol=1e-4)


@pytest.mark.parametrize("factor", [0.8, 1.25])
def test_a_tone_moves_to_the_bin_of_its_scaled_frequency(run, factor):
    rate = CONFIG.sample_rate
    t = np.arange(rate) / rate
    tone, moved = (np.sin(2 * np.pi * f * t).astype(np.float32) for f in (1500, 1500 * factor))
    mel = np.log(mel_spectrogram(np.stack([tone, moved]), CONFIG).numpy() + 1e-6)  # (2, F, M)
    warped = run(warp_mel, mel[:1], mel_warp_positions(CONFIG, [factor]))
    peak = lambda x: int(np.argmax(x[0, 20:-20].mean(axis=0)))  # noqa: E731
    assert peak(warped) == peak(mel[1:])  # the warped tone lies where the moved tone does
    assert peak(warped) != peak(mel[:1])


def test_rows_are_warped_each_by_its_own_factor_and_padding_stays(run):
    rng = np.random.default_rng(1)
    mel = rng.normal(size=[3, 5, CONFIG.n_mels]).astype(np.float32)
    mel[:, -1] = -11.5  # a padded frame: constant across bins
    factors = [0.9, 1.0, 1.1]
    positions = mel_warp_positions(CONFIG, factors)
    together = run(warp_mel, mel, positions)
    for i in range(3):
        alone = run(warp_mel, mel[i : i + 1], positions[i : i + 1])
        np.testing.assert_allclose(together[i], alone[0], atol=1e-5)
    np.testing.assert_allclose(together[:, -1], -11.5, atol=1e-5)
    np.testing.assert_allclose(together[1], mel[1], atol=1e-4)
    assert not np.allclose(together[0], mel[0], atol=1e-2)


def test_positions_stay_within_the_bins_and_read_higher_for_a_lower_voice():
    positions = mel_warp_positions(CONFIG, [0.5, 2.0])
    assert positions.shape == (2, CONFIG.n_mels)
    assert positions.dtype == np.float32
    assert positions.min() >= 0
    assert positions.max() <= CONFIG.n_mels - 1
    centres = mel_to_hz(mel_edges(CONFIG)[1:-1], htk=CONFIG.htk)
    # bin 40 of a voice lowered by half reads the bin whose centre is at twice its frequency
    twice = np.interp(2 * centres[40], centres, np.arange(CONFIG.n_mels))  # Hz-linear: ~
    assert positions[0, 40] == pytest.approx(twice, abs=1e-2)
    assert np.all(np.diff(positions[1]) >= 0)


@pytest.mark.parametrize("factors", [[0.0], [-1.0], [float("nan")]])
def test_a_factor_that_is_not_positive_is_refused(factors):
    with pytest.raises(InputError, match=r"Expected warp factors > 0"):
        mel_warp_positions(CONFIG, factors)
