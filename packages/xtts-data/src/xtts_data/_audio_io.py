"""Load one corpus audio file as mono float32 at the recipe's rate, or say why not.

WAV goes through xtts-audio's graph ops (`decode_wav`, `to_mono`, `resample`); FLAC and
OGG through soundfile (the cache builder may run Python per file, the pipeline may not).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import tensorflow as tf

from xtts_audio import MelConfig, decode_wav, resample, to_mono, trim_silence
from xtts_data.clips import BadAudioError, check_samples, decode_soundfile, file_bytes, min_samples

__all__ = ["BadAudioError", "load_audio", "min_samples"]


@tf.function(input_signature=[tf.TensorSpec([], tf.string)], autograph=False)
def _decode_wav_mono(contents: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    audio, rate = decode_wav(contents)  # (samples, channels)
    return to_mono(audio), rate  # (samples,)


@functools.cache
def _resampler(orig_sr: int, target_sr: int):
    return tf.function(
        lambda wave: resample(wave, orig_sr=orig_sr, target_sr=target_sr),
        input_signature=[tf.TensorSpec([None], tf.float32)],
        autograph=False,
    )


@functools.cache
def _trimmer(top_db: float):
    return tf.function(
        lambda wave: trim_silence(wave, top_db=top_db),
        input_signature=[tf.TensorSpec([None], tf.float32)],
        autograph=False,
    )


def load_audio(path: Path, config: MelConfig, *, trim_top_db: float | None = None) -> np.ndarray:
    """Decode, downmix, resample to `config.sample_rate` and optionally trim silence.

    Returns:
        float32 [samples], mono at `config.sample_rate`.

    Raises:
        BadAudioError: empty, truncated or undecodable file, or too short for one frame.
    """
    wave, rate = _decode(path)
    if wave.size == 0:
        raise BadAudioError("no audio samples")
    if rate != config.sample_rate:
        wave = _resampler(rate, config.sample_rate)(wave).numpy()
    if trim_top_db is not None:
        wave = _trimmer(float(trim_top_db))(wave).numpy()
    check_samples(wave.size, config)
    return wave


def _reason(message: str) -> str:
    """The decoder's own words from a TensorFlow runtime error message."""
    found = re.search(r"assertion failed: \[(.*?)\]", message)
    if found:
        return found.group(1)
    lines = [line for line in message.splitlines() if line.strip() and "[[" not in line]
    return lines[-1].strip() if lines else message


def _decode(path: Path) -> tuple[np.ndarray, int]:
    contents = file_bytes(path)
    if contents[:4] in (b"RIFF", b"RIFX", b"RF64") or path.suffix.lower() == ".wav":
        try:
            wave, rate = _decode_wav_mono(tf.constant(contents))
        except tf.errors.InvalidArgumentError as error:
            raise BadAudioError(f"unreadable WAV: {_reason(error.message)}") from None
        return wave.numpy(), int(rate)
    return decode_soundfile(path)
