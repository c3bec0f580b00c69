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

import concurrent.futures
import dataclasses
import functools
import pathlib
import statistics
import tempfile
import time
from collections.abc import Callable

import librosa
import numpy as np
import tensorflow as tf
import threadpoolctl

import xtts_audio as xa
from xtts_audio.demo import synthetic_utterance
from xtts_bench.settings import AudioBenchConfig

__all__ = [
    "AudioBenchConfig",
    "format_table",
    "librosa_mel",
    "make_clips",
    "padded_batches",
    "run_audio_benchmarks",
    "write_wavs",
]


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


def write_wavs(clips: list[np.ndarray], folder: pathlib.Path, sample_rate: int) -> list[str]:
    """Each clip as a 16-bit mono WAV file in `folder`; returns their paths, in order."""
    paths = []
    for index, clip in enumerate(clips):
        path = str(folder / f"clip{index:03d}.wav")
        xa.write_wav(path, clip, sample_rate)
        paths.append(path)
    return paths


def _wall(fn: Callable[[], object]) -> Callable[[], float]:
    """A timer of one call of `fn`."""

    def run() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    return run


def _blas_limit(threads: int | None) -> threadpoolctl.threadpool_limits:
    return threadpoolctl.threadpool_limits(limits=threads, user_api="blas")


def _fastest_blas_threads(theirs: Callable[[], float]) -> int | None:
    """The BLAS thread count (default or 1) under which the baseline runs faster.

    librosa's mel is a small matrix product. With OpenBLAS's default of a thread per core it
    is ~5% faster on an idle machine, and several times slower (7x measured here) when the
    other core is busy, because its threads spin-wait. The baseline gets whichever is better.
    """
    timings = {}
    for threads in (None, 1):
        with _blas_limit(threads):
            timings[threads] = min(theirs(), theirs())
    return min(timings, key=timings.get)


def _epoch(dataset: tf.data.Dataset) -> Callable[[], float]:
    """A timer of one pass over `dataset`, iterator set-up excluded (paid once per epoch)."""

    def run() -> float:
        iterator = iter(dataset)
        start = time.perf_counter()
        for _ in iterator:
            pass
        return time.perf_counter() - start

    return run


def _side_by_side(
    ours: Callable[[], float], theirs: Callable[[], float], rounds: int
) -> tuple[float, float, float]:
    """Median seconds of each and the median of per-round ratios (theirs / ours).

    Rounds alternate one run of each, so the machine's drift hits both alike; the ratio of
    each back-to-back pair is what is least disturbed by a shared, noisy machine.

    Both time themselves (`_epoch`, `_wall`). Each pipeline is exhausted before the other
    side runs, and a short pause lets TensorFlow's spinning pool threads go idle first.
    """
    ours()  # warm-up: compile, fill caches
    blas_threads = _fastest_blas_threads(theirs)
    ours_t, theirs_t = [], []
    for _ in range(rounds):
        ours_t.append(ours())
        time.sleep(0.05)
        with _blas_limit(blas_threads):
            theirs_t.append(theirs())
    ratios = [t / o for o, t in zip(ours_t, theirs_t, strict=True)]
    return statistics.median(ours_t), statistics.median(theirs_t), statistics.median(ratios)


def librosa_mel(config: xa.MelConfig) -> Callable[[np.ndarray], np.ndarray]:
    """The baseline: `librosa.feature.melspectrogram` with the recipe's settings, per clip."""

    def mel(y: np.ndarray) -> np.ndarray:
        return librosa.feature.melspectrogram(
            y=y, sr=config.sample_rate, n_fft=config.n_fft, hop_length=config.hop_length,
            win_length=config.win_length, center=config.center, pad_mode=config.pad_mode,
            power=config.power, n_mels=config.n_mels, fmin=config.fmin, fmax=config.fmax,
            htk=config.htk, norm=config.norm,
        )  # fmt: skip

    return mel


def padded_batches(clips: list[np.ndarray], batch_size: int, step: int) -> list[np.ndarray]:
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


def _compiled_mel_per_shape(
    config: xa.MelConfig, batches: list[tf.Tensor]
) -> Callable[[tf.Tensor], tf.Tensor]:
    """One compiled mel per batch shape (each with its `input_signature`), as a bucketed
    pipeline compiles them. TensorFlow counts traces per Python code object, so lambdas
    would share one count and draw its "triggered tf.function retracing" warning; partials
    are counted apart."""
    compiled = {
        shape: tf.function(
            functools.partial(xa.mel_spectrogram, config=config),
            input_signature=[tf.TensorSpec(shape, tf.float32)],
            jit_compile=True,
        )
        for shape in {tuple(batch.shape) for batch in batches}
    }
    return lambda batch: compiled[tuple(batch.shape)](batch)


