"""The parameters of an exported step: their names, roles and the rules that fill them.

An XLA program exported from a `tf.function` takes the function's flat arguments (nested
dicts flattened by sorted key, as `tf.nest.flatten`), then its captured variables in the
order of `get_concrete_function(...).captured_inputs`. Each gets a manifest entry: index,
name, role, shape, dtype and a `fill` rule from which `runner.synthetic_inputs` builds a
sensible value on the device (weights are too big to carry to it).

Roles: `batch` (a batch field), `flag` (the train step's `apply`), `hyper` (the learning
rate, weight decay and loss settings), `variable` (a trainable weight), `optimizer_slot`
(AdamW's moments), `step_counter` (AdamW's iterations), `seed` (a dropout seed state),
`other` (the finite gate's counters, a loss scale, non-trainable weights).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf

__all__ = [
    "ROLES",
    "argument_names",
    "batch_fill",
    "resolve_lengths",
    "value_fill",
    "variable_roles",
]

ROLES = ("batch", "flag", "hyper", "variable", "optimizer_slot", "step_counter", "seed",
         "other")  # fmt: skip

_INLINE = 64  # elements: a value this small travels in the manifest itself


def argument_names(structure, prefix: str = "") -> list[str]:
    """The names of `structure`'s leaves in `tf.nest.flatten` order: dict keys sorted and
    joined by `/` (`batch/tokens`), sequence items by index unless `prefix` labels them."""
    if isinstance(structure, Mapping):
        return [name for key in sorted(structure)
                for name in argument_names(structure[key], f"{prefix}{key}/")]  # fmt: skip
    if isinstance(structure, list | tuple):
        return [name for i, item in enumerate(structure)
                for name in argument_names(item, f"{prefix}{i}/")]  # fmt: skip
    return [prefix.rstrip("/")]


def variable_roles(steps) -> dict[int, tuple[str, object, dict | None]]:
    """{id of a variable's handle: (role, variable, fill or None)} of every variable the
    steps read (`StepFunctions.variables`); None: fill from the variable's value."""
    found: dict[int, tuple[str, object, dict | None]] = {}
    for optimizer in steps.optimizers.values():
        momentum = {"kind": "normal", "mean": 0.0, "std": 1e-3}
        # Second moments are positive: Adam divides by their square root.
        velocity = {"kind": "uniform", "low": 1e-8, "high": 1e-6}
        found[id(optimizer.momentum.handle)] = ("optimizer_slot", optimizer.momentum, momentum)
        found[id(optimizer.velocity.handle)] = ("optimizer_slot", optimizer.velocity, velocity)
        found[id(optimizer.iterations.handle)] = ("step_counter", optimizer.iterations, None)
    for state in steps.task.seed_states():
        found[id(state.handle)] = ("seed", state, None)
    for variable in steps.functions.variables():
        role = "variable" if variable.trainable else "other"
        found.setdefault(id(variable.handle), (role, variable, None))
    return found


def value_fill(value: np.ndarray, role: str) -> dict:
    """The fill rule of a parameter whose value is known: the value itself when small
    (seeds, counters, flags, hyper-parameters), else a float weight's mean and spread
    (a LayerNorm's ones stay ones), else zeros."""
    if value.size <= _INLINE:
        return {"kind": "values", "values": value.reshape(-1).tolist()}
    if np.issubdtype(value.dtype, np.floating) and role == "variable":
        return {"kind": "normal", "mean": float(value.mean()), "std": float(value.std())}
    return {"kind": "zeros"}


def batch_fill(key: str, spec: tf.TensorSpec, *, vocab_size: int, cond_frames: int) -> dict:
    """The fill rule of a text-to-mel batch field (`xtts_data.DatasetSpec.signature`):
    token ids below the vocabulary, lengths within the padded axes, masks and stop
    targets that agree with them; any other field: unit normal floats or zero ints.

    Args:
        key: the field's name (`tokens`, `mel_lengths`, ...).
        spec: its shape and dtype: tokens [batch, text], mel [batch, frames, n_mels].
        vocab_size: token ids are below it (0 is padding).
        cond_frames: the conditioning mel's padded frames.
    """
    shape = spec.shape.as_list()
    rules = {
        "tokens": {"kind": "integers", "low": 1, "high": vocab_size},
        "token_lengths": {"kind": "lengths", "high": None},  # set below from the axes
        "mel_lengths": {"kind": "lengths", "high": None},
        "cond_lengths": {"kind": "lengths", "high": cond_frames},
        "token_mask": {"kind": "mask", "of": "batch/token_lengths"},
        "mel_mask": {"kind": "mask", "of": "batch/mel_lengths"},
        "stop_targets": {"kind": "last", "of": "batch/mel_lengths"},
        "speaker": {"kind": "zeros"},
    }
    if key in rules:
        return rules[key]
    if spec.dtype.is_floating:
        return {"kind": "normal", "mean": 0.0, "std": 1.0}
    return {"kind": "zeros", "note": f"no rule for batch field {key!r} of shape {shape}"}


def resolve_lengths(parameters: Sequence[dict]) -> None:
    """Set each `lengths` rule's `high` left open to its padded axis (the second axis of
    the batch field its mask rule reads it for), in place."""
    by_name = {p["name"]: p for p in parameters}
    for parameter in parameters:
        fill = parameter["fill"]
        if fill["kind"] in ("mask", "last") and fill["of"] in by_name:
            lengths = by_name[fill["of"]]["fill"]
            if lengths.get("kind") == "lengths" and lengths.get("high") is None:
                lengths["high"] = int(parameter["shape"][-1])
