"""`xtts-bench learning` and `decode`: config checks, minutes bookkeeping, tables and picture
(the training and evaluation it drives are tested in xtts-train)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xtts_bench.decode import format_decode_table
from xtts_bench.learning import (
    _training_minutes,
    blurred_truth_pairing,
    format_learning_table,
    plot_curve,
)
from xtts_bench.settings import LearningBenchConfig


@pytest.mark.parametrize(("fields", "match"), [
    (dict(steps=0), "steps"), (dict(every=0), "every"), (dict(n=True), "n"),
    (dict(steps=250, every=100), "multiple of every"),
])  # fmt: skip
def test_bad_settings_are_value_errors(tmp_path, fields, match):
    with pytest.raises(ValueError, match=match):
        LearningBenchConfig(data=tmp_path, held_out=tmp_path, out=tmp_path, **fields)


def test_minutes_add_the_start_up_and_each_interval(tmp_path):
    lines = [{"step": 10, "step_ms": 100.0}, {"step": 10, "val_loss": 1.0},
             {"step": 30, "step_ms": 300.0}]  # fmt: skip
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    minutes = _training_minutes(tmp_path, {"time_to_first_step_s": 60.0})
    assert minutes == pytest.approx({10: (60 + 1.0) / 60, 30: (60 + 1.0 + 6.0) / 60})


def test_the_table_and_picture_have_every_point(tmp_path):
    points = [
        {"step": s, "minutes": s / 100, "pairing_mean": 1 - s / 1000, "distance_mean": 1.0,
         "duration_ratio_median": 1.0, "alignment_mean": 0.5, "stopped_share": 1.0}
        for s in (100, 200, 300)
    ]  # fmt: skip
    table = format_learning_table({"points": points}).splitlines()
    assert len(table) == 4
    assert table[-1].split()[:3] == ["300", "3.0", "0.70"]
    plot_curve(points, tmp_path / "curve.png", {"2": 0.5})
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
    table = format_learning_table({"points": points, "blurred_truth_pairing": {"2": 0.5}})
    assert table.splitlines()[-1].endswith("σ=2 0.50")


def test_blurring_the_truth_raises_its_pairing_towards_one():
    rng = np.random.default_rng(0)
    phones = rng.normal(size=(10, 16))  # "sentences": 8 of 10 spectra, 6 frames each
    mels = [np.repeat(phones[rng.integers(0, 10, size=8)], 6, axis=0) for _ in range(6)]
    scale = blurred_truth_pairing(mels, sigmas=(0.5, 2, 16))
    assert list(scale) == ["0.5", "2", "16"]
    assert scale["0.5"] < scale["2"] < scale["16"]
    assert scale["0.5"] < 0.5  # a light blur keeps each sentence closest to its own truth
    assert scale["16"] > 0.9  # a heavy one leaves nothing that tells them apart


def test_the_decode_table_has_a_row_per_run():
    runs = [{"run": f"run{r}", "reduction_factor": r, "frames": 256, "batch_size": 1,
             "wall_s": 2.0 / r, "rtf": 1.5 * r} for r in (1, 2)]  # fmt: skip
    rows = format_decode_table({"runs": runs}).splitlines()
    assert len(rows) == 3
    assert rows[2].split() == ["2", "256", "1", "1.00", "3.00", "run2"]
