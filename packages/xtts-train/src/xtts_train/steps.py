"""The compiled train and eval steps: one XLA program per static batch shape, built once.

Each step is `tf.function(jit_compile=True)` traced with the exact `tf.TensorSpec`s of a
`DatasetSpec` shape; `warm_up` traces and compiles every shape before training, and any
trace after it is a retrace: an error naming the shape (or a warning with
`allow_retrace`). The update is gated inside the graph: a non-finite loss or gradient
skips it (counted), and warm-up runs with the gate closed so it changes nothing.

With a `tf.distribute` strategy of several replicas, XLA compiles one program per device:
each replica's gradients of its static slice of the batch are the XLA program, and the
all-reduce and the gated update run around it in a `tf.function` of the same signature.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping

import keras
import tensorflow as tf

from xtts_data import BatchShape, DatasetSpec
from xtts_train.config import TrainConfig
from xtts_train.distribute import local_replicas, replica_slice
from xtts_train.errors import XttsTrainError
from xtts_train.losses import total_loss
from xtts_train.model import TextToMel
from xtts_train.optim import AdamW, warmup_cosine
from xtts_train.warmup import Job, Program, WarmUp, compile_workers, run_jobs

__all__ = ["CompiledSteps", "RetraceError", "kept_dtype_policy", "shape_of", "timed_step"]

logger = logging.getLogger(__name__)


# Config values the compiled steps take as inputs (with the scheduled learning rate).
_HYPER = ("weight_decay", "clip_norm", "stop_weight", "stop_pos_weight",
          "guided_attention_weight", "guided_attention_sigma")  # fmt: skip


class RetraceError(XttsTrainError, RuntimeError):
    """A compiled step was traced again after warm-up: a shape outside the spec arrived."""


def shape_of(batch: Mapping[str, tf.Tensor]) -> tuple[int, int, int]:
    """(batch, text, frames) of a batch: the key of its compiled step (`BatchShape.key`
    of the shape it has)."""
    b, t = batch["tokens"].shape
    return int(b), int(t), int(batch["mel"].shape[1])


def timed_step(
    train: Callable, batch: Mapping[str, tf.Tensor], *, step: int
) -> tuple[float, float]:
    """One update through `train` (e.g. `CompiledSteps.train`), waiting for its loss: the
    host syncs, so the time is the whole step's. Returns (seconds, loss)."""
    started = time.perf_counter()
    loss = float(train(batch, step=step)["loss"])
    return time.perf_counter() - started, loss


@contextlib.contextmanager
def kept_dtype_policy() -> Iterator[None]:
    """Restore Keras's global dtype policy on leaving (`build_steps` sets the run's)."""
    previous = keras.mixed_precision.global_policy()
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


