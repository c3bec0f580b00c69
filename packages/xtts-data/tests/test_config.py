"""DataConfig validation, dict round trip, cache settings, and load_config of a stack YAML."""

from __future__ import annotations

import dataclasses
import re

import pytest
import yaml

from xtts_audio import MelConfig, XttsAudioError
from xtts_data.config import DataConfig, load_config, read_stack
from xtts_data.errors import ConfigError
from xtts_data.text import TextConfig


def received(field: str, value) -> str:
    """The pattern of a DataConfig error naming `field` and the value it received."""
    return rf"^DataConfig\.{field}: expected .*, received: {re.escape(f'{field}={value!r}')}$"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("text", {"cleaners": "basic"}),
        ("text", "english"),
        ("trim_top_db", 0),
        ("trim_top_db", -20.0),
        ("trim_top_db", float("nan")),
        ("trim_top_db", "30"),
        ("trim_top_db", True),
        ("policy", "dynamic"),
        ("policy", None),
        ("shard_size", 0),
        ("shard_size", 2.5),
        ("keep_audio", "yes"),
        ("keep_audio", 1),
        ("keep_audio", None),
        ("batch_size", 0),
        ("batch_size", -4),
        ("batch_size", True),
        ("batch_size", "32"),
        ("num_buckets", 0),
        ("num_buckets", 8.0),
        ("batch_multiple", 0),
        ("pad_multiple", 0),
        ("pad_multiple", False),
        ("cond_frames", 0),
        ("cond_frames", None),
        ("frame_budget", 0),
        ("frame_budget", 1e6),
        ("max_frames", -1),
        ("max_frames", True),
        ("max_text_len", 0),
        ("max_text_len", "200"),
        ("val_fraction", 1.0),
        ("val_fraction", -0.1),
        ("val_fraction", float("nan")),
        ("val_fraction", "0.1"),
        ("val_fraction", None),
        ("val_fraction", True),
        ("voice_warp", 1.0),
        ("voice_warp", -0.1),
        ("voice_warp", float("nan")),
        ("voice_warp", None),
        ("segment_frames", 0),
        ("segment_frames", 16.0),
        ("segment_frames", True),
        ("keep_in_memory", "yes"),
        ("keep_in_memory", "auto"),
        ("shuffle_buffer", -1),
        ("shuffle_buffer", 1.5),
        ("shuffle_buffer", None),
        ("shuffle_buffer", True),
        ("service", "localhost:5050"),
        ("service", "http://host:5050"),
    ],
)
def test_invalid_field_raises_naming_field_and_value(field, value):
    with pytest.raises(ConfigError, match=received(field, value)):
        DataConfig(**{field: value})


@pytest.mark.parametrize(
    ("overrides", "value"),
    [
        ({"batch_size": 30, "batch_multiple": 4}, 30),
        ({"batch_size": 6, "batch_multiple": 4}, 6),
    ],
)
def test_batch_size_must_be_a_multiple_of_batch_multiple(overrides, value):
    with pytest.raises(ConfigError, match=r"a multiple of batch_multiple=4, received: batch_size="):
        DataConfig(**overrides)
    with pytest.raises(ConfigError, match=received("batch_size", value)):
        DataConfig(**overrides)


@pytest.mark.parametrize(
    "overrides",
    [
        {"trim_top_db": None},
        {"trim_top_db": 0.5},
        {"val_fraction": 0.0},
        {"val_fraction": 0.999},
        {"shuffle_buffer": 0},
        {"keep_in_memory": None},
        {"keep_in_memory": True},
        {"keep_in_memory": False},
        {"batch_size": 8, "batch_multiple": 4},
        {"frame_budget": None, "max_frames": None, "max_text_len": None},
        {"frame_budget": 1, "max_frames": 1, "max_text_len": 1},
        {"service": "grpc://localhost:5050"},
        {"service": "grpc+tls://localhost:5050"},
        {"policy": "fixed"},
        {"keep_audio": True},
        {"segment_frames": 1},
    ],
)
def test_valid_edge_values_are_accepted(overrides):
    config = DataConfig(**overrides)
    assert {name: getattr(config, name) for name in overrides} == overrides


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DataConfig().batch_size = 4  # type: ignore[misc]


CUSTOM = DataConfig(
    text=TextConfig(cleaners="basic", lowercase=False, symbols="abc "),
    trim_top_db=40.0,
    shard_size=16,
    policy="fixed",
    batch_size=12,
    num_buckets=3,
    frame_budget=5000,
    batch_multiple=4,
    max_frames=800,
    max_text_len=190,
    pad_multiple=16,
    cond_frames=64,
    val_fraction=0.1,
    keep_in_memory=False,
    shuffle_buffer=0,
    seed=7,
    deterministic=True,
    prefetch_to_device="/gpu:0",
    service="grpc://dispatcher:5050",
)


