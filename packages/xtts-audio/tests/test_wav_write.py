"""The one WAV writer: the bytes `tf.audio.encode_wav` writes, whole after every chunk."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from xtts_audio import (
    WAV_HEADER_BYTES,
    InputError,
    WavWriter,
    decode_wav,
    pcm16,
    stream_wav_header,
    wav_bytes,
    write_wav,
)

# Past full scale both ways, exact halves of a step (rounded away from zero), silence.
SAMPLES = np.concatenate([
    np.random.default_rng(0).uniform(-1.2, 1.2, 997), [1.0, -1.0, 0.5 / 32768, -1.5 / 32768, 0.0],
]).astype(np.float32)  # fmt: skip


def test_the_bytes_are_tensorflow_s(tmp_path):
    path = tmp_path / "a.wav"
    write_wav(path, SAMPLES, 22050)
    assert path.read_bytes() == tf.audio.encode_wav(SAMPLES[:, None], 22050).numpy()


def test_chunks_join_into_one_file_whole_after_each(tmp_path):
    path = tmp_path / "stream.wav"
    with WavWriter(path, 16000) as writer:
        for start in range(0, len(SAMPLES), 400):
            writer.write(SAMPLES[start : start + 400])
            audio, rate = decode_wav(tf.constant(path.read_bytes()))  # a whole WAV so far
            assert (audio.shape[0], int(rate)) == (min(start + 400, len(SAMPLES)), 16000)
    assert path.read_bytes() == tf.audio.encode_wav(SAMPLES[:, None], 16000).numpy()


def test_int16_is_written_as_it_is(tmp_path):
    pcm = np.array([0, 1, -1, 32767, -32768], np.int16)
    write_wav(tmp_path / "pcm.wav", pcm, 8000)
    assert (tmp_path / "pcm.wav").read_bytes()[44:] == pcm.astype("<i2").tobytes()


def test_channels_interleave_as_tensorflow_s(tmp_path):
    stereo = np.stack([SAMPLES, -0.5 * SAMPLES], axis=1)  # (samples, 2)
    write_wav(tmp_path / "stereo.wav", stereo, 44100)
    assert (tmp_path / "stereo.wav").read_bytes() == tf.audio.encode_wav(stereo, 44100).numpy()


def test_samples_of_another_shape_are_refused(tmp_path):
    with pytest.raises(InputError, match=r"Expected samples \[samples\] \(1 channel\(s\)\), received: shape=\(4, 2, 1\)"):  # fmt: skip
        write_wav(tmp_path / "x.wav", np.zeros([4, 2, 1], np.float32), 8000)
    writer = WavWriter(tmp_path / "y.wav", 8000, channels=2)
    with writer, pytest.raises(InputError, match=r"Expected samples \[samples, 2\]"):
        writer.write(np.zeros([4], np.float32))


def test_bytes_in_memory_are_the_file_s(tmp_path):
    path = tmp_path / "a.wav"
    write_wav(path, SAMPLES, 22050)
    assert wav_bytes(SAMPLES, 22050) == path.read_bytes()
    assert pcm16(SAMPLES).tobytes() == path.read_bytes()[WAV_HEADER_BYTES:]


def test_a_stream_header_then_its_samples_decode_as_a_wav():
    header = stream_wav_header(16000)
    assert len(header) == WAV_HEADER_BYTES
    assert header[4:8] == header[40:44] == b"\xff\xff\xff\xff"  # length unknown
    whole = wav_bytes(SAMPLES, 16000)
    assert header[8:36] == whole[8:36]  # WAVE, the same fmt chunk
