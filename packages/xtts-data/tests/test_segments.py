"""Waveforms in the cache (`data.keep_audio`) and `make_segment_dataset`: aligned random
mel/waveform segments of one static shape, with no Python in the graph."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import yaml
from data_helpers import AUDIO, DATA, REPORT_KEYS, read_records

from xtts_audio import MelConfig, mel_features, num_frames
from xtts_data import (
    CacheError,
    ConfigError,
    DataConfig,
    FeatureCache,
    SegmentShape,
    SegmentSpec,
    _source,
    load_audio,
    make_dataset,
    make_segment_dataset,
    python_ops,
    read_corpus,
    record,
    verify_cache,
)
from xtts_data.cli import _parser, main
from xtts_data.segments import BatchSegments, CutSegments, DropTooShort

TRIM = 40.0  # the waveform kept is the trimmed one
SEGMENTS = dataclasses.replace(DATA, trim_top_db=TRIM, deterministic=True, segment_frames=32)
HOP, M = 4, 2  # the hand-made records' hop and mel channels
TINY = MelConfig(sample_rate=16000, n_fft=8, hop_length=HOP, n_mels=M)


def _epoch(dataset: tf.data.Dataset) -> list[dict[str, np.ndarray]]:
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset]


def _assert_same_mel(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal log-mels up to the waveform's int16 rounding: 0.01 where a bin stands 2.5 over
    the floor (ln amin; measured: 0.009), 0.05 in the quiet bins near it (measured: 0.033)."""
    loud = expected > np.log(AUDIO.amin) + 2.5
    np.testing.assert_allclose(actual[loud], expected[loud], atol=1e-2)
    np.testing.assert_allclose(actual, expected, atol=5e-2)


@pytest.fixture(scope="module")
def audio_cache(tmp_path_factory, corpus) -> Path:
    """A cache with waveforms, built with the flag the no-waveform error names."""
    out = tmp_path_factory.mktemp("audio") / "cache"
    args = ["prepare", str(corpus), "--out", str(out), "--set", "data.keep_audio=true",
            "--set", "data.shard_size=8", "--set", f"data.trim_top_db={TRIM}",
            "--workers", "2", "--quiet"]  # fmt: skip
    assert main(args) == 0
    return out


@pytest.fixture(scope="module")
def segments(audio_cache):
    pipeline = make_segment_dataset(audio_cache, SEGMENTS, "all")
    return pipeline, _epoch(pipeline.dataset)


# --- the cache keeps the waveform --------------------------------------------------------


def test_records_hold_the_resampled_trimmed_waveform_their_mel_was_computed_from(
    audio_cache, corpus
):
    records = read_records(audio_cache)
    rows = {row.id: row for row in read_corpus(corpus).rows}
    assert len(records) > 40
    for uid, stored in records.items():
        wave = load_audio(rows[uid].audio, AUDIO, trim_top_db=TRIM)  # what prepare computed on
        assert stored["audio"].dtype == np.float32
        assert stored["audio"].shape == wave.shape, uid
        assert num_frames(len(stored["audio"]), AUDIO) == len(stored["mel"]), uid
        pcm = np.clip(np.round(wave.astype(np.float64) * 32767), -32768, 32767)
        np.testing.assert_array_equal(stored["audio"], (pcm / 32768).astype(np.float32))
        # int16 rounding, and libsndfile's gain of 32767 / 32768: within 1/32767 to |x| = 0.5
        np.testing.assert_allclose(stored["audio"], wave, rtol=1 / 32768, atol=0.5 / 32768)
        _assert_same_mel(mel_features(stored["audio"], AUDIO).numpy(), stored["mel"])


def test_a_cache_with_waveforms_says_so_and_verifies(audio_cache, cache):
    assert FeatureCache.open(audio_cache).has_audio
    assert not FeatureCache.open(cache).has_audio
    assert FeatureCache.open(audio_cache).manifest.settings.data["keep_audio"] is True
    assert verify_cache(audio_cache) == []


def test_text_to_mel_reads_a_cache_with_waveforms_and_leaves_them_out(audio_cache):
    for config in (SEGMENTS, dataclasses.replace(SEGMENTS, keep_audio=True)):
        pipeline = make_dataset(audio_cache, config, "all")
        batch = next(iter(pipeline.dataset))
        assert "audio" not in batch
        assert pipeline.spec.matches(batch) is not None
    elements = _source.open_source(audio_cache, SEGMENTS, None).elements()
    assert "audio" not in elements.element_spec  # nor in what KeepInMemory would hold


