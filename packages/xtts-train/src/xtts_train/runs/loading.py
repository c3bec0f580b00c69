"""Reading a training run back: its config (checked to be of the expected task), its
newest checkpoint's step, and a checkpoint's weights into a built model. `fit` (on
resume), `synthesize`, `evaluate` and `vocode` read runs through these."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import keras
import tensorflow as tf

from xtts_data.config import override_key
from xtts_train.config import StackConfig, load_stack_config
from xtts_train.errors import XttsTrainError

__all__ = [
    "INFERENCE_SETTINGS", "kept_steps", "latest_step", "load_run_config", "restore_weights",
    "step_of",
]  # fmt: skip

# The settings of a trained run that may change when it is read back (`--set` of `evaluate`
# and `synthesize`): how it decodes, not what it learned.
INFERENCE_SETTINGS = "model.infer_"


def latest_step(workdir: str | Path) -> int:
    """The step of the newest checkpoint in `workdir` (0 when there is none)."""
    latest = tf.train.latest_checkpoint(str(Path(workdir) / "checkpoints"))
    return step_of(latest) if latest else 0


def kept_steps(workdir: str | Path) -> list[int]:
    """The steps of the checkpoints kept in `workdir`, ascending (empty when there are none)."""
    indexes = (Path(workdir) / "checkpoints").glob("ckpt-*.index")
    return sorted(step_of(str(index.with_suffix(""))) for index in indexes)


def step_of(path: str) -> int:
    """The step of a checkpoint path (`.../ckpt-<step>`)."""
    return int(path.rsplit("-", 1)[1])


def load_run_config(workdir: Path, task: str, overrides: Sequence[str] = ()) -> StackConfig:
    """A run's `config.yaml`, checked to be a run of `task` (`train.task`), with
    `overrides` of its decoding settings applied (`model.infer_*=VALUE`, as `--set`).

    Raises:
        XttsTrainError: not a run folder, a run of another task, or an override of a
            setting other than `model.infer_*` (those shape the weights).
        ConfigError: an invalid config or override value.
    """
    if not (workdir / "config.yaml").is_file():
        raise XttsTrainError(f"{workdir} is not a training run ({workdir / 'config.yaml'} missing)")
    for override in overrides:
        if not override_key(override).startswith(INFERENCE_SETTINGS):
            raise XttsTrainError(
                f"Expected --set {INFERENCE_SETTINGS}KEY=VALUE, a decoding setting of the "
                f"trained run, received: {override!r} (the other settings shape the "
                f"weights, or the training)"
            )
    stack = load_stack_config(workdir / "config.yaml", overrides)
    if stack.train.task != task:
        raise XttsTrainError(
            f"Expected a {task} run, received: {workdir}, a run of train.task={stack.train.task}"
        )
    return stack


def restore_weights(workdir: Path, model: keras.Model, *, step: int | None = None) -> str:
    """Load a built model's weights from a run's checkpoint (the last, or `step`'s).

    Returns:
        The checkpoint's path.

    Raises:
        XttsTrainError: no checkpoint yet, none at `step`, or one that does not hold every
            weight of `model` (another configuration).
    """
    latest = tf.train.latest_checkpoint(str(workdir / "checkpoints"))
    if latest is None:
        raise XttsTrainError(f"{workdir} has no checkpoint yet: train it with `xtts-train fit`")
    if step is not None:
        latest = str(workdir / "checkpoints" / f"ckpt-{step}")
        if not Path(latest + ".index").is_file():
            raise XttsTrainError(f"{workdir} has no checkpoint of step {step} "
                                 f"(kept: {kept_steps(workdir)})")  # fmt: skip
    try:
        restored = tf.train.Checkpoint(model=model).restore(latest)
        restored.expect_partial()  # the optimizer and step are training state
        restored.assert_existing_objects_matched()
    except (AssertionError, ValueError) as error:  # a weight missing, or of another shape
        raise XttsTrainError(
            f"{latest} does not hold every weight of the model in {workdir / 'config.yaml'} "
            f"(written by another model configuration or an older xtts-train?): {error}"
        ) from None
    return latest
