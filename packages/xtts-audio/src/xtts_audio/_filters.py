"""Windows and mel filterbanks built once in float64 NumPy, as librosa builds them.

`tf.signal.linear_to_mel_weight_matrix` uses the HTK formula without Slaney normalisation
and drops the DC bin, so it cannot reproduce librosa's features; these can.
"""

from __future__ import annotations

import functools

import numpy as np

from xtts_audio.config import MelConfig
from xtts_audio.errors import ConfigError

_F_SP = 200.0 / 3  # Slaney scale: linear below 1 kHz with this many Hz per mel ...
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOGSTEP = np.log(6.4) / 27.0  # ... and logarithmic above it
# a0 - a1 * cos(2 pi n / N): the periodic (fftbins=True) forms scipy.signal.get_window builds
_COSINE_WINDOWS = {"hann": (0.5, 0.5), "hamming": (0.54, 0.46)}


def hz_to_mel(hz: np.ndarray, *, htk: bool) -> np.ndarray:
    """Hz → mel on the HTK or Slaney scale (librosa.hz_to_mel)."""
    hz = np.asarray(hz, dtype=np.float64)
    if htk:
        return 2595.0 * np.log10(1.0 + hz / 700.0)
    linear = hz / _F_SP
    log_part = _MIN_LOG_MEL + np.log(np.maximum(hz, _MIN_LOG_HZ) / _MIN_LOG_HZ) / _LOGSTEP
    return np.where(hz >= _MIN_LOG_HZ, log_part, linear)


def mel_to_hz(mel: np.ndarray, *, htk: bool) -> np.ndarray:
    """Mel → Hz, the inverse of `hz_to_mel` (librosa.mel_to_hz)."""
    mel = np.asarray(mel, dtype=np.float64)
    if htk:
        return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)
    linear = _F_SP * mel
    log_part = _MIN_LOG_HZ * np.exp(_LOGSTEP * (np.maximum(mel, _MIN_LOG_MEL) - _MIN_LOG_MEL))
    return np.where(mel >= _MIN_LOG_MEL, log_part, linear)


@functools.lru_cache(maxsize=32)
def window(config: MelConfig) -> np.ndarray:
    """Periodic analysis window of `win_length`, centred in `n_fft` zeros: float64 [n_fft]."""
    n = np.arange(config.win_length, dtype=np.float64)
    phase = 2.0 * np.pi * n / config.win_length
    a0, a1 = _COSINE_WINDOWS[config.window]
    win = a0 - a1 * np.cos(phase)
    left = (config.n_fft - config.win_length) // 2
    out = np.zeros(config.n_fft, dtype=np.float64)
    out[left : left + config.win_length] = win
    out.setflags(write=False)
    return out


def mel_edges(config: MelConfig) -> np.ndarray:
    """float64 [n_mels + 2]: the filters' edges on the mel scale, evenly spaced from `fmin`
    to `fmax`; filter `i` rises from edge `i`, peaks at `i + 1` and falls to `i + 2`."""
    return np.linspace(hz_to_mel(config.fmin, htk=config.htk),
                       hz_to_mel(config.fmax, htk=config.htk), config.n_mels + 2)  # fmt: skip


@functools.lru_cache(maxsize=32)
def mel_filterbank(config: MelConfig) -> np.ndarray:
    """Triangular mel filters as librosa.filters.mel builds them: float64 [n_freqs, n_mels].

    Raises:
        ConfigError: some filter has no FFT bin under it (n_mels too large for n_fft).
    """
    fft_freqs = np.fft.rfftfreq(config.n_fft, d=1.0 / config.sample_rate)
    hz_edges = mel_to_hz(mel_edges(config), htk=config.htk)
    widths = np.diff(hz_edges)
    ramps = hz_edges[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))  # (n_mels, n_freqs)
    if config.norm == "slaney":
        weights *= (2.0 / (hz_edges[2:] - hz_edges[:-2]))[:, None]
    empty = np.flatnonzero(weights.max(axis=1) == 0)
    if empty.size:
        raise ConfigError(
            f"MelConfig.n_mels: expected every mel filter to cover an FFT bin, received: "
            f"n_mels={config.n_mels} with n_fft={config.n_fft} leaves {empty.size} filter(s) "
            f"empty (first: {int(empty[0])}); lower n_mels or raise n_fft"
        )
    out = np.ascontiguousarray(weights.T)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=32)
def mel_pseudo_inverse(config: MelConfig) -> np.ndarray:
    """Moore-Penrose pseudo-inverse of the filterbank: float64 [n_mels, n_freqs]."""
    out = np.linalg.pinv(mel_filterbank(config))
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=32)
def forward_dft(config: MelConfig, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """The real DFT of a windowed frame as two [n_fft, bins] bases (window folded in):
    `frame @ cosines` and `frame @ sines` are the real and imaginary parts of its first
    `bins` FFT bins."""
    n = config.n_fft
    angle = 2.0 * np.pi * np.outer(np.arange(n), np.arange(bins)) / n  # (n, bins)
    windowed = window(config)[:, None]
    return windowed * np.cos(angle), -windowed * np.sin(angle)


@functools.lru_cache(maxsize=32)
def inverse_dft(config: MelConfig) -> tuple[np.ndarray, np.ndarray]:
    """The inverse real DFT's first n_fft // 2 + 1 output samples as two
    [bins, n_fft // 2 + 1] bases, cosine and sine parts (`forward_dft`'s inverse without
    the window: the caller applies it to the whole frame)."""
    n, bins = config.n_fft, config.n_freqs
    angle = 2.0 * np.pi * np.outer(np.arange(bins), np.arange(n // 2 + 1)) / n
    weight = np.full((bins, 1), 2.0 / n)  # each inner bin stands for itself and its mirror
    weight[0] = 1.0 / n
    if n % 2 == 0:
        weight[-1] = 1.0 / n
    cosines = weight * np.cos(angle)
    sines = weight * np.sin(angle)
    sines[0] = 0.0
    if n % 2 == 0:
        sines[-1] = 0.0
    return cosines, sines


def used_bins(config: MelConfig) -> int:
    """Number of leading FFT bins any mel filter touches (the rest need not be computed)."""
    nonzero = np.flatnonzero(mel_filterbank(config).max(axis=1) > 0)
    return int(nonzero[-1]) + 1


@functools.lru_cache(maxsize=32)
def mel_blocks(config: MelConfig, blocks: int = 4) -> tuple[tuple[int, int, int, int], ...]:
    """The filterbank cut into `blocks` runs of neighbouring mels, with the bins they read.

    Returns:
        (first bin, end bin, first mel, end mel) per block, ends exclusive; the blocks
        cover every mel once, in order, and each holds every nonzero weight of its mels.
    """
    bank = mel_filterbank(config)
    out = []
    for mels in np.array_split(np.arange(config.n_mels), min(blocks, config.n_mels)):
        rows = np.flatnonzero(bank[:, mels].max(axis=1) > 0)
        out.append((int(rows[0]), int(rows[-1]) + 1, int(mels[0]), int(mels[-1]) + 1))
    return tuple(out)
