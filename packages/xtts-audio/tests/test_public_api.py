"""The public surface is a contract: exact `__all__`, every name documented, errors typed."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import tensorflow as tf

import xtts_audio

EXPECTED = {
    "PRESETS", "ConfigError", "InputError", "MelConfig", "XttsAudioError",
    "decode_wav", "deemphasis", "denormalize", "griffin_lim", "istft", "istft_matmul", "load_wav",
    "mel_features", "mel_spectrogram", "mel_to_magnitude", "normalize", "num_frames",
    "preemphasis", "resample", "resampled_length", "silence_bounds", "spectrogram", "stft", "stft_matmul", "to_mono",
    "trim_silence", "mel_warp_positions", "warp_mel", "PITCH_RANGE", "mel_pitch",
    "WavWriter", "write_wav",
    "WAV_HEADER_BYTES", "pcm16", "stream_wav_header", "wav_bytes",
}  # fmt: skip


def test_all_is_exactly_the_contract():
    assert set(xtts_audio.__all__) == EXPECTED
    assert all(hasattr(xtts_audio, name) for name in xtts_audio.__all__)


@pytest.mark.parametrize("name", sorted(EXPECTED - {"PRESETS", "WAV_HEADER_BYTES"}))  # values
def test_every_public_name_has_a_docstring(name):
    assert inspect.getdoc(getattr(xtts_audio, name))


def test_errors_subclass_the_builtin_they_mean():
    assert issubclass(xtts_audio.ConfigError, (xtts_audio.XttsAudioError, ValueError))
    assert issubclass(xtts_audio.InputError, (xtts_audio.XttsAudioError, ValueError))


@pytest.mark.parametrize("jit_compile", [False, True])
def test_errors_keep_their_type_through_tf_function(jit_compile):
    config = xtts_audio.MelConfig.from_preset("xtts")
    compiled = tf.function(lambda w: xtts_audio.mel_spectrogram(w, config), jit_compile=jit_compile)
    with pytest.raises(xtts_audio.InputError, match="Expected a float waveform"):
        compiled(tf.constant(np.zeros(4096, np.int32)))