@pytest.mark.parametrize("config", [DataConfig(), CUSTOM], ids=["defaults", "custom"])
def test_dict_round_trip(config):
    values = config.to_dict()
    assert isinstance(values["text"], dict)
    assert values["text"] == config.text.to_dict()
    assert set(values) == {f.name for f in dataclasses.fields(DataConfig)}
    assert DataConfig.from_dict(values) == config
    assert DataConfig.from_dict(yaml.safe_load(yaml.safe_dump(values))) == config


@pytest.mark.parametrize(
    "config",
    [
        TextConfig(),
        TextConfig(language="fa", languages=("en", "de"), cleaners="basic", ascii_fold=False),
        TextConfig(symbols="ab ", lowercase=False, max_letter_loss=None),
    ],
    ids=["defaults", "languages", "symbols"],
)
def test_text_config_round_trips_through_yaml(config):
    values = config.to_dict()
    assert values["languages"] == list(config.languages)
    assert list(values) == [f.name for f in dataclasses.fields(TextConfig)]
    assert TextConfig.from_dict(yaml.safe_load(yaml.safe_dump(values))) == config


def test_from_dict_builds_nested_text():
    config = DataConfig.from_dict({"text": {"cleaners": "none"}, "batch_size": 4})
    assert config.text == TextConfig(cleaners="none")
    assert config.batch_size == 4


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"batchsize": 4}, r"^DataConfig: unknown field\(s\) \['batchsize'\]; known: \["),
        ({"zeta": 1, "alpha": 2}, r"unknown field\(s\) \['alpha', 'zeta'\]"),
        (
            {"text": {"cleaner": "basic"}},
            r"^TextConfig: unknown field\(s\) \['cleaner'\] in section text; known: \['language', ",
        ),
        ({"text": {"cleaners": "klingon"}}, r"TextConfig\.cleaners: .*cleaners='klingon'"),
        ({"num_buckets": 0}, received("num_buckets", 0)),
    ],
)
def test_from_dict_rejects_bad_values(values, match):
    with pytest.raises(ConfigError, match=match):
        DataConfig.from_dict(values)


def test_cache_settings_are_the_feature_changing_fields():
    config = DataConfig()
    assert config.cache_settings() == {
        "text": TextConfig().to_dict(),
        "trim_top_db": 40.0,
        "max_seconds": 20.0,
    }


def test_keep_audio_is_named_in_the_cache_settings_only_when_true():
    assert DataConfig(keep_audio=True).cache_settings() == {
        **DataConfig().cache_settings(), "keep_audio": True,
    }  # fmt: skip
    assert "keep_audio" not in DataConfig(keep_audio=False).cache_settings()


@pytest.mark.parametrize(
    "overrides",
    [
        {"batch_size": 64},
        {"policy": "fixed"},
        {"num_buckets": 2},
        {"shard_size": 7},
        {"pad_multiple": 1},
        {"cond_frames": 32},
        {"max_frames": 500, "max_text_len": 90},
        {"val_fraction": 0.2},
        {"shuffle_buffer": 0, "seed": 3, "deterministic": True},
        {"keep_in_memory": True},
        {"service": "grpc://h:1", "prefetch_to_device": "/gpu:0"},
        {"segment_frames": 64},
    ],
)
def test_batching_settings_do_not_change_cache_settings(overrides):
    assert DataConfig(**overrides).cache_settings() == DataConfig().cache_settings()


@pytest.mark.parametrize(
    "overrides",
    [
        {"trim_top_db": 30.0},
        {"text": TextConfig(cleaners="basic")},
        {"text": TextConfig(lowercase=False)},
        {"text": TextConfig(symbols="ab ")},
        {"keep_audio": True},
    ],
)
def test_feature_settings_change_cache_settings(overrides):
    assert DataConfig(**overrides).cache_settings() != DataConfig().cache_settings()


@pytest.mark.parametrize(
    ("pad", "length", "expected"),
    [(8, 0, 0), (8, 1, 8), (8, 8, 8), (8, 9, 16), (1, 7, 7), (5, 11, 15), (16, 861, 864)],
)
def test_round_up(pad, length, expected):
    assert DataConfig(pad_multiple=pad).round_up(length) == expected


# --- load_config ---------------------------------------------------------------------


def write_yaml(tmp_path, text: str):
    path = tmp_path / "stack.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_load_config_none_gives_defaults():
    audio, data = load_config(None)
    assert audio == MelConfig.from_preset("xtts")
    assert data == DataConfig()