def test_a_cache_without_waveforms_names_the_command_that_rebuilds_it(cache):
    match = r"built without waveforms .* `xtts-data prepare CORPUS --out .* --set data\.keep_audio=true --overwrite`"
    with pytest.raises(CacheError, match=match) as error:
        make_segment_dataset(cache, DATA)
    with pytest.raises(CacheError, match=match):
        make_segment_dataset(FeatureCache.open(cache), DATA)
    with pytest.raises(CacheError, match=match):  # any caller that asks for waveforms
        make_dataset(cache, dataclasses.replace(DATA, keep_audio=True))
    (command,) = re.findall(r"`xtts-data (prepare [^`]*)`", str(error.value))
    args = _parser().parse_args(shlex.split(command))  # the real flags of `prepare`
    assert (args.out, args.set, args.overwrite) == (cache, ["data.keep_audio=true"], True)


def test_a_corpus_is_no_source_of_segments(corpus):
    with pytest.raises(ConfigError, match=r"not a feature cache .* --set data\.keep_audio=true"):
        make_segment_dataset(corpus, DATA, audio=AUDIO)


# --- segments: alignment with known values ----------------------------------------------


def _known_record(frames: int, samples: int) -> bytes:
    """Mel row t holds t; waveform sample n is stored as the int16 n (reads n / 32768)."""
    mel = np.repeat(np.arange(frames, dtype=np.float32)[:, None], M, 1)
    return record.encode("known", 0, [1], mel, 0, np.arange(samples) / record.PCM_SCALE)


def test_a_segment_starts_at_its_frame_times_hop_and_is_zero_past_the_waveform():
    frames, length = 12, 8
    samples = (frames - 1) * HOP + 1  # the fewest for 12 centred frames: the last centre is
    assert num_frames(samples, TINY) == frames  # the last sample, so segments run short
    ds = tf.data.Dataset.from_tensors(_known_record(frames, samples)).repeat(200)
    cut = CutSegments(frames=length, hop_length=HOP, n_mels=M, seed=3)
    starts = set()
    for segment in _epoch(cut(ds.map(lambda raw: record.decode(raw, M)))):
        start = int(segment["mel"][0, 0])
        starts.add(start)
        np.testing.assert_array_equal(segment["mel"][:, 0], np.arange(start, start + length))
        n = np.arange(start * HOP, (start + length) * HOP)
        np.testing.assert_array_equal(segment["audio"] * 32768, np.where(n < samples, n, 0))
    assert starts == set(range(frames - length + 1))  # uniform over every start, ends included


