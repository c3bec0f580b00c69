"""xtts-audio against what it replaces, side by side in one process.

Three comparisons, each reported as seconds of audio processed per wall-clock second:
- mel: `xtts_audio.mel_spectrogram` on padded batches under XLA vs
  `librosa.feature.melspectrogram` called per file;
- end to end: WAV files on disk → mel, a `tf.data` pipeline (`load_wav` + batched XLA mel)
  vs `librosa.load` + `librosa.feature.melspectrogram` per file;
- decode: `xtts_audio.decode_wav` vs `tf.audio.decode_wav` on the same 16-bit files, both
  mapped over in-memory contents by `tf.data`.

Rounds alternate between the two sides so machine noise hits both alike; figures are the
median round. Compilation and warm-up happen before timing. Padding counts against us:
only real audio seconds are credited.
"""

from __future__ import annotations

import dataclasses
import pathlib
import statistics
import tempfile
import time
from collections.abc import Callable

import librosa
import numpy as np
import soundfile
import tensorflow as tf
import threadpoolctl

import xtts_audio as xa
from xtts_audio.cli import synthetic_utterance

__all__ = ["AudioBenchConfig", "format_table", "make_clips", "run_audio_benchmarks"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class AudioBenchConfig:
    """What to measure: `clips` utterances of `min_seconds`-`max_seconds` at the preset's rate."""

    clips: int = 32
    min_seconds: float = 2.0
    max_seconds: float = 10.0
    batch_size: int = 16
    rounds: int = 5
    threads: int = 2
    preset: str = "xtts"

    def __post_init__(self) -> None:
        for name in ("clips", "batch_size", "rounds", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(
                    f"AudioBenchConfig.{name}: expected >= 1, received: {getattr(self, name)}"
                )
        if self.clips < self.batch_size:
            raise ValueError(
                f"AudioBenchConfig: expected clips >= batch_size, received: "
                f"clips={self.clips}, batch_size={self.batch_size}"
            )
        if not 0 < self.min_seconds <= self.max_seconds:
            raise ValueError(
                f"AudioBenchConfig: expected 0 < min_seconds <= max_seconds, received: "
                f"min_seconds={self.min_seconds}, max_seconds={self.max_seconds}"
            )


def make_clips(bench: AudioBenchConfig, sample_rate: int) -> list[np.ndarray]:
    """Speech-like mono clips of random lengths (seeded): float32 [samples] each."""
    rng = np.random.default_rng(0)
    base = synthetic_utterance(sample_rate=sample_rate)[:, 0]
    clips = []
    for _ in range(bench.clips):
        samples = int(rng.uniform(bench.min_seconds, bench.max_seconds) * sample_rate)
        clip = np.resize(base, samples) + 1e-3 * rng.standard_normal(samples)
        clips.append(clip.astype(np.float32))
    return clips


def _timings(fn: Callable[[], object], rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _best_librosa_threads() -> threadpoolctl.threadpool_limits:
    """BLAS limited to one thread for the librosa side.

    librosa's mel is a small matrix product; with OpenBLAS's default of one thread per core
    its threads spin-wait against every other busy thread and run it several times slower
    (measured 7x on this machine with the other core busy). One thread is librosa at its best.
    """
    return threadpoolctl.threadpool_limits(limits=1, user_api="blas")


def _side_by_side(
    ours: Callable[[], object], theirs: Callable[[], object], rounds: int
) -> tuple[float, float]:
    """Median seconds of each, alternating one round of each so drift hits both."""
    ours()  # warm-up: compile, fill caches
    with _best_librosa_threads():
        theirs()
    ours_t, theirs_t = [], []
    for _ in range(rounds):
        ours_t += _timings(ours, 1)
        with _best_librosa_threads():
            theirs_t += _timings(theirs, 1)
    return statistics.median(ours_t), statistics.median(theirs_t)


def _librosa_mel(config: xa.MelConfig) -> Callable[[np.ndarray], np.ndarray]:
    def mel(y: np.ndarray) -> np.ndarray:
        return librosa.feature.melspectrogram(
            y=y, sr=config.sample_rate, n_fft=config.n_fft, hop_length=config.hop_length,
            win_length=config.win_length, center=config.center, pad_mode=config.pad_mode,
            power=config.power, n_mels=config.n_mels, fmin=config.fmin, fmax=config.fmax,
            htk=config.htk, norm=config.norm,
        )  # fmt: skip

    return mel


def _padded_batches(clips: list[np.ndarray], batch_size: int, step: int) -> list[np.ndarray]:
    """Clips sorted by length, batched, each batch zero-padded to a multiple of `step`.

    Few distinct shapes (one per `step` of length), each compiled once in the warm-up.
    """
    ordered = sorted(clips, key=len)
    batches = []
    for start in range(0, len(ordered), batch_size):
        group = ordered[start : start + batch_size]
        length = -(-max(len(c) for c in group) // step) * step
        batch = np.zeros((batch_size, length), np.float32)
        for row, clip in enumerate(group):
            batch[row, : len(clip)] = clip
        batches.append(batch)
    return batches


def _compiled_mel(config: xa.MelConfig) -> Callable[[tf.Tensor], tf.Tensor]:
    return tf.function(lambda w: xa.mel_spectrogram(w, config), jit_compile=True)


def bench_mel(clips: list[np.ndarray], config: xa.MelConfig, bench: AudioBenchConfig) -> dict:
    """Sorted, padded batches through the XLA mel, `threads` at a time, vs librosa per file."""
    batches = _padded_batches(clips, bench.batch_size, step=config.sample_rate)
    dataset = tf.data.Dataset.from_tensors(batches[0])
    for batch in batches[1:]:
        dataset = dataset.concatenate(tf.data.Dataset.from_tensors(batch))
    dataset = dataset.map(_compiled_mel(config), num_parallel_calls=bench.threads).prefetch(
        bench.threads
    )
    librosa_mel = _librosa_mel(config)
    ours, theirs = _side_by_side(
        lambda: [None for _ in dataset],
        lambda: [librosa_mel(c) for c in clips],
        bench.rounds,
    )
    return _figures(sum(len(c) for c in clips) / config.sample_rate, ours, theirs)


def bench_end_to_end(paths: list[str], config: xa.MelConfig, bench: AudioBenchConfig) -> dict:
    """WAV files → mel: tf.data + load_wav + batched XLA mel vs librosa.load + mel per file."""
    length = max(soundfile.info(p).frames for p in paths)
    dataset = (
        tf.data.Dataset.from_tensor_slices(paths)
        .map(lambda p: xa.load_wav(p)[0][:, 0], num_parallel_calls=tf.data.AUTOTUNE)
        # Fixed batch shape (full batches, fixed length): the compiled mel sees one shape.
        .padded_batch(bench.batch_size, padded_shapes=[length], drop_remainder=True)
        .map(_compiled_mel(config), num_parallel_calls=bench.threads)
        .prefetch(bench.threads)
    )
    used = paths[: len(paths) // bench.batch_size * bench.batch_size]
    librosa_mel = _librosa_mel(config)

    def theirs() -> None:
        for path in used:
            librosa_mel(librosa.load(path, sr=None)[0])

    seconds = sum(soundfile.info(p).frames for p in used) / config.sample_rate
    return _figures(seconds, *_side_by_side(lambda: [None for _ in dataset], theirs, bench.rounds))


def bench_decode(paths: list[str], sample_rate: int, bench: AudioBenchConfig) -> dict:
    """decode_wav vs tf.audio.decode_wav on the same in-memory 16-bit files, in tf.data."""
    contents = [pathlib.Path(p).read_bytes() for p in paths]

    def pipeline(decode: Callable) -> Callable[[], None]:
        dataset = tf.data.Dataset.from_tensor_slices(contents).map(
            decode, num_parallel_calls=tf.data.AUTOTUNE
        )
        return lambda: [None for _ in dataset]

    ours, theirs = _side_by_side(
        pipeline(lambda c: xa.decode_wav(c)[0]),
        pipeline(lambda c: tf.audio.decode_wav(c).audio),
        bench.rounds,
    )
    frames = sum(soundfile.info(p).frames for p in paths)
    return _figures(frames / sample_rate, ours, theirs)


def _figures(audio_seconds: float, ours_s: float, theirs_s: float) -> dict:
    return {
        "audio_seconds": round(audio_seconds, 2),
        "ours_audio_s_per_s": round(audio_seconds / ours_s, 1),
        "baseline_audio_s_per_s": round(audio_seconds / theirs_s, 1),
        "ratio": round(theirs_s / ours_s, 2),
    }


def run_audio_benchmarks(bench: AudioBenchConfig) -> dict:
    """Run all three comparisons; returns {name: figures} plus the settings used."""
    tf.config.threading.set_intra_op_parallelism_threads(bench.threads)
    tf.config.threading.set_inter_op_parallelism_threads(bench.threads)
    config = xa.MelConfig.from_preset(bench.preset)
    clips = make_clips(bench, config.sample_rate)
    with tempfile.TemporaryDirectory(prefix="xtts-bench-audio-") as folder:
        paths = []
        for index, clip in enumerate(clips):
            path = str(pathlib.Path(folder) / f"clip{index:03d}.wav")
            tf.io.write_file(path, tf.audio.encode_wav(clip[:, None], config.sample_rate))
            paths.append(path)
        results = {
            "mel": bench_mel(clips, config, bench),
            "end_to_end": bench_end_to_end(paths, config, bench),
            "decode": bench_decode(paths, config.sample_rate, bench),
        }
    return {"settings": dataclasses.asdict(bench), **results}


_LABELS = {
    "mel": ("batched XLA mel_spectrogram", "librosa.feature.melspectrogram per file"),
    "end_to_end": ("tf.data load_wav + XLA mel", "librosa.load + melspectrogram per file"),
    "decode": ("xtts_audio.decode_wav", "tf.audio.decode_wav"),
}


def format_table(results: dict) -> str:
    """One row per comparison: ours, baseline (audio s / wall s) and the ratio."""
    header = f"{'comparison':<12} {'ours':>10} {'baseline':>10} {'ratio':>7}"
    rows = [f"{header}  (audio seconds per wall second)"]
    for name, (ours_label, theirs_label) in _LABELS.items():
        r = results[name]
        rows.append(
            f"{name:<12} {r['ours_audio_s_per_s']:>10.1f} {r['baseline_audio_s_per_s']:>10.1f} "
            f"{r['ratio']:>6.2f}×  {ours_label} vs {theirs_label}"
        )
    return "\n".join(rows)
