"""The package READMEs' config tables list exactly the config dataclasses' fields, with
the defaults the code has now (the tables are written by `docs/config_reference.py`)."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path

import pytest
import yaml

from xtts_audio.frozen_config import FrozenConfig
from xtts_train.config import SECTIONS as STACK_SECTIONS

_SCRIPT = Path(__file__).parents[1] / "docs" / "config_reference.py"
_CELL = re.compile(r"(?<!\\)\|")
_REGENERATE = "rerun `hatch run python docs/config_reference.py`"


def _load_generator():
    spec = importlib.util.spec_from_file_location("config_reference", _SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


reference = _load_generator()
SECTIONS = {section.name: section for section in reference.SECTIONS}


@pytest.fixture(scope="module")
def defaults():
    return reference.defaults()


def _table(section) -> dict[str, tuple[str, str]]:
    """`{key: (default, meaning)}` of the README table between `section`'s markers."""
    text = section.readme.read_text(encoding="utf-8")
    begin, end = reference.block(text, section.name)
    rows = {}
    for line in text[begin:end].strip().splitlines()[2:]:  # after the header and rule
        cells = [cell.strip() for cell in _CELL.split(line.strip())[1:-1]]
        assert len(cells) == 3, f"{section.readme}: not a `| key | default | meaning |` row: {line}"
        key, default = (cell.removeprefix("`").removesuffix("`") for cell in cells[:2])
        assert key not in rows, f"{section.name}.{key} is listed twice"
        rows[key] = (default, cells[2])
    return rows


def _fields(config: FrozenConfig, prefix: str = "") -> dict[str, object]:
    """`{dotted key: plain default}` of every field, nested sections' fields included."""
    out = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if isinstance(value, FrozenConfig):
            out.update(_fields(value, f"{prefix}{field.name}."))
        else:
            out[f"{prefix}{field.name}"] = config.to_dict()[field.name]
    return out


def test_every_section_of_the_stack_has_a_table():
    assert set(SECTIONS) == set(STACK_SECTIONS)


@pytest.mark.parametrize("name", list(SECTIONS))
def test_the_table_lists_exactly_the_fields(name, defaults):
    config = defaults[name]
    expected = set(_fields(config)) | ({"preset"} if config.presets else set())
    listed = set(_table(SECTIONS[name]))
    assert listed == expected, (
        f"{name}: missing {sorted(expected - listed)}, extra {sorted(listed - expected)}; "
        f"{_REGENERATE}"
    )


@pytest.mark.parametrize("name", list(SECTIONS))
def test_each_default_is_the_codes(name, defaults):
    config = defaults[name]
    table = _table(SECTIONS[name])
    expected = {key: reference.render_default(value) for key, value in _fields(config).items()}
    if config.presets:
        expected["preset"] = reference.render_default(reference.default_preset(config))
    wrong = {key: (table[key][0], want) for key, want in expected.items()
             if key in table and table[key][0] != want}  # fmt: skip
    assert not wrong, f"{name}: (README, code) defaults differ: {wrong}; {_REGENERATE}"


@pytest.mark.parametrize("name", list(SECTIONS))
def test_every_key_has_a_meaning(name):
    empty = [key for key, (_, meaning) in _table(SECTIONS[name]).items() if not meaning]
    assert not empty, f"{name}: no meaning for {empty}"


@pytest.mark.parametrize(
    ("value", "rendered"),
    [(None, "null"), (40.0, "40.0"), ([], "[]"), ("auto", "auto"), (True, "true"),
     (1e-5, "1.0e-05"), ([[512, 128, 512]], "[[512, 128, 512]]"), ("yes", "'yes'")],
)  # fmt: skip
def test_defaults_render_as_yaml_reads_them_back(value, rendered):
    assert reference.render_default(value) == rendered
    assert yaml.safe_load(rendered) == value


def test_the_presets_defaults_are_the_documented_ones(defaults):
    assert reference.default_preset(defaults["audio"]) == "xtts"
    assert reference.default_preset(defaults["model"]) == "tiny"


def test_rewriting_a_table_is_idempotent():
    start, end = reference.markers("data")
    text = f"# x\n\nprose\n{start}\nold\n{end}\nmore\n"
    table = "| key | default | meaning |\n|---|---|---|"
    once = reference.update(text, "data", table)
    assert once == f"# x\n\nprose\n{start}\n\n{table}\n\n{end}\nmore\n"
    assert reference.update(once, "data", table) == once


def test_missing_markers_are_named():
    with pytest.raises(SystemExit, match="config-reference:train"):
        reference.block("no markers here", "train")
