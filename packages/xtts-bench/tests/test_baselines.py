"""The baselines compute the recipe librosa computes, batch it as documented, and really are
Python pipelines (a `tf.numpy_function` per element)."""

from __future__ import annotations

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import librosa
import numpy as np
import pytest
import soundfile
import tensorflow as tf

import xtts_audio as xa
import xtts_bench.baselines as bl
import xtts_data as xd
from xtts_bench.audio import librosa_mel

CONFIG = xa.MelConfig.from_preset("xtts")
# (seconds, file rate, channels, tokens): 16 kHz files are resampled; 0.9 s and 1.0 s exceed
# MAX_FRAMES (78 and 87 frames), and the 10-token row exceeds MAX_TEXT_LEN.
ROWS = [
    (0.3, 22050, 1, 3),
    (0.45, 16000, 1, 5),
    (0.5, 22050, 2, 4),
    (0.6, 16000, 1, 10),
    (0.7, 22050, 1, 8),
    (0.8, 16000, 2, 6),
    (0.9, 22050, 1, 7),
    (1.0, 16000, 1, 2),
]
BATCH, MAX_FRAMES, MAX_TEXT_LEN = 2, 70, 8
KEPT = [0, 1, 2, 4, 5]
SETTINGS = dict(batch_size=BATCH, max_frames=MAX_FRAMES, max_text_len=MAX_TEXT_LEN)
PYTHON_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[bl.Utterance]:
    """The ROWS as WAV files; utterance i has tokens (i + 1, ...) so batches name their rows."""
    folder = tmp_path_factory.mktemp("wavs")
    rng = np.random.default_rng(0)
    utterances = []
    for index, (seconds, rate, channels, n_tokens) in enumerate(ROWS):
        t = np.arange(int(seconds * rate)) / rate
        tone = 0.3 * np.sin(2 * np.pi * (150 + 40 * index) * t)
        audio = tone[:, None] + 0.01 * rng.standard_normal((len(t), channels))
        path = folder / f"utt{index}.wav"
        soundfile.write(path, audio.squeeze(), rate, subtype="PCM_16")
        utterances.append(bl.Utterance(f"utt{index}", path, (index + 1,) * n_tokens))
    return utterances


@pytest.fixture(scope="module")
def cache(corpus, tmp_path_factory):
    folder = tmp_path_factory.mktemp("npy")
    return folder, bl.librosa_cache_build(corpus, CONFIG, folder, workers=2)


def _expected_features(path) -> np.ndarray:
    """librosa's recipe, spelled out here: float32 [frames, n_mels]."""
    audio, rate = soundfile.read(path, dtype="float32")
    if audio.ndim == 2:
        audio = audio.mean(axis=1)
    if rate != CONFIG.sample_rate:
        audio = librosa.resample(audio, orig_sr=rate, target_sr=CONFIG.sample_rate)
    return xa.normalize(librosa_mel(CONFIG)(audio).T, CONFIG).numpy()


def _pipeline(kind: str, corpus, cache, **overrides) -> tf.data.Dataset:
    settings = {**SETTINGS, "shuffle": False, **overrides}
    if kind == "npy":
        return bl.npy_dataset(corpus, cache[0], n_mels=CONFIG.n_mels, **settings)
    return bl.librosa_dataset(corpus, CONFIG, **settings)


def test_public_surface():
    assert set(bl.__all__) == {
        "BuildStats", "DynamicStep", "Utterance", "dynamic_train_step", "librosa_cache_build",
        "librosa_dataset", "npy_dataset", "npy_segment_dataset", "trim_to_longest",
    }  # fmt: skip


def test_cache_holds_librosa_features_per_file(corpus, cache):
    folder, _ = cache
    assert sorted(p.name for p in folder.iterdir()) == sorted(f"{u.id}.npy" for u in corpus)
    for utterance in corpus:
        cached = np.load(folder / f"{utterance.id}.npy")
        expected = _expected_features(utterance.wav_path)
        assert cached.dtype == np.float32
        assert cached.shape == expected.shape == (expected.shape[0], CONFIG.n_mels)
        np.testing.assert_allclose(cached, expected, atol=1e-4, err_msg=utterance.id)


