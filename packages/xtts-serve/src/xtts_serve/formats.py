"""The response formats of `POST /v1/audio/speech`: 16-bit WAV and its raw samples
(`xtts_audio`, streamed or whole), and FLAC, MP3 and Opus in Ogg, encoded whole by
libsndfile (the `soundfile` wheel ships it, 1.2 with its MP3 and Opus encoders).

A stream is WAV or PCM only: libsndfile writes FLAC's and Ogg's headers again when the
file closes (their lengths), so their bytes are not final until the end.
"""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
import soundfile

from xtts_audio import pcm16, wav_bytes

__all__ = ["MEDIA_TYPES", "OPUS_RATE", "STREAM_FORMATS", "encode"]

MEDIA_TYPES = {
    "wav": "audio/wav",
    "pcm": "audio/pcm",
    "flac": "audio/flac",
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",  # Opus in an Ogg file, as OpenAI's `opus`
}
STREAM_FORMATS = ("wav", "pcm")
# Opus encodes 8, 12, 16, 24 or 48 kHz only: other rates are resampled to 48 kHz, its own.
OPUS_RATE = 48_000
_OPUS_RATES = (8_000, 12_000, 16_000, 24_000, 48_000)
_SNDFILE = {"flac": ("FLAC", "PCM_16"), "mp3": ("MP3", "MPEG_LAYER_III"), "opus": ("OGG", "OPUS")}


def encode(samples: np.ndarray, sample_rate: int, response_format: str, *,
           resample: Callable[[np.ndarray, int], np.ndarray]) -> tuple[bytes, int]:  # fmt: skip
    """A whole response's body.

    Args:
        samples: float32 [samples] in [-1, 1].
        sample_rate: their rate.
        response_format: a key of `MEDIA_TYPES`.
        resample: (samples, rate) → the samples at `rate` (`Speaker.resample`: the
            engine's runtime resamples).

    Returns:
        The body, and the sample rate it holds (`OPUS_RATE` for Opus at a rate it does not
        encode; else `sample_rate`).
    """
    if response_format == "wav":
        return wav_bytes(samples, sample_rate), sample_rate
    if response_format == "pcm":
        return pcm16(samples).tobytes(), sample_rate
    container, subtype = _SNDFILE[response_format]
    if response_format == "opus" and sample_rate not in _OPUS_RATES:
        samples = resample(samples, OPUS_RATE)
        sample_rate = OPUS_RATE
    out = io.BytesIO()
    # the WAV's 16-bit samples (libsndfile's own quantising rounds a few differently)
    soundfile.write(out, pcm16(samples), sample_rate, format=container, subtype=subtype)
    return out.getvalue(), sample_rate