def test_load_config_reads_audio_and_data(tmp_path):
    path = write_yaml(
        tmp_path,
        "audio: {preset: coqui, n_mels: 64}\ndata: {policy: fixed, text: {cleaners: basic}}\n",
    )
    audio, data = load_config(path)
    assert audio == MelConfig.from_preset("coqui", n_mels=64)
    assert audio.n_mels == 64
    assert data == DataConfig(policy="fixed", text=TextConfig(cleaners="basic"))


@pytest.mark.parametrize(
    "text",
    [
        "model: {dim: 512, layers: 6}\ntrain: {steps: 10, lr: 0.001}\n",
        "audio:\ndata:\nmodel:\ntrain:\n",
        "",
        "# only a comment\n",
    ],
)
def test_load_config_accepts_other_and_empty_sections(tmp_path, text):
    assert load_config(write_yaml(tmp_path, text)) == (MelConfig.from_preset("xtts"), DataConfig())


def test_load_config_accepts_str_path(tmp_path):
    path = write_yaml(tmp_path, "data: {batch_size: 4}\n")
    assert load_config(str(path))[1].batch_size == 4


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("data: [1, 2]\n", r"section 'data' must be a mapping, received: \[1, 2\]"),
        ("audio: xtts\n", r"section 'audio' must be a mapping, received: 'xtts'"),
        ("data: {policy: [\n", r"^Expected a readable YAML config, received: path=.*stack\.yaml"),
        ("- audio\n- data\n", r"^Expected a mapping of sections"),
        ("data: {batchsize: 3}\n", r"^DataConfig: unknown field\(s\) \['batchsize'\] in section data; known: "),
        ("data: {text: {cleaner: basic}}\n", r"^TextConfig: unknown field\(s\) \['cleaner'\] in section data\.text; known: "),
        ("data: {policy: dynamic}\n", received("policy", "dynamic")),
    ],
)  # fmt: skip
def test_load_config_rejects_bad_files(tmp_path, text, match):
    with pytest.raises(ConfigError, match=match):
        load_config(write_yaml(tmp_path, text))


@pytest.mark.parametrize("name", ["absent.yaml", "."])
def test_load_config_unreadable_path_raises(tmp_path, name):
    with pytest.raises(ConfigError, match=r"^Expected a readable YAML config, received: path="):
        load_config(tmp_path / name)


def test_load_config_bad_audio_section_raises_the_audio_error(tmp_path):
    path = write_yaml(tmp_path, "audio: {preset: nope}\n")
    with pytest.raises(XttsAudioError, match=r"received: name='nope'"):
        load_config(path)


def test_load_config_non_utf8_file_raises(tmp_path):
    path = tmp_path / "stack.yaml"
    path.write_bytes(b"data: {policy: fixed}\n# caf\xe9\n")
    with pytest.raises(ConfigError, match=r"readable YAML config"):
        load_config(path)


# --- read_stack: the one reader of stack configs, with --set overrides -----------------


def test_overrides_apply_on_top_of_the_default_audio_preset():
    audio, data = load_config(None, ["audio.n_mels=64", "data.text.cleaners=basic"])
    assert audio == MelConfig.from_preset("xtts", n_mels=64)
    assert data == DataConfig(text=TextConfig(cleaners="basic"))


def test_overrides_apply_on_top_of_the_file(tmp_path):
    path = write_yaml(tmp_path, "audio: {preset: coqui}\ndata: {batch_size: 4}\n")
    audio, data = load_config(path, ["audio.n_mels=64", "data.policy=fixed"])
    assert audio == MelConfig.from_preset("coqui", n_mels=64)
    assert data == DataConfig(batch_size=4, policy="fixed")


def test_a_mapping_source_is_read_like_a_file_and_left_unchanged():
    source = {"data": {"text": {"cleaners": "none"}}, "model": None}
    sections = read_stack(source, ["data.text.lowercase=false", "train.steps=5"])
    assert sections == {  # this package's sections, and those the source and overrides name
        "audio": {"preset": "xtts"},
        "data": {"text": {"cleaners": "none", "lowercase": False}},
        "model": {},
        "train": {"steps": 5},
    }
    assert source == {"data": {"text": {"cleaners": "none"}}, "model": None}
    assert load_config(source)[1] == DataConfig(text=TextConfig(cleaners="none"))


STACK = ("audio", "data", "model", "train")  # a reader's sections, as xtts-train names its


