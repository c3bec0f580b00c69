"""asv benchmarks for xtts-audio: mel throughput and WAV decoding, against their baselines.

Each `time_*` pair measures ours and the baseline on the same inputs; compilation and
warm-up happen in `setup`. `XTTS_BENCH_CLIPS` sets how many clips (default 16).
"""

from __future__ import annotations

import os
import pathlib
import tempfile
from typing import ClassVar

import tensorflow as tf

import xtts_audio as xa
from xtts_bench.audio import (
    AudioBenchConfig,
    librosa_mel,
    make_clips,
    padded_batches,
    write_wavs,
)

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
        (batch,) = padded_batches(self.clips, len(self.clips), step=1)  # one batch, no rounding
        self.batch = tf.constant(batch)
        self.compiled = tf.function(lambda w: xa.mel_spectrogram(w, self.config), jit_compile=True)
        self.compiled(self.batch).numpy()  # compile outside the timed part
        self.librosa_mel = librosa_mel(self.config)

    def time_xtts_audio_batched_xla(self, preset: str) -> None:
        self.compiled(self.batch).numpy()

    def time_librosa_per_file(self, preset: str) -> None:
        for clip in self.clips:
            self.librosa_mel(clip)


class DecodeWav:
    """decode_wav vs tf.audio.decode_wav over the same in-memory 16-bit files, in tf.data.

    Each timed call decodes one pass over the files from an iterator made in `setup`: a new
    iterator costs ~50 ms of set-up for ours (its chunk-walking graph is instantiated) and
    ~4 ms for tf.audio's, paid once per epoch, which would otherwise outweigh the decoding.
    """

    def setup(self) -> None:
        clips = make_clips(AudioBenchConfig(clips=_CLIPS, batch_size=_CLIPS), 22050)
        with tempfile.TemporaryDirectory() as folder:
            paths = write_wavs(clips, pathlib.Path(folder), 22050)
            contents = [pathlib.Path(path).read_bytes() for path in paths]
        source = tf.data.Dataset.from_tensor_slices(contents).repeat()
        self.ours = iter(source.map(lambda c: xa.decode_wav(c)[0]))
        self.theirs = iter(source.map(lambda c: tf.audio.decode_wav(c).audio))
        self.time_xtts_audio_decode_wav()
        self.time_tf_audio_decode_wav()

    def time_xtts_audio_decode_wav(self) -> None:
        for _ in range(_CLIPS):
            next(self.ours)

    def time_tf_audio_decode_wav(self) -> None:
        for _ in range(_CLIPS):
            next(self.theirs)
