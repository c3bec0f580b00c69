"""Mel spectrogram and features: parity with the computation each preset is named after."""

from __future__ import annotations

import math

import librosa
import numpy as np
import pytest
import tensorflow as tf

import xtts_audio
from xtts_audio import InputError, MelConfig

PRESETS = ("librosa", "xtts", "coqui", "tacotron2")
# One feature unit in dB of power, per preset: how feature errors convert to the dB bound.
DB_PER_UNIT = {"librosa": 1.0, "xtts": 10 / math.log(10), "coqui": 100 / 8, "tacotron2": 20.0}
MAX_DB_ERROR = 0.01
DYNAMIC_RANGE_DB = 80.0


def _librosa_mel(y: np.ndarray, c: MelConfig) -> np.ndarray:
    mel = librosa.feature.melspectrogram(
        y=y, sr=c.sample_rate, n_fft=c.n_fft, hop_length=c.hop_length, win_length=c.win_length,
        center=c.center, pad_mode=c.pad_mode, power=c.power, n_mels=c.n_mels, fmin=c.fmin,
        fmax=c.fmax, htk=c.htk, norm=c.norm,
    )  # fmt: skip
    return np.swapaxes(mel, -1, -2)


def _reference_features(name: str, y: np.ndarray) -> np.ndarray:
    """Each recipe as its source computes it, written out independently of MelConfig."""
    if name == "librosa":  # librosa defaults, end to end
        return librosa.power_to_db(librosa.feature.melspectrogram(y=y, sr=22050)).T
    if name == "xtts":  # tortoise/XTTS TorchMelSpectrogram
        mel = librosa.feature.melspectrogram(
            y=y, sr=22050, n_fft=1024, hop_length=256, win_length=1024, power=2.0,
            n_mels=80, fmin=0, fmax=8000, htk=True, norm="slaney", pad_mode="reflect",
        )  # fmt: skip
        return np.log(np.maximum(mel, 1e-5)).T
    stft = np.abs(librosa.stft(y, n_fft=1024, hop_length=256, win_length=1024, pad_mode="reflect"))
    if name == "coqui":  # TTS AudioProcessor.melspectrogram with BaseAudioConfig defaults
        mel = librosa.filters.mel(sr=22050, n_fft=1024, n_mels=80, fmin=0.0, fmax=None) @ stft
        db = 20 * np.log10(np.maximum(1e-5, mel)) - 20
        return np.clip(8 * ((db + 100) / 100) - 4, -4, 4).T
    # TensorFlowTTS logmelfilterbank with ljspeech_preprocess.yaml
    mel = librosa.filters.mel(sr=22050, n_fft=1024, n_mels=80, fmin=80, fmax=7600) @ stft
    return np.log10(np.maximum(1e-10, mel)).T


def _assert_db_close(ours: np.ndarray, ref: np.ndarray, db_per_unit: float = 1.0) -> None:
    assert ours.shape == ref.shape
    ours_db, ref_db = ours * db_per_unit, ref * db_per_unit
    loud = ref_db > ref_db.max() - DYNAMIC_RANGE_DB
    assert loud.sum() >= 500, "too few bins in range for a meaningful comparison"
    error = np.abs(ours_db - ref_db)[loud].max()
    assert error <= MAX_DB_ERROR, f"max error {error:.4f} dB > {MAX_DB_ERROR} dB"


def _power_db(mel: np.ndarray, power: float) -> np.ndarray:
    return 10 * np.log10(np.maximum(mel.astype(np.float64), 1e-30) ** (2 / power))


@pytest.fixture(scope="module")
def signals(speech, chirp) -> dict[str, np.ndarray]:
    return {"speech": speech[0], "chirp": chirp}


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("signal", ["speech", "chirp"])
def test_features_match_the_source_recipe(name, signal, signals):
    y = signals[signal]
    ref = _reference_features(name, y)
    ours = xtts_audio.mel_features(y, MelConfig.from_preset(name)).numpy()
    _assert_db_close(ours, ref, DB_PER_UNIT[name])


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("signal", ["speech", "chirp"])
def test_linear_mel_matches_librosa(name, signal, signals):
    config = MelConfig.from_preset(name)
    y = signals[signal]
    ours = xtts_audio.mel_spectrogram(y, config).numpy()
    assert ours.shape[0] == xtts_audio.num_frames(len(y), config)
    _assert_db_close(
        _power_db(ours, config.power), _power_db(_librosa_mel(y, config), config.power)
    )


