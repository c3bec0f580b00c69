"""`fit_task`: one readable training loop over a feature cache, compiled once per batch
shape, beside a `RunWriter` that owns every file the run writes. What it trains is a task
(`xtts_train.training.task.Task`; `xtts_train.fit` picks the run's by name): the loop is
the same for every task and knows no model.

```
the loop (trainer: fit_task, _Run.train)         the writer (run_writer.RunWriter)
  lock the work dir ───────────────────────────► recover: temp files, a damaged reference.npy
  open the cache; the task's config from it
    (text-to-mel: the vocabulary), its pipeline
    (repeat, static shapes); check the sizes
    fit in memory ─────────────────────────────► config.yaml, tokenizer.json (a resume's
                                                 must match)
  the task's model + AdamW (build_steps) ──────► open: checkpoints/ + TensorBoard
  warm-up: compile every shape
  resume ──────────────────────────────────────► restore checkpoints/; trim metrics.jsonl
  loop: next batch (timed: data wait) ─────────► what the task keeps of the first batch
                                                 (text-to-mel: reference.npy)
        compiled step (no host sync)
        every log_every: losses ───────────────► metrics.jsonl + TensorBoard scalars
        every eval_every: the task's eval
          (runs/evals.py) ─────────────────────► metrics.jsonl + TensorBoard media
        every checkpoint_every, on SIGINT/
          SIGTERM, and at the end ─────────────► checkpoints/ (finite weights only)
  figures: traces, step time and its CV, ... ──► summary.json
```
What the loop does besides the step (the stop signals, the log, eval and checkpoint due
after a step, the profiler, the summary's figures) is `_loop_parts`'.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import time
from pathlib import Path

import keras
import tensorflow as tf
import tqdm

import xtts_data as xd
from xtts_data.files import folder_lock
from xtts_train.compile.process import StartupClock, format_startup
from xtts_train.compile.warmup import cache_use
from xtts_train.config import StackConfig
from xtts_train.errors import XttsTrainError
from xtts_train.runs.run_stats import Interval, Timings
from xtts_train.runs.run_writer import RunWriter, latest_step
from xtts_train.training._loop_parts import (
    AfterStep,
    FitBar,
    Profiler,
    StopSignals,
    monitoring,
    print_built,
    run_summary,
)
from xtts_train.training.build import build_task_steps
from xtts_train.training.distribute import (
    PEER_ERRORS,
    common_step,
    is_multi_worker,
    lost_peer_error,
    make_strategy,
    worker_index,
)
from xtts_train.training.gpu import GpuMonitor
from xtts_train.training.init_from import StartFrom, init_source
from xtts_train.training.planner import batch_plan
from xtts_train.training.steps import kept_dtype_policy
from xtts_train.training.task import Task, check_task_settings

__all__ = ["fit_task", "format_summary_line", "latest_step"]

logger = logging.getLogger(__name__)


def _next_batch(iterator):
    """The next batch; a record the input pipeline cannot read is one clear error."""
    try:
        return next(iterator)
    except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as error:
        first = error.message.strip().splitlines()[0]
        raise XttsTrainError(
            f"the feature cache holds a damaged record ({first}); run `xtts-data verify` on "
            f"it and rebuild it with `xtts-data prepare --overwrite`; the run resumes from "
            f"its last checkpoint"
        ) from None


def fit_task(task: type[Task], stack: StackConfig, cache: str | Path, workdir: str | Path, *,
             progress: bool = True, profile_steps: tuple[int, int] | None = None,
             clock: StartupClock | None = None) -> dict:  # fmt: skip
    """Train (or resume training) `task` on the feature cache `cache`, writing into
    `workdir` (`xtts_train.fit`: the run's task, `train.task`, by name).

    `profile_steps=(first, last)` writes a TensorBoard profile of those steps (1-based,
    inclusive) to `workdir/tensorboard/plugins/profile` (the profile plugin's input-pipeline
    and trace views). `clock` is a caller's `StartupClock` when it did start-up work before
    calling `fit` (the demo's corpus and cache); by default the clock starts here.

    With `stack.train.strategy` multi-worker, every worker runs the same command; worker
    0 writes `workdir`, worker i > 0 writes `workdir/worker-i` (its checkpoints hold the
    same weights) and reads its own shuffle of the data.

    Returns:
        The summary (also written to `workdir/summary.json`).

    Raises:
        XttsTrainError: a retrace after warm-up (unless allowed), too many non-finite
            updates in a row, or a work dir of another model.
    """
    clock = clock or StartupClock()
    _check_profile_steps(profile_steps, stack.train.steps)
    check_task_settings(task, stack)
    strategy = make_strategy(stack.train.strategy)  # first: collectives start with it
    worker = worker_index(strategy)
    workdir = Path(workdir) / f"worker-{worker}" if worker else Path(workdir)
    with folder_lock(workdir, purpose="xtts-train fit"):  # a file there is a LockError
        writer = RunWriter(workdir)
        writer.recover(stack)  # what a killed run left half-written
        try:
            return _fit_locked(task, stack, cache, writer, worker, strategy, progress=progress,
                               profile_steps=profile_steps, clock=clock)  # fmt: skip
        except PEER_ERRORS as error:
            if not is_multi_worker(strategy):
                raise
            raise lost_peer_error(error, worker, latest_step(workdir)) from None


def _fit_locked(task: type[Task], stack: StackConfig, cache: str | Path, writer: RunWriter,
                worker: int, strategy, *, progress: bool,
                profile_steps: tuple[int, int] | None, clock: StartupClock) -> dict:  # fmt: skip
    """`fit_task` once `writer.workdir` is this process's."""
    with clock.part("data"):
        opened = xd.FeatureCache.open(cache, audio=stack.audio, data=stack.data)
    stack = task.configure(stack, opened.tokenizer)  # its needs checked before any compile
    start = common_step(strategy, latest_step(writer.workdir))  # each worker's own otherwise
    # One seeded order per run (and worker); a resumed run skips the batches it has
    # trained on, so it sees the batches an uninterrupted run would.
    seed = stack.data.seed if stack.data.seed is not None else stack.train.seed
    data = dataclasses.replace(stack.data, seed=seed + 7919 * worker)
    # The pipeline's seeded ops (shuffle) pair their seed with TensorFlow's global one: set
    # it first, so a fit draws the same batches whatever ran before it in this process.
    keras.utils.set_random_seed(stack.train.seed)
    with clock.part("data"):
        train = task.pipeline(opened, data, "train", repeat=True)
    if stack.train.memory_budget_gb is not None and data.batch_sizes is None:
        with clock.part("plan"):
            sizes = batch_plan(task, stack, train.spec, writer.workdir / "config.yaml", progress)
        stack = dataclasses.replace(stack, data=dataclasses.replace(stack.data, batch_sizes=sizes))
        data = dataclasses.replace(data, batch_sizes=sizes)
        with clock.part("data"):
            train = task.pipeline(opened, data, "train", repeat=True)
    with clock.part("data"):
        val = None
        if _evaluates(stack.train) and stack.data.val_fraction:
            # Validation has buckets of its own: the frame budget sizes them.
            unshuffled = dataclasses.replace(data, shuffle_buffer=0, batch_sizes=None)
            val = _val_pipeline(task, opened, unshuffled, stack)
    # Sizes too large for this machine are refused before the work dir is written to (so
    # the same command with smaller sizes may follow), as `build_steps` refuses them
    # before it compiles.
    task.check_memory(stack, train.spec)
    source = None  # the weights a new run starts from; a resumed one goes on from its own
    if stack.train.init_from and not start:
        with kept_dtype_policy():  # checked before the work dir is written to
            source = StartFrom(task, stack, init_source(stack.train.init_from, stack))
    writer.write_config(stack, weights=task.weights_section)
    writer.write_tokenizer(opened.path, opened.tokenizer)
    with kept_dtype_policy():  # leave the process as it was
        with clock.part("model"):
            run = _Run(task, stack, train, val, writer, progress, strategy, opened.tokenizer)
            if source is not None:
                source.copy_into(run.task, opened.tokenizer)
        profiler = Profiler(profile_steps, writer.workdir / "tensorboard")
        return run.train(start, clock, profiler)


def _evaluates(train) -> bool:
    """The run reaches a step that evaluates (`train.eval_every` divides one of its steps):
    only then does it need a validation split."""
    return bool(train.eval_every) and train.eval_every <= train.steps


def _val_pipeline(task: Task, opened, data, stack: StackConfig):
    """The validation split's dataset.

    Raises:
        XttsTrainError: the split holds no utterance (a small corpus: the hash split of
            `data.val_fraction` held none out), naming both ways out.
    """
    try:
        return task.pipeline(opened, data, "val", repeat=True)
    except xd.EmptySplitError as error:
        train = stack.train
        raise XttsTrainError(
            f"{error}: this run evaluates every {train.eval_every} steps (train.eval_every) "
            f"on a validation split of data.val_fraction={stack.data.val_fraction:g} of the "
            f"utterances, chosen by a hash of their ids; raise data.val_fraction (a small "
            f"corpus needs a larger share), or set train.eval_every=0 to train without "
            f"evaluating"
        ) from None


def _check_profile_steps(steps: tuple[int, int] | None, total: int) -> None:
    if steps is not None and not 1 <= steps[0] <= steps[1] <= total:
        raise XttsTrainError(
            f"Expected profile steps FIRST:LAST with 1 <= FIRST <= LAST <= train.steps "
            f"({total}), received: {steps[0]}:{steps[1]}"
        )


class _Run:
    """The training loop of one process; every file it writes goes through `writer`."""

    def __init__(self, task: type[Task], stack: StackConfig, train: xd.DataPipeline,
                 val: xd.DataPipeline | None, writer: RunWriter, progress: bool,
                 strategy: tf.distribute.Strategy | None, tokenizer: xd.Tokenizer):  # fmt: skip
        self.config, self.train_pipe, self.writer = stack.train, train, writer
        self.progress = progress
        self.steps = build_task_steps(task, stack, train.spec, val.spec if val else None,
                                      strategy)  # fmt: skip
        self.task = self.steps.task
        writer.open(model=self.steps.model, optimizer=self.steps.optimizer,
                    nonfinite=self.steps.nonfinite, seed_states=self.task.seed_states(),
                    keep=self.config.keep_checkpoints,
                    networks=self.task.networks())  # fmt: skip
        self.evaluate = self.task.evaluation(stack, self.steps, writer, val, train, tokenizer)
        self.gpu = GpuMonitor()

    def train(self, start: int, clock: StartupClock, profiler: Profiler) -> dict:
        """Steps from the checkpoint of `start` to `train.steps` (or `train.minutes`, or a
        signal). Returns the summary."""
        if self.progress:  # progress lines go through tqdm, beside its bars
            tqdm.tqdm.write(self.task.describe())
        warm = self.steps.warm_up(print_built if self.progress else None)
        clock.add_warm_up(warm)
        warm_traces = sum(self.steps.traces.values())
        # `step` is a Python int: reading the step variable each step would sync.
        step = self.writer.resume(start)
        with clock.part("data"):
            # The data position: the batches before `step` are drawn again and dropped.
            iterator = iter(self.train_pipe.dataset.skip(step))
        timings, interval, startup, out_of_minutes = Timings(), Interval(), None, False
        after_step = AfterStep(self.config, self.writer, self.steps, self.evaluate)
        bar = FitBar(self.config, step=step, progress=self.progress)
        deadline = math.inf  # the budget starts at the first step (`train.minutes`)
        with StopSignals() as signals, bar, monitoring(self.gpu), contextlib.closing(profiler):
            while step < self.config.steps and signals.received is None:
                if out_of_minutes := time.perf_counter() > deadline:
                    break
                before = time.perf_counter()
                batch = _next_batch(iterator)
                got = time.perf_counter()
                if startup is None:
                    self.task.on_first_batch(self.writer, batch)
                    clock.add("data", got - before)
                with profiler.around(step + 1):
                    outputs = self.steps.train(batch, step=step)  # dispatched, no host sync
                called = time.perf_counter()
                step += 1
                if startup is None:  # the start-up's one host sync: the first step is done
                    float(outputs["loss"])
                    clock.add("first_step", time.perf_counter() - got)
                    startup = clock.report()
                    deadline = before + 60 * (self.config.minutes or math.inf)
                    bar.start(before)  # a bar of `train.minutes` counts from here too
                profiler.after(step, outputs)
                interval.add(got - before, called - before, outputs, batch)
                bar.after_step(step, called)
                after_step(step, interval)  # log, eval, checkpoint when due
                timings.add(self.train_pipe.spec.key_of(batch), before, got, called,
                            time.perf_counter())  # fmt: skip
        self.writer.save(step)  # the last step's checkpoint, at the end or after a signal
        result = run_summary(self.steps, self.train_pipe.spec, step=step, timings=timings,
                             losses=after_step.losses, warm=warm, warm_traces=warm_traces,
                             startup=startup or clock.report(),
                             stopped=signals.received is not None,
                             out_of_minutes=out_of_minutes, gpu=self.gpu)  # fmt: skip
        self.writer.write_summary(result)
        if self.progress:
            tqdm.tqdm.write(format_summary_line(result))
        return result


def format_summary_line(summary: dict) -> str:
    """One line of a fit's summary: steps, loss, time to first step and its parts, cache."""
    loss = summary["final_loss"]
    return (
        f"fit: {summary['steps']} steps"
        + (" (train.minutes spent)" if summary.get("out_of_minutes") else "")
        + (f", loss {loss:.3f}" if loss is not None else "")
        + f"; time to first step {format_startup(summary)}; {cache_use(summary['warm_up'])}; "
        f"{summary['retraces_after_warmup']} retraces; peak RSS {summary['peak_rss_mb']:.0f} MB"
    )
