"""asv benchmarks for xtts-train: the compiled step, its traces, compile time, step-time CV.

A demo corpus of short clips (`XTTS_BENCH_TRAIN_UTTERANCES`, default 64) is cached once per
asv run (`setup_cache`); in each benchmark's process (asv runs every benchmark in its own)
the train step of every bucket shape (`XTTS_BENCH_TRAIN_BUCKETS` buckets, longest of batch
`XTTS_BENCH_TRAIN_BATCH_SIZE`) is compiled in `setup`: `time_*` measures steady-state
updates, and the warm-up's duration is reported by `track_compile_seconds`.
`XTTS_BENCH_TRAIN_STEPS` (default 20) steps are timed for the step-time figures, and
`XTTS_BENCH_TRAIN_SET` takes comma-separated stack overrides (`model.decoder_layers=3,...`).
The dynamic-shape baseline, which compiles per batch, is in `xtts-bench train`.
"""

from __future__ import annotations

import collections
import itertools
import os
import pathlib
import time

from xtts_bench.settings import TrainBenchConfig
from xtts_bench.train import read_inputs, write_cache
from xtts_data import DatasetSpec
from xtts_data.stats import cv
from xtts_train import CompiledSteps, build_steps, timed_step

_UTTERANCES = int(os.environ.get("XTTS_BENCH_TRAIN_UTTERANCES", "64"))
_BUCKETS = int(os.environ.get("XTTS_BENCH_TRAIN_BUCKETS", "2"))
_BATCH_SIZE = int(os.environ.get("XTTS_BENCH_TRAIN_BATCH_SIZE", "16"))
_STEPS = int(os.environ.get("XTTS_BENCH_TRAIN_STEPS", "20"))
_SET = tuple(o for o in os.environ.get("XTTS_BENCH_TRAIN_SET", "").split(",") if o)
BENCH = TrainBenchConfig(
    batches=_STEPS, utterances=_UTTERANCES, batch_size=_BATCH_SIZE, num_buckets=_BUCKETS,
    overrides=_SET, graph=False,
)  # fmt: skip


def build_cache(benchmark: object) -> str:
    """The demo corpus and its cache in the current folder (asv's setup_cache folder).

    The `setup_cache` of every class here (asv calls it bound to a benchmark instance).
    """
    return str(write_cache(BENCH, pathlib.Path.cwd()))


build_cache.timeout = 1800


class _Compiled:
    """Reads the batches and compiles the step of every bucket shape (timed) in `setup`."""

    timeout = 1800
    setup_cache = build_cache

    def setup(self, cache: str) -> None:
        self.inputs = read_inputs(BENCH, pathlib.Path(cache))
        self.steps = build_steps(self.inputs.stack, self.inputs.spec)
        started = time.perf_counter()
        self.steps.warm_up()
        self.compile_seconds = time.perf_counter() - started


def _step(steps: CompiledSteps, batch) -> float:
    """One update, waiting for its loss; returns milliseconds."""
    return 1e3 * timed_step(steps.train, batch, step=0)[0]


class CompiledStep(_Compiled):
    """One update of the compiled step (XLA, one program per bucket shape), batches cycled."""

    def setup(self, cache: str) -> None:
        super().setup(cache)
        self.batches = itertools.cycle(self.inputs.batches)

    def time_static_step(self, cache: str) -> None:
        _step(self.steps, next(self.batches))


class Traces(_Compiled):
    """Traces and compiled shapes after warm-up and a pass over every batch: constant (a
    retrace after warm-up raises in `CompiledSteps`; with it allowed, traces would grow)."""

    def setup(self, cache: str) -> None:
        super().setup(cache)
        for batch in self.inputs.batches:
            _step(self.steps, batch)

    def track_traces(self, cache: str) -> int:
        return sum(self.steps.traces.values())

    def track_compiled_shapes(self, cache: str) -> int:
        return self.steps.compiled_shapes


class StepTime(_Compiled):
    """Step-time CV over `XTTS_BENCH_TRAIN_STEPS` updates after one untimed pass: over all
    steps (bucket shapes differ in cost) and the worst within one shape."""

    def setup(self, cache: str) -> None:
        super().setup(cache)
        for batch in self.inputs.batches:
            _step(self.steps, batch)
        self.by_shape = collections.defaultdict(list)
        for batch in self.inputs.batches:
            self.by_shape[DatasetSpec.key_of(batch)].append(_step(self.steps, batch))

    def track_step_mscv(self, cache: str) -> float:
        return cv([ms for times in self.by_shape.values() for ms in times])

    def track_step_ms_cv_worst_shape(self, cache: str) -> float:
        return max(cv(times) for times in self.by_shape.values())


class CompileTime(_Compiled):
    """Warm-up: trace and XLA-compile the train step of every bucket shape."""

    def track_compile_seconds(self, cache: str) -> float:
        return self.compile_seconds

    track_compile_seconds.unit = "s"
