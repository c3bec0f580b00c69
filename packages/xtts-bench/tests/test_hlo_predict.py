"""`xtts-bench hlo predict`: the device-busy fraction from the device's step times and the
pipeline's CPU cost, worked by hand; each bucket's share of an epoch's batches; a report
without what the prediction reads is one line and exit code 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

import xtts_data as xd
from xtts_bench.cli import main
from xtts_bench.errors import SettingsError
from xtts_bench.hlo import batch_shares
from xtts_bench.hlo.predict import format_prediction, predict_busy

# Two buckets: 16 x 200 frames in 3 batches of 4, 8 x 400 frames in the other.
MANIFEST = {"task": "text_to_mel", "programs": [
    {"name": "train_16x64x200", "kind": "train", "shape": [16, 64, 200], "batch_share": 0.75,
     "batch_frames": [16, 200]},
    {"name": "eval_16x64x200", "kind": "eval", "shape": [16, 64, 200], "batch_share": 0.75,
     "batch_frames": [16, 200]},
    {"name": "train_8x128x400", "kind": "train", "shape": [8, 128, 400], "batch_share": 0.25,
     "batch_frames": [8, 400]},
]}  # fmt: skip
RESULTS = {"device": "gpu NVIDIA H200, jax 0.11", "programs": [
    {"name": "train_16x64x200", "step_ms_median": 100.0},
    {"name": "eval_16x64x200", "step_ms_median": 40.0},
    {"name": "train_8x128x400", "step_ms_median": 300.0},
]}  # fmt: skip
# 20 CPU-ms per sample of 200 real frames: 0.1 ms a frame; 80% of the frames real.
DOCTOR = {"cpu_ms_per_sample": 20.0, "frames_per_sample": 200.0, "padding_efficiency": 0.8}


def test_prediction_is_the_mix_of_device_and_input_time():
    prediction = predict_busy(MANIFEST, RESULTS, DOCTOR, cores=(1, 2))
    # Each batch: 0.1 ms x 3,200 frames x 0.8 = 256 CPU-ms; the device's mean 150 ms.
    assert [b["input_cpu_ms"] for b in prediction["buckets"]] == pytest.approx([256.0, 256.0])
    assert [b["name"] for b in prediction["buckets"]] == ["train_16x64x200", "train_8x128x400"]
    assert prediction["busy"] == pytest.approx({1: 150 / 256, 2: 1.0})
    assert prediction["cores_for_target"] == 2  # ceil(0.95 x 256 / 150)
    assert [b["cores_for_target"] for b in prediction["buckets"]] == [3, 1]  # each alone
    table = format_prediction(prediction)
    assert "cores for >= 95% busy: 2" in table
    assert "1 cores 59%" in table


def test_buckets_left_unmeasured_leave_the_mix():
    results = {"programs": RESULTS["programs"][:1]}  # only the short bucket timed
    prediction = predict_busy(MANIFEST, results, DOCTOR, cores=(4,))
    (bucket,) = prediction["buckets"]
    assert bucket["share"] == 1.0
    assert prediction["cores_for_target"] == 3


@pytest.mark.parametrize(("manifest", "results", "doctor", "said"), [
    (MANIFEST, RESULTS, {**DOCTOR, "frames_per_sample": None}, "frames_per_sample"),
    (MANIFEST, {"programs": []}, DOCTOR, "step times"),
    ({"programs": [{**MANIFEST["programs"][0], "batch_share": None}]}, RESULTS, DOCTOR,
     "batch_share"),
])  # fmt: skip
def test_a_report_without_what_it_reads_is_refused(manifest, results, doctor, said):
    with pytest.raises(SettingsError, match=said):
        predict_busy(manifest, results, doctor)


def test_batch_shares_count_batches_not_utterances():
    shapes = [xd.BatchShape(frames=16, text_len=8, batch_size=2),
              xd.BatchShape(frames=32, text_len=8, batch_size=1)]  # fmt: skip
    # 3 utterances in 1.5 batches of the first bucket, 1 in one batch of the second
    assert batch_shares(np.array([10, 12, 16, 30]), shapes) == pytest.approx([0.6, 0.4])
    assert batch_shares(np.array([10]), shapes[:1]) == [1.0]


def test_predict_command(tmp_path, capsys):
    (tmp_path / "export").mkdir()
    (tmp_path / "export" / "manifest.json").write_text(json.dumps(MANIFEST))
    (tmp_path / "results.json").write_text(json.dumps(RESULTS))
    (tmp_path / "doctor.json").write_text(json.dumps(DOCTOR))
    argv = ["hlo", "predict", str(tmp_path / "export"), str(tmp_path / "results.json"),
            "--doctor", str(tmp_path / "doctor.json"), "--cores", "1", "2"]  # fmt: skip
    assert main([*argv, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["busy"] == pytest.approx({"1": 150 / 256, "2": 1.0})
    (tmp_path / "doctor.json").write_text("{not json")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "xtts-data doctor --json report" in err
