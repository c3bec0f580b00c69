"""Evaluation measures on known inputs: DTW distance, pairing score, duration ratio."""

from __future__ import annotations

import numpy as np
import pytest

from xtts_train.evaluation import scores
from xtts_train.evaluation.scores import dtw_distance, dtw_distances, duration_ratio, pairing_scores


def _mel(seed: int, frames: int = 30, bins: int = 8) -> np.ndarray:
    return np.random.default_rng(seed).normal(-5, 2, (frames, bins))


def test_identical_mels_are_at_distance_zero():
    mel = _mel(0)
    assert dtw_distance(mel, mel) == 0.0


def test_a_slower_rendering_of_the_same_frames_is_at_distance_zero():
    mel = _mel(1)
    slower = np.repeat(mel, 2, axis=0)  # every frame held twice
    assert dtw_distance(slower, mel) == pytest.approx(0.0)
    assert dtw_distance(mel, _mel(2)) > 1.0


def test_distance_is_the_mean_cost_along_the_path():
    a = np.zeros((1, 4))
    b = np.ones((3, 4)) * np.array([[1.0], [2.0], [3.0]])  # one frame against three
    assert dtw_distance(a, b) == pytest.approx((1 + 2 + 3) / 3)


def _one_pair(a: np.ndarray, b: np.ndarray) -> float:
    """The DTW distance as the textbook writes it: the whole table, cell by cell, one pair."""
    total = np.full((len(a) + 1, len(b) + 1), np.inf)
    steps = np.zeros_like(total)
    total[0, 0] = 0.0
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            options = [(total[i - 1, j - 1], steps[i - 1, j - 1]), (total[i - 1, j], steps[i - 1, j]),
                       (total[i, j - 1], steps[i, j - 1])]  # fmt: skip
            best = min(range(3), key=lambda k: options[k][0])  # diagonal, up, left: first on a tie
            total[i, j] = np.abs(a[i - 1] - b[j - 1]).mean() + options[best][0]
            steps[i, j] = options[best][1] + 1
    return float(total[-1, -1] / steps[-1, -1])


@pytest.mark.parametrize("bins", [8, 80])
@pytest.mark.parametrize("frames", [1, 5, 70])
@pytest.mark.parametrize("quantised", [False, True])
def test_many_truths_at_once_are_each_pair_to_the_last_bit(bins, frames, quantised, monkeypatch):
    monkeypatch.setattr(scores, "_COST_CELLS", 16)  # diagonals of up to 70 cells: in parts
    rng = np.random.default_rng(frames * bins)
    frames_of = rng.normal(-5, 2, (2, bins))  # quantised: 2 frames, repeated: many ties
    mel = (lambda n: frames_of[rng.integers(0, 2, n)]) if quantised else (
        lambda n: rng.normal(-5, 2, (n, bins)))  # fmt: skip
    synthesis = mel(frames)
    lengths = [1, frames, 90, *rng.integers(1, 40, 8)]  # 11 truths: 2 groups
    truths = [mel(int(n)) for n in lengths]
    expected = np.array([_one_pair(synthesis, t) for t in truths])
    np.testing.assert_array_equal(dtw_distances(synthesis, truths), expected)
    np.testing.assert_array_equal([dtw_distance(synthesis, t) for t in truths], expected)
    np.testing.assert_array_equal(dtw_distances(synthesis, truths[::-1]), expected[::-1])
    np.testing.assert_array_equal(dtw_distances(synthesis[:1], truths[:1]),
                                  [_one_pair(synthesis[:1], truths[0])])  # fmt: skip


def test_ties_go_to_the_diagonal_then_up_then_left():
    synthesis, truth = np.array([[0.0], [1], [0], [1]]), np.array([[0.0], [2], [1]])
    assert _one_pair(synthesis, truth) == 0.5  # any other order of the three on a tie: 0.4
    np.testing.assert_array_equal(dtw_distances(synthesis, [truth, truth[:1], synthesis]),
                                  [0.5, 0.5, 0.0])  # fmt: skip


def test_pairing_is_below_one_when_each_synthesis_matches_its_own_truth():
    truths = [_mel(seed) for seed in range(4)]
    synthesised = [np.repeat(t, 2, axis=0) for t in truths]  # right content, other timing
    distances = np.array([[dtw_distance(s, t) for t in truths] for s in synthesised])
    scores = pairing_scores(distances)
    assert scores.shape == (4,)
    assert (scores < 0.05).all()


def test_pairing_is_about_one_for_a_synthesis_that_ignores_the_text():
    truths = [_mel(seed) for seed in range(6)]
    same = np.full((30, 8), -5.0)  # one output whatever the text
    distances = np.array([[dtw_distance(same, t) for t in truths] for _ in truths])
    assert pairing_scores(distances) == pytest.approx(np.ones(6), abs=0.15)


def test_duration_ratio():
    assert duration_ratio(120, 100) == pytest.approx(1.2)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: dtw_distance(np.zeros((3, 8)), np.zeros((3, 7))), "n_mels"),
        (lambda: dtw_distance(np.zeros((0, 8)), np.zeros((3, 8))), "non-empty"),
        (lambda: pairing_scores(np.zeros((1, 1))), "N >= 2"),
        (lambda: duration_ratio(10, 0), "true_frames=0"),
    ],
)
def test_bad_inputs_are_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