@pytest.mark.parametrize("name", PRESETS)
def test_jit_compiled_padded_batch_matches_librosa(name, signals):
    """A zero-padded batch under XLA: frames inside each signal match librosa per file."""
    config = MelConfig.from_preset(name)
    speech, chirp = signals["speech"], signals["chirp"][: len(signals["speech"]) // 2]
    batch = np.zeros((2, len(speech)), np.float32)
    batch[0], batch[1, : len(chirp)] = speech, chirp
    compiled = tf.function(lambda w: xtts_audio.mel_features(w, config), jit_compile=True)
    ours = compiled(tf.constant(batch)).numpy()
    assert ours.shape == (2, xtts_audio.num_frames(len(speech), config), config.n_mels)
    for row, y in zip(ours, (speech, chirp), strict=True):
        # Frames whose window reaches past the signal see zeros instead of its padding.
        inside = (len(y) - config.n_fft // 2) // config.hop_length + 1
        ref = _reference_features(name, y)
        if name == "librosa":  # top_db clamps relative to each file's own peak
            ref = np.maximum(ref, row.max() - 80.0)
        _assert_db_close(row[:inside], ref[:inside], DB_PER_UNIT[name])


def test_every_execution_mode_gives_the_same_features(run, speech):
    config = MelConfig.from_preset("xtts")
    expected = xtts_audio.mel_features(speech[0], config).numpy()
    got = run(lambda w: xtts_audio.mel_features(w, config), speech[0])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_leading_batch_dims_are_kept(speech):
    config = MelConfig.from_preset("coqui")
    y = speech[0][:22050]
    batch = np.stack([np.stack([y, y * 0.5])] * 3)  # (3, 2, samples)
    out = xtts_audio.mel_spectrogram(batch, config).numpy()
    frames = xtts_audio.num_frames(len(y), config)
    assert out.shape == (3, 2, frames, config.n_mels)
    single = xtts_audio.mel_spectrogram(y, config).numpy()
    np.testing.assert_allclose(out[2, 0], single, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1, 1], single * 0.5, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("seconds", "rows"), [(3, 1), (1, 4)])
def test_compiled_batches_are_chunked_and_give_the_same_mel(seconds, rows):
    """In a graph, big static batches go through the filterbank a few rows at a time."""
    from xtts_audio.spectral import _rows_per_chunk

    config = MelConfig.from_preset("xtts")
    spec = tf.TensorSpec([8, seconds * 22050], tf.float32)
    chosen = {}

    def mel(w):
        chosen["rows"] = _rows_per_chunk(w, config)
        return xtts_audio.mel_spectrogram(w, config)

    batch = np.random.default_rng(0).standard_normal(spec.shape).astype(np.float32) * 0.1
    compiled = tf.function(mel, jit_compile=True, input_signature=[spec])
    got = compiled(batch).numpy()
    # ~1 MiB of frames per 3 s row: one row per chunk; 1 s rows: the largest divisor of 8
    # whose frames fit 2 MiB.
    assert chosen["rows"] == rows
    assert _rows_per_chunk(tf.constant(batch), config) is None  # eagerly: whole batch
    expected = xtts_audio.mel_spectrogram(batch, config).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6 * expected.max())


@pytest.mark.parametrize(
    ("n_fft", "hop", "samples"),
    [(1024, 256, 22050), (1024, 256, 1024), (1024, 256, 1279), (2048, 512, 5000),
     (1024, 1024, 4096), (1000, 300, 5000)],
)  # fmt: skip
def test_compiled_frames_are_the_signals_frames(n_fft, hop, samples):
    """Under XLA, frames that are whole hops are cut as shifted slices: same frames."""
    from xtts_audio.spectral import _frames, in_xla

    config = MelConfig(
        sample_rate=22050, n_fft=n_fft, hop_length=hop, win_length=n_fft, n_mels=40,
        center=False,
    )  # fmt: skip
    y = np.random.default_rng(0).standard_normal((2, 3, samples)).astype(np.float32)
    seen = {}

    def frames(w):
        seen["xla"] = in_xla()
        return _frames(w, config)

    got = tf.function(frames, jit_compile=True)(y).numpy()
    assert seen["xla"]
    assert not in_xla()  # eagerly
    np.testing.assert_array_equal(got, tf.signal.frame(y, n_fft, hop).numpy())
    assert got.shape[-2] == xtts_audio.num_frames(samples, config)


