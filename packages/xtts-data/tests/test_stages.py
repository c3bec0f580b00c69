"""Each `ds -> ds` stage of `make_dataset`, alone, on tiny synthetic utterances.

An utterance's values say where they come from: its tokens are all `row + 1`, and frame t
of its mel is `1000 * (row + 1) + t`, so a batch row or a conditioning crop is traced back
to the utterance (and frames) it was cut from.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf

from xtts_data import _references, is_validation, record
from xtts_data.buckets import BatchShape
from xtts_data.errors import ConfigError
from xtts_data.pipeline import DatasetSpec
from xtts_data.stages import (
    WARP_FACTORS,
    BucketBatches,
    Chain,
    Distribute,
    DropTooLong,
    FinishBatches,
    KeepInMemory,
    Prefetch,
    Repeat,
    SelectSplit,
    Shuffle,
    WarpVoices,
    split_threshold,
    warp_factors,
)

M = 3  # mel channels


def _utterances(frames, tokens=None, speakers=None, ids=None) -> tf.data.Dataset:
    """Utterances as `_source` gives them: `frames`, `speaker`, `split` int32 scalars,
    `tokens` int32 [T], `mel` float32 [F, M]."""
    n = len(frames)
    tokens = tokens or [1 + i % 3 for i in range(n)]
    speakers = speakers or [0] * n
    ids = ids or [f"utt{i}" for i in range(n)]
    flat_mels = [_mel(i, f).ravel() for i, f in enumerate(frames)]  # ragged rows, reshaped below
    ds = tf.data.Dataset.from_tensor_slices(
        {
            "frames": np.asarray(frames, np.int32),
            "speaker": np.asarray(speakers, np.int32),
            "split": record.split_bucket(ids),
            "tokens": tf.ragged.constant([[i + 1] * t for i, t in enumerate(tokens)], tf.int32),
            "mel": tf.ragged.constant(flat_mels, tf.float32),
        }
    )
    return ds.map(lambda e: {**e, "mel": tf.reshape(e["mel"], [-1, M])})


def _mel(row: int, frames: int) -> np.ndarray:
    """float32 [frames, M]: frame t of utterance `row` holds 1000 * (row + 1) + t."""
    return np.repeat(1000.0 * (row + 1) + np.arange(frames, dtype=np.float32)[:, None], M, 1)


def _rows(ds: tf.data.Dataset) -> list[int]:
    """The utterance each element of an unbatched dataset is (from its tokens)."""
    return [int(e["tokens"][0]) - 1 for e in ds]


def _numpy(ds: tf.data.Dataset) -> list[dict[str, np.ndarray]]:
    return [{k: v.numpy() for k, v in e.items()} for e in ds]


def test_chain_applies_its_stages_in_order():
    def add(ds):
        return ds.map(lambda x: x + 1)

    def double(ds):
        return ds.map(lambda x: x * 2)

    ds = tf.data.Dataset.range(3)
    assert list(Chain((add, double))(ds).as_numpy_iterator()) == [2, 4, 6]
    assert list(Chain((double, add))(ds).as_numpy_iterator()) == [1, 3, 5]
    assert Chain(())(ds) is ds


@pytest.mark.parametrize("split", ["train", "val", "all"])
def test_select_split_keeps_exactly_the_ids_of_the_split(split):
    ids = [f"speaker{i % 3}_{i:03d}" for i in range(60)]
    held_out = is_validation(ids, 0.3).numpy()
    assert 0 < held_out.sum() < len(ids)  # both splits have utterances to tell apart
    expected = {"train": ~held_out, "val": held_out, "all": np.ones(len(ids), bool)}[split]
    kept = _rows(SelectSplit(split=split, val_fraction=0.3)(_utterances([2] * 60, ids=ids)))
    assert kept == np.flatnonzero(expected).tolist()  # exactly those, in order


@pytest.mark.parametrize(("split", "kept"), [("val", [0, 1]), ("train", [2, 3, 4])])
def test_select_split_cuts_at_the_threshold_bucket(split, kept):
    cut = split_threshold(0.3)
    buckets = [0, cut - 1, cut, cut + 1, record.SPLIT_BUCKETS - 1]
    ds = tf.data.Dataset.from_tensor_slices({"split": np.asarray(buckets, np.int32)})
    out = [int(e["split"]) for e in SelectSplit(split=split, val_fraction=0.3)(ds)]
    assert out == [buckets[i] for i in kept]


def test_select_split_rejects_an_unknown_split():
    with pytest.raises(ConfigError, match=r"Expected split .* received: split='test'"):
        SelectSplit(split="test", val_fraction=0.1)


@pytest.mark.parametrize(("max_frames", "max_text_len"), [(9, 6), (8, 7), (12, 1), (20, 20)])
def test_drop_too_long_drops_exactly_the_rows_over_either_limit(max_frames, max_text_len):
    frames, tokens = [3, 8, 9, 12, 5, 1], [2, 6, 3, 1, 7, 6]
    ds = _utterances(frames, tokens)
    kept = _rows(DropTooLong(max_frames=max_frames, max_text_len=max_text_len)(ds))
    expected = [i for i, (f, t) in enumerate(zip(frames, tokens, strict=True))
                if f <= max_frames and t <= max_text_len]  # fmt: skip
    assert kept == expected


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, None])
def test_drop_too_long_rejects_a_limit_that_is_not_a_positive_int(bad):
    expected = rf"Expected max_frames an int >= 1, received: max_frames={re.escape(repr(bad))}"
    with pytest.raises(ConfigError, match=expected):
        DropTooLong(max_frames=bad, max_text_len=4)


@pytest.mark.parametrize(
    "stage",
    [KeepInMemory(enabled=False), Repeat(enabled=False), Shuffle(buffer=0, seed=1),
     Distribute(service=None)],
    ids=lambda stage: type(stage).__name__,
)  # fmt: skip
def test_a_stage_switched_off_returns_its_input(stage):
    ds = tf.data.Dataset.range(4)
    assert stage(ds) is ds


def test_keep_in_memory_hands_out_the_first_epoch_again():
    # A seeded shuffle reshuffles every epoch: upstream of the stage the epochs differ.
    source = tf.data.Dataset.range(20).shuffle(20, seed=4)
    read, kept = source, KeepInMemory(enabled=True)(source)
    assert list(read.as_numpy_iterator()) != list(read.as_numpy_iterator())
    first = list(kept.as_numpy_iterator())
    assert sorted(first) == list(range(20))
    assert list(kept.as_numpy_iterator()) == first


def test_repeat_goes_on_past_the_epoch():
    repeated = Repeat(enabled=True)(tf.data.Dataset.range(3))
    assert list(repeated.take(8).as_numpy_iterator()) == [0, 1, 2, 0, 1, 2, 0, 1]


def test_shuffle_permutes_the_elements_the_same_way_for_a_seed():
    def order(seed):
        return list(Shuffle(buffer=50, seed=seed)(tf.data.Dataset.range(50)).as_numpy_iterator())

    assert sorted(order(3)) == list(range(50))
    assert order(3) != list(range(50))
    assert order(3) == order(3)


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_shuffle_rejects_a_bad_buffer(bad):
    expected = rf"Expected buffer an int >= 0, received: buffer={re.escape(repr(bad))}"
    with pytest.raises(ConfigError, match=expected):
        Shuffle(buffer=bad)


@pytest.mark.parametrize(
    "shapes",
    [
        (BatchShape(frames=16, text_len=4, batch_size=3),),
        (BatchShape(frames=6, text_len=3, batch_size=2), BatchShape(frames=10, text_len=4, batch_size=3),
         BatchShape(frames=16, text_len=5, batch_size=2)),
    ],
    ids=["one shape", "three buckets"],
)  # fmt: skip
def test_bucket_batches_emits_only_the_shapes_and_pads_each_row_into_its_bucket(shapes):
    frames = [1, 16, 5, 6, 7, 12, 10, 3, 15, 9, 2, 11, 8, 14, 4, 13, 6, 10]
    tokens = [1 + i % 3 for i in range(len(frames))]  # within every shape's text_len
    batches = _numpy(BucketBatches(shapes=shapes, n_mels=M)(_utterances(frames, tokens)))
    bounds = [0] + [s.frames for s in shapes]
    seen = []
    for batch in batches:
        (shape,) = [s for s in shapes if s.key == batch["tokens"].shape + batch["mel"].shape[1:2]]
        assert batch["mel"].shape == (shape.batch_size, shape.frames, M)
        for key in ("frames", "speaker", "split"):
            assert batch[key].shape == (shape.batch_size,)
        for i, n in enumerate(batch["frames"]):
            row = int(batch["tokens"][i, 0]) - 1
            seen.append(row)
            assert bounds[shapes.index(shape)] < n <= shape.frames  # the first shape that fits
            np.testing.assert_array_equal(batch["mel"][i, :n], _mel(row, frames[row]))
            assert not batch["mel"][i, n:].any()
            padding = [0] * (shape.text_len - tokens[row])
            assert batch["tokens"][i].tolist() == [row + 1] * tokens[row] + padding
    counts = np.bincount(np.searchsorted(bounds[1:], frames), minlength=len(shapes))
    assert len(batches) == sum(c // s.batch_size for c, s in zip(counts, shapes, strict=True))
    assert len(seen) == len(set(seen))  # every row once; each bucket drops its remainder only


@pytest.mark.parametrize(
    "frames",
    [[], [16, 8], [8, 8]],
    ids=["none", "decreasing", "repeated"],
)
def test_bucket_batches_rejects_shapes_out_of_order(frames):
    shapes = tuple(BatchShape(frames=f, text_len=4, batch_size=2) for f in frames)
    expected = rf"increasing frames, received: frames={re.escape(str(frames))}"
    with pytest.raises(ConfigError, match=expected):
        BucketBatches(shapes=shapes, n_mels=M)


C = 5  # conditioning frames
# Two utterances each; in batches of 4, speakers 0 and 3 find a partner, 1 and 2 do not.
SPEAKERS = [0, 0, 1, 2, 1, 3, 2, 3]


def _bank(frames: list[int]) -> _references.Bank:
    """Centre crops of every utterance, as `make_dataset` builds from the split."""
    ids = [f"utt{i}" for i in range(len(frames))]
    speakers = np.asarray(SPEAKERS)
    picked = _references.choose_references(speakers, np.zeros(len(frames), int), per_speaker=4)
    keys = _references.identity_keys(
        record.split_bucket(np.asarray(ids)[picked]).numpy(), np.asarray(frames)[picked]
    )
    mels = [_mel(int(i), frames[i]) for i in picked]
    return _references.make_bank(mels, speakers[picked], keys, 4, cond_frames=C, n_mels=M)


@pytest.mark.parametrize("batch_size", [4, 1], ids=["partners in the batch", "bank only"])
def test_finish_batches_adds_the_trainer_fields_and_crops_of_another_utterance(batch_size):
    frames, tokens = [9, 3, 12, 7, 8, 4, 11, 6], [3, 1, 4, 2, 2, 3, 1, 4]
    shape = BatchShape(frames=12, text_len=4, batch_size=batch_size)
    batched = BucketBatches(shapes=(shape,), n_mels=M)(_utterances(frames, tokens, SPEAKERS))
    finished = FinishBatches(bank=_bank(frames), cond_frames=C, seed=7, deterministic=True)
    spec = DatasetSpec((shape,), M, C)
    batches = _numpy(finished(batched))
    assert len(batches) == 8 // batch_size
    for batch in batches:
        assert spec.matches(batch) == shape
        rows = (batch["tokens"][:, 0] - 1).tolist()
        np.testing.assert_array_equal(batch["token_lengths"], [tokens[r] for r in rows])
        np.testing.assert_array_equal(batch["mel_lengths"], [frames[r] for r in rows])
        steps, lengths = np.arange(shape.frames), batch["mel_lengths"][:, None]
        np.testing.assert_array_equal(batch["mel_mask"], steps < lengths)
        np.testing.assert_array_equal(batch["stop_targets"], steps >= lengths - 1)
        np.testing.assert_array_equal(
            batch["token_mask"], np.arange(4) < batch["token_lengths"][:, None]
        )
        for i, row in enumerate(rows):
            source, start = divmod(int(batch["cond_mel"][i, 0, 0]), 1000)
            source -= 1
            n = batch["cond_lengths"][i]
            assert source != row
            assert SPEAKERS[source] == SPEAKERS[row]
            assert n == min(C, frames[source])
            crop = _mel(source, frames[source])[start : start + n]  # consecutive frames
            np.testing.assert_array_equal(batch["cond_mel"][i, :n], crop)
            assert not batch["cond_mel"][i, n:].any()
            partner_in_batch = any(SPEAKERS[r] == SPEAKERS[row] for r in rows if r != row)
            assert (source in rows) == partner_in_batch  # the bank only without a partner


def test_finish_batches_is_reproducible_for_a_seed():
    frames = [9, 3, 12, 7, 8, 4, 11, 6]
    shape = BatchShape(frames=12, text_len=4, batch_size=4)
    batched = BucketBatches(shapes=(shape,), n_mels=M)(_utterances(frames, speakers=SPEAKERS))

    def crops(seed):
        stage = FinishBatches(bank=_bank(frames), cond_frames=C, seed=seed, deterministic=True)
        return [b["cond_mel"] for b in _numpy(stage(batched))]

    first = crops(11)
    for a, b in zip(first, crops(11), strict=True):
        np.testing.assert_array_equal(a, b)


def test_finish_batches_rejects_a_bank_of_other_crops():
    expected = r"cond_frames=8 .* received: bank\.mel\.shape=\(8, 5, 3\)"
    with pytest.raises(ConfigError, match=expected):
        FinishBatches(bank=_bank([9, 3, 12, 7, 8, 4, 11, 6]), cond_frames=8, seed=0)


def _warp_batches(warp: float, seed: int = 0):
    from xtts_audio import MelConfig

    rng = np.random.default_rng(0)
    batches = [{"mel": rng.normal(size=[4, 6, 80]).astype(np.float32),
                "cond_mel": rng.normal(size=[4, 5, 80]).astype(np.float32),
                "tokens": np.full([4, 3], i, np.int32)} for i in range(3)]  # fmt: skip
    ds = tf.data.Dataset.from_tensor_slices(
        {k: np.stack([b[k] for b in batches]) for k in batches[0]}
    )
    stage = WarpVoices(audio=MelConfig.from_preset("xtts"), warp=warp, seed=seed,
                       deterministic=True)  # fmt: skip
    return batches, [{k: v.numpy() for k, v in b.items()} for b in stage(ds)]


def test_warp_voices_scales_a_row_and_its_clip_by_one_drawn_factor():
    from xtts_audio import MelConfig, mel_warp_positions, warp_mel

    factors = warp_factors(0.25)
    assert len(factors) == WARP_FACTORS
    assert factors[0] == pytest.approx(0.8)
    assert factors[-1] == pytest.approx(1.25)
    np.testing.assert_allclose(np.diff(np.log(factors)), np.log(1.25) * 2 / (WARP_FACTORS - 1))
    table = mel_warp_positions(MelConfig.from_preset("xtts"), factors)
    before, after = _warp_batches(0.25)
    drawn = []
    for b, a in zip(before, after, strict=True):
        np.testing.assert_array_equal(b["tokens"], a["tokens"])  # other fields pass through
        for i in range(4):
            errors = [np.abs(warp_mel(b["mel"][i : i + 1], p[None])[0] - a["mel"][i]).max()
                      for p in table]  # fmt: skip
            k = int(np.argmin(errors))
            assert errors[k] < 1e-5
            clip = warp_mel(b["cond_mel"][i : i + 1], table[k][None])[0]
            np.testing.assert_allclose(clip, a["cond_mel"][i], atol=1e-5)  # the same factor
            drawn.append(k)
    assert len(set(drawn)) > 3
    _, again = _warp_batches(0.25)
    np.testing.assert_array_equal(again[2]["mel"], after[2]["mel"])  # the seed's draws
    _, other = _warp_batches(0.25, seed=1)
    assert not np.array_equal(other[2]["mel"], after[2]["mel"])


def test_warp_voices_of_zero_returns_its_input_and_bad_warps_are_refused():
    before, after = _warp_batches(0.0)
    for b, a in zip(before, after, strict=True):
        np.testing.assert_array_equal(b["mel"], a["mel"])
    with pytest.raises(ConfigError, match=r"Expected warp a number in \[0, 1\), received: warp=1"):
        WarpVoices(audio=None, warp=1, seed=0)


@pytest.mark.parametrize("device", [None, "/cpu:0"])
def test_prefetch_hands_out_the_same_elements(device):
    ds = tf.data.Dataset.range(6)
    assert list(Prefetch(batches=2, device=device)(ds).as_numpy_iterator()) == list(range(6))


def test_prefetch_rejects_a_depth_below_one():
    with pytest.raises(ConfigError, match=r"Expected batches an int >= 1, received: batches=0"):
        Prefetch(batches=0)
