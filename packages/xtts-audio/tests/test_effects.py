"""Silence trimming against `librosa.effects.trim`; emphasis filters against `lfilter`."""

from __future__ import annotations

import librosa
import numpy as np
import pytest
import scipy.signal
import tensorflow as tf

from xtts_audio.effects import deemphasis, preemphasis, silence_bounds, trim_silence
from xtts_audio.errors import ConfigError, InputError

TOP_DBS = [20.0, 40.0, 60.0]
COEFS = [0.0, 0.5, 0.97]


@pytest.fixture(scope="module")
def padded(speech):
    """`padded(kind)`: the speech clip between 0.3 s and 0.4 s of silence or low noise."""
    audio, _ = speech
    clean = np.concatenate([np.zeros(6615), audio, np.zeros(8820)]).astype(np.float32)
    noise = np.random.default_rng(0).standard_normal(clean.shape).astype(np.float32)
    signals = {
        "silence": clean,
        "noise_80db": clean + 1e-4 * noise,
        "noise_60db": clean + 1e-3 * noise,
    }
    return signals.__getitem__


def librosa_bounds(x: np.ndarray, top_db: float) -> np.ndarray:
    return librosa.effects.trim(x, top_db=top_db)[1]


@pytest.mark.parametrize("top_db", TOP_DBS)
@pytest.mark.parametrize("kind", ["silence", "noise_80db", "noise_60db"])
def test_silence_bounds_matches_librosa(run, padded, kind, top_db):
    x = padded(kind)
    out = run(lambda w: silence_bounds(w, top_db=top_db), x)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, librosa_bounds(x, top_db))


@pytest.mark.parametrize("top_db", TOP_DBS)
@pytest.mark.parametrize("kind", ["silence", "noise_80db"])
def test_trim_silence_matches_librosa(run, padded, kind, top_db):
    if run.mode == "xla":
        pytest.skip("trim_silence has a data-dependent length; XLA code uses silence_bounds")
    x = padded(kind)
    out = run(lambda w: trim_silence(w, top_db=top_db), x)
    np.testing.assert_array_equal(out, librosa.effects.trim(x, top_db=top_db)[0])


@pytest.mark.parametrize(("frame_length", "hop_length"), [(1024, 256), (2048, 512), (512, 300)])
def test_silence_bounds_frame_settings(padded, frame_length, hop_length):
    x = padded("noise_80db")
    out = silence_bounds(x, top_db=40.0, frame_length=frame_length, hop_length=hop_length)
    expected = librosa.effects.trim(
        x, top_db=40.0, frame_length=frame_length, hop_length=hop_length
    )
    np.testing.assert_array_equal(out, expected[1])


def test_silence_bounds_batched(run, padded):
    rows = [padded("silence"), padded("noise_80db"), 0.01 * padded("silence")]
    x = np.stack(rows).reshape(3, 1, -1)
    out = run(lambda w: silence_bounds(w, top_db=40.0), x)
    assert out.shape == (3, 1, 2)
    np.testing.assert_array_equal(out[:, 0], [librosa_bounds(row, 40.0) for row in rows])


def test_silence_bounds_unknown_length(padded):
    x = padded("noise_80db")
    fn = tf.function(
        lambda w: silence_bounds(w, top_db=40.0),
        input_signature=[tf.TensorSpec([None, None], tf.float32)],
    )
    np.testing.assert_array_equal(fn(x[None]).numpy()[0], librosa_bounds(x, 40.0))


def test_trim_silence_unknown_length_in_dataset(padded):
    x = padded("silence")
    spec = tf.TensorSpec([None], tf.float32)
    dataset = tf.data.Dataset.from_generator(lambda: iter([x]), output_signature=spec)
    out = next(iter(dataset.map(lambda w: trim_silence(w, top_db=40.0))))
    np.testing.assert_array_equal(out, librosa.effects.trim(x, top_db=40.0)[0])


def test_all_zero_signal_is_kept_like_librosa():
    x = np.zeros(5000, np.float32)
    np.testing.assert_array_equal(silence_bounds(x), librosa_bounds(x, 60.0))


