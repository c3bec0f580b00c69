"""`resample` against `scipy.signal.resample_poly`, and `to_mono`."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.signal
import tensorflow as tf

from xtts_audio.errors import ConfigError, InputError
from xtts_audio.resample import resample, resampled_length, to_mono

RATE_PAIRS = [(44100, 22050), (16000, 22050), (22050, 16000), (48000, 22050)]
MIN_SNR_DB = 60.0


def scipy_resample(x: np.ndarray, orig_sr: int, target_sr: int) -> np.ndarray:
    """The reference, in float64."""
    gcd = math.gcd(orig_sr, target_sr)
    return scipy.signal.resample_poly(
        x.astype(np.float64), target_sr // gcd, orig_sr // gcd, axis=-1
    )


def snr_db(reference: np.ndarray, estimate: np.ndarray) -> float:
    error = np.sum((reference - estimate) ** 2)
    return 10.0 * math.log10(np.sum(reference**2) / error) if error > 0 else math.inf


def assert_matches_scipy(x: np.ndarray, orig_sr: int, target_sr: int, out: np.ndarray) -> None:
    """One conformance check: dtype, scipy's exact length, and SNR against scipy."""
    expected = scipy_resample(x, orig_sr, target_sr)
    assert out.dtype == np.float32
    assert out.shape == expected.shape
    snr = snr_db(expected, out)
    assert snr > MIN_SNR_DB, f"SNR {snr:.1f} dB for {orig_sr}->{target_sr}"


@pytest.fixture(scope="module")
def signals(speech):
    """`signals(kind, rate)`: speech (from the 22050 Hz clip) or 2 s of white noise."""
    audio, rate = speech
    cache = {}

    def get(kind: str, sample_rate: int) -> np.ndarray:
        if (kind, sample_rate) not in cache:
            if kind == "speech":
                x = scipy_resample(audio, rate, sample_rate)
            else:
                x = 0.3 * np.random.default_rng(sample_rate).standard_normal(2 * sample_rate)
            cache[kind, sample_rate] = x.astype(np.float32)
        return cache[kind, sample_rate]

    return get


@pytest.mark.parametrize("kind", ["speech", "noise"])
@pytest.mark.parametrize(("orig_sr", "target_sr"), RATE_PAIRS)
def test_matches_scipy(run, signals, kind, orig_sr, target_sr):
    x = signals(kind, orig_sr)
    out = run(lambda w: resample(w, orig_sr=orig_sr, target_sr=target_sr), x)
    assert_matches_scipy(x, orig_sr, target_sr, out)


@pytest.mark.parametrize("length", [0, 1, 2, 7, 319, 320, 321, 441, 442, 5000])
@pytest.mark.parametrize(("orig_sr", "target_sr"), RATE_PAIRS)
def test_length_matches_scipy(length, orig_sr, target_sr):
    x = np.random.default_rng(length).standard_normal(length).astype(np.float32)
    out = resample(x, orig_sr=orig_sr, target_sr=target_sr)
    assert out.shape == scipy_resample(x, orig_sr, target_sr).shape
    if length:
        assert_matches_scipy(x, orig_sr, target_sr, out.numpy())


@pytest.mark.parametrize(("orig_sr", "target_sr"), RATE_PAIRS)
def test_unknown_length(signals, orig_sr, target_sr):
    x = signals("speech", orig_sr)[:12345]
    spec = tf.TensorSpec([None], tf.float32)
    fn = tf.function(lambda w: resample(w, orig_sr=orig_sr, target_sr=target_sr))
    assert fn.get_concrete_function(spec).structured_outputs.shape.as_list() == [None]
    assert_matches_scipy(x, orig_sr, target_sr, fn(tf.constant(x)).numpy())
    dataset = tf.data.Dataset.from_generator(lambda: iter([x]), output_signature=spec)
    out = next(iter(dataset.map(fn)))
    assert_matches_scipy(x, orig_sr, target_sr, out.numpy())


def test_static_output_shape():
    fn = tf.function(lambda w: resample(w, orig_sr=16000, target_sr=22050))
    out = fn.get_concrete_function(tf.TensorSpec([None, 3, 16000], tf.float32))
    assert out.structured_outputs.shape.as_list() == [None, 3, 22050]


