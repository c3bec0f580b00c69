"""Pitch read off mel features (`mel_pitch`), and harmonics written into them
(`harmonic_ripple`, `ripple_depth`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from xtts_audio import (
    PITCH_RANGE,
    InputError,
    MelConfig,
    harmonic_ripple,
    mel_features,
    mel_pitch,
    ripple_depth,
)

CONFIG = MelConfig.from_preset("xtts")


def voice(f0: float, seconds: float = 0.5) -> np.ndarray:
    """A steady voiced sound: harmonics of `f0` falling 6 dB an octave, float32 [samples]."""
    rate = CONFIG.sample_rate
    t = np.arange(int(seconds * rate)) / rate
    harmonics = np.arange(1, int(4000 // f0) + 1)
    wave = sum(np.sin(2 * np.pi * k * f0 * t + k) / k for k in harmonics)
    return (0.3 * wave / np.abs(wave).max()).astype(np.float32)


def features(*waves: np.ndarray) -> np.ndarray:
    return mel_features(np.stack(waves), CONFIG).numpy()  # (B, F, M)


def test_the_pitch_of_a_voiced_sound_is_its_fundamental_not_an_octave_off(run):
    pitches = (95.0, 150.0, 235.0)
    pitch, harmonicity = run(lambda x: mel_pitch(x, CONFIG), features(*map(voice, pitches)))
    assert pitch.shape == harmonicity.shape == (3, 44)
    inner = slice(4, -4)  # frames whose window lies inside the sound
    for row, f0 in enumerate(pitches):
        assert np.median(pitch[row, inner]) == pytest.approx(f0, rel=0.04)
        assert np.all(harmonicity[row, inner] > 0.6)


def test_noise_and_silence_are_not_harmonic():
    noise = np.random.default_rng(0).normal(0, 0.1, CONFIG.sample_rate // 2).astype(np.float32)
    silence = np.zeros_like(noise)
    _, harmonicity = mel_pitch(features(noise, silence), CONFIG)
    # White noise matches some comb by chance (the best of 64 correlations), rarely well.
    assert np.median(harmonicity.numpy()[0]) < 0.45
    assert np.mean(harmonicity.numpy()[0] > 0.6) < 0.1
    assert np.all(harmonicity.numpy()[1] < 0.35)


def test_any_leading_axes_and_the_candidates_lie_in_the_pitch_range():
    mel = features(voice(120.0))  # (1, F, M)
    pitch, _ = mel_pitch(mel[0], CONFIG)  # (F, M) → (F,)
    batched, _ = mel_pitch(mel[None], CONFIG)  # (1, 1, F, M) → (1, 1, F)
    assert pitch.shape == (mel.shape[1],)
    np.testing.assert_array_equal(batched.numpy()[0, 0], pitch.numpy())
    assert PITCH_RANGE[0] <= pitch.numpy().min() <= pitch.numpy().max() <= PITCH_RANGE[1]


def test_a_written_ripple_is_read_back_at_its_pitch_and_depth():
    # A smooth frame (a voice's mel averaged over pitches) gains the ripple of each pitch:
    # mel_pitch reads that pitch, ripple_depth that depth, and the envelope barely moves.
    smooth = np.mean(features(*map(voice, np.geomspace(90.0, 300.0, 12))), axis=(0, 1))
    pitches = np.array([95.0, 180.0, 290.0], np.float32)
    ripple = harmonic_ripple(pitches, CONFIG).numpy()  # (3, M)
    assert ripple.shape == (3, CONFIG.n_mels)
    assert np.all(ripple[:, 60:] == 0.0)  # nothing above the 2.5 kHz band
    before = ripple_depth(np.tile(smooth, [3, 1]), pitches, CONFIG).numpy()
    written = smooth + (6.0 - before)[:, None] * ripple  # (3, M): depth 6 each
    pitch, harmonicity = mel_pitch(written, CONFIG)
    np.testing.assert_allclose(pitch, pitches, rtol=0.02)
    assert np.all(harmonicity.numpy() > 0.8)  # steady voiced speech: 0.6-0.9
    np.testing.assert_allclose(ripple_depth(written, pitches, CONFIG), 6.0, rtol=1e-3)
    envelope = np.convolve(np.mean(written - smooth, axis=0), np.ones(9) / 9, mode="valid")
    assert np.abs(envelope).max() < 0.2


def test_bad_features_and_recipes_are_refused():
    with pytest.raises(InputError, match=r"n_mels=80.*shape=\(1, 4, 64\)"):
        mel_pitch(np.zeros([1, 4, 64], np.float32), CONFIG)
    with pytest.raises(InputError, match=r"n_mels=80.*shape=\(4, 64\)"):
        ripple_depth(np.zeros([4, 64], np.float32), np.full([4], 100.0), CONFIG)
    coarse = dataclasses.replace(CONFIG, n_mels=8)
    with pytest.raises(InputError, match=r"at least 8 mel bins below 2500 Hz"):
        mel_pitch(np.zeros([1, 4, 8], np.float32), coarse)
