"""`TrainConfig`, and the whole stack's YAML config with `--set section.key=value` overrides."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml

from xtts_audio import MelConfig
from xtts_data import DataConfig
from xtts_data.config import read_sections
from xtts_train.distribute import STRATEGIES
from xtts_train.errors import ConfigError
from xtts_train.model import ModelConfig

__all__ = ["StackConfig", "TrainConfig", "load_stack_config"]

Precision = Literal["float32", "mixed_float16", "mixed_bfloat16"]
_PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


def _fail(field: str, value: Any, allowed: str) -> None:
    raise ConfigError(f"TrainConfig.{field}: expected {allowed}, received: {field}={value!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Optimisation and bookkeeping of a training run.

    Attributes:
        steps: optimizer updates to reach (a resumed run continues to this total).
        learning_rate: peak rate of AdamW, reached after `warmup_steps` linear warm-up,
            then cosine decay to `learning_rate * min_lr_ratio` at `steps`.
        weight_decay: AdamW decoupled weight decay.
        clip_norm: global gradient-norm clipping threshold.
        grad_accum: micro-batches per update, accumulated inside the compiled step (each
            static batch is split in `grad_accum` equal parts; batch sizes must divide).
        precision: `float32`, `mixed_float16` (with dynamic loss scaling) or `mixed_bfloat16`.
        strategy: `auto`, `one-device`, `mirrored` or `multi-worker` (see
            `xtts_train.distribute`); batch sizes must divide by replicas x `grad_accum`.
        stop_weight, stop_pos_weight: weight of the stop-token loss, and of its positives.
        log_every: steps between host syncs (losses, timings, metrics.jsonl line).
        eval_every: steps between validation passes (0: never); `eval_batches` per pass.
        checkpoint_every: steps between checkpoints; `keep_checkpoints` are kept.
        allow_retrace: a trace after warm-up warns instead of stopping the run.
        max_nonfinite: consecutive skipped (non-finite) updates that stop the run.
        seed: weight initialisation and data shuffling seed.
    """

    steps: int = 1000
    learning_rate: float = 1e-3
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    grad_accum: int = 1
    precision: Precision = "float32"
    strategy: str = "auto"
    stop_weight: float = 1.0
    stop_pos_weight: float = 5.0
    log_every: int = 10
    eval_every: int = 0
    eval_batches: int = 8
    checkpoint_every: int = 200
    keep_checkpoints: int = 3
    allow_retrace: bool = False
    max_nonfinite: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "grad_accum", "log_every", "eval_batches", "checkpoint_every",
                     "keep_checkpoints", "max_nonfinite"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                _fail(name, value, "an int >= 1")
        for name in ("warmup_steps", "eval_every", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                _fail(name, value, "an int >= 0")
        for name in ("learning_rate", "clip_norm", "stop_pos_weight"):
            if not _number(getattr(self, name)) or getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "a number > 0")
        for name in ("weight_decay", "stop_weight"):
            if not _number(getattr(self, name)) or getattr(self, name) < 0:
                _fail(name, getattr(self, name), "a number >= 0")
        if not _number(self.min_lr_ratio) or not 0 <= self.min_lr_ratio <= 1:
            _fail("min_lr_ratio", self.min_lr_ratio, "a number in [0, 1]")
        if self.precision not in _PRECISIONS:
            _fail("precision", self.precision, f"one of {_PRECISIONS}")
        if self.strategy not in STRATEGIES:
            _fail("strategy", self.strategy, f"one of {STRATEGIES}")
        if not isinstance(self.allow_retrace, bool):
            _fail("allow_retrace", self.allow_retrace, "true or false")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TrainConfig:
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(f"TrainConfig: unknown field(s) {unknown}; known: {known}")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class StackConfig:
    """The four sections of a stack config, each in its package's dataclass."""

    audio: MelConfig
    data: DataConfig
    model: ModelConfig
    train: TrainConfig

    def to_dict(self) -> dict[str, Any]:
        return {
            "audio": self.audio.to_dict(),
            "data": self.data.to_dict(),
            "model": self.model.to_dict(),
            "train": self.train.to_dict(),
        }


def load_stack_config(path: str | Path | None, overrides: Sequence[str] = ()) -> StackConfig:
    """Read a YAML stack config (or defaults) and apply `section.key=value` overrides.

    Values of overrides are parsed as YAML (`train.steps=200`, `data.policy=fixed`,
    `model.preset=tiny`, `data.text.cleaners=basic`).

    Raises:
        ConfigError: unreadable file, unknown section or key, malformed override, or an
            invalid value (the message names the field).
    """
    try:
        sections = {k: dict(v or {}) for k, v in read_sections(path).items()}
    except ValueError as error:  # xtts_data's ConfigError: same meaning here
        raise ConfigError(str(error)) from None
    for override in overrides:
        _apply(sections, override)
    try:
        audio = MelConfig.from_dict(sections.get("audio") or {"preset": "xtts"})
        data = DataConfig.from_dict(sections.get("data") or {})
    except ValueError as error:
        raise ConfigError(str(error)) from None
    model = ModelConfig.from_dict({"preset": "tiny", **(sections.get("model") or {})})
    model = dataclasses.replace(model, n_mels=audio.n_mels)
    return StackConfig(audio, data, model, TrainConfig.from_dict(sections.get("train") or {}))


def _apply(sections: dict[str, dict], override: str) -> None:
    key, sep, raw = override.partition("=")
    parts = key.strip().split(".")
    if not sep or len(parts) < 2 or parts[0] not in ("audio", "data", "model", "train"):
        raise ConfigError(
            f"Expected --set section.key=value with section audio, data, model or train, "
            f"received: {override!r}"
        )
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise ConfigError(f"--set {override!r}: value is not valid YAML ({error})") from None
    node = sections.setdefault(parts[0], {})
    for part in parts[1:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {override!r}: {part} is not a section")
    node[parts[-1]] = value
