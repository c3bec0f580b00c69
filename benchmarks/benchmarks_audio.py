"""asv benchmarks for xtts-audio: mel throughput and WAV decoding, against their baselines.

Each `time_*` pair measures ours and the baseline on the same inputs; compilation and
warm-up happen in `setup`. `XTTS_BENCH_CLIPS` sets how many clips (default 16).
"""

from __future__ import annotations

import os
import pathlib
import tempfile
from typing import ClassVar

import librosa
import numpy as np
import tensorflow as tf

import xtts_audio as xa
from xtts_bench.audio import AudioBenchConfig, make_clips

_CLIPS = int(os.environ.get("XTTS_BENCH_CLIPS", "16"))  # asv imports this module once


class MelSpectrogram:
    """Batched XLA mel (one padded batch) vs librosa per file, per preset."""

    params: ClassVar[tuple] = (["xtts", "librosa"],)
    param_names: ClassVar[list[str]] = ["preset"]

    def setup(self, preset: str) -> None:
        self.config = xa.MelConfig.from_preset(preset)
        self.clips = make_clips(
            AudioBenchConfig(clips=_CLIPS, batch_size=_CLIPS), self.config.sample_rate
        )
        batch = np.zeros((len(self.clips), max(len(c) for c in self.clips)), np.float32)
        for row, clip in enumerate(self.clips):
            batch[row, : len(clip)] = clip
        self.batch = tf.constant(batch)
        self.compiled = tf.function(lambda w: xa.mel_spectrogram(w, self.config), jit_compile=True)
        self.compiled(self.batch).numpy()  # compile outside the timed part

    def time_xtts_audio_batched_xla(self, preset: str) -> None:
        self.compiled(self.batch).numpy()

    def time_librosa_per_file(self, preset: str) -> None:
        c = self.config
        for clip in self.clips:
            librosa.feature.melspectrogram(
                y=clip, sr=c.sample_rate, n_fft=c.n_fft, hop_length=c.hop_length,
                win_length=c.win_length, pad_mode=c.pad_mode, power=c.power,
                n_mels=c.n_mels, fmin=c.fmin, fmax=c.fmax, htk=c.htk, norm=c.norm,
            )  # fmt: skip


class DecodeWav:
    """decode_wav vs tf.audio.decode_wav over the same in-memory 16-bit files, in tf.data."""

    def setup(self) -> None:
        clips = make_clips(AudioBenchConfig(clips=_CLIPS, batch_size=_CLIPS), 22050)
        with tempfile.TemporaryDirectory() as folder:
            contents = []
            for index, clip in enumerate(clips):
                path = pathlib.Path(folder) / f"{index}.wav"
                tf.io.write_file(str(path), tf.audio.encode_wav(clip[:, None], 22050))
                contents.append(path.read_bytes())
        source = tf.data.Dataset.from_tensor_slices(contents)
        self.ours = source.map(lambda c: xa.decode_wav(c)[0])
        self.theirs = source.map(lambda c: tf.audio.decode_wav(c).audio)
        self.time_xtts_audio_decode_wav()
        self.time_tf_audio_decode_wav()

    def time_xtts_audio_decode_wav(self) -> None:
        for _ in self.ours:
            pass

    def time_tf_audio_decode_wav(self) -> None:
        for _ in self.theirs:
            pass
