"""Channel down-mixing and band-limited resampling that matches `scipy.signal.resample_poly`.

`resample` runs eagerly, in `tf.function`, under `jit_compile=True` and inside
`tf.data.Dataset.map` (also with an unknown length there). Its polyphase filter is designed
once per rate pair in float64 NumPy and enters the graph as a float32 constant.
"""

from __future__ import annotations

import functools
import math
import numbers

import numpy as np
import tensorflow as tf

from xtts_audio._checks import as_signal as _as_signal
from xtts_audio._checks import as_waveform as _as_waveform
from xtts_audio._checks import leading as _leading
from xtts_audio.errors import ConfigError, InputError

__all__ = ["resample", "resampled_length", "to_mono"]

# Entries of the polyphase matrix W (about (up + down) * up floats): above this the rate
# pair has so little in common that the matrix would no longer fit comfortably in memory.
_MAX_FILTER_ENTRIES = 2**24
_KAISER_BETA = 5.0  # scipy's default window ('kaiser', 5.0)
_HALF_LEN_PER_RATE = 10  # scipy: half_len = 10 * max(up, down)


def to_mono(waveform) -> tf.Tensor:
    """Down-mix to one channel by averaging the channels.

    Args:
        waveform: float [..., samples, channels], as `tf.audio.decode_wav` returns.

    Returns:
        float32 [..., samples].

    Raises:
        InputError: `waveform` is not float or has rank below 2.
    """
    waveform = _as_waveform(waveform)
    if waveform.shape.rank is None or waveform.shape.rank < 2:
        raise InputError(
            f"Expected waveform of shape [..., samples, channels], received: shape={waveform.shape}"
        )
    return tf.reduce_mean(waveform, axis=-1)


def resample(waveform, *, orig_sr: int, target_sr: int) -> tf.Tensor:
    """Resample the last axis from `orig_sr` to `target_sr` Hz.

    Reproduces `scipy.signal.resample_poly(x, up, down, axis=-1)` (window
    `('kaiser', 5.0)`, zero padding) with `up / down = target_sr / orig_sr` in lowest
    terms, to float32 precision. The output repeats with period `up` samples while the
    input advances `down` samples, so it is computed as one `tf.signal.frame` (frames of
    `down + L` input samples, hop `down`) and one matmul with a `[down + L, up]` matrix.

    Args:
        waveform: float [..., samples], any number of leading batch dims.
        orig_sr: sample rate of `waveform` in Hz.
        target_sr: wanted sample rate in Hz.

    Returns:
        float32 [..., ceil(samples * up / down)]; `waveform` as float32 when the rates
        are equal.

    Raises:
        ConfigError: a rate is not a positive int, or the rate pair needs a filter
            matrix above 2^24 entries (the message suggests a nearby rate).
        InputError: `waveform` is not float, is a scalar, or has unknown rank.
    """
    up, down = _ratio(orig_sr, target_sr)
    waveform = _as_signal(waveform)
    if up == down:
        return waveform
    matrix, left = _polyphase_matrix(up, down)
    frame_length = matrix.shape[0]
    n = _length(waveform)
    blocks = _ceil_div(n, down)  # output blocks of `up` samples
    n_out = _reduced_length(n, up, down)
    needed = (blocks - 1) * down + frame_length
    right = _relu(needed - left - n)
    rank = waveform.shape.rank
    padded = _leading(tf.pad(waveform, [[0, 0]] * (rank - 1) + [[left, right]]), needed)
    frames = tf.signal.frame(padded, frame_length, down)  # (..., blocks, frame_length)
    out = tf.linalg.matmul(frames, tf.constant(matrix))  # (..., blocks, up)
    return _leading(_merge_last_two(out), n_out)


def resampled_length(num_samples, *, orig_sr: int, target_sr: int):
    """Samples `resample` returns for `num_samples` input samples: ceil(n * target / orig).

    The one place resampled-length arithmetic lives: caches and pipelines call it.

    Args:
        num_samples: int, NumPy array or integer tensor of sample counts.
        orig_sr, target_sr: the rates, positive ints.

    Returns:
        Sample counts of the same kind as `num_samples`.
    """
    return _reduced_length(num_samples, *_reduced(orig_sr, target_sr))


