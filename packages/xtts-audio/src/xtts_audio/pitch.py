"""Pitch from mel features: where a frame's harmonics lie, read off its low mel bins.

Below a few kHz a mel filterbank is narrow enough to resolve the harmonics of a voice
(with the XTTS recipe, 22-60 Hz between bins below 1.5 kHz), so a voiced frame's log-mel
ripples with its pitch. `mel_pitch` compares that ripple with the ripple of an ideal
harmonic comb at each of a grid of candidate pitches, put through the same filterbank
(a harmonic sieve): the best-matching candidate is the frame's pitch, and the match, a
correlation, says how harmonic the frame is. Candidates an octave above or below match a
comb's ripple about as poorly as any other (half their teeth fall between its harmonics),
so the sieve does not jump octaves as autocorrelation does. It reads the features a cache
holds, so a model can use it in its compiled step; it is a coarse measure (candidates 3%
apart), for a voice's pitch over an utterance more than a melody.
"""

from __future__ import annotations

import functools

import numpy as np
import tensorflow as tf

from xtts_audio._filters import mel_edges, mel_filterbank, mel_to_hz
from xtts_audio.config import MelConfig
from xtts_audio.errors import InputError
from xtts_audio.spectral import denormalize

__all__ = ["PITCH_RANGE", "mel_pitch"]

PITCH_RANGE = (60.0, 500.0)  # Hz: the candidates span speech's pitch, men's to children's
_CANDIDATES = 64  # log-spaced over PITCH_RANGE: 3.4% apart
_BAND = 2500.0  # Hz: bins centred below it are read (a comb's harmonics fill the band)
_SMOOTH = 5  # bins: the envelope each log-mel row is detrended by is their moving mean
_COMB_FLOOR = 1e-3  # a comb's floor between its harmonics, relative to a harmonic's peak


def mel_pitch(features, config: MelConfig) -> tuple[tf.Tensor, tf.Tensor]:
    """Each frame's pitch, the harmonic comb its low mel bins match best.

    Args:
        features: float [..., frames, n_mels] in the recipe's feature scale (`normalize`'s).
        config: the recipe the features were made with.

    Returns:
        `pitch` float32 [..., frames] in Hz, one of 64 candidates log-spaced over
        `PITCH_RANGE`, and `harmonicity` float32 [..., frames] in [-1, 1]: the correlation
        of the frame's detrended log-mel with that candidate's comb. Voiced speech scores
        about 0.5-0.9, noise and silence near 0; read the pitch where it is high.

    Raises:
        InputError: features whose last axis is not `config.n_mels`, or a recipe with
            fewer than 8 mel bins below 2.5 kHz (too few to see harmonics in).
    """
    candidates, combs, _ = _sieve(config)
    ripple = tf.math.l2_normalize(_ripple(features, config), axis=-1, epsilon=1e-12)
    match = tf.linalg.matmul(ripple, combs, transpose_b=True)  # (..., F, K)
    best = tf.argmax(match, axis=-1, output_type=tf.int32)
    return tf.gather(candidates, best), tf.reduce_max(match, axis=-1)


def _ripple(features, config: MelConfig) -> tf.Tensor:
    """Each frame's log-mel over the bins below 2.5 kHz less its moving mean: float32
    [..., frames, low]."""
    features = tf.convert_to_tensor(features)
    if features.shape.rank is None or features.shape[-1] != config.n_mels:
        raise InputError(
            f"Expected features [..., frames, n_mels={config.n_mels}], received: "
            f"shape={features.shape}"
        )
    _, combs, detrend = _sieve(config)
    linear = denormalize(features, config)[..., : combs.shape[1]]  # (..., F, low)
    floor = float(config.amin) if config.amin else 1e-10
    return tf.linalg.matmul(tf.math.log(tf.maximum(linear, floor)), detrend)


@functools.lru_cache(maxsize=8)
def _sieve(config: MelConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The candidates float32 [K] in Hz, their combs through the filterbank, detrended and
    of unit norm, float32 [K, low], and the detrending matrix float32 [low, low]."""
    centres = mel_to_hz(mel_edges(config)[1:-1], htk=config.htk)
    low = int(np.sum(centres < _BAND))
    if low < 8:
        raise InputError(
            f"Expected at least 8 mel bins below {_BAND:.0f} Hz to read pitch from, "
            f"received: {low} (n_mels={config.n_mels}, fmin={config.fmin}, fmax={config.fmax})"
        )
    candidates = np.exp(np.linspace(*np.log(PITCH_RANGE), _CANDIDATES))
    filters = mel_filterbank(config)[:, :low]  # (n_freqs, low)
    hz = np.arange(filters.shape[0]) * config.sample_rate / config.n_fft
    width = config.sample_rate / config.n_fft  # a harmonic's lobe: about one FFT bin
    combs = []
    for f0 in candidates:
        harmonics = f0 * np.arange(1, int(_BAND // f0) + 2)
        power = np.exp(-0.5 * ((hz[:, None] - harmonics[None, :]) / width) ** 2).sum(axis=1)
        combs.append(np.log((power + _COMB_FLOOR) ** (config.power / 2.0) @ filters))
    detrend = _detrend_matrix(low)
    combs = np.asarray(combs) @ detrend
    combs /= np.linalg.norm(combs, axis=1, keepdims=True)
    # NumPy, not tensors: a cached tensor made while tracing would belong to that graph.
    return (candidates.astype(np.float32), combs.astype(np.float32),
            detrend.astype(np.float32))  # fmt: skip


def _detrend_matrix(bins: int) -> np.ndarray:
    """float64 [bins, bins]: a row vector times it is the row less its moving mean over
    `_SMOOTH` bins (the edge bins repeated past the ends)."""
    half = _SMOOTH // 2
    smooth = np.zeros((bins, bins))
    for out in range(bins):
        for offset in range(-half, half + 1):
            smooth[min(max(out + offset, 0), bins - 1), out] += 1.0 / _SMOOTH
    return np.eye(bins) - smooth