def test_build_stats_count_files_and_source_seconds(corpus, cache):
    _, stats = cache
    assert stats.files == len(ROWS)
    assert stats.audio_seconds == pytest.approx(sum(seconds for seconds, *_ in ROWS), abs=1e-3)
    assert stats.wall_seconds > 0
    assert stats.seconds_per_second == pytest.approx(stats.audio_seconds / stats.wall_seconds)


@pytest.mark.parametrize("preset", sorted(xa.PRESETS))
def test_numpy_scaling_matches_normalize(preset):
    config = xa.MelConfig.from_preset(preset)
    mel = np.random.default_rng(1).gamma(0.3, 2.0, (2, 40, config.n_mels)).astype(np.float32)
    mel[0, :5] = 0.0  # below every floor
    for example in mel:
        expected = xa.normalize(example, config).numpy()
        np.testing.assert_allclose(bl._scale(example, config), expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kind", ["npy", "librosa"])
def test_element_spec_is_static(kind, corpus, cache):
    spec = _pipeline(kind, corpus, cache).element_spec
    assert spec == {
        "tokens": tf.TensorSpec([BATCH, MAX_TEXT_LEN], tf.int32),
        "token_lengths": tf.TensorSpec([BATCH], tf.int32),
        "mel": tf.TensorSpec([BATCH, MAX_FRAMES, CONFIG.n_mels], tf.float32),
        "mel_lengths": tf.TensorSpec([BATCH], tf.int32),
    }


@pytest.mark.parametrize("kind", ["npy", "librosa"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_batches_hold_cached_mels_zero_padded(kind, shuffle, corpus, cache):
    seen = []
    for batch in _pipeline(kind, corpus, cache, shuffle=shuffle):
        batch = {name: value.numpy() for name, value in batch.items()}
        for row in range(BATCH):
            index = int(batch["tokens"][row, 0]) - 1
            seen.append(index)
            n_tokens = len(corpus[index].tokens)
            cached = np.load(cache[0] / f"{corpus[index].id}.npy")
            frames = len(cached)
            assert batch["token_lengths"][row] == n_tokens
            assert list(batch["tokens"][row]) == [index + 1] * n_tokens + [0] * (
                MAX_TEXT_LEN - n_tokens
            )
            assert batch["mel_lengths"][row] == frames
            np.testing.assert_allclose(batch["mel"][row, :frames], cached, atol=1e-5)
            assert not batch["mel"][row, frames:].any()
    # Five rows fit, two full batches of them come out.
    assert len(seen) == len(set(seen)) == len(KEPT) // BATCH * BATCH
    assert set(seen) <= set(KEPT)
    if not shuffle:
        assert seen == KEPT[: len(seen)]


def _op_types(ds: tf.data.Dataset) -> set[str]:
    graph = tf.compat.v1.GraphDef.FromString(ds._as_serialized_graph().numpy())
    ops = {node.op for node in graph.node}
    for function in graph.library.function:
        ops.update(node.op for node in function.node_def)
    return ops


@pytest.mark.parametrize("kind", ["npy", "librosa"])
def test_pipelines_run_python_per_element(kind, corpus, cache):
    assert _op_types(_pipeline(kind, corpus, cache)) & PYTHON_OPS


@pytest.mark.parametrize("kind", ["npy", "librosa"])
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"batch_size": 0}, "batch_size to be an int >= 1, received: batch_size=0"),
        ({"max_frames": 2.5}, "max_frames to be an int >= 1, received: max_frames=2.5"),
        ({"max_text_len": 1}, "none fits"),
    ],
)
def test_rejects_bad_settings(kind, overrides, message, corpus, cache):
    with pytest.raises(ValueError, match=message):
        _pipeline(kind, corpus, cache, **overrides)


