"""asv benchmarks for xtts-train: the compiled step, its traces, compile time, step-time CV.

A demo corpus of short clips (`XTTS_BENCH_TRAIN_UTTERANCES`, default 64) is cached and the
train step of every bucket shape (`XTTS_BENCH_TRAIN_BUCKETS` buckets, longest of batch
`XTTS_BENCH_TRAIN_BATCH_SIZE`) is compiled once per process, in `setup`: `time_*` measures
steady-state updates, and the warm-up's duration is reported by `track_compile_seconds`.
`XTTS_BENCH_TRAIN_STEPS` (default 20) steps are timed for the step-time figures, and
`XTTS_BENCH_TRAIN_SET` takes comma-separated stack overrides (`model.decoder_layers=1,...`).
The dynamic-shape baseline, which compiles per batch, is in `xtts-bench train`.
"""

from __future__ import annotations

import collections
import functools
import itertools
import os
import pathlib
import statistics
import tempfile
import time

from xtts_bench.train import TrainBenchConfig, TrainInputs, prepare_inputs
from xtts_train.steps import CompiledSteps, shape_of
from xtts_train.trainer import build_steps

_UTTERANCES = int(os.environ.get("XTTS_BENCH_TRAIN_UTTERANCES", "64"))
_BUCKETS = int(os.environ.get("XTTS_BENCH_TRAIN_BUCKETS", "2"))
_BATCH_SIZE = int(os.environ.get("XTTS_BENCH_TRAIN_BATCH_SIZE", "16"))
_STEPS = int(os.environ.get("XTTS_BENCH_TRAIN_STEPS", "20"))
_SET = tuple(o for o in os.environ.get("XTTS_BENCH_TRAIN_SET", "").split(",") if o)


@functools.lru_cache(maxsize=1)
def _warm() -> tuple[TrainInputs, CompiledSteps, float]:
    """(inputs, steps compiled for every bucket shape, warm-up seconds), once per process."""
    bench = TrainBenchConfig(
        batches=_STEPS, utterances=_UTTERANCES, batch_size=_BATCH_SIZE, num_buckets=_BUCKETS,
        overrides=_SET, graph=False,
    )  # fmt: skip
    inputs = prepare_inputs(bench, pathlib.Path(tempfile.mkdtemp(prefix="xtts-asv-train-")))
    steps = build_steps(inputs.stack, inputs.spec)
    started = time.perf_counter()
    steps.warm_up()
    return inputs, steps, time.perf_counter() - started


def _step(steps: CompiledSteps, batch) -> float:
    """One update, waiting for its loss; returns milliseconds."""
    started = time.perf_counter()
    float(steps.train(batch)["loss"])
    return 1e3 * (time.perf_counter() - started)


def _cv(values: list[float]) -> float:
    return statistics.pstdev(values) / statistics.fmean(values) if len(values) > 1 else 0.0


class CompiledStep:
    """One update of the compiled step (XLA, one program per bucket shape), batches cycled."""

    timeout = 1800

    def setup(self) -> None:
        inputs, self.steps, _ = _warm()
        self.batches = itertools.cycle(inputs.batches)

    def time_static_step(self) -> None:
        _step(self.steps, next(self.batches))


class Traces:
    """Traces and compiled shapes after warm-up and a pass over every batch: constant."""

    timeout = 1800

    def setup(self) -> None:
        inputs, self.steps, _ = _warm()
        for batch in inputs.batches:
            _step(self.steps, batch)

    def track_traces(self) -> int:
        return sum(self.steps.traces.values())

    def track_compiled_shapes(self) -> int:
        return self.steps.compiled_shapes

    def track_retraces_after_warm_up(self) -> int:
        return sum(self.steps.traces.values()) - self.steps.compiled_shapes


class StepTime:
    """Step time over `XTTS_BENCH_TRAIN_STEPS` updates after one untimed pass: median, CV
    over all steps (bucket shapes differ in cost) and the worst CV within one shape."""

    timeout = 1800

    def setup(self) -> None:
        inputs, steps, _ = _warm()
        for batch in inputs.batches:
            _step(steps, batch)
        self.ms = [(shape_of(b), _step(steps, b)) for b in inputs.batches]
        self.by_shape = collections.defaultdict(list)
        for shape, ms in self.ms:
            self.by_shape[shape].append(ms)

    def track_step_ms_median(self) -> float:
        return statistics.median(ms for _, ms in self.ms)

    def track_step_ms_cv(self) -> float:
        return _cv([ms for _, ms in self.ms])

    def track_step_ms_cv_worst_shape(self) -> float:
        return max(_cv(times) for times in self.by_shape.values())

    track_step_ms_median.unit = "ms"


class CompileTime:
    """Warm-up: trace and XLA-compile the train step of every bucket shape."""

    timeout = 1800

    def setup(self) -> None:
        _, self.steps, self.seconds = _warm()

    def track_compile_seconds(self) -> float:
        return self.seconds

    def track_compile_seconds_per_shape(self) -> float:
        return self.seconds / self.steps.compiled_shapes

    track_compile_seconds.unit = "s"
    track_compile_seconds_per_shape.unit = "s"
