"""Measures of free-running synthesis against ground truth: DTW distance, pairing score,
duration ratio (host-side NumPy; used by evaluation, not inside compiled steps).

- `dtw_distance`: mean L1 distance between log-mel frames along the dynamic-time-warping
  path, so a synthesis spoken faster or slower than the recording is compared sound for
  sound.
- `pairing_scores`: for each utterance, its distance to its own ground truth divided by
  the mean distance to the other utterances' ground truths. A model that ignores the text
  scores about 1; one that says what it reads scores well below 1.
- `duration_ratio`: synthesised frames / true frames.
"""

from __future__ import annotations

import numpy as np

__all__ = ["dtw_distance", "duration_ratio", "pairing_scores"]


def dtw_distance(synthesised: np.ndarray, truth: np.ndarray) -> float:
    """Mean per-frame L1 (averaged over mel bins) along the best monotonic alignment.

    Args:
        synthesised: float [frames_a, n_mels]; truth: float [frames_b, n_mels] (same bins).

    Returns:
        The path's total cost divided by its length (steps: right, down, diagonal).

    Raises:
        ValueError: empty inputs, or different numbers of mel bins.
    """
    a, b = np.asarray(synthesised, np.float64), np.asarray(truth, np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or not len(a) or not len(b):
        raise ValueError(
            f"Expected two non-empty [frames, n_mels] arrays with the same n_mels, received: "
            f"synthesised.shape={a.shape}, truth.shape={b.shape}"
        )
    cost = np.abs(a[:, None, :] - b[None, :, :]).mean(axis=2)  # (A, B)
    rows, cols = cost.shape
    total = np.full((rows + 1, cols + 1), np.inf)
    steps = np.zeros((rows + 1, cols + 1))
    total[0, 0] = 0.0
    for k in range(2, rows + cols + 1):  # anti-diagonals i + j = k of the 1-based table
        i = np.arange(max(1, k - cols), min(rows, k - 1) + 1)
        j = k - i
        options = np.stack([total[i - 1, j - 1], total[i - 1, j], total[i, j - 1]])
        lengths = np.stack([steps[i - 1, j - 1], steps[i - 1, j], steps[i, j - 1]])
        best = np.argmin(options, axis=0)
        total[i, j] = cost[i - 1, j - 1] + options[best, np.arange(len(i))]
        steps[i, j] = lengths[best, np.arange(len(i))] + 1
    return float(total[rows, cols] / steps[rows, cols])


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
