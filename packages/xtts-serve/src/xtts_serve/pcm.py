"""Audio as the server sends it: 16-bit little-endian mono PCM, a whole WAV, or the header
of a WAV whose length is not known yet (a stream).

Samples are quantised by `tf.audio.encode_wav`, the rule `xtts_audio.WavWriter` follows,
so a response is the bytes of the WAV `xtts-train synthesize` writes.
"""

from __future__ import annotations

import struct

import numpy as np
import tensorflow as tf

__all__ = ["WAV_HEADER_BYTES", "pcm16", "stream_wav_header", "wav_bytes"]

WAV_HEADER_BYTES = 44  # RIFF, fmt (16-bit PCM) and data chunk headers
_UNKNOWN = 0xFFFFFFFF  # a chunk size no reader takes literally: the stream's end is its end


def wav_bytes(samples: np.ndarray, sample_rate: int) -> bytes:
    """A whole 16-bit mono WAV file of float32 [samples] in [-1, 1] (louder is clipped)."""
    wave = tf.convert_to_tensor(np.asarray(samples, np.float32)[:, None])  # (samples, 1)
    return tf.audio.encode_wav(wave, sample_rate).numpy()


def pcm16(samples: np.ndarray) -> np.ndarray:
    """int16 [samples] of float32 [samples] in [-1, 1], quantised as `wav_bytes` does (the
    rate given to it only fills the header, which is cut off)."""
    data = wav_bytes(samples, 16000)[WAV_HEADER_BYTES:]
    return np.frombuffer(data, "<i2").astype(np.int16)


def stream_wav_header(sample_rate: int) -> bytes:
    """The 44-byte header of a 16-bit mono WAV of unknown length (its RIFF and data sizes
    0xFFFFFFFF), sent before a stream's PCM: players read on to the end of the stream."""
    return b"".join([
        b"RIFF", struct.pack("<I", _UNKNOWN), b"WAVE",
        b"fmt ", struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, 2 * sample_rate, 2, 16),
        b"data", struct.pack("<I", _UNKNOWN),
    ])  # fmt: skip
