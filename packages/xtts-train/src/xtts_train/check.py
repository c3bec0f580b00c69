"""`xtts-train check`: does the step compile once per shape and run steadily?

Builds the pipeline and the compiled steps as `fit` does, compiles every shape (timed),
then draws batches until every shape has run `repeats` times, timing each step. A trace
after warm-up — a shape the spec did not list — fails the check.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path

import keras

import xtts_data as xd
from xtts_train.config import StackConfig
from xtts_train.steps import shape_of
from xtts_train.trainer import build_steps

__all__ = ["CheckReport", "check"]


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """Per shape (batch, text, frames): traces, step times in ms; and the compile time."""

    traces: dict[tuple[int, int, int], int]
    step_ms: dict[tuple[int, int, int], list[float]]
    compile_seconds: float

    @property
    def retraced(self) -> bool:
        return any(count != 1 for count in self.traces.values())

    def format(self) -> str:
        lines = [f"compiled {len(self.traces)} shape(s) in {self.compile_seconds:.1f} s",
                 f"{'batch x text x frames':<24}{'traces':>7}{'step ms':>10}{'CV':>7}"]  # fmt: skip
        for shape, times in sorted(self.step_ms.items()):
            mean = statistics.mean(times)
            cv = statistics.pstdev(times) / mean if mean else 0.0
            label = " x ".join(map(str, shape))
            lines.append(f"{label:<24}{self.traces.get(shape, 0):>7}{mean:>10.1f}{cv:>7.1%}")
        lines.append("RETRACED: a shape was traced more than once" if self.retraced
                     else "ok: one trace per shape, no retrace")  # fmt: skip
        return "\n".join(lines)


def check(stack: StackConfig, cache: str | Path, *, repeats: int = 2,
          max_batches: int = 500) -> CheckReport:  # fmt: skip
    """Compile every shape of the cache's pipeline, then run each `repeats` times.

    Raises:
        RetraceError: a batch of a shape outside the spec (unless `allow_retrace`).
    """
    opened = xd.FeatureCache.open(cache, audio=stack.audio, data=stack.data)
    model = dataclasses.replace(stack.model, vocab_size=opened.tokenizer.vocab_size)
    stack = dataclasses.replace(stack, model=model)
    pipeline = xd.make_dataset(opened, stack.data, "train", repeat=True)
    previous = keras.mixed_precision.global_policy()
    try:
        steps = build_steps(stack, pipeline.spec)
        started = time.perf_counter()
        steps.warm_up()
        compile_seconds = time.perf_counter() - started
        times: dict[tuple[int, int, int], list[float]] = {
            (s.batch_size, s.text_len, s.frames): [] for s in pipeline.spec.shapes
        }
        for batch, _ in zip(pipeline.dataset, range(max_batches), strict=False):
            key = shape_of(batch)
            if len(times.get(key, [])) >= repeats:
                continue
            before = time.perf_counter()
            float(steps.train(batch)["loss"])  # wait for the result: time the whole step
            times.setdefault(key, []).append(1e3 * (time.perf_counter() - before))
            if all(len(t) >= repeats for t in times.values()):
                break
    finally:
        keras.mixed_precision.set_global_policy(previous)
    return CheckReport(dict(steps.traces), times, compile_seconds)