def bench_mel(clips: list[np.ndarray], config: xa.MelConfig, bench: AudioBenchConfig) -> dict:
    """Sorted, padded batches through the XLA mel, `threads` in flight, vs librosa per file.

    Each batch keeps its static shape (as a bucketed pipeline's batches do), and `threads`
    batches run at once, one per core, as `map(..., num_parallel_calls=threads)` runs them.
    """
    padded = padded_batches(clips, bench.batch_size, step=config.sample_rate // 4)
    # Longest first: the cores finish together instead of one waiting on the last, longest batch.
    batches = [tf.constant(b) for b in reversed(padded)]
    compiled = _compiled_mel_per_shape(config, batches)
    executor = concurrent.futures.ThreadPoolExecutor(bench.threads)
    in_flight = _wall(lambda: list(executor.map(lambda b: compiled(b).numpy(), batches)))
    librosa_mel_of = librosa_mel(config)
    seconds = sum(len(c) for c in clips) / config.sample_rate
    measured = _side_by_side(
        in_flight, _wall(lambda: [librosa_mel_of(c) for c in clips]), bench.rounds
    )
    # Not the baseline, but what a careful librosa user could do with the same cores.
    with concurrent.futures.ThreadPoolExecutor(bench.threads) as pool:
        pooled = _wall(lambda: list(pool.map(librosa_mel_of, clips)))
        _, pool_s, pool_ratio = _side_by_side(in_flight, pooled, bench.rounds)
    executor.shutdown()
    figures = _figures(seconds, *measured)
    figures["librosa_pool_audio_s_per_s"] = round(seconds / pool_s, 1)
    figures["ratio_vs_librosa_pool"] = round(pool_ratio, 2)
    return figures


def bench_end_to_end(
    paths: list[str], lengths: list[int], config: xa.MelConfig, bench: AudioBenchConfig
) -> dict:
    """WAV files → mel: tf.data + load_wav + batched XLA mel vs librosa.load + mel per file.

    `lengths` are the files' sample counts.
    """
    length = max(lengths)
    dataset = (
        tf.data.Dataset.from_tensor_slices(paths)
        .map(lambda p: xa.load_wav(p)[0][:, 0], num_parallel_calls=tf.data.AUTOTUNE)
        # Fixed batch shape (full batches, fixed length): the compiled mel sees one shape.
        .padded_batch(bench.batch_size, padded_shapes=[length], drop_remainder=True)
        .map(_compiled_mel(config), num_parallel_calls=bench.threads)
        .prefetch(bench.threads)
    )
    used = len(paths) // bench.batch_size * bench.batch_size  # full batches only
    librosa_mel_of = librosa_mel(config)

    def theirs() -> None:
        for path in paths[:used]:
            librosa_mel_of(librosa.load(path, sr=None)[0])

    seconds = sum(lengths[:used]) / config.sample_rate
    return _figures(seconds, *_side_by_side(_epoch(dataset), _wall(theirs), bench.rounds))


def bench_decode(
    paths: list[str], lengths: list[int], sample_rate: int, bench: AudioBenchConfig
) -> dict:
    """decode_wav vs tf.audio.decode_wav on the same in-memory 16-bit files, in tf.data."""
    contents = [pathlib.Path(p).read_bytes() for p in paths]

    def pipeline(decode: Callable) -> Callable[[], float]:
        return _epoch(
            tf.data.Dataset.from_tensor_slices(contents).map(
                decode, num_parallel_calls=tf.data.AUTOTUNE
            )
        )

    theirs_epoch = pipeline(lambda c: tf.audio.decode_wav(c).audio)
    measured = _side_by_side(pipeline(lambda c: xa.decode_wav(c)[0]), theirs_epoch, bench.rounds)
    return _figures(sum(lengths) / sample_rate, *measured)


def _figures(audio_seconds: float, ours_s: float, theirs_s: float, ratio: float) -> dict:
    return {
        "audio_seconds": round(audio_seconds, 2),
        "ours_audio_s_per_s": round(audio_seconds / ours_s, 1),
        "baseline_audio_s_per_s": round(audio_seconds / theirs_s, 1),
        "ratio": round(ratio, 2),
    }


def _configure_threads(threads: int) -> None:
    """One op per core: `threads` batches in flight, each on one thread (two calls sharing
    two intra-op threads contend and lose ~20%)."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError as error:
        raise RuntimeError(
            "run_audio_benchmarks sets TensorFlow's thread pools, which is only possible "
            "before TensorFlow runs anything: call it first in a fresh process (the "
            "`xtts-bench audio` command does)"
        ) from error


def run_audio_benchmarks(bench: AudioBenchConfig) -> dict:
    """Run all three comparisons; returns {name: figures} plus the settings used."""
    _configure_threads(bench.threads)
    config = xa.MelConfig.from_preset(bench.preset)
    clips = make_clips(bench, config.sample_rate)
    lengths = [len(clip) for clip in clips]  # the WAV files below hold exactly these
    with tempfile.TemporaryDirectory(prefix="xtts-bench-audio-") as folder:
        paths = write_wavs(clips, pathlib.Path(folder), config.sample_rate)
        results = {
            "mel": bench_mel(clips, config, bench),
            "end_to_end": bench_end_to_end(paths, lengths, config, bench),
            "decode": bench_decode(paths, lengths, config.sample_rate, bench),
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
        if "librosa_pool_audio_s_per_s" in r:
            rows.append(
                f"{'':<12} {'':>10} {r['librosa_pool_audio_s_per_s']:>10.1f} "
                f"{r['ratio_vs_librosa_pool']:>6.2f}×  … vs librosa in a "
                f"{results['settings']['threads']}-thread pool"
            )
    return "\n".join(rows)
