"""`--strategy mirrored` on two logical CPU devices, in a fresh process, for both tasks."""

from __future__ import annotations

import json
import math

import tensorflow as tf
from train_helpers import MICRO, ONE_SHAPE, VOCODER, as_cli, train_cli

from xtts_train.training.trainer import latest_step

# Logical devices must be configured before TensorFlow starts: a fresh process.
TWO_CPUS = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
"""


def test_mirrored_on_two_logical_cpu_devices(cache, tmp_path):
    workdir = tmp_path / "mirrored"
    evaluate = ["train.eval_every=5", "train.eval_batches=1", "data.val_fraction=0.25"]
    result = train_cli("fit", "--data", str(cache), "--workdir", str(workdir), "--quiet",
                       *as_cli([*ONE_SHAPE, *MICRO, *evaluate]), "--strategy", "mirrored",
                       "--steps", "10", prelude=TWO_CPUS)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((workdir / "summary.json").read_text())
    assert summary["replicas"] == 2
    assert summary["traces"] == summary["compiled_shapes"] == summary["spec_shapes"] == 1
    assert summary["retraces_after_warmup"] == 0
    assert summary["steps"] == 10
    lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    train = [line for line in lines if "loss" in line]
    assert train[-1]["loss"] < train[0]["loss"]  # the all-reduced updates train the model
    assert latest_step(workdir) == 10
    val = [line for line in lines if "val_loss" in line]
    assert [line["step"] for line in val] == [5, 10]
    assert all(math.isfinite(line["val_loss"]) for line in val)
    for line in val:  # free-running decoding of validation utterances at every eval
        assert line["val_free_duration_ratio"] > 0
        assert 0 <= line["val_free_alignment"] <= 1
        assert 0 <= line["sentences_alignment"] <= 1
    tags = {
        value.tag
        for path in (workdir / "tensorboard").glob("events.out.tfevents.*")
        for event in tf.compat.v1.train.summary_iterator(str(path))
        for value in event.summary.value
    }
    assert {"loss", "val_loss", "val/mel_target_then_predicted", "val/attention", "alignment",
            "val/predicted_griffin_lim"} <= tags  # fmt: skip
    for i in range(2):  # the default eval sentences, synthesised free-running
        assert {f"sentence_{i}/{part}" for part in ("mel", "attention", "audio", "alignment")
                } <= tags  # fmt: skip


def test_mirrored_trains_the_vocoder_on_two_logical_cpu_devices(audio_cache, tmp_path):
    workdir = tmp_path / "mirrored-vocoder"
    evaluate = ["train.eval_every=6", "train.eval_batches=1", "data.val_fraction=0.25"]
    result = train_cli("fit", "--data", str(audio_cache), "--workdir", str(workdir), "--quiet",
                       *as_cli([*VOCODER, *evaluate]), "--strategy", "mirrored",
                       "--steps", "12", prelude=TWO_CPUS)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((workdir / "summary.json").read_text())
    assert summary["task"] == "vocoder"
    assert summary["replicas"] == 2
    assert summary["traces"] == summary["compiled_shapes"] == summary["spec_shapes"] == 1
    assert summary["retraces_after_warmup"] == 0
    lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    train = [line for line in lines if "loss" in line]
    assert train[-1]["loss"] < train[0]["loss"]  # the all-reduced updates train it
    assert latest_step(workdir) == 12
    val = [line for line in lines if "val_loss" in line]
    assert [line["step"] for line in val] == [6, 12]
    assert all(math.isfinite(line["val_loss"]) for line in val)
