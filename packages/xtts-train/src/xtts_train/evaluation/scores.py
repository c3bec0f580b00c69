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


# Truths aligned at once by `dtw_distances`: it keeps three anti-diagonals of two tables,
# [3, group, frames_a + 1] float64 each (~0.9 MB for 8 truths against 2,300 frames), the
# truths frame-reversed (a copy of the inputs) and [group, _COST_CELLS, n_mels] differences.
_DTW_GROUP = 8
_COST_CELLS = 128  # cells of a diagonal whose costs are computed at once: cache-sized


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
    """The DTW distances of `a` against a few `truths`, their tables stacked and filled one
    anti-diagonal i + j = k at a time, of which only the two read and the one written are
    kept: diagonal k in row k % 3, cell (i, k - i) in column i, so that each read is a slice.
    A diagonal's costs are computed as it is reached, each cell as one pair's table computed
    it. A truth shorter than the longest is padded with frames no cell of its own path reads
    (a cell reads only cells to its left and above)."""
    rows, cols, bins = len(a), max(len(b) for b in truths), a.shape[1]
    flipped = np.zeros((len(truths), cols, bins))  # frame j - 1 of a truth at cols - j
    for t, b in enumerate(truths):
        flipped[t, cols - len(b) :] = b[::-1]
    total = np.full((3, len(truths), rows + 1), np.inf)  # cells of row 0, column 0: inf
    steps = np.zeros((3, len(truths), rows + 1))
    total[0, :, 0] = 0.0  # cell (0, 0)
    scratch = np.empty(len(truths) * _COST_CELLS * bins)
    ends = np.array([rows + len(b) for b in truths])  # diagonals of the last cells
    distances = [0.0] * len(truths)
    for k in range(2, rows + cols + 1):  # anti-diagonals i + j = k of the 1-based table
        lo, hi = max(1, k - cols), min(rows, k - 1)  # its cells (i, k - i), lo <= i <= hi
        cost = np.empty((len(truths), hi + 1 - lo))
        for start in range(lo, hi + 1, _COST_CELLS):  # cells i in [start, end): cache-sized
            end = min(start + _COST_CELLS, hi + 1)
            part = scratch[: len(truths) * (end - start) * bins].reshape(len(truths), -1, bins)
            np.subtract(a[None, start - 1 : end - 1],
                        flipped[:, cols - k + start : cols - k + end], out=part)  # fmt: skip
            cost[:, start - lo : end - lo] = np.abs(part, out=part).mean(axis=2)
        new, one, two = k % 3, (k - 1) % 3, (k - 2) % 3  # rows of diagonals k, k - 1, k - 2
        total[new, :, 0] = np.inf  # cell (0, k); the row held diagonal k - 3, (0, 0) for k = 3
        options = np.stack([total[two, :, lo - 1 : hi], total[one, :, lo - 1 : hi],
                            total[one, :, lo : hi + 1]])  # fmt: skip
        lengths = np.stack([steps[two, :, lo - 1 : hi], steps[one, :, lo - 1 : hi],
                            steps[one, :, lo : hi + 1]])  # fmt: skip
        best = np.argmin(options, axis=0)[None]  # diagonal, up, left: the first on a tie
        total[new, :, lo : hi + 1] = cost + np.take_along_axis(options, best, 0)[0]
        steps[new, :, lo : hi + 1] = np.take_along_axis(lengths, best, 0)[0] + 1
        for t in np.flatnonzero(ends == k):  # its last cell (rows, len(truths[t]))
            distances[t] = float(total[new, t, rows] / steps[new, t, rows])
    return distances


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
