"""The tasks by name (`train.task`), and `fit` and `build_steps` for a config's task.

- `text_to_mel`: `TextToMel` on `xtts_data.make_dataset`'s K bucketed (batch, text,
  frames) shapes, a program per bucket; sized by `model`, its losses weighed by
  `text_to_mel`.
- `vocoder`: `Vocoder` on `xtts_data.make_segment_dataset`'s one (batch, frames, samples)
  shape, one program; sized and weighed by `vocoder`.

A new task is a `Task` subclass in this folder and one line in `TASKS`; one defined
elsewhere (a test's, a user's) is added with `register_task`.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from xtts_train.compile.process import StartupClock
from xtts_train.config import StackConfig
from xtts_train.errors import ConfigError
from xtts_train.tasks.text_to_mel import TextToMelTask
from xtts_train.tasks.vocoder import VocoderTask
from xtts_train.training.build import build_task_steps
from xtts_train.training.steps import CompiledSteps
from xtts_train.training.task import Task
from xtts_train.training.trainer import fit_task

__all__ = ["TASKS", "build_steps", "fit", "register_task", "task_class"]

TASKS: dict[str, type[Task]] = {"text_to_mel": TextToMelTask, "vocoder": VocoderTask}


def register_task(task: type[Task]) -> type[Task]:
    """Add `task` under its `name` (usable as a class decorator). Returns it.

    Raises:
        ConfigError: the name is another task's.
    """
    known = TASKS.get(task.name)
    if known is not None and known is not task:
        raise ConfigError(f"Expected a new task name, received: {task.name!r}, the name of "
                          f"{known.__module__}.{known.__qualname__}")  # fmt: skip
    TASKS[task.name] = task
    return task


def task_class(name: str) -> type[Task]:
    """The task called `name` (a run's `train.task`).

    Raises:
        ConfigError: no task has that name (the message lists the known ones).
    """
    if name not in TASKS:
        raise ConfigError(f"Expected train.task one of {sorted(TASKS)}, received: {name!r}")
    return TASKS[name]


def fit(stack: StackConfig, cache: str | Path, workdir: str | Path, *, progress: bool = True,
        profile_steps: tuple[int, int] | None = None,
        clock: StartupClock | None = None) -> dict:  # fmt: skip
    """Train (or resume) the run's task (`train.task`) on the feature cache `cache`, writing
    into `workdir`: `xtts_train.training.trainer.fit_task` (its arguments, its summary)."""
    return fit_task(task_class(stack.train.task), stack, cache, workdir, progress=progress,
                    profile_steps=profile_steps, clock=clock)  # fmt: skip


def build_steps(stack: StackConfig, spec, eval_spec=None,
                strategy: tf.distribute.Strategy | None = None, *,
                check_memory: bool = True) -> CompiledSteps:  # fmt: skip
    """The run's task's model, AdamW and compiled steps (`build_task_steps`), for `check`,
    the benchmarks and tests."""
    return build_task_steps(task_class(stack.train.task), stack, spec, eval_spec, strategy,
                            check_memory=check_memory)  # fmt: skip
