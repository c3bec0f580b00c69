"""FrozenConfig, the one `from_dict`/`to_dict` of every config dataclass, on two toy configs."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from xtts_audio.errors import ConfigError, XttsAudioError
from xtts_audio.frozen_config import FrozenConfig, expected_received


@dataclasses.dataclass(frozen=True, kw_only=True)
class Inner(FrozenConfig):
    names: tuple[str, ...] = ()
    rate: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate < 1.0:
            self._fail("rate", self.rate, "a rate in [0, 1)")


SIZES = {"small": {"size": 2}, "big": {"size": 64, "name": "big"}}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Outer(FrozenConfig):
    presets = SIZES

    size: int
    name: str = "plain"
    inner: Inner = dataclasses.field(default_factory=Inner)


class ToyError(XttsAudioError, ValueError):
    """Stands for another package's ConfigError."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Owned(FrozenConfig):
    error_type = ToyError

    flag: bool = False


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Outer.from_dict({"size": 1, "sise": 2}), r"^Outer: unknown field\(s\) \['sise'\]; known: \['size', 'name', 'inner'\]$"),
        (lambda: Outer.from_dict({"size": 1, "b": 0, "a": 0}, section="toy"), r"^Outer: unknown field\(s\) \['a', 'b'\] in section toy; known: "),
        (lambda: Outer.from_dict({"size": 1, "inner": {"rat": 0.1}}), r"^Inner: unknown field\(s\) \['rat'\] in section inner; known: \['names', 'rate'\]$"),
        (lambda: Outer.from_dict({"size": 1, "inner": {"rat": 0.1}}, section="stack.toy"), r"^Inner: unknown field\(s\) \['rat'\] in section stack\.toy\.inner; "),
        (lambda: Outer.from_preset("big", nam="x"), r"^Outer: unknown field\(s\) \['nam'\]; known: "),
        (lambda: Outer.from_dict({"preset": "big", "nam": "x"}, section="toy"), r"^Outer: unknown field\(s\) \['nam'\] in section toy"),
        (lambda: Inner.from_dict({"preset": "small"}), r"^Inner: unknown field\(s\) \['preset'\]"),
        (lambda: Outer.from_preset("huge"), r"^Outer\.from_preset: expected one of \['big', 'small'\], received: name='huge'$"),
        (lambda: Outer.from_dict({"preset": "huge"}), r"received: name='huge'$"),
        (lambda: Outer.from_dict({"inner": {"rate": 1.5}, "size": 1}), r"^Inner\.rate: expected a rate in \[0, 1\), received: rate=1\.5$"),
    ],
)  # fmt: skip
def test_from_dict_names_unknown_keys_their_section_and_the_known_ones(build, match):
    with pytest.raises(ConfigError, match=match):
        build()


def test_a_missing_field_says_what_a_mapping_must_give():
    with pytest.raises(ConfigError) as caught:
        Outer.from_dict({"name": "x"}, section="toy")
    assert str(caught.value) == (
        "Outer: missing required field(s) ['size'] in section toy; expected `preset: NAME` "
        "(one of ['big', 'small']) plus overrides, or all of ['size'], received: name='x'"
    )


def test_presets_are_bases_the_mapping_overrides():
    assert Outer.from_dict({"preset": "big", "size": 3}) == Outer(size=3, name="big")
    assert Outer.from_preset("small", name="s") == Outer(size=2, name="s")
    assert Outer.presets is SIZES
    assert Inner.presets == {}


def test_errors_are_the_subclass_error_type():
    with pytest.raises(ToyError, match=r"^Owned: unknown field\(s\) \['flags'\]"):
        Owned.from_dict({"flags": True})
    with pytest.raises(ToyError, match=r"^Owned\.flag: expected"):
        Owned._fail("flag", 1, "a bool")


def test_configs_are_frozen():
    config = Outer.from_dict({"size": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.size = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    "config",
    [
        Outer(size=1),
        Outer(size=5, name="n", inner=Inner(names=("a", "b"), rate=0.25)),
        Outer.from_preset("big"),
    ],
)
def test_to_dict_is_plain_and_round_trips(config):
    values = config.to_dict()
    assert values["inner"] == {"names": list(config.inner.names), "rate": config.inner.rate}
    assert json.loads(json.dumps(values)) == values  # plain: no tuples, no dataclasses
    assert Outer.from_dict(json.loads(json.dumps(values))) == config


def test_lists_become_tuples():
    assert Inner.from_dict({"names": ["a", "b"]}).names == ("a", "b")


def test_expected_received_is_the_house_message():
    assert expected_received("Toy", "n", 0, "an int >= 1") == (
        "Toy.n: expected an int >= 1, received: n=0"
    )


def test_the_base_imports_no_tensorflow():
    code = (
        "import sys, xtts_audio.frozen_config\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'numpy')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