# --- npy_segment_dataset: the Python segment cutter ---------------------------------------

HOP, M, SEGMENT, SEG_BATCH = 4, 2, 8, 3
TINY = xa.MelConfig(sample_rate=16000, n_fft=8, hop_length=HOP, n_mels=M)
RAMP_FRAMES = (12, 8, 20, 5)  # frames per utterance; 5 is shorter than a segment: dropped


@pytest.fixture(scope="module")
def ramps(tmp_path_factory) -> tuple[list[bl.Utterance], pathlib.Path]:
    """Known values: utterance i's mel row t holds 100 i + t, its WAV sample n the int16
    1000 i + n; (frames - 1) * hop + 1 samples, the fewest for its frames, so a segment
    at the end runs past the waveform (zero-padded)."""
    folder = tmp_path_factory.mktemp("ramps")
    utterances = []
    for i, frames in enumerate(RAMP_FRAMES):
        mel = np.repeat((100 * i + np.arange(frames, dtype=np.float32))[:, None], M, 1)
        np.save(folder / f"ramp{i}.npy", mel)
        samples = 1000 * i + np.arange((frames - 1) * HOP + 1)
        soundfile.write(folder / f"ramp{i}.wav", samples.astype(np.int16), TINY.sample_rate,
                        subtype="PCM_16")  # fmt: skip
        utterances.append(bl.Utterance(f"ramp{i}", folder / f"ramp{i}.wav", (1,)))
    return utterances, folder


def _segments(ramps, **overrides) -> tf.data.Dataset:
    settings = {"batch_size": SEG_BATCH, "segment_frames": SEGMENT, **overrides}
    return bl.npy_segment_dataset(ramps[0], ramps[1], TINY, **settings)


def test_segments_have_the_static_shape_of_xtts_segments(ramps):
    shape = xd.SegmentShape(batch_size=SEG_BATCH, frames=SEGMENT, samples=SEGMENT * HOP)
    spec = xd.SegmentSpec(shapes=(shape,), n_mels=M, hop_length=HOP)
    assert _segments(ramps).element_spec == spec.signature(shape)


def test_segments_cut_aligned_mel_and_audio_at_a_random_frame(ramps):
    starts = {i: set() for i in range(len(RAMP_FRAMES))}
    for batch in _segments(ramps, seed=5).repeat(30):
        mel, audio = batch["mel"].numpy(), batch["audio"].numpy()
        for row in range(SEG_BATCH):
            i, start = divmod(int(mel[row, 0, 0]), 100)
            starts[i].add(start)
            frames = np.arange(start, start + SEGMENT)
            np.testing.assert_array_equal(mel[row, :, 0], 100 * i + frames)
            n = np.arange(start * HOP, (start + SEGMENT) * HOP)  # samples under those frames
            length = (RAMP_FRAMES[i] - 1) * HOP + 1
            expected = np.where(n < length, 1000 * i + n, 0)
            np.testing.assert_array_equal(audio[row] * 32768, expected)
    assert not starts[3]  # too short for a segment
    for i in range(3):
        assert starts[i] <= set(range(RAMP_FRAMES[i] - SEGMENT + 1)), (i, starts[i])
    assert len(starts[2]) > 1  # the start is drawn, not fixed


def test_the_segment_cutter_is_a_python_pipeline(ramps):
    assert _op_types(_segments(ramps)) & PYTHON_OPS


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"batch_size": 0}, "Expected batch_size to be an int >= 1, received: batch_size=0"),
        ({"segment_frames": 21}, "segment_frames=21 frames or more, received: none that long"),
    ],
)
def test_segment_cutter_rejects_bad_settings(ramps, overrides, message):
    with pytest.raises(ValueError, match=message):
        _segments(ramps, **overrides)


def test_cache_build_rejects_bad_workers(corpus, tmp_path):
    with pytest.raises(ValueError, match="workers to be an int >= 1, received: workers=0"):
        bl.librosa_cache_build(corpus, CONFIG, tmp_path, workers=0)
