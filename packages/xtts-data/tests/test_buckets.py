"""plan_shapes / assign: optimal buckets, fixed shapes, batch sizes and padding efficiency."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from xtts_data.buckets import BatchShape, assign, plan_shapes
from xtts_data.config import DataConfig
from xtts_data.errors import ConfigError


def padded(frames: np.ndarray, shapes: list[BatchShape]) -> int:
    """Total frames after padding each utterance to its bucket."""
    bounds = np.asarray([s.frames for s in shapes])
    return int(bounds[assign(frames, shapes)].sum())


def brute_force(frames: np.ndarray, k: int, pad: int) -> int:
    """Least padded total over every choice of <= k bounds from the rounded lengths."""
    rounded = -(-frames // pad) * pad
    values = np.unique(rounded)
    best = None
    for extra in range(k):  # the largest value is always a bound
        for chosen in itertools.combinations(values[:-1], extra):
            bounds = np.asarray([*chosen, values[-1]])
            total = int(bounds[np.searchsorted(bounds, rounded)].sum())
            best = total if best is None else min(best, total)
    return best


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", range(6))
def test_buckets_minimise_padding_like_brute_force(seed, k):
    rng = np.random.default_rng(seed)
    frames = rng.integers(10, 400, size=12)
    tokens = rng.integers(1, 80, size=12)
    shapes = plan_shapes(frames, tokens, DataConfig(num_buckets=k, pad_multiple=8))
    assert padded(frames, shapes) == brute_force(frames, k, pad=8)
    assert shapes[-1].frames == DataConfig(pad_multiple=8).round_up(int(frames.max()))


def test_buckets_never_exceed_the_unique_lengths():
    frames = np.array([40, 40, 37, 100, 97])  # rounded to 8: two values, 40 and 104
    shapes = plan_shapes(frames, np.array([3, 4, 5, 6, 7]), DataConfig(num_buckets=8))
    assert [s.frames for s in shapes] == [40, 104]


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, BatchShape(frames=104, text_len=24, batch_size=6)),
        ({"max_frames": 200}, BatchShape(frames=200, text_len=24, batch_size=6)),
        ({"max_text_len": 50}, BatchShape(frames=104, text_len=50, batch_size=6)),
        (
            {"max_frames": 120, "max_text_len": 30},
            BatchShape(frames=120, text_len=30, batch_size=6),
        ),
        ({"pad_multiple": 1}, BatchShape(frames=97, text_len=21, batch_size=6)),
    ],
)
def test_fixed_policy_is_one_shape_of_the_maxima(overrides, expected):
    config = DataConfig(policy="fixed", batch_size=6, num_buckets=4, **overrides)
    frames, tokens = np.array([30, 97, 64, 12]), np.array([5, 21, 9, 2])
    assert plan_shapes(frames, tokens, config) == [expected]


@pytest.mark.parametrize(
    ("budget", "multiple", "sizes"),
    [
        (1000, 1, [62, 25, 9]),
        (1000, 4, [60, 24, 8]),
        (2080, 8, [128, 48, 16]),
    ],
)
def test_batch_size_is_the_frame_budget_rounded_down(budget, multiple, sizes):
    config = DataConfig(
        num_buckets=3, frame_budget=budget, batch_multiple=multiple, batch_size=multiple
    )
    frames = np.array([16, 12, 40, 33, 100, 99])
    shapes = plan_shapes(frames, np.ones(6, np.int64), config)
    assert [s.frames for s in shapes] == [16, 40, 104]
    assert [s.batch_size for s in shapes] == sizes
    assert all(s.batch_size == budget // s.frames // multiple * multiple for s in shapes)


def test_default_budget_gives_the_longest_bucket_batch_size():
    config = DataConfig(num_buckets=3, batch_size=4)
    shapes = plan_shapes(np.array([16, 40, 100]), np.array([1, 2, 3]), config)
    assert [s.batch_size for s in shapes] == [4 * 104 // 16, 4 * 104 // 40, 4]


def test_batch_sizes_set_each_bucket_in_place_of_the_budget():
    config = DataConfig(num_buckets=3, frame_budget=2080, batch_sizes=[40, 9, 3])
    shapes = plan_shapes(np.array([16, 12, 40, 33, 100, 99]), np.ones(6, np.int64), config)
    assert [(s.frames, s.batch_size) for s in shapes] == [(16, 40), (40, 9), (104, 3)]
    assert config.batch_sizes == (40, 9, 3)  # a list from YAML is kept as a tuple
    with pytest.raises(ConfigError, match=r"one size per bucket \(3: frames \[16, 40, 104\]\), received: batch_sizes=\[40, 9\]"):  # fmt: skip
        plan_shapes(np.array([16, 40, 100]), np.ones(3, np.int64),
                    DataConfig(num_buckets=3, batch_sizes=[40, 9]))  # fmt: skip


@pytest.mark.parametrize(
    "overrides",
    [dict(batch_sizes=[4, 0]), dict(batch_sizes=[]), dict(batch_sizes=[3, 2.5]),
     dict(batch_sizes=[4, 3], batch_multiple=2, batch_size=32),
     dict(batch_sizes=[4], policy="fixed")],
)  # fmt: skip
def test_bad_batch_sizes_are_refused(overrides):
    with pytest.raises(ConfigError, match="batch_sizes"):
        DataConfig(**overrides)


def test_configured_max_frames_is_kept_exactly_for_the_longest_bucket():
    config = DataConfig(num_buckets=3, batch_size=32, max_frames=99)
    shapes = plan_shapes(np.array([99, 50, 20]), np.array([5, 5, 5]), config)
    assert shapes[-1] == BatchShape(frames=99, text_len=8, batch_size=32)


@pytest.mark.parametrize(
    ("budget", "multiple", "bound", "least"),
    [
        (100, 1, 104, 104),
        (500, 8, 104, 832),
        (15, 1, 16, 16),
    ],
)
def test_budget_too_small_for_one_batch_raises(budget, multiple, bound, least):
    config = DataConfig(
        num_buckets=3, frame_budget=budget, batch_multiple=multiple, batch_size=multiple
    )
    with pytest.raises(
        ConfigError,
        match=rf"^DataConfig\.frame_budget: expected at least {least} frames \(one batch of the "
        rf"{bound}-frame bucket\), received: frame_budget={budget}$",
    ):
        plan_shapes(np.array([16, 40, 100]), np.array([1, 2, 3]), config)


def test_no_utterances_raises():
    with pytest.raises(ConfigError, match="at least one utterance"):
        plan_shapes(np.array([], np.int64), np.array([], np.int64), DataConfig())


@pytest.mark.parametrize("k", [1, 2, 5, 8])
@pytest.mark.parametrize("seed", range(3))
def test_every_utterance_fits_its_bucket(seed, k):
    rng = np.random.default_rng(seed)
    frames = rng.integers(5, 900, size=300)
    tokens = frames // 6 + rng.integers(0, 30, size=300)
    shapes = plan_shapes(frames, tokens, DataConfig(num_buckets=k, batch_size=8))
    assert 1 <= len(shapes) <= k
    assert shapes == sorted(shapes)
    assert len({s.frames for s in shapes}) == len(shapes)
    index = assign(frames, shapes)
    assert index.max() < len(shapes)
    assert np.all(frames <= np.asarray([s.frames for s in shapes])[index])
    assert np.all(tokens <= np.asarray([s.text_len for s in shapes])[index])
    assert all(s.frames % 8 == 0 and s.text_len % 8 == 0 for s in shapes)


def test_assign_picks_the_first_bucket_that_fits():
    shapes = [
        BatchShape(frames=f, text_len=8, batch_size=b) for f, b in ((16, 4), (40, 2), (104, 1))
    ]
    assert assign(np.array([1, 16, 17, 40, 41, 104]), shapes).tolist() == [0, 0, 1, 1, 2, 2]


def ljspeech_like_frames(n: int = 2000) -> np.ndarray:
    """Frames of `n` clips of 1–10 s, mean ~6.5 s, at 22050 Hz with hop 256."""
    # beta(2.6, 1.0) has mean 2.6 / 3.6, i.e. 7.5 s; b = 1.65 gives 1 + 9 * 2.6 / 4.25 = 6.5 s
    seconds = 1 + 9 * np.random.default_rng(2024).beta(2.6, 1.65, size=n)
    assert 6.2 <= seconds.mean() <= 6.8
    return (seconds * 22050 / 256 + 1).astype(np.int64)


def efficiency(frames: np.ndarray, shapes: list[BatchShape]) -> float:
    return float(frames.sum() / padded(frames, shapes))


def test_ljspeech_like_lengths_pad_little_with_buckets():
    frames = ljspeech_like_frames()
    tokens = frames // 5
    shapes = plan_shapes(frames, tokens, DataConfig(policy="buckets", num_buckets=8))
    assert len(shapes) <= 8
    assert efficiency(frames, shapes) >= 0.90


def test_ljspeech_like_lengths_pad_a_lot_with_fixed():
    frames = ljspeech_like_frames()
    shapes = plan_shapes(frames, frames // 5, DataConfig(policy="fixed"))
    assert len(shapes) == 1
    assert 0.5 <= efficiency(frames, shapes) <= 0.75
