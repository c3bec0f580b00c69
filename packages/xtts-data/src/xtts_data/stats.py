"""Timing statistics shared by every package that reports a variance (doctor, fit's
summary, check, the benchmarks): one definition of the coefficient of variation."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["cv", "cv_within_groups"]


def cv(values: Sequence[float] | np.ndarray) -> float:
    """Coefficient of variation: population standard deviation / mean.

    0.0 for fewer than two values or a zero mean (nothing varies that can be divided).
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size < 2:
        return 0.0
    mean = float(values.mean())
    return float(values.std() / mean) if mean else 0.0


def cv_within_groups(groups: Iterable[Sequence[float]], *, least: int = 3) -> float | None:
    """CV of every value divided by its group's mean: how steady a thing of fixed cost is
    (e.g. step times grouped by batch shape, each shape's own cost taken out).

    Groups of fewer than `least` values are left out; None when fewer than `least` values
    are left.
    """
    ratios = [value / float(np.mean(group)) for group in groups if len(group) >= least
              for value in group]  # fmt: skip
    return cv(ratios) if len(ratios) >= least else None