def _reduced_length(n, up: int, down: int):
    return (n // down) * up + _ceil_div((n % down) * up, down)  # no overflow of n * up


def _reduced(orig_sr: int, target_sr: int) -> tuple[int, int]:
    """(up, down): the rates' ratio in lowest terms, after checking both rates."""
    for name, rate in (("orig_sr", orig_sr), ("target_sr", target_sr)):
        if isinstance(rate, bool) or not isinstance(rate, numbers.Integral) or rate <= 0:
            raise ConfigError(f"Expected {name} to be a positive int, received: {name}={rate!r}")
    orig_sr, target_sr = int(orig_sr), int(target_sr)
    gcd = math.gcd(orig_sr, target_sr)
    return target_sr // gcd, orig_sr // gcd


def _ratio(orig_sr: int, target_sr: int) -> tuple[int, int]:
    up, down = _reduced(orig_sr, target_sr)
    entries = _matrix_entries(up, down)
    if entries > _MAX_FILTER_ENTRIES:
        raise ConfigError(
            f"Expected a rate pair with a polyphase matrix of at most 2^24 entries, received: "
            f"orig_sr={orig_sr}, target_sr={target_sr} (up={up}, down={down}, "
            f"{entries} entries). Resample to a nearby rate with a larger common divisor, "
            f"e.g. target_sr={_nearby_rate(orig_sr, target_sr)}."
        )
    return up, down


def _layout(up: int, down: int) -> tuple[int, int, int]:
    """scipy's filter placement: (filter taps incl. front zeros, output offset, first q)."""
    half_len = _HALF_LEN_PER_RATE * max(up, down)
    pre_pad = down - half_len % down  # zeros scipy puts before the filter
    taps = pre_pad + 2 * half_len + 1
    offset = (half_len + pre_pad) // down  # outputs scipy drops from the front
    first = -((taps - 1 - offset * down) // up)  # lowest input offset any output uses
    return taps, offset, first


def _matrix_entries(up: int, down: int) -> int:
    _, offset, first = _layout(up, down)
    last = ((up - 1 + offset) * down) // up
    return (last - first + 1) * up


def _nearby_rate(orig_sr: int, target_sr: int) -> int:
    """The rate closest to `target_sr` whose pair with `orig_sr` passes the size limit."""
    for distance in range(1, target_sr):
        for rate in (target_sr - distance, target_sr + distance):
            if rate == orig_sr:
                continue
            gcd = math.gcd(orig_sr, rate)
            if _matrix_entries(rate // gcd, orig_sr // gcd) <= _MAX_FILTER_ENTRIES:
                return rate
    return orig_sr


@functools.lru_cache(maxsize=16)
def _polyphase_matrix(up: int, down: int) -> tuple[np.ndarray, int]:
    """W float32 [frame_length, up] and the zeros to pad before the input.

    Output `b * up + p` is `sum_q x[b * down + q] * h[(p + offset) * down - q * up]`, with
    `h` scipy's filter (front zeros included); row `q - first` of W holds those taps.
    """
    half_len = _HALF_LEN_PER_RATE * max(up, down)
    taps, offset, first = _layout(up, down)
    h = np.zeros(taps, dtype=np.float64)
    h[taps - (2 * half_len + 1) :] = _lowpass(half_len, max(up, down)) * up
    last = ((up - 1 + offset) * down) // up
    q = np.arange(first, last + 1)[:, None]
    p = np.arange(up)[None, :]
    index = (p + offset) * down - q * up
    inside = (index >= 0) & (index < taps)
    matrix = np.where(inside, h[np.clip(index, 0, taps - 1)], 0.0).astype(np.float32)
    matrix.setflags(write=False)
    return matrix, -first


def _lowpass(half_len: int, max_rate: int) -> np.ndarray:
    """`scipy.signal.firwin(2 * half_len + 1, 1 / max_rate, window=('kaiser', 5.0))`."""
    cutoff = 1.0 / max_rate
    m = np.arange(2 * half_len + 1, dtype=np.float64) - half_len
    h = cutoff * np.sinc(cutoff * m) * np.kaiser(2 * half_len + 1, _KAISER_BETA)
    return h / h.sum()  # unit gain at DC, as firwin's scale=True


def _length(waveform: tf.Tensor):
    """Static length as an int when known, else a scalar int32 tensor."""
    static = waveform.shape[-1]
    return static if static is not None else tf.shape(waveform)[-1]


def _ceil_div(a, b: int):
    """ceil(a / b) for a >= 0, without a negative operand: tf2onnx lowers an int `//` to
    ONNX's `Div`, which truncates (a negative quotient would round up, not down)."""
    return (a + b - 1) // b


def _relu(value):
    return max(value, 0) if isinstance(value, int) else tf.maximum(value, 0)


def _merge_last_two(x: tf.Tensor) -> tf.Tensor:
    """[..., a, b] → [..., a * b], keeping every dimension that is static."""
    dynamic = tf.shape(x)
    lead = [dynamic[i] if d is None else d for i, d in enumerate(x.shape[:-2].as_list())]
    inner = x.shape[-2:].as_list()
    last = inner[0] * inner[1] if None not in inner else -1
    return tf.reshape(x, [*lead, last])
