"""What the training loop (`trainer._Run.train`) does besides the step: the warm-up's
progress lines, the progress bar, the stop signals, the log, eval and checkpoint due after
a step, the device monitor, the profile of some steps and the run's summary."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import tensorflow as tf
import tqdm

from xtts_train.compile import compile_cache
from xtts_train.compile.compiler import choices
from xtts_train.compile.process import peak_rss_mb
from xtts_train.compile.warmup import Program, WarmUp
from xtts_train.config import TrainConfig
from xtts_train.errors import XttsTrainError
from xtts_train.runs.run_stats import Interval, Timings
from xtts_train.runs.run_writer import RunWriter
from xtts_train.training.gpu import GpuMonitor
from xtts_train.training.steps import CompiledSteps

__all__ = ["AfterStep", "FitBar", "Profiler", "StopSignals", "monitoring", "print_built",
           "run_summary"]  # fmt: skip


def print_built(done: int, total: int, program: Program) -> None:
    """The warm-up's progress line of a built program (through tqdm, beside its bars)."""
    if program.deferred:
        built = "in the compile cache, loads at its first step"
    elif program.compiler == "graph":  # nothing to compile: the first run
        built = f"graph executor, first run {program.compile_seconds:.1f} s"
    else:
        built = f"XLA, compiled in {program.compile_seconds:.1f} s"
    tqdm.tqdm.write(f"built {done}/{total}: {program.name} (traced in "
                    f"{program.trace_seconds:.1f} s, {built})")  # fmt: skip


class FitBar:
    """The loop's progress bar: the budget that ends the run, as its total.

    With `train.minutes` it counts that budget's seconds from the first step's start, as
    the budget does (`start`), so its ETA is the budget's end, and shows the step in its
    postfix (`step=1393/20000`); when `train.steps` ends the run first it closes short of
    its total. Without, it counts the steps to `train.steps` (from a resumed run's step).

    Attributes:
        bar: the tqdm bar (disabled without `progress`).
    """

    def __init__(self, config: TrainConfig, *, step: int, progress: bool) -> None:
        self.steps, self.step, self.began = config.steps, step, None
        self.budget = None if config.minutes is None else 60 * config.minutes  # seconds
        if self.budget is not None:  # a budget under a second still counts one
            self.bar = tqdm.tqdm(total=max(1, round(self.budget)), unit="s",
                                 desc="train", disable=not progress)  # fmt: skip
        else:
            self.bar = tqdm.tqdm(total=config.steps, initial=step, unit="step", desc="train",
                                 disable=not progress)  # fmt: skip

    def __enter__(self) -> FitBar:
        return self

    def __exit__(self, *exc_info) -> None:
        self._show(time.perf_counter(), final=True)  # full when the budget is spent
        self.bar.close()

    def start(self, began: float) -> None:
        """The first step began at `began` (`time.perf_counter`): the budget's clock."""
        if self.budget is None or self.bar.disable:
            return
        self.began = began
        self.bar.reset()
        lag = time.perf_counter() - began  # tqdm's clock too: its elapsed time and rate
        self.bar.start_t -= lag
        self.bar.last_print_t -= lag

    def after_step(self, step: int, now: float) -> None:
        """After update `step` (1-based) at `now` (`time.perf_counter`): a counter and a
        clock read, no host sync; the bar moves when a second of the budget has passed."""
        self.step = step
        if self.budget is not None:
            self._show(now)
        else:
            self.bar.update(1)

    def _show(self, now: float, *, final: bool = False) -> None:
        if self.began is None:
            return
        spent = now - self.began
        seconds = self.bar.total if spent >= self.budget else min(int(spent), self.bar.total)
        if seconds > self.bar.n or final:
            self.bar.set_postfix_str(f"step={self.step}/{self.steps}", refresh=False)
            self.bar.update(max(0, seconds - self.bar.n))  # never back


