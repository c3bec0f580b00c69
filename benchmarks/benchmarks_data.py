"""asv benchmarks for xtts-data: cache build, pipeline throughput, latency, utilization.

A demo corpus (`XTTS_BENCH_UTTERANCES` utterances of 1-10 s, LJSpeech-like, default 200)
or a real one (`XTTS_BENCH_CORPUS`) is built into both caches once per process; every
pipeline is warmed up in `setup`, so `time_*` measures steady-state batches and `track_*`
reports the figures `xtts-data doctor` computes.
"""

from __future__ import annotations

import functools
import os
import pathlib
import shutil
import tempfile
import uuid
from typing import ClassVar

import xtts_audio as xa
import xtts_data as xd
from xtts_bench import baselines
from xtts_bench.data import baseline_utterances
from xtts_data.doctor import time_batches

_UTTERANCES = int(os.environ.get("XTTS_BENCH_UTTERANCES", "200"))
_CORPUS = os.environ.get("XTTS_BENCH_CORPUS")
_BATCHES = int(os.environ.get("XTTS_BENCH_BATCHES", "50"))
AUDIO = xa.MelConfig.from_preset("xtts")


@functools.lru_cache(maxsize=1)
def _inputs() -> tuple[xd.Corpus, pathlib.Path, pathlib.Path, list]:
    """(corpus, xtts cache, npy cache, baseline utterances), built once per process."""
    work = pathlib.Path(tempfile.mkdtemp(prefix="xtts-asv-data-"))
    if _CORPUS is None:
        xd.write_demo_corpus(work / "corpus", n=_UTTERANCES)
    corpus = xd.read_corpus(_CORPUS or work / "corpus")
    xd.prepare(corpus, work / "cache", audio=AUDIO, data=xd.DataConfig())
    utterances = baseline_utterances(corpus, xd.DataConfig())
    baselines.librosa_cache_build(utterances, AUDIO, work / "npy")
    return corpus, work / "cache", work / "npy", utterances


class CacheBuild:
    """Seconds to build the feature cache: xtts-data prepare vs librosa in a thread pool."""

    timeout = 600

    def setup(self) -> None:
        self.corpus, *_ = _inputs()
        self.utterances = _inputs()[3]
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="xtts-asv-build-"))
        xd.prepare(self.corpus, self.work / "warm", audio=AUDIO, data=xd.DataConfig())

    def teardown(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)

    def time_xtts_prepare(self) -> None:
        xd.prepare(self.corpus, self.work / uuid.uuid4().hex, audio=AUDIO, data=xd.DataConfig())

    def time_librosa_thread_pool(self) -> None:
        baselines.librosa_cache_build(self.utterances, AUDIO, self.work / uuid.uuid4().hex)


class Pipeline:
    """make_dataset batches from the cache, per shape policy and batch size."""

    params: ClassVar[tuple] = (["buckets", "fixed"], [16, 32])
    param_names: ClassVar[list[str]] = ["policy", "batch_size"]
    timeout = 600

    def setup(self, policy: str, batch_size: int) -> None:
        _, cache, _, _ = _inputs()
        config = xd.DataConfig(policy=policy, batch_size=batch_size, val_fraction=0.0)
        self.pipeline = xd.make_dataset(cache, config, "train", repeat=True)
        self.iterator = iter(self.pipeline.dataset)
        time_batches(self.iterator, batches=10)  # start-up and first (uncached) reads
        self.alone = time_batches(self.iterator, batches=_BATCHES).summary()
        self.device = time_batches(self.iterator, batches=_BATCHES, device_ms=20.0).summary()

    def time_batches(self, policy: str, batch_size: int) -> None:
        time_batches(self.iterator, batches=_BATCHES)

    def track_samples_per_s(self, policy: str, batch_size: int) -> float:
        return self.alone["samples_per_s"]

    def track_batch_ms_cv(self, policy: str, batch_size: int) -> float:
        return self.alone["batch_ms_cv"]

    def track_device_utilization_20ms(self, policy: str, batch_size: int) -> float:
        return self.device["device_utilization"]

    def track_padding_efficiency(self, policy: str, batch_size: int) -> float:
        return self.alone["padding_efficiency"]

    def track_static_shapes(self, policy: str, batch_size: int) -> int:
        return len(self.pipeline.spec.shapes)

    def track_python_ops(self, policy: str, batch_size: int) -> int:
        return len(xd.python_ops(self.pipeline.dataset))


class NpyBaseline:
    """The pipeline xtts-data replaces: .npy mels through tf.numpy_function, fixed padding."""

    params: ClassVar[tuple] = ([16, 32],)
    param_names: ClassVar[list[str]] = ["batch_size"]
    timeout = 600

    def setup(self, batch_size: int) -> None:
        _, cache, npy, utterances = _inputs()
        config = xd.DataConfig(policy="fixed", batch_size=batch_size, val_fraction=0.0)
        fixed = xd.make_dataset(cache, config, repeat=True)  # the same fixed shape
        (shape,) = fixed.spec.shapes
        dataset = baselines.npy_dataset(
            utterances, npy, batch_size=batch_size, max_frames=shape.frames,
            max_text_len=shape.text_len, n_mels=AUDIO.n_mels,
        )  # fmt: skip
        self.iterator = iter(dataset.repeat())
        time_batches(self.iterator, batches=10)
        self.alone = time_batches(self.iterator, batches=_BATCHES).summary()
        self.device = time_batches(self.iterator, batches=_BATCHES, device_ms=20.0).summary()

    def time_batches(self, batch_size: int) -> None:
        time_batches(self.iterator, batches=_BATCHES)

    def track_samples_per_s(self, batch_size: int) -> float:
        return self.alone["samples_per_s"]

    def track_batch_ms_cv(self, batch_size: int) -> float:
        return self.alone["batch_ms_cv"]

    def track_device_utilization_20ms(self, batch_size: int) -> float:
        return self.device["device_utilization"]
