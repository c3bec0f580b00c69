"""Pitch read off mel features (`mel_pitch`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from xtts_audio import PITCH_RANGE, InputError, MelConfig, mel_features, mel_pitch

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


def test_bad_features_and_recipes_are_refused():
    with pytest.raises(InputError, match=r"n_mels=80.*shape=\(1, 4, 64\)"):
        mel_pitch(np.zeros([1, 4, 64], np.float32), CONFIG)
    coarse = dataclasses.replace(CONFIG, n_mels=8)
    with pytest.raises(InputError, match=r"at least 8 mel bins below 2500 Hz"):
        mel_pitch(np.zeros([1, 4, 8], np.float32), coarse)
