"""`xtts-bench compare`: xtts-data side by side with the pipelines it replaces, on one
corpus, in one process.

- cache build: `xtts_data.prepare` vs `baselines.librosa_cache_build` (librosa in a thread
  pool), in seconds of audio per wall second;
- input pipelines: `make_dataset` from the cache (buckets and fixed) and on the fly, vs
  `baselines.npy_dataset` (`np.load` through `tf.numpy_function`) and
  `baselines.librosa_dataset` (librosa through `tf.numpy_function` per sample), alone
  (samples/s, batch latency and its CV, CPU-ms per sample) and fed to a simulated device
  that needs `device_ms` per batch (utilization);
- padding efficiency of buckets vs fixed padding;
- the vocoder's segment pipelines: `make_segment_dataset` from a cache with waveforms vs
  `baselines.npy_segment_dataset` (WAV file and `.npy` mel per utterance, the segment cut
  in NumPy through `tf.numpy_function`), both batched to the one static segment shape,
  measured as the input pipelines are.

Every pipeline is timed with `xtts_data.doctor.time_batches`, the same yardstick.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import shutil
import statistics
import tempfile
import time

import numpy as np
import tensorflow as tf

import xtts_audio as xa
import xtts_data as xd
from xtts_bench import baselines
from xtts_bench.settings import DataBenchConfig
from xtts_data.doctor import time_batches

__all__ = [
    "DataBenchConfig",
    "baseline_utterances",
    "corpus_summary",
    "format_data_table",
    "run_data_benchmarks",
]

XTTS_SEGMENTS, SEGMENT_CUTTER = "xtts segments", "segments + numpy_function"


def baseline_utterances(corpus: xd.Corpus, data: xd.DataConfig) -> list[baselines.Utterance]:
    """The corpus rows as the baselines take them, with xtts-data's token ids."""
    transcripts = xd.read_transcripts(corpus.rows, data.text)
    return [
        baselines.Utterance(row.id.replace("/", "_"), row.audio, tuple(transcripts.tokens[row.id]))
        for row in corpus.rows
        if row.id in transcripts.tokens
    ]


def bench_cache_build(
    corpus: xd.Corpus, audio: xa.MelConfig, work: pathlib.Path, bench: DataBenchConfig
) -> dict:
    """Audio seconds per wall second of both builders, alternating, fresh folders each time."""
    data = xd.DataConfig()
    utterances = baseline_utterances(corpus, data)
    warm = xd.Corpus(corpus.root, corpus.layout, corpus.rows[:4], ())
    xd.prepare(warm, work / "warm-ours", audio=audio, data=data, workers=bench.workers)
    baselines.librosa_cache_build(
        utterances[:4], audio, work / "warm-theirs", workers=bench.workers
    )
    ours, theirs = [], []
    for round_ in range(bench.rounds):
        result = xd.prepare(
            corpus, work / f"ours-{round_}", audio=audio, data=data, workers=bench.workers
        )
        ours.append(result.audio_seconds / result.wall_seconds)
        stats = baselines.librosa_cache_build(
            utterances, audio, work / f"theirs-{round_}", workers=bench.workers
        )
        theirs.append(stats.seconds_per_second)
        if round_:  # keep the last pair: the pipeline benchmark reads them
            shutil.rmtree(work / f"ours-{round_ - 1}")
            shutil.rmtree(work / f"theirs-{round_ - 1}")
    return {
        "ours_audio_s_per_s": statistics.median(ours),
        "baseline_audio_s_per_s": statistics.median(theirs),
        "ratio": statistics.median(o / t for o, t in zip(ours, theirs, strict=True)),
        "audio_seconds": result.audio_seconds,
    }


@dataclasses.dataclass(frozen=True)
class _Inputs:
    """What the pipeline comparison reads: the corpus and the caches (xtts-data's, the
    baseline's `.npy` mels and, for segments, xtts-data's with waveforms)."""

    corpus: xd.Corpus
    audio: xa.MelConfig
    cache: pathlib.Path
    npy: pathlib.Path
    utterances: list[baselines.Utterance]
    segment_cache: pathlib.Path


def _pipelines(inputs: _Inputs, bench: DataBenchConfig) -> dict[str, tuple]:
    """name: (dataset, static shapes, slow) for every pipeline compared."""
    base = xd.DataConfig(batch_size=bench.batch_size, val_fraction=0.0)
    fixed_config = dataclasses.replace(base, policy="fixed")
    buckets = xd.make_dataset(inputs.cache, base, "train", repeat=True)
    fixed = xd.make_dataset(inputs.cache, fixed_config, "train", repeat=True)
    (shape,) = fixed.spec.shapes
    sizes = dict(batch_size=bench.batch_size, max_frames=shape.frames, max_text_len=shape.text_len)
    npy = baselines.npy_dataset(inputs.utterances, inputs.npy, n_mels=buckets.spec.n_mels, **sizes)
    pipelines = {
        "xtts buckets": (buckets.dataset, len(buckets.spec.shapes), False),
        "xtts fixed": (fixed.dataset, 1, False),
        "npy + numpy_function": (npy, 1, False),
    }
    try:  # features computed inside tf.data, every epoch (nothing kept in memory)
        on_the_fly = xd.make_dataset(
            inputs.corpus.root, dataclasses.replace(fixed_config, keep_in_memory=False),
            "train", audio=inputs.audio, repeat=True,
        )  # fmt: skip
        pipelines["xtts on the fly"] = (on_the_fly.dataset, 1, True)
    except xd.CorpusError:  # a corpus with non-WAV audio: needs a cache
        pass
    librosa = baselines.librosa_dataset(inputs.utterances, inputs.audio, **sizes)
    pipelines["librosa + numpy_function"] = (librosa, 1, True)
    return pipelines