class CompiledSteps:
    """Train and eval steps of `model` for every shape of `spec`.

    Args:
        strategy: a `tf.distribute` strategy whose scope created `model` and `optimizer`,
            or `None` for one device (the whole step is then one XLA program).

    Attributes:
        traces: Python traces of the train step per (batch, text, frames).
        nonfinite: updates skipped because the loss or a gradient was not finite (a
            variable, updated inside the step).
    """

    def __init__(self, model: TextToMel, optimizer: AdamW,
                 spec: DatasetSpec, config: TrainConfig,
                 eval_spec: DatasetSpec | None = None,
                 strategy: tf.distribute.Strategy | None = None):  # fmt: skip
        self.model, self.optimizer, self.spec, self.config = model, optimizer, spec, config
        self.strategy = strategy
        self.replicas = local_replicas(strategy) if strategy is not None else 1
        _check_divisible(spec, self.replicas * config.grad_accum, self.replicas)
        self.eval_spec = eval_spec  # validation batches have shapes of their own
        self.traces: collections.Counter = collections.Counter()
        self.eval_traces: collections.Counter = collections.Counter()
        self.nonfinite = tf.Variable(0, dtype=tf.int64, trainable=False, name="nonfinite")
        self.consecutive_nonfinite = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.loss_scale, self._good_steps = None, None
        if config.precision == "mixed_float16":  # float16 gradients underflow unscaled
            self.loss_scale = tf.Variable(2.0**15, trainable=False, name="loss_scale")
            self._good_steps = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.schedule = warmup_cosine(
            peak=config.learning_rate,
            warmup_steps=config.warmup_steps,
            total_steps=config.steps,
            min_ratio=config.min_lr_ratio,
        )
        self._hyper = {name: tf.constant(float(getattr(config, name))) for name in _HYPER}
        self._warm = False
        if strategy is None:
            self._train = tf.function(self._train_step, jit_compile=True)
            self._eval = tf.function(self._eval_step, jit_compile=True)
        else:  # XLA per device; all-reduce and update outside it
            self._gradients = tf.function(self._accumulated_gradients, jit_compile=True)
            self._train = tf.function(self._replicated_train_step)
            self._replica_losses = tf.function(
                functools.partial(self._losses, training=False), jit_compile=True
            )
            self._eval = tf.function(self._replicated_eval_step)
        self._concrete: dict[tuple[int, int, int], Callable] = {}
        self._concrete_eval: dict[tuple[int, int, int], Callable] = {}

    # -- building -------------------------------------------------------------------------

    def warm_up(self, progress: Callable[[int, int, Program], None] | None = None, *,
                workers: int | None = None, defer_cached: bool = True) -> WarmUp:  # fmt: skip
        """Trace and compile the train step of every shape of `spec` and the eval step of
        every shape of `eval_spec` (see `xtts_train.warmup`); no update happens (the gate
        is closed).

        Args:
            progress: called as each program is compiled: `progress(done, total, program)`.
            workers: compile threads; default `config.compile_workers` (0: one per core).
            defer_cached: programs the compile cache holds load at their first call
                instead of running once here (see `xtts_train.warmup.run_jobs`).
        """
        slots = [(self._concrete, "train", shape) for shape in self.spec.shapes]
        if self.eval_spec is not None:
            slots += [(self._concrete_eval, "eval", shape) for shape in self.eval_spec.shapes]
        jobs = [self._job(role, shape) for _, role, shape in slots]
        if workers is None:
            workers = compile_workers(self.config.compile_workers, len(jobs))
        programs, report = run_jobs(jobs, workers=workers, defer_cached=defer_cached,
                                    progress=progress)  # fmt: skip
        for (table, _, shape), program in zip(slots, programs, strict=True):
            table[shape.key] = program
        self._warm = True
        return report

    def _job(self, role: str, shape: BatchShape) -> Job:
        """Trace the train (or eval) step at `shape`; run it once on a placeholder batch."""
        train = role == "train"
        signature = (self.spec if train else self.eval_spec).signature(shape)
        function = self._train if train else self._eval
        hyper = {name: tf.TensorSpec([], tf.float32) for name in ["learning_rate", *_HYPER]}
        args = (signature, tf.TensorSpec([], tf.bool), hyper) if train else (signature, hyper)

        def run(program) -> None:
            batch, hyper = _placeholder_batch(signature), self.hyper(0)
            outputs = program(batch, tf.constant(False), hyper) if train else program(batch, hyper)
            float(outputs["loss"])  # wait for it: the compile happens in this call

        name = f"{role} {'x'.join(map(str, shape.key))}"
        return Job(name, lambda: function.get_concrete_function(*args), run)

    @property
    def compiled_shapes(self) -> int:
        return len(self._concrete)

    # -- running --------------------------------------------------------------------------

    def hyper(self, step: int) -> dict[str, tf.Tensor]:
        """The step's inputs besides the batch: the scheduled learning rate at `step`
        (updates done before it) and the config's weight decay, clipping and loss weights.
        Inputs, not constants of the compiled program: changing them compiles nothing."""
        return {"learning_rate": tf.constant(self.schedule(step), tf.float32), **self._hyper}

    def train(self, batch: Mapping[str, tf.Tensor], *, step: int) -> dict[str, tf.Tensor]:
        """Update `step` + 1 on `batch` (dispatched without waiting for its results)."""
        program = self._concrete.get(shape_of(batch))
        hyper = self.hyper(step)
        if program is None:
            return self._retrace(self._train, batch, tf.constant(True), hyper)
        return program(batch, tf.constant(True), hyper)

    def evaluate(self, batch: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        program = self._concrete_eval.get(shape_of(batch))
        if program is None:
            return self._retrace(self._eval, batch, self.hyper(0))
        return program(batch, self.hyper(0))

    def _retrace(self, function, batch, *args):
        message = (
            f"batch shape (batch, text, frames) = {shape_of(batch)} is not one of the "
            f"{len(self._concrete)} compiled shapes {sorted(self._concrete)}; it would "
            f"retrace and recompile the step"
        )
        if not self.config.allow_retrace:
            raise RetraceError(message + " (pass --allow-retrace to accept it)")
        logger.warning("%s", message)
        return function(batch, *args)

    # -- the graphs -----------------------------------------------------------------------

    def _train_step(self, batch, apply, hyper):
        self._count_trace(batch)
        scale = self.loss_scale if self.loss_scale is not None else tf.constant(1.0)
        grads, losses = self._accumulated_gradients(batch, scale, hyper)
        return self._update(grads, losses, apply, hyper)

    def _replicated_train_step(self, batch, apply, hyper):
        self._count_trace(batch)
        scale = self.loss_scale.read_value() if self.loss_scale is not None else 1.0
        scale = tf.convert_to_tensor(scale)  # an argument: XLA reads no other device's variable

        def replica(batch, hyper):  # (B / replicas, ...) rows of this replica
            grads, losses = self._gradients(replica_slice(batch, self.replicas), scale, hyper)
            return tf.distribute.get_replica_context().all_reduce("MEAN", (grads, losses))

        reduced = self.strategy.run(replica, args=(batch, hyper))
        # Every replica holds the same mean now; take this worker's first copy.
        first = self.strategy.experimental_local_results
        grads, losses = tf.nest.map_structure(lambda value: first(value)[0], reduced)
        return self._update(grads, losses, apply, hyper)

    def _count_trace(self, batch) -> None:
        self.traces[shape_of(batch)] += 1  # runs once per trace, never per step
        if self._warm:
            self._after_warm_up(batch)

    def _update(self, grads, losses, apply, hyper):
        """Clip, then apply unless `apply` is false or the loss or a gradient is not finite."""
        norm = tf.linalg.global_norm(grads)
        finite = tf.math.is_finite(norm) & tf.math.is_finite(losses["loss"])
        grads, _ = tf.clip_by_global_norm(grads, hyper["clip_norm"], use_norm=norm)
        self.optimizer.apply(grads, self.model.trainable_variables, gate=apply & finite,
                             learning_rate=hyper["learning_rate"],
                             weight_decay=hyper["weight_decay"])  # fmt: skip
        if self.loss_scale is not None:
            self._scale_step(finite, apply)
        skipped = tf.cast(apply & ~finite, tf.int64)
        self.nonfinite.assign_add(skipped)
        self.consecutive_nonfinite.assign((self.consecutive_nonfinite + skipped) * skipped)
        return {**losses, "grad_norm": norm, "finite": finite}

    def _accumulated_gradients(self, batch, scale, hyper):
        """Mean gradients over `grad_accum` equal micro-batches, in the graph.

        `scale` multiplies the loss before differentiation (float16 loss scaling; 1.0
        otherwise) and divides the gradients after it.
        """
        variables = self.model.trainable_variables
        parts = self.config.grad_accum
        size = shape_of(batch)[0] // parts
        total_grads, total_losses = None, None
        for i in range(parts):  # static unroll: each micro-batch has a static shape
            micro = {k: v[i * size : (i + 1) * size] for k, v in batch.items()}
            with tf.GradientTape() as tape:
                losses = self._losses(micro, hyper, training=True)
                scaled = tf.cast(losses["loss"], tf.float32) * scale
            grads = [None if g is None else tf.cast(g, tf.float32) / scale
                     for g in tape.gradient(scaled, variables)]  # fmt: skip
            grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                     for g, v in zip(grads, variables, strict=True)]  # fmt: skip
            if total_grads is None:
                total_grads, total_losses = grads, losses
            else:
                total_grads = [a + g for a, g in zip(total_grads, grads, strict=True)]
                total_losses = {k: total_losses[k] + losses[k] for k in losses}
        return [g / parts for g in total_grads], {k: v / parts for k, v in total_losses.items()}

    def _eval_step(self, batch, hyper):
        self.eval_traces[shape_of(batch)] += 1
        return self._losses(batch, hyper, training=False)

    def _replicated_eval_step(self, batch, hyper):
        self.eval_traces[shape_of(batch)] += 1

        def replica(batch, hyper):
            losses = self._replica_losses(replica_slice(batch, self.replicas), hyper)
            return tf.distribute.get_replica_context().all_reduce("MEAN", losses)

        reduced = self.strategy.run(replica, args=(batch, hyper))
        return tf.nest.map_structure(
            lambda value: self.strategy.experimental_local_results(value)[0], reduced
        )

    def _losses(self, batch, hyper, *, training: bool) -> dict[str, tf.Tensor]:
        outputs = self.model(batch, training=training)
        return total_loss(outputs, batch, stop_weight=hyper["stop_weight"],
                          pos_weight=hyper["stop_pos_weight"],
                          guided_weight=hyper["guided_attention_weight"],
                          guided_sigma=hyper["guided_attention_sigma"])  # fmt: skip

    def _scale_step(self, finite, apply) -> None:
        """Dynamic loss scaling (float16): halve on overflow, double after 2000 good steps;
        nothing changes unless `apply`."""
        good = tf.where(finite, self._good_steps + 1, tf.constant(0, tf.int64))
        grow = good >= 2000
        scale = tf.where(finite, tf.where(grow, self.loss_scale * 2, self.loss_scale),
                         tf.maximum(self.loss_scale / 2, 1.0))  # fmt: skip
        self.loss_scale.assign(tf.where(apply, scale, self.loss_scale))
        good = tf.where(grow, tf.constant(0, tf.int64), good)
        self._good_steps.assign(tf.where(apply, good, self._good_steps))

    def _after_warm_up(self, batch) -> None:
        logger.warning("train step traced again after warm-up for shape %s", shape_of(batch))


