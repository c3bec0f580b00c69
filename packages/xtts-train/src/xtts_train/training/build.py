"""`build_task_steps`: a task's model, AdamW and their compiled steps, as `fit` builds them
(also `check`'s, the memory planner's and the benchmarks', through
`xtts_train.tasks.build_steps`, which picks the task by name)."""

from __future__ import annotations

import contextlib

import keras
import tensorflow as tf

from xtts_train.config import StackConfig
from xtts_train.training.optim import AdamW
from xtts_train.training.steps import CompiledSteps
from xtts_train.training.task import Task

__all__ = ["build_task_steps", "make_optimizers"]


def make_optimizers(task: Task) -> dict[str, AdamW]:
    """An AdamW for each of `task`'s objectives (`Task.objectives`), by name (the schedule
    and weight decay are the compiled step's inputs: `CompiledSteps.hyper`)."""
    return {o.name: AdamW(o.variables, beta_1=o.betas[0], beta_2=o.betas[1])
            for o in task.objectives()}  # fmt: skip


def build_task_steps(task: type[Task], stack: StackConfig, spec, eval_spec=None,
                     strategy: tf.distribute.Strategy | None = None, *,
                     check_memory: bool = True) -> CompiledSteps:  # fmt: skip
    """`task`'s model (under the run's precision policy), an AdamW per objective, and
    their compiled steps.

    Sets the global Keras dtype policy to `stack.train.precision` (callers restore it).
    With a `strategy`, the model and optimizer variables are created in its scope.

    Args:
        spec, eval_spec: the static shapes of the task's batches (its `pipeline`'s spec:
            an `xtts_data.DatasetSpec` for `text_to_mel`, a `SegmentSpec` for `vocoder`).
        check_memory: refuse shapes whose step would not fit this machine (the task's
            `check_memory`); off for programs built to run elsewhere (`xtts-bench hlo`).
    """
    if check_memory:
        task.check_memory(stack, spec)  # before any compile: a step that fits
    keras.mixed_precision.set_global_policy(stack.train.precision)
    keras.utils.set_random_seed(stack.train.seed)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        built = task.build(stack)
        optimizers = make_optimizers(built)
    return CompiledSteps(built, optimizers, spec, stack.train, eval_spec, strategy)
