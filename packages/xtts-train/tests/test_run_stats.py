"""Step timings of the training loop: per-shape steadiness, host overhead, input-bound
fraction (fake clocks, no model)."""

from __future__ import annotations

import pytest

from xtts_data.stats import cv, cv_within_groups
from xtts_train.runs.run_stats import Timings


def test_cv_within_groups_takes_out_each_groups_cost():
    # Two shapes at 10 and 100 ms, each perfectly steady: no variation within a shape,
    # though the plain CV over all steps is large.
    assert cv_within_groups([[10.0] * 4, [100.0] * 4]) == 0.0
    assert cv([10.0] * 4 + [100.0] * 4) > 0.8
    assert cv_within_groups([[9.0, 11.0, 9.0, 11.0], [90.0, 110.0, 90.0, 110.0]]) == (
        pytest.approx(0.1)
    )


def test_cv_within_groups_leaves_out_groups_too_small_to_say():
    assert cv_within_groups([[1.0, 2.0], [5.0]]) is None
    assert cv_within_groups([[1.0, 3.0], [4.0, 4.0, 4.0]]) == 0.0  # the pair is left out


def _timings(steps: list[tuple[tuple[int, int, int], float, float]]) -> Timings:
    """(shape, data wait, step) per step, one after the other on a fake clock."""
    timings, now = Timings(), 0.0
    for shape, wait, step in steps:
        timings.add(shape, now, now + wait, now + wait + step, now + wait + step + 0.001)
        now += wait + step + 0.001
    return timings


def test_summary_reports_fits_steadiness_within_a_shape():
    small, large = (8, 16, 64), (4, 32, 128)
    steps = [(small, 0.0, 0.010), (large, 0.0, 0.100)] * 10
    steps[6] = (small, 0.0, 0.012)  # one slower small step after the skipped first tenth
    summary = _timings(steps).summary()
    assert summary["step_cv_within_shape"] == pytest.approx(
        cv_within_groups([[11.0] * 8 + [13.0], [101.0] * 9]), rel=1e-6
    )
    assert summary["step_ms_cv"] > 10 * summary["step_cv_within_shape"]
    assert summary["host_overhead_ms"] == pytest.approx(1.0)
    assert summary["input_bound_fraction"] == 0.0
