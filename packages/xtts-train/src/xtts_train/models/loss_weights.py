"""The check a loss function makes of each weight it is given: a Python number must be one
>= 0; a tensor is a compiled step's input, checked where its config was."""

from __future__ import annotations

import tensorflow as tf

from xtts_train.errors import ConfigError

__all__ = ["check_weight"]


def check_weight(name: str, value: float | tf.Tensor) -> None:
    """Raises ConfigError for a Python weight that is not a number >= 0."""
    if isinstance(value, tf.Tensor):  # a compiled step's input, checked in its config
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ConfigError(f"Expected {name} a number >= 0, received: {name}={value!r}")
