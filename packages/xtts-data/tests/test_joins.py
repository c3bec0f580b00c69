"""`JoinUtterances` and `joined_lengths`: items of several utterances of one speaker, a
pause between, planned into static shapes before anything runs (`data.join`).

An utterance's values say where it comes from: utterance i has tokens `i + 2` then
`<eos>`, and every value of its mel is `100 * (i + 1)`, so each item is traced back to the
utterances it joins.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
from data_helpers import DATA

from xtts_data import ConfigError, Tokenizer, make_dataset, python_ops
from xtts_data.buckets import BatchShape
from xtts_data.joins import JoinUtterances, TokenJoin, joined_lengths

M = 3
SPACE, PAUSE, SILENCE = 99, 2, -4.0
FRAMES = [5, 7, 3, 9, 4, 6, 8, 2, 5, 5, 6, 3, 7, 4, 9, 2, 5, 8]
SPEAKERS = [0, 1, 0, 0, 1, 1, 0, 1, 0, 1, 2, 0, 1, 2, 0, 1, 2, 2]
SHAPES = (BatchShape(frames=16, text_len=12, batch_size=2),
          BatchShape(frames=40, text_len=24, batch_size=2))  # fmt: skip


def _tokens(i: int) -> list[int]:
    return [i + 2] * (i % 3 + 2) + [Tokenizer.EOS]


def _utterances() -> tf.data.Dataset:
    def rows():
        for i, (frames, speaker) in enumerate(zip(FRAMES, SPEAKERS, strict=True)):
            yield {"frames": np.int32(frames), "speaker": np.int32(speaker),
                   "split": np.int32(i), "tokens": np.asarray(_tokens(i), np.int32),
                   "mel": np.full([frames, M], 100.0 * (i + 1), np.float32)}  # fmt: skip

    signature = {"frames": tf.TensorSpec([], tf.int32), "speaker": tf.TensorSpec([], tf.int32),
                 "split": tf.TensorSpec([], tf.int32), "tokens": tf.TensorSpec([None], tf.int32),
                 "mel": tf.TensorSpec([None, M], tf.float32)}  # fmt: skip
    return tf.data.Dataset.from_generator(rows, output_signature=signature)


def _stage(shapes=SHAPES, *, most=3, seed=3, space=SPACE, start=0) -> JoinUtterances:
    return JoinUtterances(most=most, pause=PAUSE, silence=SILENCE, seed=seed, shapes=shapes,
                          join=TokenJoin(lead=0, space=space), start=start)  # fmt: skip


def _parts(item) -> list[int]:
    """The utterances an item joins, in order, checked value by value against them."""
    mel, tokens = item["mel"].numpy()[:, 0], item["tokens"].numpy().tolist()
    assert tokens[-1] == Tokenizer.EOS
    assert mel.shape[0] == int(item["frames"])
    parts, at = [], 0
    for text in _split(tokens[:-1], SPACE):
        i = text[0] - 2
        assert [*text, Tokenizer.EOS] == _tokens(i)
        if parts:  # a pause of silence before every utterance but the first
            np.testing.assert_array_equal(mel[at : at + PAUSE], SILENCE)
            at += PAUSE
        np.testing.assert_array_equal(mel[at : at + FRAMES[i]], 100.0 * (i + 1))
        at += FRAMES[i]
        parts.append(i)
    assert at == mel.shape[0]
    return parts


def _split(tokens: list[int], separator: int) -> list[list[int]]:
    out = [[]]
    for token in tokens:
        out.append([]) if token == separator else out[-1].append(token)
    return out


def test_items_join_utterances_of_one_speaker_with_a_pause_and_lose_none():
    items = list(_stage()(_utterances()))
    parts = [_parts(item) for item in items]
    assert sorted(i for joined in parts for i in joined) == list(range(len(FRAMES)))
    for item, joined in zip(items, parts, strict=True):
        assert {SPEAKERS[i] for i in joined} == {int(item["speaker"])}
        assert int(item["split"]) == joined[0]
        assert len(joined) <= 3
        assert any(int(item["frames"]) <= s.frames and len(item["tokens"]) <= s.text_len
                   for s in SHAPES)  # fmt: skip
    assert max(len(joined) for joined in parts) > 1


def test_an_item_is_joined_only_as_far_as_a_shape_holds_it():
    small = (BatchShape(frames=9, text_len=8, batch_size=2),)  # holds every one alone
    parts = [_parts(item) for item in _stage(small)(_utterances())]
    assert sorted(i for joined in parts for i in joined) == list(range(len(FRAMES)))
    for joined in parts:
        assert sum(FRAMES[i] for i in joined) + PAUSE * (len(joined) - 1) <= 9


def test_the_counts_are_drawn_from_the_seed_and_join_of_one_is_off():
    def counts(seed):
        return [len(_parts(item)) for item in _stage(seed=seed)(_utterances())]

    assert counts(3) == counts(3)
    assert len({tuple(counts(seed)) for seed in range(4)}) > 1
    ds = _utterances()
    assert _stage(most=1)(ds) is ds


def test_windows_before_the_start_stay_single_and_those_after_join_as_without_it():
    start = 9  # stream positions 0..8 are read before joining begins
    late = [_parts(item) for item in _stage(start=start)(_utterances())]
    plain = [_parts(item) for item in _stage()(_utterances())]
    assert sorted(i for joined in late for i in joined) == list(range(len(FRAMES)))
    assert all(len(joined) == 1 for joined in late if joined[0] < start)
    # a window's draw depends on its stream position alone: from the start on, the same joins
    assert ({tuple(j) for j in late if len(j) > 1}
            == {tuple(j) for j in plain if len(j) > 1 and j[0] >= start} != set())  # fmt: skip


def test_without_a_space_in_the_vocabulary_the_texts_meet_directly():
    (item, *_) = [i for i in _stage(space=None, seed=1)(_utterances()) if len(i["tokens"]) > 8]
    assert SPACE not in item["tokens"].numpy()


@pytest.mark.parametrize(("most", "pause"), [(0, 2), (2, -1), (2.5, 2)])
def test_bad_settings_are_refused(most, pause):
    with pytest.raises(ConfigError, match=r"Expected (most|pause) an int"):
        JoinUtterances(most=most, pause=pause, silence=0.0, seed=0, shapes=SHAPES,
                       join=TokenJoin(lead=0, space=None))  # fmt: skip


@pytest.mark.parametrize("join", [TokenJoin(lead=0, space=5), TokenJoin(lead=1, space=None)])
def test_joined_lengths_keep_every_utterance_and_add_the_pauses(join):
    frames, tokens, speakers = np.asarray(FRAMES), np.asarray(FRAMES) + 2, np.asarray(SPEAKERS)
    out_frames, out_tokens = joined_lengths(frames, tokens, speakers, most=3, pause=PAUSE,
                                            join=join, seed=0)  # fmt: skip
    joins = len(FRAMES) - len(out_frames)  # each join makes two items one
    assert joins > 0
    assert out_frames.sum() == frames.sum() + joins * PAUSE
    assert out_tokens.sum() == tokens.sum() + joins * join.change
    assert out_frames.max() > frames.max()
    again = joined_lengths(frames, tokens, speakers, most=3, pause=PAUSE, join=join, seed=0)
    np.testing.assert_array_equal(again[0], out_frames)


def test_make_dataset_plans_shapes_for_the_joined_items(cache):
    config = dataclasses.replace(DATA, join=3, val_fraction=0.0)
    alone = make_dataset(cache, DATA, "train")
    joined = make_dataset(cache, config, "train")
    assert python_ops(joined.dataset) == []
    assert joined.spec.shapes[-1].frames > alone.spec.shapes[-1].frames
    longest = max(s.frames for s in alone.spec.shapes)
    seen = 0
    for batch in joined.dataset:
        assert joined.spec.matches(batch) is not None
        seen = max(seen, int(batch["mel_lengths"].numpy().max()))
    assert seen > longest  # some item is longer than any clip
    val = make_dataset(cache, dataclasses.replace(config, val_fraction=0.3), "val")
    single = make_dataset(cache, dataclasses.replace(DATA, val_fraction=0.3), "val")
    assert val.spec == single.spec  # validation items stay single


def test_a_curriculum_plans_the_joined_shapes_and_keeps_its_first_epochs_single(cache):
    config = dataclasses.replace(DATA, join=3, val_fraction=0.0, join_from_epoch=2)
    joined = make_dataset(cache, dataclasses.replace(config, join_from_epoch=0), "train")
    later = make_dataset(cache, config, "train")  # one epoch: all before joining begins
    assert later.spec == joined.spec  # no new shape when joining begins
    longest = max(s.frames for s in make_dataset(cache, DATA, "train").spec.shapes)
    assert max(int(b["mel_lengths"].numpy().max()) for b in later.dataset) <= longest


@pytest.mark.parametrize(("key", "value"), [("join", 0), ("join_pause", -0.1), ("join_pause", 3),
                                            ("join_from_epoch", -1), ("join_from_epoch", 1.5)])  # fmt: skip
def test_bad_join_settings_are_config_errors(key, value):
    with pytest.raises(ConfigError, match=key):
        dataclasses.replace(DATA, **{"join": 2, key: value})


def test_a_curriculum_without_joins_is_refused():
    with pytest.raises(ConfigError, match=r"join_from_epoch.*set join > 1"):
        dataclasses.replace(DATA, join=1, join_from_epoch=3)
