"""asv benchmarks for xtts-data: cache build, pipeline throughput, latency, utilization.

A demo corpus (`XTTS_BENCH_UTTERANCES` utterances of 1-10 s, LJSpeech-like, default 200)
or a real one (`XTTS_BENCH_CORPUS`) is built into both caches once per asv run
(`setup_cache`, shared by every class here: asv runs each benchmark in its own process);
every pipeline is warmed up in `setup`, so `time_*` measures steady-state batches and
`track_*` reports the figures `xtts-data doctor` computes.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
import uuid
from typing import ClassVar, NamedTuple

import xtts_audio as xa
import xtts_data as xd
from xtts_bench import baselines
from xtts_bench.data import baseline_utterances
from xtts_data import doctor

_UTTERANCES = int(os.environ.get("XTTS_BENCH_UTTERANCES", "200"))
_CORPUS = os.environ.get("XTTS_BENCH_CORPUS")
_BATCHES = int(os.environ.get("XTTS_BENCH_BATCHES", "50"))
AUDIO = xa.MelConfig.from_preset("xtts")


class _Inputs(NamedTuple):
    """What `build_inputs` leaves on disk, passed to every benchmark by asv."""

    corpus: str
    cache: str
    npy: str
    utterances: list


def build_inputs(benchmark: object) -> _Inputs:
    """The corpus, its xtts cache and the librosa `.npy` cache, in the current folder (asv's
    setup_cache folder, kept until every benchmark here has run).

    The `setup_cache` of every class here: asv calls it bound to a benchmark instance, and
    runs it once because the classes share it.
    """
    work = pathlib.Path.cwd()
    if _CORPUS is None:
        xd.write_demo_corpus(work / "corpus", n=_UTTERANCES)
    corpus = xd.read_corpus(_CORPUS or work / "corpus")
    xd.prepare(corpus, work / "cache", audio=AUDIO, data=xd.DataConfig())
    utterances = baseline_utterances(corpus, xd.DataConfig())
    baselines.librosa_cache_build(utterances, AUDIO, work / "npy")
    return _Inputs(str(_CORPUS or work / "corpus"), str(work / "cache"), str(work / "npy"),
                  utterances)  # fmt: skip


build_inputs.timeout = 1800


class CacheBuild:
    """Seconds to build the feature cache: xtts-data prepare vs librosa in a thread pool."""

    timeout = 600
    setup_cache = build_inputs

    def setup(self, inputs: _Inputs) -> None:
        self.corpus = xd.read_corpus(inputs.corpus)
        self.utterances = inputs.utterances
        self.work = pathlib.Path(tempfile.mkdtemp(prefix="xtts-asv-build-"))
        xd.prepare(self.corpus, self.work / "warm", audio=AUDIO, data=xd.DataConfig())

    def teardown(self, inputs: _Inputs) -> None:
        shutil.rmtree(self.work, ignore_errors=True)

    def time_xtts_prepare(self, inputs: _Inputs) -> None:
        xd.prepare(self.corpus, self.work / uuid.uuid4().hex, audio=AUDIO, data=xd.DataConfig())

    def time_librosa_thread_pool(self, inputs: _Inputs) -> None:
        baselines.librosa_cache_build(self.utterances, AUDIO, self.work / uuid.uuid4().hex)


class TextFrontEnd:
    """Cleaning and tokenising the corpus's transcripts (`read_transcripts`, one thread):
    the text part of `prepare` (`benchmarks/text_front_end.py` compares it with an older
    commit's front end side by side)."""

    setup_cache = build_inputs

    def setup(self, inputs: _Inputs) -> None:
        self.rows = xd.read_corpus(inputs.corpus).rows
        self.config = xd.DataConfig().text
        xd.read_transcripts(self.rows, self.config)  # num2words and the caches warm

    def time_read_transcripts(self, inputs: _Inputs) -> None:
        xd.read_transcripts(self.rows, self.config)

    def track_rows_per_s(self, inputs: _Inputs) -> float:
        return xd.read_transcripts(self.rows, self.config).rows_per_second

    track_rows_per_s.unit = "rows/s"


class Pipeline:
    """make_dataset batches from the cache, per shape policy and batch size."""

    params: ClassVar[tuple] = (["buckets", "fixed"], [16, 32])
    param_names: ClassVar[list[str]] = ["policy", "batch_size"]
    timeout = 600
    setup_cache = build_inputs

    def setup(self, inputs: _Inputs, policy: str, batch_size: int) -> None:
        config = xd.DataConfig(policy=policy, batch_size=batch_size, val_fraction=0.0)
        self.pipeline = xd.make_dataset(inputs.cache, config, "train", repeat=True)
        self.iterator = iter(self.pipeline.dataset)
        doctor.time_batches(self.iterator, batches=10)  # start-up and first (uncached) reads
        self.alone = doctor.time_batches(self.iterator, batches=_BATCHES).summary()
        self.device = doctor.time_batches(self.iterator, batches=_BATCHES, device_ms=20.0).summary()

    def time_batches(self, inputs: _Inputs, policy: str, batch_size: int) -> None:
        doctor.time_batches(self.iterator, batches=_BATCHES)

    def track_samples_per_s(self, inputs: _Inputs, policy: str, batch_size: int) -> float:
        return self.alone["samples_per_s"]

    def track_batch_ms_cv(self, inputs: _Inputs, policy: str, batch_size: int) -> float:
        return self.alone["batch_ms_cv"]

    def track_device_utilization_20ms(self, inputs: _Inputs, policy: str, batch_size: int) -> float:
        return self.device["device_utilization"]

    def track_padding_efficiency(self, inputs: _Inputs, policy: str, batch_size: int) -> float:
        return self.alone["padding_efficiency"]

    def track_static_shapes(self, inputs: _Inputs, policy: str, batch_size: int) -> int:
        return len(self.pipeline.spec.shapes)

    def track_python_ops(self, inputs: _Inputs, policy: str, batch_size: int) -> int:
        return len(xd.python_ops(self.pipeline.dataset))


class JoinedItems:
    """make_dataset's train batches with items of several utterances (`data.join`) beside
    single ones: what the `JoinUtterances` stage costs the pipeline."""

    params: ClassVar[tuple] = ([1, 3],)
    param_names: ClassVar[list[str]] = ["join"]
    timeout = 600
    setup_cache = build_inputs

    def setup(self, inputs: _Inputs, join: int) -> None:
        config = xd.DataConfig(join=join, val_fraction=0.0, keep_in_memory=True, seed=0)
        self.pipeline = xd.make_dataset(inputs.cache, config, "train", repeat=True)
        self.iterator = iter(self.pipeline.dataset)
        doctor.time_batches(self.iterator, batches=10)  # start-up and the in-memory copy
        self.alone = doctor.time_batches(self.iterator, batches=_BATCHES).summary()

    def time_batches(self, inputs: _Inputs, join: int) -> None:
        doctor.time_batches(self.iterator, batches=_BATCHES)

    def track_samples_per_s(self, inputs: _Inputs, join: int) -> float:
        return self.alone["samples_per_s"]

    def track_batch_ms_cv(self, inputs: _Inputs, join: int) -> float:
        return self.alone["batch_ms_cv"]

    def track_python_ops(self, inputs: _Inputs, join: int) -> int:
        return len(xd.python_ops(self.pipeline.dataset))


class NpyBaseline:
    """The pipeline xtts-data replaces: .npy mels through tf.numpy_function, fixed padding."""

    params: ClassVar[tuple] = ([16, 32],)
    param_names: ClassVar[list[str]] = ["batch_size"]
    timeout = 600
    setup_cache = build_inputs

    def setup(self, inputs: _Inputs, batch_size: int) -> None:
        config = xd.DataConfig(policy="fixed", batch_size=batch_size, val_fraction=0.0)
        fixed = xd.make_dataset(inputs.cache, config, repeat=True)  # the same fixed shape
        (shape,) = fixed.spec.shapes
        dataset = baselines.npy_dataset(
            inputs.utterances, pathlib.Path(inputs.npy), batch_size=batch_size,
            max_frames=shape.frames, max_text_len=shape.text_len, n_mels=AUDIO.n_mels,
        )  # fmt: skip
        self.iterator = iter(dataset.repeat())
        doctor.time_batches(self.iterator, batches=10)
        self.alone = doctor.time_batches(self.iterator, batches=_BATCHES).summary()
        self.device = doctor.time_batches(self.iterator, batches=_BATCHES, device_ms=20.0).summary()

    def time_batches(self, inputs: _Inputs, batch_size: int) -> None:
        doctor.time_batches(self.iterator, batches=_BATCHES)

    def track_samples_per_s(self, inputs: _Inputs, batch_size: int) -> float:
        return self.alone["samples_per_s"]

    def track_batch_ms_cv(self, inputs: _Inputs, batch_size: int) -> float:
        return self.alone["batch_ms_cv"]

    def track_device_utilization_20ms(self, inputs: _Inputs, batch_size: int) -> float:
        return self.device["device_utilization"]
