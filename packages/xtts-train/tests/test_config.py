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
    DecodeConfig,
    ModelConfig,
    StackConfig,
    TextToMelConfig,
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
        TrainConfig(steps=7, precision="mixed_bfloat16"),
        DecodeConfig(window_ahead=2, global_variance=True, split_symbols=0),
        TextToMelConfig(stop_weight=0.5, eval_sentences=("One.", "Two.")),
    ],
    ids=[
        *sorted(PRESETS),
        "tiny-custom",
        "train-defaults",
        "train-custom",
        "decode",
        "text_to_mel",
    ],
)
def test_model_train_and_decode_configs_round_trip_through_yaml(config):
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
        ("", ["model.preset=huge"], r"^ModelConfig\.from_preset: expected one of \['base', 'small', 'tiny', 'tiny-voices', 'xtts'\], received: name='huge'$"),
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


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (["decode.window_ahead=-1"], r"DecodeConfig\.window_ahead: expected an int >= 0, received: window_ahead=-1"),
        (["decode.window_back=true"], "window_back=True"),
        (["decode.global_variance=maybe"], "global_variance='maybe'"),
        (["decode.reference_frames=-1"], "reference_frames=-1"),
        (["decode.reference_frames=8", "data.cond_frames=16"], r"decode\.reference_frames 0 \(data\.cond_frames\) or at least data\.cond_frames=16, received: 8"),
        (["decode.window=2"], r"unknown field\(s\) \['window'\] in section decode"),
        (["model.infer_global_variance=true"], r"Expected decode\.global_variance=VALUE, received: 'model\.infer_global_variance=true': the setting moved to the decode section"),
        (["train.stop_weight=2"], r"Expected text_to_mel\.stop_weight=VALUE, received: 'train\.stop_weight=2': the setting moved to the text_to_mel section"),
        (["text_to_mel.guided_attention_sigma=0"], r"TextToMelConfig\.guided_attention_sigma: expected a number > 0, received: guided_attention_sigma=0"),
    ],
)  # fmt: skip
def test_bad_decode_settings_name_the_field(overrides, match):
    with pytest.raises(ConfigError, match=match):
        load_stack_config(None, overrides)


def test_the_decoding_settings_are_not_the_model_s():
    """Every decoding setting is in the decode section, none left in the model's."""
    model = {f.name for f in dataclasses.fields(ModelConfig)}
    assert not [name for name in model if name.startswith("infer_")]
    assert len(model) == 26  # 36 before the decode section, voice_input's removal, the
    # standardisation's one home (MEL_MEAN, MEL_STD) and pitch_contour's removal; then
    # `alignment` and `own_frames` (issue 67)


def test_a_run_config_written_before_the_decode_section_still_loads(tmp_path):
    """A run's `config.yaml` from before the move (decoding settings as `model.infer_KEY`)
    loads with them in the decode section; one the decode section gives wins."""
    old = load_stack_config(None).to_dict()
    del old["decode"]
    old["model"].update(infer_window_ahead=3, infer_global_variance=True, infer_harmonics=False,
                        infer_split_symbols=0, infer_reference_frames=0, infer_stop_gate=4,
                        infer_window_back=1, infer_prenet_dropout=False)  # fmt: skip
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(old, sort_keys=False))
    stack = load_stack_config(path)
    assert stack.decode == DecodeConfig(window_ahead=3, global_variance=True, split_symbols=0,
                                        stop_gate=4)  # fmt: skip
    assert stack.model == load_stack_config(None).model
    assert load_stack_config(path, ["decode.split_symbols=50"]).decode.split_symbols == 50
    old["decode"] = {"stop_gate": 2}
    path.write_text(yaml.safe_dump(old, sort_keys=False))
    assert load_stack_config(path).decode.stop_gate == 2


def test_a_run_config_written_before_alignment_existed_loads_as_the_content_model(tmp_path):
    """Today's default is the relative alignment; a run's `config.yaml` from before the
    setting was trained with content alignment and loads so. A config that is not a run's
    gets the default."""
    older = load_stack_config(None).to_dict()
    assert older["model"].pop("alignment") == "relative"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(older, sort_keys=False))
    assert load_stack_config(path, written=True).model.alignment == "content"
    assert load_stack_config(path).model.alignment == "relative"
    older["model"]["alignment"] = "relative"  # a run that names it keeps it
    path.write_text(yaml.safe_dump(older, sort_keys=False))
    assert load_stack_config(path, written=True).model.alignment == "relative"


def test_a_run_config_with_the_loss_weights_in_train_still_loads(tmp_path):
    """A run's `config.yaml` from before the text_to_mel section (its loss weights and eval
    sentences in `train`) loads with them in the text_to_mel section."""
    old = load_stack_config(None).to_dict()
    del old["text_to_mel"]
    old["train"].update(stop_weight=0.5, guided_attention_sigma=0.3, eval_sentences=["Hi."])
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(old, sort_keys=False))
    stack = load_stack_config(path)
    assert stack.text_to_mel == TextToMelConfig(stop_weight=0.5, guided_attention_sigma=0.3,
                                                eval_sentences=("Hi.",))  # fmt: skip
    assert stack.train == load_stack_config(None).train


@pytest.mark.parametrize("section", ["model", "vocoder"])
def test_a_run_config_with_the_fixed_standardisation_loads_and_another_is_refused(
    section, tmp_path
):
    old = load_stack_config(None).to_dict()
    old[section].update(mel_mean=-5.0, mel_std=2.5)  # what every run wrote before
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(old, sort_keys=False))
    assert load_stack_config(path) == load_stack_config(None)
    old[section]["mel_std"] = 3.0
    path.write_text(yaml.safe_dump(old, sort_keys=False))
    with pytest.raises(
        ConfigError,
        match=rf"^Expected {section}\.mel_std 2\.5 or absent, received: 3\.0: the features' standardisation is fixed",
    ):
        load_stack_config(path)


def test_the_voice_cloning_settings_are_two_presets():
    presets = load_stack_config(None, ["model.preset=tiny-voices", "decode.preset=voices"])
    flags = load_stack_config(None, [
        "model.reduction_factor=4", "model.voice_stats=mean_std",
        "model.voice_stats_source=utterance", "model.voice_pitch=true",
        "decode.global_variance=true", "decode.reference_frames=1024",
    ])  # fmt: skip
    assert presets == flags
    assert load_stack_config(None, ["decode.preset=plain"]).decode == DecodeConfig()


@pytest.mark.parametrize(("section", "key"), [
    ("model", "voice_input"), ("decode", "prenet_dropout"), ("model", "pitch_contour"),
    ("decode", "harmonics"),
])  # fmt: skip
def test_a_removed_option_loads_off_and_is_refused_on(tmp_path, section, key):
    old = load_stack_config(None).to_dict()
    old[section][key] = False  # as runs before its removal wrote it
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(old, sort_keys=False))
    assert load_stack_config(path) == load_stack_config(None)
    old[section][key] = True
    path.write_text(yaml.safe_dump(old, sort_keys=False))
    refused = rf"{section}\.{key} false or absent, .*was removed \("
    with pytest.raises(ConfigError, match=refused):
        load_stack_config(path)
    with pytest.raises(ConfigError, match=refused):  # and as an override
        load_stack_config(None, [f"{section}.{key}=true"])