def test_a_reader_that_names_its_sections_gets_each_and_no_other(tmp_path):
    assert read_stack({"data": {"policy": "fixed"}}, sections=STACK) == {
        "audio": {"preset": "xtts"}, "data": {"policy": "fixed"}, "model": {}, "train": {},
    }  # fmt: skip
    with pytest.raises(
        ConfigError,
        match=r"unknown section\(s\) \['voice'\]; known: \['audio', 'data', 'model', 'train'\]",
    ):
        read_stack(write_yaml(tmp_path, "voice: {speed: 1}\n"), sections=STACK)


def test_a_stack_round_trips_through_read_stack():
    audio, data = MelConfig.from_preset("coqui"), DataConfig(policy="fixed")
    written = yaml.safe_load(yaml.safe_dump({"audio": audio.to_dict(), "data": data.to_dict()}))
    assert load_config(written) == (audio, data)


def test_an_audio_section_without_a_preset_says_what_it_needs(tmp_path):
    with pytest.raises(
        XttsAudioError,
        match=r"^MelConfig: missing required field\(s\) \['sample_rate', 'n_fft', 'hop_length'\] in section audio; expected `preset: NAME` \(one of \[.*'xtts'\]\) plus overrides, .*received: n_mels=64$",
    ):
        load_config(write_yaml(tmp_path, "audio: {n_mels: 64}\n"))


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("steps=3", r"^Expected --set section\.key=value with section one of audio, data, model, train, received: 'steps=3'$"),
        ("voice.speed=1", r"received: 'voice\.speed=1'"),
        ("data.batch_size", r"received: 'data\.batch_size'"),
        ("data.policy=[", r"^--set 'data\.policy=\[': value is not valid YAML"),
        ("data.policy.x=1", r"^--set 'data\.policy\.x=1': policy is not a section$"),
    ],
)  # fmt: skip
def test_malformed_overrides_are_named(override, match):
    with pytest.raises(ConfigError, match=match):
        read_stack({"data": {"policy": "fixed"}}, [override], sections=STACK)


# --- a cache's build settings (read_stack(built=...)) ----------------------------------


def _built(audio: MelConfig, data: DataConfig):
    """What a cache's manifest records of its build (`manifest.CacheSettings`)."""
    return dataclasses.make_dataclass("Built", ["audio", "data"])(
        audio.to_dict(), data.cache_settings()
    )


BUILT_AUDIO = MelConfig.from_preset("xtts", n_mels=64)
BUILT_DATA = DataConfig(trim_top_db=30.0, max_seconds=12.0, keep_audio=True,
                        text=TextConfig(cleaners="basic"))  # fmt: skip


def test_a_config_silent_on_features_takes_the_caches():
    audio, data = load_config(None, ["data.batch_size=4"], built=_built(BUILT_AUDIO, BUILT_DATA))
    assert audio == BUILT_AUDIO
    assert data == dataclasses.replace(BUILT_DATA, batch_size=4)


def test_a_config_that_agrees_with_the_cache_is_accepted(tmp_path):
    path = write_yaml(tmp_path, "audio: {preset: xtts, n_mels: 64}\n"
                                "data: {trim_top_db: 30, text: {cleaners: basic}}\n")  # fmt: skip
    audio, data = load_config(path, built=_built(BUILT_AUDIO, BUILT_DATA))
    assert (audio, data.trim_top_db, data.text.cleaners) == (BUILT_AUDIO, 30.0, "basic")
    assert data.max_seconds == 12.0  # not given: the cache's


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("data.trim_top_db=20", "data.trim_top_db: the cache was built with 30.0, the config gives 20"),
        ("data.trim_top_db=null", "data.trim_top_db: the cache was built with 30.0, the config gives None"),
        ("data.text.cleaners=full", "data.text.cleaners: the cache was built with 'basic', the config gives 'full'"),
        ("audio.n_mels=80", "audio.n_mels: the cache was built with 64, the config gives 80"),
    ],
)  # fmt: skip
def test_a_feature_setting_that_disagrees_with_the_cache_is_named(override, named):
    with pytest.raises(ConfigError, match=re.escape(named)) as caught:
        load_config(None, [override], built=_built(BUILT_AUDIO, BUILT_DATA))
    assert "\n" not in str(caught.value)


def test_waveforms_are_not_a_disagreement():
    # A cache with waveforms serves a config without them; a config asking for them of a
    # cache without is refused where the cache is opened (with how to rebuild it).
    with_audio = _built(BUILT_AUDIO, BUILT_DATA)
    assert not load_config(None, ["data.keep_audio=false"], built=with_audio)[1].keep_audio
    without = _built(BUILT_AUDIO, dataclasses.replace(BUILT_DATA, keep_audio=False))
    assert load_config(None, ["data.keep_audio=true"], built=without)[1].keep_audio