def _segment_pipelines(
    inputs: _Inputs, bench: DataBenchConfig
) -> tuple[dict[str, tuple], xd.SegmentShape]:
    """name: (dataset, static shapes, slow) of the two segment pipelines, and the one shape
    both emit: `batch_size` segments of `data.segment_frames` (DataConfig's default) frames."""
    config = xd.DataConfig(batch_size=bench.batch_size, val_fraction=0.0)
    ours = xd.make_segment_dataset(inputs.segment_cache, config, "train", repeat=True)
    (shape,) = ours.spec.shapes
    cutter = baselines.npy_segment_dataset(
        inputs.utterances, inputs.npy, inputs.audio, batch_size=shape.batch_size,
        segment_frames=shape.frames,
    )  # fmt: skip
    pipelines = {XTTS_SEGMENTS: (ours.dataset, 1, False), SEGMENT_CUTTER: (cutter, 1, False)}
    return pipelines, shape


def bench_pipelines(inputs: _Inputs, bench: DataBenchConfig) -> dict:
    """The text-to-mel input pipelines, timed by `_time_each`, with each one's ratio of
    samples/s to both baselines."""
    results = _time_each(_pipelines(inputs, bench), inputs, bench)
    npy = results["npy + numpy_function"]["samples_per_s"]
    librosa = results["librosa + numpy_function"]["samples_per_s"]
    for result in results.values():
        result["ratio_vs_npy"] = result["samples_per_s"] / npy
        result["ratio_vs_librosa"] = result["samples_per_s"] / librosa
    return results


def bench_segment_pipelines(inputs: _Inputs, bench: DataBenchConfig) -> dict:
    """The segment pipelines, timed by `_time_each`, with each one's ratio of samples/s
    (segments/s) to the Python cutter's; and their one shape (batch, frames, samples)."""
    pipelines, shape = _segment_pipelines(inputs, bench)
    results = _time_each(pipelines, inputs, bench)
    cutter = results[SEGMENT_CUTTER]["samples_per_s"]
    for result in results.values():
        result["ratio_vs_cutter"] = result["samples_per_s"] / cutter
    return {"shape": list(shape.key), "pipelines": results}