def _check_divisible(spec: DatasetSpec, multiple: int, replicas: int) -> None:
    """Each replica, and each of its micro-batches, needs an equal static share."""
    for shape in spec.shapes:
        if shape.batch_size % multiple:
            raise XttsTrainError(
                f"batch shape {shape.key}: expected a batch size divisible by "
                f"{multiple} ({replicas} replica(s) x train.grad_accum "
                f"{multiple // replicas}), received: batch_size={shape.batch_size}; set "
                f"data.batch_multiple={multiple} (buckets) or a data.batch_size that divides"
            )


def _placeholder_batch(signature: Mapping[str, tf.TensorSpec]) -> dict[str, tf.Tensor]:
    """A batch of the signature's shapes with one real frame and token per row."""
    batch = {name: tf.zeros(spec.shape, spec.dtype) for name, spec in signature.items()}
    b = signature["tokens"].shape[0]
    for name in ("token_lengths", "mel_lengths", "cond_lengths"):
        batch[name] = tf.ones([b], tf.int32)
    first = tf.one_hot(0, signature["mel"].shape[1])[None]  # (1, F)
    batch["mel_mask"] = tf.tile(first, [b, 1])
    batch["stop_targets"] = tf.tile(first, [b, 1])
    batch["token_mask"] = tf.tile(tf.one_hot(0, signature["tokens"].shape[1])[None], [b, 1])
    batch["tokens"] = tf.cast(batch["token_mask"], tf.int32) * 2
    return batch
