"""Timing statistics shared by every package that reports a variance (doctor, fit's
summary, check, the benchmarks): one definition of the coefficient of variation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["cv"]


def cv(values: Sequence[float] | np.ndarray) -> float:
    """Coefficient of variation: population standard deviation / mean.

    0.0 for fewer than two values or a zero mean (nothing varies that can be divided).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size < 2:
        return 0.0
    mean = float(values.mean())
    return float(values.std() / mean) if mean else 0.0
