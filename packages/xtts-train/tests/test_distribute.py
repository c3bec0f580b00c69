"""`--strategy mirrored` on two logical CPU devices, in a fresh process, for both tasks."""

from __future__ import annotations

import json
import math

import pytest
import tensorflow as tf
from train_helpers import MICRO, ONE_SHAPE, VOCODER, as_cli, train_cli

from xtts_train.training.trainer import latest_step

# The slow tier (`hatch run test-slow`, run by CI): logical CPU devices exist only in a
# process configured at its start, so each run is a process of its own.
pytestmark = pytest.mark.slow

# Logical devices must be configured before TensorFlow starts: a fresh process.
TWO_CPUS = """
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
"""


def _mirrored_fit(data, workdir, overrides: list[str], *, steps: int, every: int,
                  extra: tuple[str, ...] = ()) -> list[dict]:  # fmt: skip
    """`fit --strategy mirrored` on two logical CPUs with an eval every `every` steps:
    asserts one program, two replicas, learning, a checkpoint at `steps` and finite
    validation losses; returns the metrics lines."""
    evaluate = [f"train.eval_every={every}", "train.eval_batches=1", "data.val_fraction=0.25"]
    result = train_cli("fit", "--data", str(data), "--workdir", str(workdir), "--quiet",
                       *as_cli([*overrides, *evaluate]), "--strategy", "mirrored",
                       "--steps", str(steps), *extra, prelude=TWO_CPUS)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((workdir / "summary.json").read_text())
    assert summary["replicas"] == 2
    assert summary["traces"] == summary["compiled_shapes"] == summary["spec_shapes"] == 1
    assert summary["retraces_after_warmup"] == 0
    assert summary["steps"] == steps
    lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    train = [line for line in lines if "loss" in line]
    assert train[-1]["loss"] < train[0]["loss"]  # the all-reduced updates train the model
    assert latest_step(workdir) == steps
    val = [line for line in lines if "val_loss" in line]
    assert [line["step"] for line in val] == [every, 2 * every]
    assert all(math.isfinite(line["val_loss"]) for line in val)
    return lines


def test_mirrored_on_two_logical_cpu_devices(cache, tmp_path):
    workdir = tmp_path / "mirrored"
    lines = _mirrored_fit(cache, workdir, [*ONE_SHAPE, *MICRO], steps=10, every=5)
    for line in (line for line in lines if "val_loss" in line):  # free-running decoding
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
    _mirrored_fit(audio_cache, workdir, VOCODER, steps=12, every=6,
                  extra=("--profile-steps", "3:4"))  # fmt: skip
    assert json.loads((workdir / "summary.json").read_text())["task"] == "vocoder"
    profiles = list((workdir / "tensorboard" / "plugins" / "profile").glob("*/*.xplane.pb"))
    assert len(profiles) == 1  # --profile-steps holds for the vocoder task too
    assert profiles[0].stat().st_size > 0
