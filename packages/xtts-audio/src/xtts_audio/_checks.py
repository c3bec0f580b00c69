"""Argument checks and shape helpers shared by the ops (one message per kind of mistake)."""

from __future__ import annotations

import tensorflow as tf

from xtts_audio.errors import InputError


def as_waveform(waveform, name: str = "waveform") -> tf.Tensor:
    """`waveform` as float32, after checking it is a float tensor of rank >= 1.

    Raises:
        InputError: not floating point, or a scalar.
    """
    waveform = tf.convert_to_tensor(waveform)
    if not waveform.dtype.is_floating:
        raise InputError(f"Expected a float waveform, received: {name}.dtype={waveform.dtype.name}")
    if waveform.shape.rank == 0:
        raise InputError(f"Expected {name} of shape [..., samples], received: shape=[]")
    return tf.cast(waveform, tf.float32)


def as_signal(waveform) -> tf.Tensor:
    """`as_waveform`, for ops that need the rank: float32 [..., samples] of known rank.

    Raises:
        InputError: not floating point, a scalar, or of unknown rank.
    """
    waveform = as_waveform(waveform)
    if waveform.shape.rank is None:
        raise InputError("Expected waveform of shape [..., samples], received: unknown rank")
    return waveform


def leading(signal: tf.Tensor, count) -> tf.Tensor:
    """`signal[..., :count]`, a gather where `count` is a tensor: the ONNX converter
    lowers a strided slice with an ellipsis and an unknown end to an invalid `Slice`
    ("'axes' has duplicates"), so the ops of exported programs avoid it."""
    if isinstance(count, int):
        return signal[..., :count]
    return tf.gather(signal, tf.range(count), axis=-1)