@pytest.mark.parametrize("name", PRESETS)
def test_mel_blocks_hold_every_filter_weight_once(name):
    from xtts_audio._filters import mel_blocks, mel_filterbank, used_bins

    config = MelConfig.from_preset(name)
    bank = mel_filterbank(config)
    blocks = mel_blocks(config)
    assert [b[2] for b in blocks] == [0] + [b[3] for b in blocks[:-1]]  # mels in order, once
    assert blocks[-1][3] == config.n_mels
    rebuilt = np.zeros_like(bank)
    for lo, hi, first, last in blocks:
        assert 0 <= lo < hi <= used_bins(config)
        rebuilt[lo:hi, first:last] = bank[lo:hi, first:last]
    np.testing.assert_array_equal(rebuilt, bank)  # nothing outside the blocks
    dense = used_bins(config) * config.n_mels
    assert sum((hi - lo) * (last - first) for lo, hi, first, last in blocks) < dense / 3


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("n_fft", [1024, 1023])
@pytest.mark.parametrize("samples", [1024, 1025, 5000, 22050])
def test_num_frames_matches_librosa(center, n_fft, samples):
    config = MelConfig(sample_rate=22050, n_fft=n_fft, hop_length=256, n_mels=40, center=center)
    y = np.random.default_rng(0).standard_normal(samples).astype(np.float32)
    expected = librosa.stft(y, n_fft=n_fft, hop_length=256, center=center).shape[-1]
    assert xtts_audio.num_frames(samples, config) == expected
    assert int(xtts_audio.num_frames(tf.constant(samples), config)) == expected
    assert xtts_audio.spectrogram(y, config).shape[-2] == expected


def test_num_frames_of_an_array_of_lengths():
    config = MelConfig.from_preset("xtts")
    lengths = np.array([0, 255, 256, 22050])
    assert list(xtts_audio.num_frames(lengths, config)) == [1, 1, 2, 87]


@pytest.mark.parametrize("name", PRESETS)
def test_denormalize_inverts_normalize(name, speech):
    config = MelConfig.from_preset(name)
    mel = xtts_audio.mel_spectrogram(speech[0], config).numpy()
    back = xtts_audio.denormalize(xtts_audio.normalize(mel, config), config).numpy()
    # Values under the floor / below the normalisation range cannot come back.
    floor = 10 ** (-80 / 10) * mel.max() if name == "librosa" else 1e-4
    kept = mel > max(floor, config.amin * 10)
    np.testing.assert_allclose(back[kept], mel[kept], rtol=2e-3)


def test_stft_matches_librosa_complex(speech):
    config = MelConfig.from_preset("xtts")
    ours = xtts_audio.stft(speech[0], config).numpy()
    ref = librosa.stft(speech[0], n_fft=1024, hop_length=256, pad_mode="reflect").T
    np.testing.assert_allclose(ours, ref, atol=2e-4 * np.abs(ref).max())


def test_integer_waveform_is_rejected():
    with pytest.raises(
        InputError, match=r"Expected a float waveform, received: waveform.dtype=int16"
    ):
        xtts_audio.mel_spectrogram(np.zeros(4096, np.int16), MelConfig.from_preset("xtts"))


def test_unknown_rank_is_rejected_where_padding_needs_it():
    config = MelConfig.from_preset("xtts")
    compiled = tf.function(
        lambda w: xtts_audio.mel_spectrogram(w, config),
        input_signature=[tf.TensorSpec(None, tf.float32)],
    )
    with pytest.raises(InputError, match="received: unknown rank"):
        compiled(np.zeros(4096, np.float32))


def test_reflect_padding_of_a_too_short_signal_is_rejected():
    with pytest.raises(InputError, match=r"more than n_fft // 2 = 512 samples.*samples=100"):
        xtts_audio.mel_spectrogram(np.zeros(100, np.float32), MelConfig.from_preset("xtts"))


@pytest.mark.parametrize("name", ["coqui", "xtts"])
def test_denormalize_and_istft_in_every_mode(run, speech, name):
    config = MelConfig.from_preset(name)
    y = speech[0][:22050]
    features = xtts_audio.mel_features(y, config).numpy()
    expected = xtts_audio.denormalize(features, config).numpy()
    np.testing.assert_allclose(
        run(lambda f: xtts_audio.denormalize(f, config), features), expected, rtol=1e-5
    )
    spec = xtts_audio.stft(y, config).numpy()
    back = run(lambda s: xtts_audio.istft(s, config, length=len(y)), spec)
    np.testing.assert_allclose(back, y, atol=1e-5)
