"""`make_dataset`: static shapes from the spec, no Python ops, right contents."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from data_helpers import AUDIO, DATA, read_records

from xtts_audio import load_wav, mel_features
from xtts_data import (
    CacheError,
    ConfigError,
    CorpusError,
    FeatureCache,
    is_validation,
    make_dataset,
    prepare,
    python_ops,
    start_dispatcher,
    start_worker,
    write_demo_corpus,
)
from xtts_data import pipeline as pipeline_module
from xtts_data._audio_io import load_audio

FIXED = dataclasses.replace(DATA, policy="fixed")


def _epoch(pipeline) -> list[dict[str, np.ndarray]]:
    return [{k: v.numpy() for k, v in batch.items()} for batch in pipeline.dataset]


@pytest.fixture(scope="module")
def records(cache):
    return read_records(cache)


@pytest.fixture(scope="module")
def by_tokens(records):
    return {tuple(r["tokens"]): (uid, r) for uid, r in records.items()}


@pytest.fixture(scope="module", params=["buckets", "fixed"])
def epoch(request, cache):
    pipeline = make_dataset(cache, DATA if request.param == "buckets" else FIXED, "all")
    return pipeline, _epoch(pipeline)


def test_no_python_ops_in_the_graph(epoch):
    assert python_ops(epoch[0].dataset) == []


def test_the_pipelines_functions_are_traced_without_autograph(cache, monkeypatch):
    # AutoGraph converts a function by running its calls through `converted_call`; none of
    # the pipeline's functions (joins, voice warp and a repeat included) goes by it.
    # (TensorFlow's own, such as TFRecordDataset's file reader built inside one, may: they
    # are called unconverted.)
    from tensorflow.python.autograph.impl import api

    converted = []

    def counted(*args, **kwargs):
        if (getattr(args[0], "__module__", None) or "").startswith("xtts_"):
            converted.append(args[0].__qualname__)
        return convert(*args, **kwargs)

    convert = api.converted_call
    monkeypatch.setattr(api, "converted_call", counted)
    config = dataclasses.replace(DATA, join=2, voice_warp=0.1)
    pipeline = make_dataset(cache, config, "train", repeat=True)
    next(iter(pipeline.dataset))
    assert converted == []


def test_every_batch_has_a_shape_of_the_spec(epoch):
    pipeline, batches = epoch
    assert len(pipeline.spec.shapes) <= (DATA.num_buckets if pipeline.spec.shapes[0] else 1)
    for signature in pipeline.spec.signatures:
        assert all(spec.shape.is_fully_defined() for spec in signature.values())
    for batch in batches:
        assert pipeline.spec.matches(batch) is not None, {k: v.shape for k, v in batch.items()}
    assert len(batches) == pipeline.batches_per_epoch


def test_fixed_policy_pads_everything_to_one_shape(cache):
    pipeline = make_dataset(cache, FIXED, "all")
    (shape,) = pipeline.spec.shapes
    frames = FeatureCache.open(cache).manifest.samples.frames
    assert shape.frames == DATA.round_up(int(frames.max()))
    assert shape.batch_size == DATA.batch_size


def test_buckets_pad_less_than_fixed(cache):
    def measured(pipeline):
        batches = _epoch(pipeline)
        real = sum(b["mel_lengths"].sum() for b in batches)
        return real / sum(b["mel_mask"].size for b in batches)

    buckets, fixed = make_dataset(cache, DATA, "all"), make_dataset(cache, FIXED, "all")
    assert measured(buckets) > measured(fixed) + 0.1
    assert buckets.padding_efficiency > fixed.padding_efficiency
    budget = DATA.batch_size * buckets.spec.shapes[-1].frames
    for shape in buckets.spec.shapes:  # batch x frames about constant: the frame budget
        assert shape.batch_size == budget // shape.frames


def test_batch_contents_match_the_cache(epoch, by_tokens):
    _, batches = epoch
    for batch in batches:
        for i, length in enumerate(batch["mel_lengths"]):
            tokens = batch["tokens"][i, : batch["token_lengths"][i]]
            _, record = by_tokens[tuple(tokens)]
            np.testing.assert_array_equal(batch["mel"][i, :length], record["mel"])
            assert not batch["mel"][i, length:].any()
            assert not batch["tokens"][i, len(tokens) :].any()
            assert batch["speaker"][i] == record["speaker"]
            np.testing.assert_array_equal(
                batch["mel_mask"][i], np.arange(batch["mel"].shape[1]) < length
            )
            np.testing.assert_array_equal(
                batch["stop_targets"][i], np.arange(batch["mel"].shape[1]) >= length - 1
            )
            np.testing.assert_array_equal(
                batch["token_mask"][i], np.arange(batch["tokens"].shape[1]) < len(tokens)
            )


def _source_of(crop: np.ndarray, records: dict) -> set[str]:
    """Ids of the utterances whose mel contains `crop` as consecutive frames."""
    found = set()
    for uid, record in records.items():
        mel = record["mel"]
        for start in range(len(mel) - len(crop) + 1):
            if np.array_equal(mel[start : start + len(crop)], crop):
                found.add(uid)
                break
    return found


def test_conditioning_mel_is_a_crop_of_another_utterance_of_the_speaker(epoch, records, by_tokens):
    _, batches = epoch
    rows = others = 0
    for batch in batches:
        for i in range(len(batch["mel_lengths"])):
            uid, record = by_tokens[tuple(batch["tokens"][i, : batch["token_lengths"][i]])]
            n = batch["cond_lengths"][i]
            assert n == min(DATA.cond_frames, max(1, n))
            assert not batch["cond_mel"][i, n:].any()
            sources = _source_of(batch["cond_mel"][i, :n], records)
            assert sources, "conditioning crop found in no utterance"
            assert all(records[s]["speaker"] == record["speaker"] for s in sources)
            rows += 1
            others += uid not in sources
    assert others == rows  # in-batch partner or the bank: never the row itself


def test_voice_warp_scales_each_train_row_and_its_clip_by_one_factor(cache):
    from xtts_audio import mel_warp_positions, warp_mel
    from xtts_data.stages import warp_factors

    plain = dataclasses.replace(DATA, deterministic=True, val_fraction=0.3)
    warped = dataclasses.replace(plain, voice_warp=0.25)
    pipeline = make_dataset(cache, warped, "train")
    assert python_ops(pipeline.dataset) == []
    table = mel_warp_positions(AUDIO, warp_factors(0.25))
    drawn, first = set(), _epoch(pipeline)
    for before, after in zip(_epoch(make_dataset(cache, plain, "train")), first, strict=True):
        np.testing.assert_array_equal(before["tokens"], after["tokens"])  # the same rows
        for i in range(len(before["mel"])):
            for k, positions in enumerate(table):
                row = warp_mel(before["mel"][i : i + 1], positions[None]).numpy()[0]
                if np.allclose(row, after["mel"][i], atol=1e-5):
                    clip = warp_mel(before["cond_mel"][i : i + 1], positions[None]).numpy()[0]
                    np.testing.assert_allclose(clip, after["cond_mel"][i], atol=1e-5)
                    drawn.add(k)
                    break
            else:
                pytest.fail(f"row {i}: no factor of the table gives its warped mel")
    assert len(drawn) > 3  # each row its own draw
    again = _epoch(make_dataset(cache, warped, "train"))[0]  # the seed's draws
    np.testing.assert_array_equal(again["mel"], first[0]["mel"])
    for before, after in zip(_epoch(make_dataset(cache, plain, "val")),
                             _epoch(make_dataset(cache, warped, "val")), strict=True):  # fmt: skip
        np.testing.assert_array_equal(before["mel"], after["mel"])  # validation: as it is


def test_split_is_deterministic_and_disjoint(cache):
    ids = FeatureCache.open(cache).manifest.samples.id.astype(str)
    held_out = is_validation(ids, 0.3).numpy()
    assert held_out.any()
    assert not held_out.all()
    np.testing.assert_array_equal(held_out, is_validation(ids, 0.3).numpy())
    config = dataclasses.replace(DATA, val_fraction=0.3)
    train, val = make_dataset(cache, config, "train"), make_dataset(cache, config, "val")
    assert (train.num_samples, val.num_samples) == ((~held_out).sum(), held_out.sum())


def test_val_split_yields_exactly_its_utterances(cache, records, by_tokens):
    config = dataclasses.replace(DATA, val_fraction=0.3, policy="fixed", batch_size=1)
    ids = {
        by_tokens[tuple(b["tokens"][0, : b["token_lengths"][0]])][0]
        for b in _epoch(make_dataset(cache, config, "val"))
    }
    expected = {uid for uid in records if is_validation(uid, 0.3).numpy()}
    assert ids == expected


def test_over_long_utterances_are_filtered_and_counted(cache):
    frames = FeatureCache.open(cache).manifest.samples.frames
    limit = int(np.median(frames))
    config = dataclasses.replace(DATA, max_frames=limit)
    pipeline = make_dataset(cache, config, "all")
    assert pipeline.filtered == int((frames > limit).sum())
    assert pipeline.spec.shapes[-1].frames <= limit
    assert all(b["mel_lengths"].max() <= limit for b in _epoch(pipeline))


def test_seeded_deterministic_pipeline_repeats_itself(cache):
    config = dataclasses.replace(DATA, deterministic=True, seed=3)
    first, second = (_epoch(make_dataset(cache, config)) for _ in range(2))
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a["mel"], b["mel"])
        np.testing.assert_array_equal(a["cond_mel"], b["cond_mel"])


def test_a_resumed_stream_sees_the_batches_of_an_uninterrupted_one(cache):
    # How `fit` resumes: the same seeded stream, the batches before the checkpoint's step
    # drawn again and dropped.
    config = dataclasses.replace(DATA, deterministic=True, seed=3)
    stream = lambda skip: iter(make_dataset(cache, config, repeat=True).dataset.skip(skip))  # noqa: E731
    straight, resumed = stream(0), stream(7)
    whole = [next(straight) for _ in range(12)]
    for expected in whole[7:]:
        batch = next(resumed)
        for key in ("tokens", "mel", "cond_mel"):
            np.testing.assert_array_equal(batch[key], expected[key])


def test_bad_split_and_empty_result_are_errors(cache):
    with pytest.raises(ConfigError, match="split"):
        make_dataset(cache, DATA, "test")
    with pytest.raises(ConfigError, match="no utterances left"):
        make_dataset(cache, dataclasses.replace(DATA, max_frames=1), "all")


def test_an_opened_cache_is_checked_against_the_settings_passed(cache):
    # As `FeatureCache.open(path, audio=..., data=...)` checks them: never silently
    # features of another recipe.
    opened = FeatureCache.open(cache)
    other_audio = AUDIO.__class__.from_preset("xtts", n_mels=64)
    with pytest.raises(CacheError, match=r"audio\.n_mels: cache has 80, requested 64"):
        make_dataset(opened, DATA, "all", audio=other_audio)
    other_text = dataclasses.replace(DATA, text=dataclasses.replace(DATA.text, lowercase=False))
    with pytest.raises(CacheError, match=r"data\.text\.lowercase: cache has True, requested False"):
        make_dataset(opened, other_text, "all")
    assert make_dataset(opened, DATA, "all", audio=AUDIO).num_samples > 0  # the same: fine


@pytest.fixture(scope="module")
def wav_corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("wav") / "corpus"
    write_demo_corpus(root, n=16, min_seconds=0.4, max_seconds=1.2, seed=5)
    return root


@pytest.mark.parametrize("trim", [None, 40.0])
def test_on_the_fly_mode_computes_the_same_features(wav_corpus, trim):
    # Trimmed as `prepare` trims (the header lengths only bound the trimmed ones).
    config = dataclasses.replace(FIXED, trim_top_db=trim)
    pipeline = make_dataset(wav_corpus, config, "all", audio=AUDIO)
    assert python_ops(pipeline.dataset) == []
    expected, trimmed = {}, 0
    for wav in sorted((wav_corpus / "wavs").glob("*.wav")):
        mel = mel_features(load_audio(wav, AUDIO, trim_top_db=trim), AUDIO).numpy()
        trimmed += len(mel) < len(mel_features(load_wav(str(wav))[0][:, 0], AUDIO))
        expected[len(mel)] = [*expected.get(len(mel), []), mel]
    assert (trimmed > 0) == (trim is not None)  # the demo clips carry silence to trim
    batches = _epoch(pipeline)
    assert len(batches) == pipeline.batches_per_epoch == 16 // DATA.batch_size
    for batch in batches:
        assert pipeline.spec.matches(batch) is not None
        for i, length in enumerate(batch["mel_lengths"]):
            row = batch["mel"][i, :length]
            assert any(np.allclose(row, m, atol=1e-4) for m in expected[length])


def test_on_the_fly_mode_rejects_non_wav_audio(corpus):
    with pytest.raises(CorpusError, match="xtts-data prepare"):
        make_dataset(corpus, DATA, "all", audio=AUDIO)


def test_a_corpus_without_audio_settings_is_an_error(wav_corpus):
    with pytest.raises(ConfigError, match="audio=MelConfig"):
        make_dataset(wav_corpus, DATA)


def test_tf_data_service_round_trip(cache):
    dispatcher = start_dispatcher()
    workers = [start_worker(dispatcher.target) for _ in range(2)]
    config = dataclasses.replace(DATA, service=dispatcher.target)
    pipeline = make_dataset(cache, config, "all")
    batches = _epoch(pipeline)
    assert len(batches) == pipeline.batches_per_epoch  # each utterance once, not once per worker
    assert all(pipeline.spec.matches(b) is not None for b in batches)
    assert len(workers) == 2


def test_repeat_carries_partial_batches_across_epochs(cache):
    pipeline = make_dataset(cache, DATA, "all", repeat=True)
    wanted = 3 * pipeline.batches_per_epoch + 2  # more than whole epochs can give
    batches = [{k: v.numpy() for k, v in b.items()} for b in pipeline.dataset.take(wanted)]
    assert len(batches) == wanted
    assert all(pipeline.spec.matches(b) is not None for b in batches)


def test_keeping_features_in_memory_gives_the_same_batches(cache):
    config = dataclasses.replace(DATA, deterministic=True, seed=7)
    kept = make_dataset(cache, dataclasses.replace(config, keep_in_memory=True))
    read = make_dataset(cache, dataclasses.replace(config, keep_in_memory=False))
    assert kept.in_memory
    assert not read.in_memory
    assert make_dataset(cache, DATA).in_memory  # automatic: a small cache fits
    for a, b in zip(_epoch(kept), _epoch(read), strict=True):
        np.testing.assert_array_equal(a["mel"], b["mel"])


@pytest.mark.parametrize(("ram", "kept"), [(2**40, True), (2**20, False)])
def test_automatic_keep_in_memory_uses_a_quarter_of_ram(cache, monkeypatch, ram, kept):
    monkeypatch.setattr(pipeline_module, "physical_memory", lambda: ram)
    assert make_dataset(cache, DATA).in_memory is kept


def test_too_few_utterances_for_one_batch_is_an_error(cache):
    with pytest.raises(ConfigError, match="too few for one complete batch"):
        make_dataset(cache, dataclasses.replace(DATA, batch_size=400), "all")


def test_single_speaker_conditioning_always_uses_another_utterance(wav_corpus, tmp_path):
    cache = tmp_path / "cache"
    prepare(wav_corpus, cache, audio=AUDIO, data=DATA)
    records = read_records(cache)
    by_text = {tuple(r["tokens"]): uid for uid, r in records.items()}
    for batch in _epoch(make_dataset(cache, DATA, "all")):
        for i, n in enumerate(batch["cond_lengths"]):
            uid = by_text[tuple(batch["tokens"][i, : batch["token_lengths"][i]])]
            sources = _source_of(batch["cond_mel"][i, :n], records)
            assert sources
            assert uid not in sources


def test_prefetch_to_device(cache):
    config = dataclasses.replace(DATA, prefetch_to_device="/cpu:0")
    pipeline = make_dataset(cache, config, "all")
    batches = _epoch(pipeline)
    assert len(batches) == pipeline.batches_per_epoch
    assert all(pipeline.spec.matches(b) is not None for b in batches)


def test_rows_alone_in_their_batch_condition_on_a_bank_reference(cache, records, by_tokens):
    config = dataclasses.replace(DATA, policy="fixed", batch_size=1, refs_per_speaker=2)
    for batch in _epoch(make_dataset(cache, config, "all"))[:12]:
        uid, record = by_tokens[tuple(batch["tokens"][0, : batch["token_lengths"][0]])]
        sources = _source_of(batch["cond_mel"][0, : batch["cond_lengths"][0]], records)
        assert sources
        assert uid not in sources
        assert all(records[s]["speaker"] == record["speaker"] for s in sources)
