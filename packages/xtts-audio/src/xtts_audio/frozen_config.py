"""`FrozenConfig`: the `from_dict`/`to_dict` plumbing every config dataclass of the stack shares.

One owner for: the unknown-key check (naming the known keys and the section), nested
sections (`data.text`), presets (`preset: name` plus overrides), the fields a mapping
without a preset must give, plain values for YAML, and the house message
"Owner.name: expected …, received: name=value". Standard library only: xtts-audio installs
with TensorFlow and NumPy alone, and the command lines check configs before TensorFlow loads.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, NoReturn, Self

from xtts_audio.errors import ConfigError

__all__ = ["FrozenConfig", "expected_received"]


def expected_received(owner: str, name: str, value: Any, expected: str) -> str:
    """The house message of a bad value: `"owner.name: expected …, received: name=value"`."""
    return f"{owner}.{name}: expected {expected}, received: {name}={value!r}"


class FrozenConfig:
    """Base of a `@dataclasses.dataclass(frozen=True, kw_only=True)` config.

    A field annotated with another `FrozenConfig` is a nested section: `from_dict` builds it
    from a mapping, `to_dict` writes it as one. Tuple fields are written as lists (YAML has
    no tuples) and read back as tuples.

    Class attributes a subclass sets:
        error_type: what its errors raise (the package's `ConfigError`).
        presets: named base values; `from_preset(name)` and a `preset: name` key in
            `from_dict` start from one. Without presets, `preset` is an unknown key.
    """

    error_type: ClassVar[type[Exception]] = ConfigError
    presets: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    @classmethod
    def _fail(cls, name: str, value: Any, expected: str) -> NoReturn:
        """Raise `error_type` naming the field, the value received and what was expected."""
        raise cls.error_type(expected_received(cls.__name__, name, value, expected))

    @classmethod
    def field_names(cls) -> list[str]:
        """Every field, in declaration order (the keys `from_dict` knows)."""
        return [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]

    @classmethod
    def required_fields(cls) -> list[str]:
        """The fields without a default: a mapping without a preset must give them."""
        no_default = dataclasses.MISSING
        return [f.name for f in dataclasses.fields(cls)  # type: ignore[arg-type]
                if f.default is no_default and f.default_factory is no_default]  # fmt: skip

    @classmethod
    def from_preset(cls, name: str, /, **overrides: Any) -> Self:
        """The named values (see `presets`), with any fields replaced by `overrides`.

        Raises:
            error_type: unknown preset name, unknown field or an invalid value.
        """
        return cls._build({**cls._preset(name), **overrides}, "")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], *, section: str = "") -> Self:
        """Build from a mapping (e.g. a YAML section); `preset` picks the base values.

        Args:
            values: field values; nested sections as mappings, tuples as lists.
            section: the mapping's dotted place in the stack config (`"data.text"`),
                named in messages about its keys.

        Raises:
            error_type: unknown keys, a missing required field, an unknown preset, or an
                invalid value.
        """
        values = dict(values)
        preset = values.pop("preset", None) if cls.presets else None
        if preset is not None:  # `preset: null` (e.g. over a default preset) means none
            values = {**cls._preset(preset), **values}
        return cls._build(values, section)

    def to_dict(self) -> dict[str, Any]:
        """All fields as plain values (sections as mappings, tuples as lists): round-trips
        `from_dict` and `yaml.safe_dump`."""
        return {name: _plain(getattr(self, name)) for name in self.field_names()}

    @classmethod
    def _build(cls, values: dict[str, Any], section: str) -> Self:
        cls._reject_unknown(values, section)
        missing = [name for name in cls.required_fields() if name not in values]
        if missing:
            raise cls.error_type(cls._missing_message(missing, values, section))
        for name, kind in _sections(cls).items():
            if isinstance(values.get(name), Mapping):
                inner = f"{section}.{name}" if section else name
                values[name] = kind.from_dict(values[name], section=inner)
        for name in _tuple_fields(cls):
            if isinstance(values.get(name), list):
                values[name] = tuple(values[name])
        return cls(**values)

    @classmethod
    def _preset(cls, name: Any) -> Mapping[str, Any]:
        if not isinstance(name, str) or name not in cls.presets:
            raise cls.error_type(
                f"{cls.__name__}.from_preset: expected one of {sorted(cls.presets)}, "
                f"received: name={name!r}"
            )
        return cls.presets[name]

    @classmethod
    def _reject_unknown(cls, values: Mapping[str, Any], section: str) -> None:
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            where = f" in section {section}" if section else ""
            raise cls.error_type(
                f"{cls.__name__}: unknown field(s) {unknown}{where}; known: {cls.field_names()}"
            )

    @classmethod
    def _missing_message(cls, missing: list[str], values: Mapping[str, Any], section: str) -> str:
        where = f" in section {section}" if section else ""
        given = ", ".join(f"{k}={v!r}" for k, v in values.items()) or "no fields"
        presets = f"`preset: NAME` (one of {sorted(cls.presets)}) plus overrides, or "
        return (
            f"{cls.__name__}: missing required field(s) {missing}{where}; expected "
            f"{presets if cls.presets else ''}all of {cls.required_fields()}, received: {given}"
        )


def _plain(value: Any) -> Any:
    if isinstance(value, FrozenConfig):
        return value.to_dict()
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    # Field annotations are strings (`from __future__ import annotations`): resolve once.
    return typing.get_type_hints(cls)


def _sections(cls: type) -> dict[str, type[FrozenConfig]]:
    hints = _hints(cls)
    return {name: hints[name] for name in cls.field_names()  # type: ignore[attr-defined]
            if isinstance(hints[name], type) and issubclass(hints[name], FrozenConfig)}  # fmt: skip


def _tuple_fields(cls: type) -> list[str]:
    hints = _hints(cls)
    return [name for name in cls.field_names()  # type: ignore[attr-defined]
            if typing.get_origin(hints[name]) is tuple]  # fmt: skip
