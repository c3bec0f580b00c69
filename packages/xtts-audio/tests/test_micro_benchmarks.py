"""Micro-benchmarks (pytest-benchmark) of the ops on the training input path.

Marked `benchmark`: the default test command skips them; `hatch run bench-micro` runs them
(`-- --benchmark-autosave` keeps a run, `--benchmark-compare` compares with the last one).
Compiles and warm-up happen before the timed calls. Side-by-side ratios against librosa
and `tf.audio` are in `xtts-bench audio`; these track each op's own time across changes.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile
import tensorflow as tf

import xtts_audio as xa

pytestmark = pytest.mark.benchmark

XTTS = xa.MelConfig.from_preset("xtts")


@pytest.fixture(scope="module")
def clips() -> tf.Tensor:
    """A batch of 8 two-second clips: float32 [8, 44100]."""
    rng = np.random.default_rng(0)
    return tf.constant(rng.uniform(-0.5, 0.5, (8, 44100)), tf.float32)


def test_mel_spectrogram_batch_xla(benchmark, clips):
    mel = tf.function(lambda x: xa.mel_spectrogram(x, XTTS), jit_compile=True)
    mel(clips).numpy()  # compile
    out = benchmark(lambda: mel(clips).numpy())
    assert out.shape == (8, xa.num_frames(44100, XTTS), XTTS.n_mels)


def test_decode_wav_16bit(benchmark, clips):
    buffer = io.BytesIO()
    soundfile.write(buffer, clips[0].numpy(), 22050, subtype="PCM_16", format="WAV")
    contents = tf.constant(buffer.getvalue())
    decode = tf.function(xa.decode_wav)
    decode(contents)
    waveform, rate = benchmark(lambda: decode(contents))
    assert waveform.shape == (44100, 1)
    assert int(rate) == 22050


def test_resample_44100_to_22050(benchmark, clips):
    resample = tf.function(
        lambda x: xa.resample(x, orig_sr=44100, target_sr=22050), jit_compile=True
    )
    resample(clips).numpy()
    out = benchmark(lambda: resample(clips).numpy())
    assert out.shape == (8, 22050)
