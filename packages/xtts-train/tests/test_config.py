"""ModelConfig, TrainConfig and StackConfig round trips, and `load_stack_config` with `--set`."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from xtts_audio import MelConfig
from xtts_data import DataConfig
from xtts_data.text import TextConfig
from xtts_train.config import (
    PRESETS,
    ModelConfig,
    StackConfig,
    TrainConfig,
    load_stack_config,
)
from xtts_train.errors import ConfigError


def through_yaml(values: dict) -> dict:
    return yaml.safe_load(yaml.safe_dump(values, sort_keys=False))


@pytest.mark.parametrize(
    "config",
    [
        *(ModelConfig.from_preset(name) for name in sorted(PRESETS)),
        ModelConfig.from_preset("tiny", vocab_size=40, reduction_factor=2),
        TrainConfig(),
        TrainConfig(steps=7, precision="mixed_bfloat16", eval_sentences=("One.", "Two.")),
    ],
    ids=[*sorted(PRESETS), "tiny-custom", "train-defaults", "train-custom"],
)
def test_model_and_train_configs_round_trip_through_yaml(config):
    values = config.to_dict()
    assert list(values) == [f.name for f in dataclasses.fields(config)]
    assert type(config).from_dict(through_yaml(values)) == config


def test_a_stack_round_trips_as_a_run_config_yaml(tmp_path):
    stack = load_stack_config(None, ["model.vocab_size=40", "data.text.languages=[fa]"])
    values = stack.to_dict()
    assert values["data"]["text"]["languages"] == ["fa"]
    assert StackConfig.from_dict(through_yaml(values)) == stack
    path = tmp_path / "config.yaml"  # as `fit` writes it and `load_run` reads it
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    assert load_stack_config(path) == stack
    assert load_stack_config(values) == stack


def test_set_on_the_default_audio_keeps_its_preset():
    stack = load_stack_config(None, ["audio.n_mels=64"])
    assert stack.audio == MelConfig.from_preset("xtts", n_mels=64)
    assert stack.model.n_mels == 64
    assert stack.model == ModelConfig.from_preset("tiny", n_mels=64)


def test_defaults_and_nested_overrides():
    stack = load_stack_config(None, ["data.text.cleaners=basic", "train.steps=3"])
    assert stack.audio == MelConfig.from_preset("xtts")
    assert stack.data == DataConfig(text=TextConfig(cleaners="basic"))
    assert stack.model == ModelConfig.from_preset("tiny")
    assert stack.train == TrainConfig(steps=3)


def test_a_model_section_without_a_preset_starts_from_tiny(tmp_path):
    path = tmp_path / "stack.yaml"
    path.write_text("model: {d_model: 64}\n")
    assert load_stack_config(path).model == ModelConfig.from_preset("tiny", d_model=64)


@pytest.mark.parametrize(
    ("text", "overrides", "match"),
    [
        ("audio: {n_mels: 64}\n", [], r"^MelConfig: missing required field\(s\) \['sample_rate', 'n_fft', 'hop_length'\] in section audio; expected `preset: NAME` \(one of \['coqui', 'librosa', 'tacotron2', 'xtts'\]\) plus overrides, or all of \['sample_rate', 'n_fft', 'hop_length', 'n_mels'\], received: n_mels=64$"),
        ("", ["model.layers=2"], r"^ModelConfig: unknown field\(s\) \['layers'\] in section model; known: \['vocab_size', "),
        ("", ["train.stepz=2"], r"^TrainConfig: unknown field\(s\) \['stepz'\] in section train; known: \['steps', "),
        ("", ["data.text.cleaner=basic"], r"^TextConfig: unknown field\(s\) \['cleaner'\] in section data\.text; known: "),
        ("", ["model.preset=huge"], r"^ModelConfig\.from_preset: expected one of \['base', 'small', 'tiny', 'xtts'\], received: name='huge'$"),
        ("", ["train.steps=0"], r"^TrainConfig\.steps: expected an int >= 1, received: steps=0$"),
        ("", ["train.compiler=jit"], r"^TrainConfig\.compiler: expected one of \('auto', 'xla', 'graph'\), received: compiler='jit'$"),
        ("", ["steps=3"], r"^Expected --set section\.key=value"),
        ("voice: {}\n", [], r"unknown section\(s\) \['voice'\]"),
    ],
)  # fmt: skip
def test_errors_are_train_config_errors_naming_the_section(tmp_path, text, overrides, match):
    path = tmp_path / "stack.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_stack_config(path, overrides)


def test_stack_from_dict_needs_every_section():
    with pytest.raises(
        ConfigError, match=r"^StackConfig: missing required field\(s\) \['model', 'train'\]"
    ):
        StackConfig.from_dict({"audio": {"preset": "xtts"}, "data": {}})