class StopSignals:
    """SIGINT and SIGTERM, caught while inside: `received` holds the last one (the loop
    then saves a checkpoint and returns); leaving restores the previous handlers."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: tuple = ()

    def __enter__(self) -> StopSignals:
        self._previous = (
            signal.signal(signal.SIGINT, self._on_signal),
            signal.signal(signal.SIGTERM, self._on_signal),
        )
        return self

    def __exit__(self, *exc_info) -> None:
        signal.signal(signal.SIGINT, self._previous[0])
        signal.signal(signal.SIGTERM, self._previous[1])

    def _on_signal(self, signum, frame) -> None:
        self.received = signum


@contextlib.contextmanager
def monitoring(gpu: GpuMonitor) -> Iterator[GpuMonitor]:
    """`gpu` sampling the device while inside."""
    gpu.start()
    try:
        yield gpu
    finally:
        gpu.stop()


class AfterStep:
    """What is due after a step: every `log_every` (and at the last step) the interval's
    losses to the writer, then the non-finite check; every `eval_every` the task's eval;
    every `checkpoint_every` a checkpoint.

    Attributes:
        losses: the losses logged last (empty before the first log).
    """

    def __init__(self, config: TrainConfig, writer: RunWriter, steps: CompiledSteps,
                 evaluate: Callable[[int], object]) -> None:  # fmt: skip
        self.config, self.writer, self.steps, self.evaluate = config, writer, steps, evaluate
        self.losses: dict = {}

    def __call__(self, step: int, interval: Interval) -> None:
        """After update `step` (1-based); `interval` holds the steps since the last log."""
        if step % self.config.log_every == 0 or step == self.config.steps:
            self.losses = interval.flush()
            self.writer.log(step, {**self.losses, "lr": self.steps.schedule(step - 1)})
            self._check_nonfinite(step)
        if self.config.eval_every and step % self.config.eval_every == 0:
            self.evaluate(step)
        if step % self.config.checkpoint_every == 0:
            self.writer.save(step)

    def _check_nonfinite(self, step: int) -> None:
        if int(self.steps.consecutive_nonfinite) >= self.config.max_nonfinite:
            raise XttsTrainError(
                f"step {step}: the last {int(self.steps.consecutive_nonfinite)} updates had a "
                f"non-finite loss or gradient and were skipped; stopping (lower the learning "
                f"rate, check the data, or raise train.max_nonfinite). The last checkpoint "
                f"({self.writer.latest_checkpoint}) holds finite weights."
            )


class Profiler:
    """A TensorBoard profile (`tf.profiler`) of the steps `first..last` (1-based), each
    marked as a step for the profile plugin's input-pipeline analysis."""

    def __init__(self, steps: tuple[int, int] | None, logdir: Path) -> None:
        self.first, self.last = steps if steps is not None else (0, -1)
        self.logdir, self.active = str(logdir), False

    def around(self, step: int):
        """Context of the call that runs `step`."""
        if not self.active and self.first <= step <= self.last:
            tf.profiler.experimental.start(self.logdir)
            self.active = True
        if not self.active:
            return contextlib.nullcontext()
        return tf.profiler.experimental.Trace("train", step_num=step, _r=1)

    def after(self, step: int, outputs: dict) -> None:
        if self.active and step >= self.last:
            float(outputs["loss"])  # the profiled steps have run
            self.close()

    def close(self) -> None:
        if self.active:
            tf.profiler.experimental.stop()
            self.active = False


def run_summary(steps: CompiledSteps, spec, *, step: int, timings: Timings, losses: dict,
                warm: WarmUp, warm_traces: int, startup: dict, stopped: bool,
                out_of_minutes: bool, gpu: GpuMonitor) -> dict:  # fmt: skip
    """The run's figures (`summary.json`): steps, traces and compiles, start-up, step
    times, health and device use.

    Args:
        steps: the run's compiled steps; spec: the training batches' shapes.
        step: the last update done; timings: this run's steps; losses: the last logged.
        warm: the warm-up's report; warm_traces: train traces when it ended.
        startup: the start-up clock's report; stopped: a signal ended the run.
        out_of_minutes: `train.minutes` ended it.
        gpu: the device monitor, stopped.
    """
    total_traces = sum(steps.traces.values())
    config = steps.config
    return {
        "steps": step,
        "steps_this_run": len(timings.walls),
        "traces": total_traces,
        "compiled_shapes": steps.compiled_shapes,
        "spec_shapes": len(spec.shapes),
        "retraces_after_warmup": total_traces - warm_traces,
        "compile_seconds": warm.seconds,
        "compiler": choices(config.compiler, steps.task.compilers),
        "task": steps.task.name,
        **startup,
        "warm_up": warm.to_dict(),
        "compile_cache": compile_cache.describe(),
        "peak_rss_mb": peak_rss_mb(),
        **timings.summary(),
        "nonfinite_skipped": int(steps.nonfinite),
        "final_loss": losses.get("loss"),
        "stopped_by_signal": stopped,
        "out_of_minutes": out_of_minutes,
        "replicas": steps.replicas,
        "device_utilization": gpu.utilization,
        "device_utilization_note": gpu.note,
    }
