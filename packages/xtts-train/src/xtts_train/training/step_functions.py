"""The Python bodies of the train and eval steps, which `CompiledSteps` traces and compiles
once per batch shape.

A train step is the task's losses (`xtts_train.training.task`), their gradients
(`accumulated_gradients`: each objective's loss with respect to its variables), and the
update as a chain of transforms (`xtts_train.training.transforms`):
`LossScale` (float16 only) → `FiniteGate` → per objective: `clip_by_global_norm` → `adamw`.

With a `tf.distribute` strategy of several replicas, each replica's gradients of its
static slice of the batch are one program per device (XLA-compiled where `train.compiler`
says so), and the all-reduce and the update run around it in a `tf.function` of the same
signature.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence

import keras
import tensorflow as tf

from xtts_train.compile.compiler import resolve
from xtts_train.config import TrainConfig
from xtts_train.errors import ConfigError
from xtts_train.training.distribute import local_replicas, replica_slice
from xtts_train.training.optim import AdamW, warmup_cosine
from xtts_train.training.task import Objective, Task
from xtts_train.training.transforms import (
    FiniteGate,
    Hyper,
    LossScale,
    Update,
    accumulated_gradients,
    adamw,
    chain,
    clip_by_global_norm,
    per_objective,
)

__all__ = ["UPDATE_SETTINGS", "StepFunctions"]

# `train` values the compiled steps take as inputs, with the scheduled learning rate and
# the task's loss settings (`Task.loss_settings`).
UPDATE_SETTINGS = ("weight_decay", "clip_norm")
# `train` values no step's graph depends on (the run's length, logging, the schedule,
# which is an input): left out of a stored trace's key (`trace_settings`).
_RUN_ONLY = ("steps", "learning_rate", "warmup_steps", "min_lr_ratio", "log_every",
             "eval_every", "eval_batches", "checkpoint_every",
             "keep_checkpoints", "allow_retrace", "max_nonfinite", "compile_workers",
             "memory_budget_gb", "init_from")  # fmt: skip


class StepFunctions:
    """The train and eval step bodies of a task's model, on one device or under `strategy`.

    Args:
        task: the model and its losses (`xtts_train.training.task`).
        optimizers: an AdamW per objective of the task (`Task.objectives`), by name.
        strategy: a `tf.distribute` strategy whose scope created `model` and `optimizer`,
            or `None` for one device.

    Attributes:
        loss_scale: the `LossScale` of a `mixed_float16` run, else None.
        gate: the `FiniteGate` (its `skipped` and `consecutive` counters).
        update: the chain of transforms from gradients to applied update.
        schedule: the learning rate of a step (updates done before it).
        replicas: replicas of this worker (1 without a strategy).
        compilers: `{"train": c, "eval": c}`, `c` `"xla"` or `"graph"`: `train.compiler`
            resolved for this device (`xtts_train.compile.compiler.resolve`).
    """

    def __init__(self, task: Task, optimizers: Mapping[str, AdamW], config: TrainConfig,
                 strategy: tf.distribute.Strategy | None = None) -> None:  # fmt: skip
        self.task, self.model = task, task.model
        self.optimizers, self.config, self.strategy = dict(optimizers), config, strategy
        self.objectives = objectives = task.objectives()
        _check_objectives(objectives, self.optimizers)
        self.replicas = local_replicas(strategy) if strategy is not None else 1
        self.loss_scale = LossScale() if config.precision == "mixed_float16" else None
        self.gate = FiniteGate()
        branches = [(len(o.variables),
                     chain(clip_by_global_norm(), adamw(self.optimizers[o.name], o.variables)))
                    for o in objectives]  # fmt: skip
        pieces = (self.loss_scale, self.gate, per_objective(branches))
        self.update = chain(*(piece for piece in pieces if piece is not None))
        self.schedule = warmup_cosine(
            peak=config.learning_rate,
            warmup_steps=config.warmup_steps,
            total_steps=config.steps,
            min_ratio=config.min_lr_ratio,
        )
        settings = {name: float(getattr(config, name)) for name in UPDATE_SETTINGS}
        self._hyper = {name: tf.constant(value)
                       for name, value in {**settings, **task.settings()}.items()}  # fmt: skip
        self.compilers = {role: resolve(config.compiler, role, table=task.compilers)
                          for role in ("train", "eval")}  # fmt: skip
        if strategy is not None:  # a program per device; all-reduce and update outside it
            self._gradients = tf.function(
                self.gradients, jit_compile=self.compilers["train"] == "xla", autograph=False
            )
            self._replica_losses = tf.function(
                functools.partial(self.losses, training=False),
                jit_compile=self.compilers["eval"] == "xla",
                autograph=False,
            )

    def hyper(self, step: int) -> dict[str, tf.Tensor]:
        """The step's inputs besides the batch: the scheduled learning rate at `step`
        (updates done before it), the config's weight decay and clipping, and the task's
        loss settings. Inputs, not constants of the compiled program: changing them
        compiles nothing."""
        return {"learning_rate": tf.constant(self.schedule(step), tf.float32), **self._hyper}

    def variables(self) -> list[tf.Variable]:
        """Every variable a step reads or writes, once each: the model's, the optimizer's,
        the gate's and the loss scale's (a stored trace's captured inputs)."""
        modules = [*self.task.networks().values(), *self.optimizers.values(), self.gate,
                   *([self.loss_scale] if self.loss_scale else [])]  # fmt: skip
        found: dict[int, tf.Variable] = {}
        for variable in [*self.model.variables, *(v for m in modules for v in m.variables)]:
            found.setdefault(id(variable.handle), variable)
        return list(found.values())

    def trace_settings(self) -> dict:
        """What decides the steps' graphs besides their shapes, code and variables (a
        stored trace's key, `xtts_train.compile.traces.key`): the train settings a step
        reads, the dtype policy, the compilers and the task's own."""
        train = {k: v for k, v in dataclasses.asdict(self.config).items() if k not in _RUN_ONLY}
        return {"train": train, "policy": keras.mixed_precision.global_policy().name,
                "compilers": self.compilers, "task": self.task.trace_settings()}  # fmt: skip

    def signature_of_hyper(self) -> dict[str, tf.TensorSpec]:
        """The `tf.TensorSpec`s of `hyper`'s values."""
        return {name: tf.TensorSpec([], tf.float32) for name in ["learning_rate", *self._hyper]}

    def losses(self, batch: Mapping[str, tf.Tensor], hyper: Hyper, *,
               training: bool) -> dict[str, tf.Tensor]:  # fmt: skip
        """The float32 scalar losses of `batch` (`Task.losses`)."""
        return self.task.losses(batch, hyper, training=training)

    def gradients(self, batch, scale, hyper):
        """Mean gradients and losses over `train.grad_accum` micro-batches of `batch`, the
        loss multiplied by `scale` before differentiation."""
        return accumulated_gradients(
            functools.partial(self.losses, hyper=hyper, training=True),
            [(o.loss, o.variables) for o in self.objectives], batch,
            parts=self.config.grad_accum, scale=scale,
        )  # fmt: skip

    def train(self, batch, apply, hyper) -> dict[str, tf.Tensor]:
        """One device: gradients and update, one program. `apply` false changes no weight
        (warm-up)."""
        grads, losses = self.gradients(batch, self._scale(), hyper)
        return self._finish(grads, losses, apply, hyper)

    def replicated_train(self, batch, apply, hyper) -> dict[str, tf.Tensor]:
        """Under the strategy: each replica's gradients (XLA), their mean, one update."""
        scale = self._scale()  # an argument: XLA reads no other device's variable

        def replica(batch, hyper):  # (B / replicas, ...) rows of this replica
            grads, losses = self._gradients(replica_slice(batch, self.replicas), scale, hyper)
            return tf.distribute.get_replica_context().all_reduce("MEAN", (grads, losses))

        grads, losses = self._first_copy(self.strategy.run(replica, args=(batch, hyper)))
        return self._finish(grads, losses, apply, hyper)

    def eval(self, batch, hyper) -> dict[str, tf.Tensor]:
        return self.losses(batch, hyper, training=False)

    def replicated_eval(self, batch, hyper) -> dict[str, tf.Tensor]:
        def replica(batch, hyper):
            losses = self._replica_losses(replica_slice(batch, self.replicas), hyper)
            return tf.distribute.get_replica_context().all_reduce("MEAN", losses)

        return self._first_copy(self.strategy.run(replica, args=(batch, hyper)))

    def _scale(self) -> tf.Tensor:
        if self.loss_scale is None:
            return tf.constant(1.0)
        return self.loss_scale.scale.read_value()

    def _first_copy(self, reduced):
        """Every replica holds the same mean after an all-reduce: this worker's first."""
        return tf.nest.map_structure(
            lambda value: self.strategy.experimental_local_results(value)[0], reduced
        )

    def _finish(self, grads, losses, apply, hyper) -> dict[str, tf.Tensor]:
        """The update chain; the losses, the gradients' norm before clipping, and whether
        the update was applied (`finite`: false for a non-finite loss or gradient)."""
        # One gate for every objective: any non-finite loss makes the sum non-finite.
        loss = tf.add_n([losses[o.loss] for o in self.objectives])
        with tf.name_scope("update"):  # its ops apart in a profile of the step
            update = self.update(Update(tuple(grads), loss, apply), hyper)
        return {**losses, "grad_norm": update.grad_norm, "finite": update.apply}


def _check_objectives(objectives: Sequence[Objective], optimizers: Mapping[str, AdamW]) -> None:
    """Objectives need distinct names, an optimizer each, and variables of their own."""
    names = [o.name for o in objectives]
    if not objectives or len(set(names)) != len(names) or set(names) != set(optimizers):
        raise ConfigError(f"Expected objectives of distinct names with an optimizer each "
                          f"({sorted(optimizers)}), received: {names}")  # fmt: skip
    seen: dict[int, str] = {}
    for objective in objectives:
        for variable in objective.variables:
            other = seen.setdefault(id(variable), objective.name)
            if other != objective.name:
                raise ConfigError(f"Expected each variable in one objective, received: "
                                  f"{variable.path} in {other!r} and "
                                  f"{objective.name!r}")  # fmt: skip
