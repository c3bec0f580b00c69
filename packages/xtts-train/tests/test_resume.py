"""Killed with SIGKILL, the same command resumes: step count and loss curve continue."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from train_helpers import ONE_SHAPE, as_cli

from xtts_data import LockError, make_dataset
from xtts_data.files import folder_lock
from xtts_train.cli import main
from xtts_train.config import load_stack_config
from xtts_train.errors import XttsTrainError
from xtts_train.trainer import _forget_metrics_after, _next_batch, fit, latest_step


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
    # What a kill at a worse moment leaves: a half-written reference clip, a cut line in
    # metrics.jsonl, an atomic writer's temp file.
    reference = (workdir / "reference.npy").read_bytes()
    (workdir / "reference.npy").write_bytes(reference[: len(reference) * 4 // 5])
    with open(workdir / "metrics.jsonl", "a") as metrics:
        metrics.write('{"step": 9999, "lo')
    (workdir / ".summary.json.1234.tmp").write_text("{")
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
    assert max(steps) == killed_at + 10  # the cut line is gone
    assert (
        np.load(workdir / "reference.npy").shape == np.load(io.BytesIO(reference)).shape
    )  # saved again, whole
    assert not list(workdir.glob(".*.tmp"))
    resumed_first = next(line for line in lines if line["step"] > killed_at)
    # Restored weights, optimizer and schedule: the curve goes on from where it was, not
    # from the loss of a fresh model.
    assert resumed_first["loss"] < lines[0]["loss"]
    assert lines[-1]["loss"] < lines[0]["loss"]


def test_a_workdir_that_is_a_file_is_one_line_and_exit_2(cache, tmp_path, capsys):
    (tmp_path / "run").write_text("not a folder")
    assert main(["fit", "--data", str(cache), "--workdir", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "is a file" in err[0]


@pytest.mark.parametrize("checkpoint", [0, 20])
def test_metrics_keep_steps_up_to_the_checkpoint_and_drop_a_cut_line(tmp_path, checkpoint):
    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"step": step, "loss": 1.0}) for step in (10, 20, 30)]
    path.write_text("\n".join(lines) + '\n{"step": 40, "lo')
    _forget_metrics_after(path, checkpoint)
    kept = [json.loads(line)["step"] for line in path.read_text().splitlines()]
    assert kept == [step for step in (10, 20) if step <= checkpoint]


def test_a_second_fit_on_the_same_workdir_is_refused(cache, tmp_path):
    stack = load_stack_config(None, ONE_SHAPE)
    held = rf"in use by another process \(pid {os.getpid()} "
    with folder_lock(tmp_path / "run", purpose="fit"), pytest.raises(LockError, match=held):
        fit(stack, cache, tmp_path / "run", progress=False)


def test_a_damaged_record_met_in_training_is_one_clear_error(cache, tmp_path):
    damaged = Path(shutil.copytree(cache, tmp_path / "cache"))
    shard = sorted((damaged / "shards").glob("*.tfrecord"))[0]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a record's mel: its CRC no longer matches
    shard.write_bytes(bytes(data))
    stack = load_stack_config(None, ONE_SHAPE)
    # The iterator `fit` draws from, without the compile: the error is the same.
    pipe = make_dataset(damaged, stack.data, "train", audio=stack.audio)
    iterator = iter(pipe.dataset)  # one epoch: the damaged record is met on the way
    with pytest.raises(XttsTrainError, match=r"the feature cache holds a damaged record \("):
        list(iter(lambda: _next_batch(iterator), None))