def test_trim_silence_rejects_batches():
    with pytest.raises(InputError, match=r"shape=\(2, 100\)"):
        trim_silence(np.zeros((2, 100), np.float32))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"top_db": 0.0}, "top_db=0.0"),
        ({"top_db": -20.0}, "top_db=-20.0"),
        ({"frame_length": 0}, "frame_length=0"),
        ({"hop_length": 256.0}, "hop_length=256.0"),
    ],
)
def test_silence_bounds_bad_config_raises(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        silence_bounds(np.zeros(100, np.float32), **kwargs)


@pytest.fixture(scope="module")
def clips(speech):
    """Speech and noise, batched: float32 [2, samples]."""
    audio, _ = speech
    noise = 0.3 * np.random.default_rng(1).standard_normal(audio.shape)
    return np.stack([audio, noise]).astype(np.float32)


@pytest.mark.parametrize("coef", COEFS)
def test_preemphasis_matches_lfilter(run, clips, coef):
    out = run(lambda w: preemphasis(w, coef=coef), clips)
    expected = scipy.signal.lfilter([1.0, -coef], [1.0], clips.astype(np.float64), axis=-1)
    np.testing.assert_allclose(out, expected, atol=1e-6)


@pytest.mark.parametrize("coef", COEFS)
def test_deemphasis_matches_lfilter(run, clips, coef):
    out = run(lambda w: deemphasis(w, coef=coef), clips)
    expected = scipy.signal.lfilter([1.0], [1.0, -coef], clips.astype(np.float64), axis=-1)
    assert out.dtype == np.float32
    assert np.max(np.abs(out - expected)) < 1e-5 * np.max(np.abs(expected))


@pytest.mark.parametrize("coef", COEFS)
def test_deemphasis_inverts_preemphasis(run, clips, coef):
    out = run(lambda w: deemphasis(preemphasis(w, coef=coef), coef=coef), clips)
    np.testing.assert_allclose(out, clips, atol=2e-6)


@pytest.mark.parametrize("coef", COEFS)
def test_deemphasis_unknown_length(clips, coef):
    spec = tf.TensorSpec([2, None], tf.float32)
    fn = tf.function(lambda w: deemphasis(w, coef=coef), input_signature=[spec])
    dataset = tf.data.Dataset.from_generator(lambda: iter([clips]), output_signature=spec)
    expected = scipy.signal.lfilter([1.0], [1.0, -coef], clips.astype(np.float64), axis=-1)
    for out in (fn(clips), next(iter(dataset.map(fn)))):
        assert out.shape == clips.shape
        assert np.max(np.abs(out.numpy() - expected)) < 1e-5 * np.max(np.abs(expected))


@pytest.mark.parametrize("length", [1, 2, 3])
def test_emphasis_short_signals(length):
    x = np.arange(1, length + 1, dtype=np.float32)
    np.testing.assert_allclose(preemphasis(x), scipy.signal.lfilter([1, -0.97], [1], x), rtol=1e-6)
    np.testing.assert_allclose(deemphasis(x), scipy.signal.lfilter([1], [1, -0.97], x), rtol=1e-6)


@pytest.mark.parametrize("fn", [preemphasis, deemphasis])
def test_emphasis_empty_signal(fn):
    assert fn(np.zeros((2, 0), np.float32)).shape == (2, 0)


@pytest.mark.parametrize("fn", [preemphasis, deemphasis])
@pytest.mark.parametrize("coef", [-0.1, 1.0, 1.5, True, "0.9"])
def test_bad_coef_raises(fn, coef):
    with pytest.raises(ConfigError, match=r"Expected coef in \[0, 1\), received: coef="):
        fn(np.zeros(10, np.float32), coef=coef)


@pytest.mark.parametrize("fn", [preemphasis, deemphasis, silence_bounds])
def test_non_float_waveform_raises(fn):
    with pytest.raises(InputError, match="dtype=int16"):
        fn(np.zeros(10, np.int16))


@pytest.mark.parametrize("fn", [preemphasis, deemphasis, silence_bounds, trim_silence])
def test_unknown_rank_raises(fn):
    # autograph=False: AutoGraph re-wraps InputError raised while tracing as StagingError.
    spec = tf.TensorSpec(None, tf.float32)
    traced = tf.function(fn, input_signature=[spec], autograph=False)
    with pytest.raises(InputError, match="unknown rank"):
        traced.get_concrete_function()
