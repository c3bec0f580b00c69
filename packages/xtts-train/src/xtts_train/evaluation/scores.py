"""Measures of free-running synthesis against ground truth: DTW distance, pairing score,
duration ratio (host-side NumPy; used by evaluation, not inside compiled steps).

- `dtw_distance`: mean L1 distance between log-mel frames along the dynamic-time-warping
  path, so a synthesis spoken faster or slower than the recording is compared sound for
  sound; `dtw_distances`: one synthesis against many truths at once.
- `pairing_scores`: for each utterance, its distance to its own ground truth divided by
  the mean distance to the other utterances' ground truths. A model that ignores the text
  scores about 1; one that says what it reads scores well below 1.
- `duration_ratio`: synthesised frames / true frames.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["dtw_distance", "dtw_distances", "duration_ratio", "pairing_scores"]


def dtw_distance(synthesised: np.ndarray, truth: np.ndarray) -> float:
    """Mean per-frame L1 (averaged over mel bins) along the best monotonic alignment.

    Args:
        synthesised: float [frames_a, n_mels]; truth: float [frames_b, n_mels] (same bins).

    Returns:
        The path's total cost divided by its length (steps: right, down, diagonal).

    Raises:
        ValueError: empty inputs, or different numbers of mel bins.
    """
    return float(dtw_distances(synthesised, [truth])[0])


# Truths aligned at once by `dtw_distances`: its tables are [group, frames_a + 1, longest
# truth + 1] float64, two of them (~100 MB for 8 truths of 1,000 frames against 800).
_DTW_GROUP = 8
_COST_ROWS = 64  # frames of the synthesis whose cost rows are computed at once


def dtw_distances(synthesised: np.ndarray, truths: Sequence[np.ndarray]) -> np.ndarray:
    """`dtw_distance` of `synthesised` against each of `truths`, the same to the last bit,
    with up to `_DTW_GROUP` truths aligned at once: one pass over the anti-diagonals serves
    them all (a long synthesis against 24 truths took minutes one pair at a time).

    Args:
        synthesised: float [frames_a, n_mels]; truths: float [frames_j, n_mels] each.

    Returns:
        float64 [len(truths)].

    Raises:
        ValueError: empty inputs, or different numbers of mel bins.
    """
    a = np.asarray(synthesised, np.float64)
    found = [np.asarray(t, np.float64) for t in truths]
    for b in found:
        if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or not len(a) or not len(b):
            raise ValueError(
                f"Expected two non-empty [frames, n_mels] arrays with the same n_mels, "
                f"received: synthesised.shape={a.shape}, truth.shape={b.shape}"
            )
    return np.array([d for start in range(0, len(found), _DTW_GROUP)
                     for d in _aligned(a, found[start : start + _DTW_GROUP])])  # fmt: skip


def _aligned(a: np.ndarray, truths: list[np.ndarray]) -> list[float]:
    """The DTW distances of `a` against a few `truths`, their tables stacked: a truth
    shorter than the longest is padded with cells no cell of its own path reads (a cell
    reads only cells to its left and above)."""
    rows, cols = len(a), max(len(b) for b in truths)
    cost = np.zeros((len(truths), rows, cols))
    for t, b in enumerate(truths):  # each cell as one pair's table computed it
        for start in range(0, rows, _COST_ROWS):  # cache-sized parts: 5x faster
            part = a[start : start + _COST_ROWS]
            cost[t, start : start + len(part), : len(b)] = np.abs(
                part[:, None, :] - b[None, :, :]).mean(axis=2)  # fmt: skip
    total = np.full((len(truths), rows + 1, cols + 1), np.inf)
    steps = np.zeros((len(truths), rows + 1, cols + 1))
    total[:, 0, 0] = 0.0
    for k in range(2, rows + cols + 1):  # anti-diagonals i + j = k of the 1-based table
        i = np.arange(max(1, k - cols), min(rows, k - 1) + 1)
        j = k - i
        options = np.stack([total[:, i - 1, j - 1], total[:, i - 1, j], total[:, i, j - 1]])
        lengths = np.stack([steps[:, i - 1, j - 1], steps[:, i - 1, j], steps[:, i, j - 1]])
        best = np.argmin(options, axis=0)[None]  # diagonal, up, left: the first on a tie
        total[:, i, j] = cost[:, i - 1, j - 1] + np.take_along_axis(options, best, 0)[0]
        steps[:, i, j] = np.take_along_axis(lengths, best, 0)[0] + 1
    return [float(total[t, rows, len(b)] / steps[t, rows, len(b)]) for t, b in enumerate(truths)]


def pairing_scores(distances: np.ndarray) -> np.ndarray:
    """Per utterance: distance to its own truth / mean distance to the other truths.

    Args:
        distances: float [N, N], `distances[i, j]` = `dtw_distance(synthesised_i,
            truth_j)`; N >= 2.

    Returns:
        float [N].
    """
    d = np.asarray(distances, np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1] or d.shape[0] < 2:
        raise ValueError(f"Expected a square [N, N] matrix with N >= 2, received: shape={d.shape}")
    others = (d.sum(axis=1) - np.diag(d)) / (len(d) - 1)
    return np.diag(d) / np.maximum(others, 1e-12)


def duration_ratio(synthesised_frames: int, true_frames: int) -> float:
    """Synthesised frames / true frames (1.0: the same length)."""
    if true_frames < 1:
        raise ValueError(f"Expected true_frames >= 1, received: true_frames={true_frames}")
    return synthesised_frames / true_frames