def _time_each(pipelines: dict[str, tuple], inputs: _Inputs, bench: DataBenchConfig) -> dict:
    """Each pipeline in turn, `rounds` times, with only its own iterator alive.

    A fresh iterator first runs one epoch (timed: the first epoch reads the cache from
    disk; xtts-data keeps it in memory for the next ones), then `batches` batches alone
    and `batches` fed to the simulated device. The on-the-fly pipelines, which compute
    features every epoch, skip the epoch and draw a fifth of the batches.
    """
    epoch = math.ceil(len(inputs.utterances) / bench.batch_size) + 2
    runs: dict[str, list] = {name: [] for name in pipelines}
    for _ in range(bench.rounds):
        for name, (dataset, _, slow) in pipelines.items():
            iterator = iter(dataset.repeat())
            first = time_batches(iterator, batches=3 if slow else epoch).summary()
            batches = max(bench.batches // 5, 5) if slow else bench.batches
            alone = time_batches(iterator, batches=batches).summary()
            time.sleep(0.2)  # let the prefetch buffers refill, as after a device step
            device = time_batches(iterator, batches=batches, device_ms=bench.device_ms)
            runs[name].append((first, alone, device.summary()))
            del iterator  # stops its threads before the next pipeline is timed
    results = {}
    for name, triples in runs.items():
        first, alone, device = (list(column) for column in zip(*triples, strict=True))
        slow = pipelines[name][2]
        results[name] = {
            # (on the fly, the first batches are start-up only: not reported)
            "first_epoch_samples_per_s": None if slow else _median(first, "samples_per_s"),
            "samples_per_s": _median(alone, "samples_per_s"),
            "batch_ms_mean": _median(alone, "batch_ms_mean"),
            "batch_ms_cv": _median(alone, "batch_ms_cv"),
            "cpu_ms_per_sample": _median(alone, "cpu_ms_per_sample"),
            "device_utilization": _median(device, "device_utilization"),
            "device_wait_ms_cv": _median(device, "batch_ms_cv"),
            "padding_efficiency": alone[0]["padding_efficiency"],
            "shapes": pipelines[name][1],
        }
    return results


def _median(summaries: list[dict], key: str) -> float:
    return statistics.median(summary[key] for summary in summaries)


def corpus_summary(cache: pathlib.Path, audio: xa.MelConfig) -> dict:
    """Utterance count and min/mean/max seconds of a feature cache's utterances."""
    frames = xd.FeatureCache.open(cache).manifest.samples.frames
    seconds = frames * audio.hop_length / audio.sample_rate
    return {
        "utterances": len(frames),
        "mean_seconds": float(np.mean(seconds)),
        "min_seconds": float(np.min(seconds)),
        "max_seconds": float(np.max(seconds)),
    }


def _inputs(corpus: xd.Corpus, audio: xa.MelConfig, work: pathlib.Path,
            bench: DataBenchConfig) -> _Inputs:  # fmt: skip
    """The timed build's last caches, and an untimed xtts-data cache with waveforms
    (`keep_audio`) for the segment pipelines."""
    last = bench.rounds - 1
    segments = work / "ours-segments"
    xd.prepare(corpus, segments, audio=audio, data=xd.DataConfig(keep_audio=True),
               workers=bench.workers)  # fmt: skip
    utterances = baseline_utterances(corpus, xd.DataConfig())
    return _Inputs(corpus, audio, work / f"ours-{last}", work / f"theirs-{last}", utterances,
                   segments)  # fmt: skip


def run_data_benchmarks(bench: DataBenchConfig) -> dict:
    """Build both caches (timed) and one with waveforms (not timed), then compare the
    text-to-mel and the segment pipelines; returns all figures."""
    audio = xa.MelConfig.from_preset(bench.preset)
    with tempfile.TemporaryDirectory(prefix="xtts-bench-data-") as folder:
        work = pathlib.Path(folder)
        if bench.corpus is None:
            xd.write_demo_corpus(
                work / "corpus", n=bench.utterances, min_seconds=bench.min_seconds,
                max_seconds=bench.max_seconds,
            )  # fmt: skip
        corpus = xd.read_corpus(bench.corpus or work / "corpus")
        build = bench_cache_build(corpus, audio, work, bench)
        inputs = _inputs(corpus, audio, work, bench)
        pipelines = bench_pipelines(inputs, bench)
        segments = bench_segment_pipelines(inputs, bench)
        corpus = corpus_summary(inputs.cache, audio)
    return {
        "settings": dataclasses.asdict(bench),
        "corpus": corpus,
        "cache_build": build,
        "pipelines": pipelines,
        "segments": segments,
        "tensorflow": tf.__version__,
    }


def format_data_table(results: dict) -> str:
    """The figures as a plain table."""
    c, b, s = results["corpus"], results["cache_build"], results["settings"]
    lines = [
        f"corpus: {c['utterances']} utterances, {c['min_seconds']:.1f}-{c['max_seconds']:.1f} s "
        f"(mean {c['mean_seconds']:.2f} s); batch {s['batch_size']}; device step "
        f"{s['device_ms']:g} ms",
        f"cache build   xtts {b['ours_audio_s_per_s']:.0f} vs librosa pool "
        f"{b['baseline_audio_s_per_s']:.0f} audio s per s: {b['ratio']:.2f}x",
        f"{'pipeline':<26}{'1st epoch':>10}{'samples/s':>10}{'vs npy':>8}{'vs librosa':>11}"
        f"{'batch ms':>10}{'CV':>6}{'device busy':>13}{'CPU ms/sample':>14}{'padding':>9}"
        f"{'shapes':>7}",
    ]
    for name, r in results["pipelines"].items():
        lines.append(
            f"{name:<26}{_number(r['first_epoch_samples_per_s']):>10}{r['samples_per_s']:>10.0f}"
            f"{r['ratio_vs_npy']:>7.2f}x{r['ratio_vs_librosa']:>10.1f}x"
            f"{r['batch_ms_mean']:>10.2f}{r['batch_ms_cv']:>6.2f}{r['device_utilization']:>13.1%}"
            f"{r['cpu_ms_per_sample']:>14.2f}{r['padding_efficiency']:>9.1%}{r['shapes']:>7}"
        )
    return "\n".join(lines + _segment_lines(results["segments"]))


def _segment_lines(segments: dict) -> list[str]:
    """The segment pipelines' rows, under their one shape."""
    b, f, n = segments["shape"]
    lines = [
        f"vocoder segments: batch {b} x {f} frames x {n} samples (one static shape)",
        f"{'pipeline':<26}{'1st epoch':>10}{'samples/s':>10}{'vs cutter':>11}"
        f"{'batch ms':>10}{'CV':>6}{'device busy':>13}{'CPU ms/sample':>14}",
    ]
    for name, r in segments["pipelines"].items():
        lines.append(
            f"{name:<26}{_number(r['first_epoch_samples_per_s']):>10}{r['samples_per_s']:>10.0f}"
            f"{r['ratio_vs_cutter']:>10.2f}x{r['batch_ms_mean']:>10.2f}{r['batch_ms_cv']:>6.2f}"
            f"{r['device_utilization']:>13.1%}{r['cpu_ms_per_sample']:>14.2f}"
        )
    return lines


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"
