"""Silence trimming and pre-/de-emphasis: pure TensorFlow, any leading batch dims.

`silence_bounds`, `preemphasis` and `deemphasis` run eagerly, in `tf.function`, under
`jit_compile=True` and inside `tf.data.Dataset.map`. `trim_silence` returns a
data-dependent length, so it cannot be compiled with XLA: jit-compiled code uses
`silence_bounds` and keeps the bounds next to the padded waveform instead.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import tensorflow as tf

from xtts_audio._checks import as_signal as _as_signal
from xtts_audio.errors import ConfigError, InputError

__all__ = ["deemphasis", "preemphasis", "silence_bounds", "trim_silence"]

_AMIN_POWER = 1e-10  # librosa.amplitude_to_db's amin=1e-5, squared


def silence_bounds(
    waveform, *, top_db: float = 60.0, frame_length: int = 2048, hop_length: int = 512
) -> tf.Tensor:
    """Sample range that `librosa.effects.trim` keeps, per signal.

    Frames are RMS values as `librosa.feature.rms` computes them (centred, zero padding);
    a frame is non-silent when it is more than `-top_db` dB relative to the loudest frame
    of its own signal. The range runs from the first non-silent frame's start to one hop
    past the last one, clipped to the signal. As in librosa, an all-zero signal counts as
    loud everywhere and gives `(0, samples)`; `(0, 0)` comes back only when no frame
    passes the threshold, i.e. for non-finite input (whose NaN handling differs
    between eager and XLA, so do not rely on it).

    Args:
        waveform: float [..., samples], any number of leading batch dims.
        top_db: threshold in dB below the loudest frame, > 0.
        frame_length: samples per RMS frame.
        hop_length: samples between frame starts.

    Returns:
        int32 [..., 2]: `(start, end)` per signal; `waveform[..., start:end]` is the
        trimmed signal.

    Raises:
        ConfigError: `top_db` is not a positive number, or a length is not a positive int.
        InputError: `waveform` is not float, is a scalar, or has unknown rank.
    """
    _check_positive_number("top_db", top_db)
    _check_positive_int("frame_length", frame_length)
    _check_positive_int("hop_length", hop_length)
    waveform = _as_signal(waveform)
    db = _frame_db(waveform, frame_length=frame_length, hop_length=hop_length)  # (..., T)
    loud = tf.cast(db > -top_db, tf.int32)
    num_frames = tf.shape(loud)[-1]
    first = tf.argmax(loud, axis=-1, output_type=tf.int32)
    last = num_frames - 1 - tf.argmax(tf.reverse(loud, [-1]), axis=-1, output_type=tf.int32)
    start = first * hop_length
    end = tf.minimum(tf.shape(waveform)[-1], (last + 1) * hop_length)
    bounds = tf.stack([start, end], axis=-1)
    return tf.where(tf.reduce_any(loud > 0, axis=-1, keepdims=True), bounds, 0)


def trim_silence(
    waveform, *, top_db: float = 60.0, frame_length: int = 2048, hop_length: int = 512
) -> tf.Tensor:
    """Cut leading and trailing silence, as `librosa.effects.trim(...)[0]` does.

    The output length depends on the audio, so this cannot run under `jit_compile=True`
    (XLA needs static shapes); there, call `silence_bounds` and carry the bounds (or a
    mask) with the fixed-size waveform. Works eagerly, in `tf.function` and in `tf.data`.

    Args:
        waveform: float [samples], one mono signal.
        top_db: threshold in dB below the loudest frame, > 0.
        frame_length: samples per RMS frame.
        hop_length: samples between frame starts.

    Returns:
        float32 [new_samples], `waveform[start:end]` with the bounds of `silence_bounds`.

    Raises:
        ConfigError: as `silence_bounds`.
        InputError: `waveform` is not a float tensor of rank 1.
    """
    waveform = _as_signal(waveform)
    if waveform.shape.rank != 1:
        raise InputError(
            f"Expected a single waveform of shape [samples] (use silence_bounds for "
            f"batches), received: shape={waveform.shape}"
        )
    bounds = silence_bounds(
        waveform, top_db=top_db, frame_length=frame_length, hop_length=hop_length
    )
    return waveform[bounds[0] : bounds[1]]


def preemphasis(waveform, *, coef: float = 0.97) -> tf.Tensor:
    """First-order high-pass `y[n] = x[n] - coef * x[n-1]`, with `y[0] = x[0]`.

    Equals `scipy.signal.lfilter([1, -coef], [1], x)`, as Coqui TTS applies it.
    `librosa.effects.preemphasis` differs in the first sample only: it starts the filter
    from `zi = 2 * x[0] - x[1]`, giving `y[0] = x[0] - coef * (2 * x[0] - x[1])`.

    Args:
        waveform: float [..., samples], any number of leading batch dims.
        coef: filter coefficient, 0 <= coef < 1 (0 leaves the signal unchanged).

    Returns:
        float32 [..., samples].

    Raises:
        ConfigError: `coef` is outside [0, 1).
        InputError: `waveform` is not float, is a scalar, or has unknown rank.
    """
    _check_coef(coef)
    x = _as_signal(waveform)
    return tf.concat([x[..., :1], x[..., 1:] - coef * x[..., :-1]], axis=-1)


def deemphasis(waveform, *, coef: float = 0.97) -> tf.Tensor:
    """The inverse of `preemphasis`: the IIR filter `y[n] = x[n] + coef * y[n-1]`.

    Equals `scipy.signal.lfilter([1], [1, -coef], x)`. Computed by recursive doubling,
    `y += coef**s * shift(y, s)` for s = 1, 2, 4, … (log2(samples) vectorised steps, no
    per-sample loop); steps whose gain `coef**s` rounds to 0 in float32 are skipped.

    Args:
        waveform: float [..., samples], any number of leading batch dims.
        coef: filter coefficient, 0 <= coef < 1 (the filter is unstable at 1).

    Returns:
        float32 [..., samples].

    Raises:
        ConfigError: `coef` is outside [0, 1).
        InputError: `waveform` is not float, is a scalar, or has unknown rank.
    """
    _check_coef(coef)
    y = _as_signal(waveform)
    length = y.shape[-1]
    if length is None:
        return _deemphasis_dynamic(y, coef)
    shift = 1
    while shift < length and _gain(coef, shift) > 0.0:
        y = y + _gain(coef, shift) * _delay(y, shift, length)
        shift *= 2
    return y


def _deemphasis_dynamic(y: tf.Tensor, coef: float) -> tf.Tensor:
    """`deemphasis` for an unknown length: the same doubling in a `tf.while_loop`."""
    length = tf.shape(y)[-1]
    log_coef = math.log(coef) if coef > 0.0 else -math.inf

    def gain(shift):
        return tf.cast(tf.exp(log_coef * tf.cast(shift, tf.float64)), tf.float32)

    def cond(shift, _):
        return tf.logical_and(shift < length, gain(shift) > 0.0)

    def body(shift, y):
        return shift * 2, y + gain(shift) * _delay(y, shift, length)

    _, y = tf.while_loop(cond, body, (tf.constant(1), y))
    return y


def _delay(y: tf.Tensor, shift, length) -> tf.Tensor:
    """`y` [..., length] delayed by `shift` < `length` samples, zeros shifted in."""
    return tf.concat([tf.zeros_like(y[..., :shift]), y[..., : length - shift]], axis=-1)


def _gain(coef: float, shift: int) -> float:
    return float(np.float32(coef**shift))


def _frame_db(waveform: tf.Tensor, *, frame_length: int, hop_length: int) -> tf.Tensor:
    """Frame RMS in dB relative to each signal's loudest frame: float32 [..., frames]."""
    pad = frame_length // 2
    padded = tf.pad(waveform, [[0, 0]] * (waveform.shape.rank - 1) + [[pad, pad]])
    frames = tf.signal.frame(padded, frame_length, hop_length)  # (..., T, frame_length)
    rms = tf.sqrt(tf.reduce_mean(tf.square(frames), axis=-1))  # (..., T)
    ref = tf.reduce_max(rms, axis=-1, keepdims=True)
    return _power_db(tf.square(rms)) - _power_db(tf.square(ref))


def _power_db(power: tf.Tensor) -> tf.Tensor:
    return (10.0 / math.log(10.0)) * tf.math.log(tf.maximum(power, _AMIN_POWER))


def _check_coef(coef: float) -> None:
    if isinstance(coef, bool) or not isinstance(coef, numbers.Real) or not 0.0 <= coef < 1.0:
        raise ConfigError(f"Expected coef in [0, 1), received: coef={coef!r}")


def _check_positive_number(name: str, value: float) -> None:
    valid = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not valid or not (math.isfinite(value) and value > 0):
        raise ConfigError(f"Expected {name} to be a positive number, received: {name}={value!r}")


def _check_positive_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ConfigError(f"Expected {name} to be a positive int, received: {name}={value!r}")
