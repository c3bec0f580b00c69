"""`fit`: one readable training loop over a feature cache, compiled once per batch shape.

```
cache ─ make_dataset (repeat, static shapes) ─┐
model + AdamW ─ restore latest checkpoint ────┴─ warm-up: compile every shape
  loop: next batch (timed: data wait) → compiled step (no host sync)
        every log_every: losses to metrics.jsonl + TensorBoard; every eval_every: val loss
        every checkpoint_every (and on SIGINT/SIGTERM, and at the end): checkpoint if finite
  summary.json: traces, compiled shapes, step time and its CV, input-bound fraction, ...
```
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
import math
import shutil
import signal
import statistics
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
import tqdm
import yaml

import xtts_data as xd
from xtts_train.config import StackConfig
from xtts_train.distribute import make_strategy, worker_index
from xtts_train.errors import XttsTrainError
from xtts_train.gpu import GpuMonitor
from xtts_train.media import write_eval_media
from xtts_train.model import TextToMel, dummy_batch
from xtts_train.steps import CompiledSteps, shape_of

__all__ = ["build_steps", "fit", "latest_step", "make_optimizer"]

logger = logging.getLogger(__name__)


def latest_step(workdir: str | Path) -> int:
    """The step of the newest checkpoint in `workdir` (0 when there is none)."""
    latest = tf.train.latest_checkpoint(str(Path(workdir) / "checkpoints"))
    return int(latest.rsplit("-", 1)[1]) if latest else 0


def _schedule(config) -> keras.optimizers.schedules.LearningRateSchedule:
    """Linear warm-up to `learning_rate`, then cosine decay to `min_lr_ratio` of it."""
    warm = config.warmup_steps
    return keras.optimizers.schedules.CosineDecay(
        0.0 if warm else config.learning_rate,
        decay_steps=max(config.steps - warm, 1),
        alpha=config.min_lr_ratio,
        warmup_target=config.learning_rate if warm else None,
        warmup_steps=warm,
    )


def _check_workdir(workdir: Path, stack: StackConfig) -> None:
    """Write the resolved config, or check a resumed run was started with the same model."""
    path = workdir / "config.yaml"
    resolved = stack.to_dict()
    if path.exists():
        before = yaml.safe_load(path.read_text())
        for section in ("audio", "model"):
            if before.get(section) != resolved[section]:
                raise XttsTrainError(
                    f"{workdir} holds a run with another {section} config; resume it with the "
                    f"same settings or use a new --workdir"
                )
    path.write_text(yaml.safe_dump(resolved, sort_keys=False))


def fit(stack: StackConfig, cache: str | Path, workdir: str | Path, *,
        progress: bool = True) -> dict:  # fmt: skip
    """Train (or resume training) on the feature cache `cache`, writing into `workdir`.

    With `stack.train.strategy` multi-worker, every worker runs the same command; worker
    0 writes `workdir`, worker i > 0 writes `workdir/worker-i` (its checkpoints hold the
    same weights) and reads its own shuffle of the data.

    Returns:
        The summary (also written to `workdir/summary.json`).

    Raises:
        XttsTrainError: a retrace after warm-up (unless allowed), too many non-finite
            updates in a row, or a work dir of another model.
    """
    strategy = make_strategy(stack.train.strategy)  # first: collectives start with it
    worker = worker_index(strategy)
    workdir = Path(workdir) / f"worker-{worker}" if worker else Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    opened = xd.FeatureCache.open(cache, audio=stack.audio, data=stack.data)
    stack = dataclasses.replace(
        stack, model=dataclasses.replace(stack.model, vocab_size=opened.tokenizer.vocab_size)
    )
    _check_workdir(workdir, stack)
    shutil.copyfile(opened.path / "tokenizer.json", workdir / "tokenizer.json")  # synthesis
    start = latest_step(workdir)
    # A resumed run continues with freshly shuffled data, not the first epoch again.
    data = dataclasses.replace(stack.data, seed=stack.train.seed + start + 7919 * worker)
    train = xd.make_dataset(opened, data, "train", repeat=True)
    val = None
    if stack.train.eval_every and stack.data.val_fraction:
        val = xd.make_dataset(
            opened, dataclasses.replace(data, shuffle_buffer=0), "val", repeat=True
        )
    previous = keras.mixed_precision.global_policy()
    try:
        return _Run(stack, train, val, workdir, progress, strategy).train(start)
    finally:
        keras.mixed_precision.set_global_policy(previous)  # leave the process as it was


def make_optimizer(config, model: TextToMel) -> keras.optimizers.Optimizer:
    """AdamW with the run's schedule, built for `model`'s trainable variables."""
    optimizer = keras.optimizers.AdamW(
        learning_rate=_schedule(config), weight_decay=config.weight_decay
    )
    optimizer.build(model.trainable_variables)
    return optimizer


def build_steps(stack: StackConfig, spec: xd.DatasetSpec,
                eval_spec: xd.DatasetSpec | None = None,
                strategy: tf.distribute.Strategy | None = None) -> CompiledSteps:  # fmt: skip
    """The model (under the run's precision policy), AdamW, and their compiled steps.

    Sets the global Keras dtype policy to `stack.train.precision` (callers restore it).
    With a `strategy`, the model and optimizer variables are created in its scope.
    """
    keras.mixed_precision.set_global_policy(stack.train.precision)
    keras.utils.set_random_seed(stack.train.seed)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = TextToMel(stack.model)
        model(dummy_batch(stack.model))  # variables exist before any step is traced
        optimizer = make_optimizer(stack.train, model)
    return CompiledSteps(model, optimizer, spec, stack.train, eval_spec, strategy)


class _Run:
    """The state of one training process."""

    def __init__(self, stack: StackConfig, train: xd.DataPipeline, val: xd.DataPipeline | None,
                 workdir: Path, progress: bool,
                 strategy: tf.distribute.Strategy | None = None):  # fmt: skip
        self.stack, self.config, self.train_pipe, self.val_pipe = stack, stack.train, train, val
        self.workdir, self.progress = workdir, progress
        self.steps = build_steps(stack, train.spec, val.spec if val else None, strategy)
        self.model, self.optimizer = self.steps.model, self.steps.optimizer
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.checkpoint = tf.train.Checkpoint(
            model=self.model, optimizer=self.optimizer, step=self.step,
            nonfinite=self.steps.nonfinite,
        )  # fmt: skip
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, str(workdir / "checkpoints"), max_to_keep=self.config.keep_checkpoints
        )
        self.writer = tf.summary.create_file_writer(str(workdir / "tensorboard"))
        self.stop_signal: int | None = None
        self.gpu = GpuMonitor()

    # -- the loop -------------------------------------------------------------------------

    def train(self, start: int) -> dict:
        if start:
            restored = self.checkpoint.restore(self.manager.latest_checkpoint)
            restored.assert_existing_objects_matched()
            self._forget_metrics_after(int(self.step))
            logger.info("resumed from step %d", int(self.step))
        if self.progress:
            print(self.model.describe(), flush=True)
        self._warm_up()
        iterator = iter(self.train_pipe.dataset)
        timings, last_losses, interval = _Timings(), {}, _Interval()
        previous = (
            signal.signal(signal.SIGINT, self._on_signal),
            signal.signal(signal.SIGTERM, self._on_signal),
        )
        step = int(self.step)  # a Python int: reading the variable each step would sync
        bar = tqdm.tqdm(total=self.config.steps, initial=step, unit="step",
                        disable=not self.progress, desc="train")  # fmt: skip
        self.gpu.start()
        try:
            while step < self.config.steps and self.stop_signal is None:
                before = time.perf_counter()
                batch = next(iterator)
                got = time.perf_counter()
                if not timings.walls:
                    self._keep_reference(batch)
                outputs = self.steps.train(batch)  # dispatched; no host sync here
                called = time.perf_counter()
                step += 1
                interval.add(got - before, called - before, outputs, batch)
                bar.update(1)
                if step % self.config.log_every == 0 or step == self.config.steps:
                    last_losses = self._log(step, interval.flush())
                    self._check_nonfinite(step)
                if self.val_pipe is not None and step % self.config.eval_every == 0:
                    self._evaluate(step)
                if step % self.config.checkpoint_every == 0:
                    self._save(step)
                timings.add(shape_of(batch), before, got, called, time.perf_counter())
        finally:
            self.gpu.stop()
            bar.close()
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])
        self._save(step)
        summary = self._summary(step, timings, last_losses)
        (self.workdir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        return summary

    def _warm_up(self) -> None:
        started = time.perf_counter()

        def report(i: int, total: int, shape) -> None:
            print(f"compiling step {i}/{total}: batch {shape.batch_size} x text "
                  f"{shape.text_len} x frames {shape.frames}", flush=True)  # fmt: skip

        self.steps.warm_up(report if self.progress else None)
        self.compile_seconds = time.perf_counter() - started
        self.warm_traces = sum(self.steps.traces.values())

    def _forget_metrics_after(self, step: int) -> None:
        """Drop lines a killed run logged after its last checkpoint: they are redone."""
        path = self.workdir / "metrics.jsonl"
        if path.exists():
            lines = path.read_text().splitlines()
            kept = [line for line in lines if json.loads(line)["step"] <= step]
            path.write_text("".join(line + "\n" for line in kept))

    def _keep_reference(self, batch) -> None:
        """A conditioning clip for `synthesize` when no --reference is given."""
        path = self.workdir / "reference.npy"
        if not path.exists():
            np.save(path, batch["cond_mel"][0, : int(batch["cond_lengths"][0])].numpy())

    def _on_signal(self, signum, frame) -> None:
        self.stop_signal = signum  # the loop saves a checkpoint and returns

    # -- bookkeeping ----------------------------------------------------------------------

    def _log(self, step: int, values: dict) -> dict:
        record = {"step": step, **values, "lr": float(self.optimizer.learning_rate)}
        with open(self.workdir / "metrics.jsonl", "a") as file:
            file.write(json.dumps(record) + "\n")
        with self.writer.as_default(step=step):
            for name, value in record.items():
                if name != "step" and isinstance(value, float) and math.isfinite(value):
                    tf.summary.scalar(name, value)
        return values

    def _check_nonfinite(self, step: int) -> None:
        if int(self.steps.consecutive_nonfinite) >= self.config.max_nonfinite:
            raise XttsTrainError(
                f"step {step}: the last {int(self.steps.consecutive_nonfinite)} updates had a "
                f"non-finite loss or gradient and were skipped; stopping (lower the learning "
                f"rate, check the data, or raise train.max_nonfinite). The last checkpoint "
                f"({self.manager.latest_checkpoint}) holds finite weights."
            )

    def _evaluate(self, step: int) -> None:
        iterator = iter(self.val_pipe.dataset)
        batches = [next(iterator) for _ in range(self.config.eval_batches)]
        losses = [self.steps.evaluate(batch) for batch in batches]
        write_eval_media(self.writer, step, self.model, batches[0], self.stack.audio)
        mean = {f"val_{k}": float(np.mean([float(x[k]) for x in losses])) for k in losses[0]}
        with open(self.workdir / "metrics.jsonl", "a") as file:
            file.write(json.dumps({"step": step, **mean}) + "\n")
        with self.writer.as_default(step=step):
            for name, value in mean.items():
                tf.summary.scalar(name, value)

    def _save(self, step: int) -> None:
        if not all(
            bool(tf.reduce_all(tf.math.is_finite(v))) for v in self.model.trainable_variables
        ):
            logger.error("step %d: weights are not finite; checkpoint not written", step)
            return
        if self.manager.latest_checkpoint and latest_step(self.workdir) == step:
            return
        self.step.assign(step)
        self.manager.save(checkpoint_number=step)

    def _summary(self, step: int, timings: _Timings, losses: dict) -> dict:
        total_traces = sum(self.steps.traces.values())
        return {
            "steps": step,
            "steps_this_run": len(timings.walls),
            "traces": total_traces,
            "compiled_shapes": self.steps.compiled_shapes,
            "spec_shapes": len(self.train_pipe.spec.shapes),
            "retraces_after_warmup": total_traces - self.warm_traces,
            "compile_seconds": self.compile_seconds,
            **timings.summary(),
            "nonfinite_skipped": int(self.steps.nonfinite),
            "final_loss": losses.get("loss"),
            "stopped_by_signal": self.stop_signal is not None,
            "replicas": self.steps.replicas,
            "device_utilization": self.gpu.utilization,
            "device_utilization_note": self.gpu.note,
        }


class _Timings:
    """Per step: data wait, the step call, host time around them; by batch shape.

    `wall` runs from one `next(iterator)` to the next, so the walls sum to the loop's time;
    host overhead is what is left after the data wait and the step call.
    """

    def __init__(self) -> None:
        self.waits, self.walls, self.hosts = [], [], []
        self.by_shape: dict[tuple[int, int, int], list[float]] = collections.defaultdict(list)

    def add(self, shape, before: float, got: float, called: float, after: float) -> None:
        self.waits.append(got - before)
        self.walls.append(after - before)
        self.hosts.append(after - called)  # bookkeeping after the step call returned
        self.by_shape[shape].append(after - before)

    def summary(self) -> dict:
        skip = len(self.walls) // 10  # the first steps fill buffers and caches
        walls = [w * 1e3 for w in self.walls[skip:]]
        return {
            "step_ms_median": statistics.median(walls) if walls else 0.0,
            "step_ms_cv": _cv(walls),
            "step_ms_by_shape": {
                "x".join(map(str, shape)): {
                    "steps": len(times),
                    "median": statistics.median(times) * 1e3,
                    "cv": _cv(times[len(times) // 10 :]),
                }
                for shape, times in sorted(self.by_shape.items())
            },
            "host_overhead_ms": statistics.median(self.hosts[skip:]) * 1e3 if walls else 0.0,
            "input_bound_fraction": sum(self.waits) / sum(self.walls) if self.walls else 0.0,
        }


def _cv(values: list[float]) -> float:
    """Coefficient of variation (population std / mean); 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mean = statistics.fmean(values)
    return statistics.pstdev(values) / mean if mean else 0.0


class _Interval:
    """Sums between two log lines; reading the losses is the interval's one host sync."""

    def __init__(self) -> None:
        self.waits, self.walls, self.outputs, self.samples = [], [], [], 0

    def add(self, wait: float, wall: float, outputs: dict, batch: dict) -> None:
        self.waits.append(wait)
        self.walls.append(wall)
        self.outputs.append(outputs)
        self.samples += int(batch["tokens"].shape[0])

    def flush(self) -> dict:
        losses = {k: float(np.mean([float(o[k]) for o in self.outputs]))
                  for k in ("loss", "mel_before", "mel_after", "stop", "grad_norm")}  # fmt: skip
        wall = sum(self.walls)
        values = {
            **losses,
            "step_ms": 1e3 * wall / len(self.walls),
            "data_wait_ms": 1e3 * sum(self.waits) / len(self.waits),
            "samples_per_s": self.samples / wall if wall else 0.0,
        }
        self.__init__()
        return values
