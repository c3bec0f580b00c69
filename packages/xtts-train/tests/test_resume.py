"""Killed with SIGKILL, the same command resumes: step count and loss curve continue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from train_helpers import ONE_SHAPE, as_cli

from xtts_train.trainer import latest_step


def test_killed_training_resumes_with_the_same_command(cache, tmp_path):
    workdir = tmp_path / "run"
    command = [sys.executable, "-m", "xtts_train.cli", "fit", "--data", str(cache),
               "--workdir", str(workdir), "--quiet", *as_cli(ONE_SHAPE)]  # fmt: skip
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    first = subprocess.Popen([*command, "--steps", "500"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 300
    while not (workdir / "checkpoints" / "ckpt-20.index").exists():
        assert first.poll() is None, first.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed_at = latest_step(workdir)
    assert killed_at >= 20
    resumed = subprocess.run([*command, "--steps", str(killed_at + 10)], env=env,
                             capture_output=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr.decode()
    summary = json.loads((workdir / "summary.json").read_text())
    assert summary["steps"] == killed_at + 10
    assert summary["steps_this_run"] == 10
    assert summary["traces"] == summary["compiled_shapes"] == 1  # compiled again, once
    lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    steps = [line["step"] for line in lines]
    assert steps == sorted(set(steps))  # no step logged twice
    resumed_first = next(line for line in lines if line["step"] > killed_at)
    # Restored weights, optimizer and schedule: the curve goes on from where it was, not
    # from the loss of a fresh model.
    assert resumed_first["loss"] < lines[0]["loss"]
    assert lines[-1]["loss"] < lines[0]["loss"]