@pytest.mark.parametrize(("orig_sr", "target_sr"), RATE_PAIRS)
def test_batched_equals_rows(run, orig_sr, target_sr):
    x = np.random.default_rng(0).standard_normal((2, 3, 3001)).astype(np.float32)
    out = run(lambda w: resample(w, orig_sr=orig_sr, target_sr=target_sr), x)
    rows = [resample(row, orig_sr=orig_sr, target_sr=target_sr).numpy() for row in x.reshape(6, -1)]
    np.testing.assert_allclose(out.reshape(6, -1), np.stack(rows), atol=1e-6)


def test_equal_rates_return_input_as_float32():
    x = np.linspace(-1.0, 1.0, 100)
    out = resample(x, orig_sr=22050, target_sr=22050)
    assert out.dtype == tf.float32
    np.testing.assert_array_equal(out.numpy(), x.astype(np.float32))


@pytest.mark.parametrize(
    ("orig_sr", "target_sr", "match"),
    [
        (0, 22050, "orig_sr=0"),
        (22050, -16000, "target_sr=-16000"),
        (22050.0, 16000, "orig_sr=22050.0"),
        (True, 16000, "orig_sr=True"),
        (22050, 22051, r"orig_sr=22050, target_sr=22051.*e\.g\. target_sr=\d+"),
    ],
)
def test_bad_rates_raise(orig_sr, target_sr, match):
    with pytest.raises(ConfigError, match=match):
        resample(np.zeros(100, np.float32), orig_sr=orig_sr, target_sr=target_sr)


def test_suggested_rate_is_accepted():
    with pytest.raises(ConfigError) as info:
        resample(np.zeros(100, np.float32), orig_sr=44100, target_sr=22051)
    suggested = int(str(info.value).rsplit("target_sr=", 1)[1].rstrip("."))
    assert resample(np.zeros(100, np.float32), orig_sr=44100, target_sr=suggested).shape[0] > 0


@pytest.mark.parametrize("x", [np.zeros(100, np.int16), np.float32(1.0)])
def test_bad_waveform_raises(x):
    with pytest.raises(InputError, match="Expected"):
        resample(x, orig_sr=44100, target_sr=22050)


def test_to_mono(run):
    x = np.random.default_rng(0).standard_normal((1000, 2)).astype(np.float64)
    out = run(to_mono, x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, x.mean(axis=-1), atol=1e-6)


@pytest.mark.parametrize(
    ("x", "match"),
    [
        (np.zeros(100, np.float32), r"\[\.\.\., samples, channels\]"),
        (np.zeros((9, 2), np.int16), "int16"),
    ],
)
def test_to_mono_bad_input_raises(x, match):
    with pytest.raises(InputError, match=match):
        to_mono(x)


def test_unknown_rank_raises():
    fn = tf.function(
        lambda w: resample(w, orig_sr=44100, target_sr=22050),
        input_signature=[tf.TensorSpec(None, tf.float32)],
        autograph=False,  # AutoGraph re-wraps InputError raised while tracing as StagingError
    )
    with pytest.raises(InputError, match="unknown rank"):
        fn.get_concrete_function()


@pytest.mark.parametrize(
    ("orig_sr", "target_sr"), [(44100, 22050), (16000, 22050), (48000, 24000), (8000, 44100)]
)
def test_resampled_length_is_what_resample_returns(orig_sr, target_sr):
    lengths = [1, 2, 7, 160, 441, 1001]
    for n in lengths:
        out = resample(np.zeros(n, np.float32), orig_sr=orig_sr, target_sr=target_sr)
        assert resampled_length(n, orig_sr=orig_sr, target_sr=target_sr) == out.shape[-1], n
    as_array = resampled_length(np.array(lengths), orig_sr=orig_sr, target_sr=target_sr)
    as_tensor = resampled_length(tf.constant(lengths), orig_sr=orig_sr, target_sr=target_sr)
    np.testing.assert_array_equal(as_array, as_tensor.numpy())
    np.testing.assert_array_equal(as_array, -(-np.array(lengths) * target_sr // orig_sr))