def test_the_mel_of_a_segments_waveform_is_its_mel_away_from_the_edges(segments):
    _, batches = segments
    length = SEGMENTS.segment_frames
    # Frames 0-1 reach before the segment; frames from length - 2 on may reach past the
    # utterance's end (reflect-padded in the cache, zeros in the segment).
    inner = slice(AUDIO.n_fft // 2 // AUDIO.hop_length, length - 2)
    for batch in batches[:3]:
        again = mel_features(batch["audio"], AUDIO).numpy()  # (B, length + 1, M)
        _assert_same_mel(again[:, inner], batch["mel"][:, inner])


# --- segments: shape, graph, seed, filtering --------------------------------------------


def test_every_batch_has_the_one_shape_of_the_spec(segments):
    pipeline, batches = segments
    (shape,) = pipeline.spec.shapes
    assert shape.key == (DATA.batch_size, 32, 32 * AUDIO.hop_length)
    signature = {"mel": tf.TensorSpec([4, 32, AUDIO.n_mels], tf.float32),
                 "audio": tf.TensorSpec([4, 32 * AUDIO.hop_length], tf.float32)}  # fmt: skip
    assert pipeline.spec.signatures == [signature]
    assert pipeline.dataset.element_spec == signature
    assert len(batches) == pipeline.batches_per_epoch == pipeline.num_samples // 4
    assert all(pipeline.spec.matches(batch) == shape for batch in batches)
    assert pipeline.spec.matches({**batches[0], "audio": batches[0]["audio"][:, 1:]}) is None


def test_no_python_ops_in_the_graph(segments):
    assert python_ops(segments[0].dataset) == []


def test_the_same_seed_gives_the_same_segments(audio_cache, segments):
    def epoch(config):
        return _epoch(make_segment_dataset(audio_cache, config, "all").dataset)

    same, other = epoch(SEGMENTS), epoch(dataclasses.replace(SEGMENTS, seed=1))
    for a, b in zip(segments[1], same, strict=True):
        assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not all(np.array_equal(a["audio"], b["audio"]) for a, b in zip(same, other, strict=True))


def test_repeat_runs_on_with_new_segments_of_the_same_shape(audio_cache, segments):
    pipeline = make_segment_dataset(audio_cache, SEGMENTS, "all", repeat=True)
    batches = _epoch(pipeline.dataset.take(2 * pipeline.batches_per_epoch + 1))
    assert all(pipeline.spec.matches(batch) for batch in batches)


def test_utterances_shorter_than_a_segment_are_dropped_and_counted(audio_cache):
    frames = FeatureCache.open(audio_cache).manifest.samples.frames
    length = int(np.median(frames))
    pipeline = make_segment_dataset(
        audio_cache, dataclasses.replace(SEGMENTS, segment_frames=length), "all"
    )
    assert pipeline.filtered == int((frames < length).sum()) > 0
    assert pipeline.num_samples == int((frames >= length).sum())
    assert len(_epoch(pipeline.dataset)) == pipeline.num_samples // DATA.batch_size
    too_long = dataclasses.replace(SEGMENTS, segment_frames=int(frames.max()) + 1)
    with pytest.raises(ConfigError, match=rf"0 utterance\(s\) of at least segment_frames=\d+ "
                                          rf"frames \({len(frames)} shorter\)"):  # fmt: skip
        make_segment_dataset(audio_cache, too_long, "all")


def test_an_opened_cache_is_a_source_too(audio_cache):
    pipeline = make_segment_dataset(FeatureCache.open(audio_cache), SEGMENTS, "all")
    assert pipeline.source == audio_cache
    assert pipeline.spec.matches(_epoch(pipeline.dataset.take(1))[0])


# --- doctor --segments -------------------------------------------------------------------


@pytest.fixture(scope="module")
def segments_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("doctor") / "voc.yaml"
    data = {"batch_size": 4, "segment_frames": 32, "trim_top_db": TRIM}
    path.write_text(yaml.safe_dump({"audio": {"preset": "xtts"}, "data": data}))
    return path


def test_doctor_measures_the_segment_pipeline(audio_cache, segments_config, capsys):
    args = ["doctor", str(audio_cache), "--segments", "--config", str(segments_config),
            "--batches", "8", "--device-ms", "5"]  # fmt: skip
    assert main([*args, "--json"]) == 0
    values = json.loads(capsys.readouterr().out)
    assert set(values) >= REPORT_KEYS | {"verdict"}
    samples = 32 * AUDIO.hop_length
    assert values["shapes"] == values["spec_shapes"] == [[4, 32, samples]]
    assert values["shapes_outside_spec"] == []
    assert values["python_ops"] == []
    assert values["samples_per_s"] > 0
    assert 0 < values["device_utilization"] <= 1
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "too short for a segment)" in out
    assert f"(batch, frames, samples): [[4, 32, {samples}]]" in out
    assert "python ops         none" in out
    assert "padding efficiency" not in out  # a segment's frames are all real
    assert "verdict" in out


def test_doctor_on_a_cache_without_waveforms_is_one_line_exit_2(cache, capsys):
    assert main(["doctor", str(cache), "--segments"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "built without waveforms" in err
    assert "--set data.keep_audio=true --overwrite" in err


# --- bad settings ------------------------------------------------------------------------


SHAPE = SegmentShape(batch_size=4, frames=8, samples=8 * HOP)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: DataConfig(segment_frames=0), r"^DataConfig\.segment_frames: expected an int >= 1, received: segment_frames=0$"),
        (lambda: DataConfig.from_dict({"keep_audio": "yes"}), r"keep_audio: expected true or false, received: keep_audio='yes'$"),
        (lambda: CutSegments(frames=0, hop_length=HOP, n_mels=M, seed=0), r"^Expected frames an int >= 1, received: frames=0$"),
        (lambda: CutSegments(frames=8, hop_length=HOP, n_mels=M, seed=None), r"^Expected seed an int, received: seed=None$"),
        (lambda: DropTooShort(min_frames=True), r"^Expected min_frames an int >= 1, received: min_frames=True$"),
        (lambda: BatchSegments(batch_size=0), r"^Expected batch_size an int >= 1, received: batch_size=0$"),
        (lambda: SegmentShape(batch_size=4, frames=8, samples=0), r"received: samples=0$"),
        (lambda: SegmentSpec(shapes=(SHAPE, SHAPE), n_mels=M, hop_length=HOP), r"^Expected shapes one SegmentShape in a tuple"),
        (lambda: SegmentSpec(shapes=(dataclasses.replace(SHAPE, samples=33),), n_mels=M, hop_length=HOP),
         r"^Expected samples = frames x hop_length = 32, received: samples=33$"),
    ],
)  # fmt: skip
def test_bad_settings_are_named(make, match):
    with pytest.raises(ConfigError, match=match):
        make()


def test_a_bad_split_is_named(audio_cache):
    with pytest.raises(ConfigError, match=r"received: split='test'"):
        make_segment_dataset(audio_cache, SEGMENTS, "test")
