"""MelConfig: validation names the field, presets, dict round trip, filterbank parity."""

from __future__ import annotations

import dataclasses
import json

import librosa
import numpy as np
import pytest

from xtts_audio import PRESETS, ConfigError, MelConfig
from xtts_audio._filters import mel_filterbank, window

BASE = dict(sample_rate=22050, n_fft=1024, hop_length=256, n_mels=80)


@pytest.mark.parametrize(
    ("override", "pattern"),
    [
        ({"hop_length": 2048}, r"hop_length: expected <= win_length \(1024\), received: hop_length=2048"),
        ({"win_length": 2048}, r"win_length: expected <= n_fft \(1024\), received: win_length=2048"),
        ({"fmax": 12000.0}, r"fmax: expected fmin \(0\) < fmax <= sample_rate / 2 \(11025\), received: fmax=12000"),
        ({"fmin": 9000.0, "fmax": 8000.0}, r"fmax: .* received: fmax=8000"),
        ({"n_mels": 0}, r"n_mels: expected a positive int, received: n_mels=0"),
        ({"n_fft": 512.0}, r"n_fft: expected a positive int, received: n_fft=512.0"),
        ({"sample_rate": True}, r"sample_rate: expected a positive int, received: sample_rate=True"),
        ({"pad_mode": "edge"}, r"pad_mode: expected one of \('constant', 'reflect'\), received: pad_mode='edge'"),
        ({"power": 1.5}, r"power: expected 1.0 \(magnitude\) or 2.0 \(power\), received: power=1.5"),
        ({"norm": "l2"}, r"norm: expected 'slaney' or None, received: norm='l2'"),
        ({"window": "kaiser"}, r"window: expected one of .*, received: window='kaiser'"),
        ({"log": "log2"}, r"log: expected one of .*, received: log='log2'"),
        ({"amin": 0.0}, r"amin: expected a finite float > 0, received: amin=0.0"),
        ({"top_db": 80.0}, r"top_db: expected its default unless log='db' \(log='none'\), received: top_db=80.0"),
        ({"log": "db", "min_level_db": 10.0}, r"min_level_db: expected None or a float < 0, received: min_level_db=10.0"),
        ({"log": "db", "max_norm": 0.0}, r"max_norm: expected a float > 0, received: max_norm=0.0"),
    ],
)  # fmt: skip
def test_invalid_values_name_the_field_value_and_rule(override, pattern):
    with pytest.raises(ConfigError, match=pattern):
        MelConfig(**{**BASE, **override})


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


def test_config_is_frozen_and_resolves_defaults():
    config = MelConfig(**BASE)
    assert (config.win_length, config.fmax, config.n_freqs) == (1024, 11025.0, 513)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.n_mels = 40  # type: ignore[misc]


def test_positional_arguments_are_refused():
    with pytest.raises(TypeError):
        MelConfig(22050, 1024, 256)  # type: ignore[misc]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_build_and_round_trip_through_dicts(name):
    config = MelConfig.from_preset(name)
    assert MelConfig.from_dict(config.to_dict()) == config
    assert MelConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert MelConfig.from_dict({"preset": name}) == config
    assert list(config.to_dict()) == [f.name for f in dataclasses.fields(MelConfig)]


def test_librosa_preset_is_librosa_defaults():
    config = MelConfig.from_preset("librosa")
    mel = librosa.filters.mel(sr=22050, n_fft=2048)  # librosa's defaults
    assert (config.n_fft, config.hop_length, config.n_mels) == (2048, 512, mel.shape[0])
    assert (config.pad_mode, config.power, config.center, config.top_db) == (
        "constant",
        2.0,
        True,
        80.0,
    )


def test_preset_overrides_and_unknown_names():
    assert MelConfig.from_preset("xtts", sample_rate=24000).sample_rate == 24000
    with pytest.raises(ConfigError, match=r"expected one of \['coqui', .*received: name='hifigan'"):
        MelConfig.from_preset("hifigan")
    with pytest.raises(ConfigError, match=r"unknown field\(s\) \['hop'\]"):
        MelConfig.from_preset("xtts", hop=200)


def test_from_dict_rejects_unknown_and_missing_keys():
    with pytest.raises(ConfigError, match=r"unknown field\(s\) \['nfft'\]"):
        MelConfig.from_dict({**BASE, "nfft": 1024})
    with pytest.raises(ConfigError, match=r"missing required field\(s\) \['n_mels'\]"):
        MelConfig.from_dict({"sample_rate": 22050, "n_fft": 1024, "hop_length": 256})


def test_a_section_without_a_preset_says_what_it_needs():
    with pytest.raises(ConfigError) as caught:
        MelConfig.from_dict({"n_mels": 64}, section="audio")
    assert str(caught.value) == (
        "MelConfig: missing required field(s) ['sample_rate', 'n_fft', 'hop_length'] in section "
        "audio; expected `preset: NAME` (one of ['coqui', 'librosa', 'tacotron2', 'xtts']) plus "
        "overrides, or all of ['sample_rate', 'n_fft', 'hop_length', 'n_mels'], received: n_mels=64"
    )


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_filterbank_matches_librosa(name):
    c = MelConfig.from_preset(name)
    ref = librosa.filters.mel(
        sr=c.sample_rate, n_fft=c.n_fft, n_mels=c.n_mels, fmin=c.fmin, fmax=c.fmax,
        htk=c.htk, norm=c.norm, dtype=np.float64,
    )  # fmt: skip
    np.testing.assert_allclose(mel_filterbank(c), ref.T, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("kind", "win_length"), [("hann", 1024), ("hann", 800), ("hamming", 801)])
def test_window_matches_librosa(kind, win_length):
    c = MelConfig(**{**BASE, "hop_length": 200}, win_length=win_length, window=kind)
    ref = librosa.util.pad_center(
        librosa.filters.get_window(kind, win_length, fftbins=True), size=1024
    )
    np.testing.assert_allclose(window(c), ref, atol=1e-12)


def test_too_many_mels_for_the_fft_is_an_error():
    with pytest.raises(
        ConfigError, match=r"n_mels=256 with n_fft=256 leaves \d+ filter\(s\) empty"
    ):
        mel_filterbank(MelConfig(sample_rate=22050, n_fft=256, hop_length=64, n_mels=256))
