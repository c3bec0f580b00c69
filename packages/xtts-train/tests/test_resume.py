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
import tensorflow as tf
from fault_helpers import killed, run_with_fault
from train_helpers import MICRO, ONE_SHAPE, as_cli, cli_env

from xtts_data import LockError, make_dataset
from xtts_data.files import folder_lock
from xtts_train.cli import main
from xtts_train.config import load_stack_config
from xtts_train.errors import XttsTrainError
from xtts_train.tasks.registry import fit
from xtts_train.training.trainer import _next_batch, latest_step

# The micro model, deterministic data, a long schedule, checkpoints every 10 steps: runs
# stopped by signals at chosen checkpoints. Runs in new processes share a compile cache
# (`compile_cache`): the first compiles, the rest load its program, and the bit-for-bit
# comparison below holds across both (the warm-up leaves the dropout seeds as it found them).
SETTINGS = [*ONE_SHAPE, *MICRO, "data.deterministic=true"]


CLI = "xtts_train.cli"  # the module `run_with_fault` and `python -m` run


def _fit_args(cache, workdir, steps: int = 3000, compiler: str = "auto") -> list[str]:
    """`xtts-train` arguments of a fit of `SETTINGS` on `cache` into `workdir`."""
    return ["fit", "--data", str(cache), "--workdir", str(workdir), "--quiet",
            "--steps", str(steps), *as_cli([*SETTINGS, f"train.compiler={compiler}"])]  # fmt: skip


def _fit_until(cache, workdir, checkpoint: int, stop: int, env: dict,
               compiler: str = "auto") -> subprocess.Popen:  # fmt: skip
    """`fit` in a new process until `workdir` holds `checkpoint`, then `stop` (a signal)."""
    command = [sys.executable, "-m", CLI, *_fit_args(cache, workdir, compiler=compiler)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    # The checkpoint is complete once the manager's state names it (its files come first).
    while latest_step(workdir) < checkpoint:
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(stop)
    process.wait(timeout=120)
    return process


def _losses(workdir) -> dict[int, float]:
    lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    return {line["step"]: line["loss"] for line in lines if "loss" in line}


# Both compilers: XLA (its runs share the compile cache; the slow tier, `hatch run
# test-slow`) and the graph executor (`auto` on a CPU).
@pytest.mark.parametrize("compiler", [pytest.param("xla", marks=pytest.mark.slow), "graph"])
def test_killed_training_resumes_where_it_stopped(cache, tmp_path, compile_cache, compiler):
    env = cli_env(compile_cache)
    straight = tmp_path / "straight"
    assert _fit_until(cache, straight, 40, signal.SIGTERM, env, compiler).returncode == 0
    workdir = tmp_path / "run"
    # Killed the moment checkpoint 20 is written (a fault event, as in the matrix below).
    fault = run_with_fault("after:checkpoint:2", CLI, *_fit_args(cache, workdir, compiler=compiler),
                           env=env)  # fmt: skip
    assert killed(fault)
    killed_at = latest_step(workdir)
    assert killed_at == 20
    # What a kill at a worse moment leaves: a half-written reference clip, a cut line in
    # metrics.jsonl, an atomic writer's temp file.
    reference = (workdir / "reference.npy").read_bytes()
    (workdir / "reference.npy").write_bytes(reference[: len(reference) * 4 // 5])
    with open(workdir / "metrics.jsonl", "a") as metrics:
        metrics.write('{"step": 9999, "lo')
    (workdir / ".summary.json.1234.tmp").write_text("{")
    resumed = _fit_until(cache, workdir, 40, signal.SIGTERM, env, compiler)
    assert resumed.returncode == 0, resumed.stderr.read().decode()
    summary = json.loads((workdir / "summary.json").read_text())
    assert summary["compiler"]["train"] == compiler
    assert summary["steps"] >= 40
    assert summary["steps_this_run"] == summary["steps"] - killed_at
    # Its program registered from the trace the first run stored: none traced in Python.
    assert summary["warm_up"]["stored"] == summary["compiled_shapes"] == 1
    assert summary["traces"] == 0
    lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    steps = [line["step"] for line in lines]
    assert steps == sorted(set(steps))  # no step logged twice
    assert max(steps) < 9999  # the cut line is gone
    assert (
        np.load(workdir / "reference.npy").shape == np.load(io.BytesIO(reference)).shape
    )  # saved again, whole
    assert not list(workdir.glob(".*.tmp"))
    # Restored weights, optimizer, schedule, data position and dropout seeds: the resumed
    # run computes what the uninterrupted one computed, to the bit.
    losses, expected = _losses(workdir), _losses(straight)
    for step in (step for step in losses if killed_at < step <= 40):
        assert losses[step] == expected[step], step
    ours, theirs = (
        tf.train.load_checkpoint(str(w / "checkpoints" / "ckpt-40")) for w in (workdir, straight)
    )
    names = sorted(ours.get_variable_to_shape_map())  # weights, optimizer slots, seeds, step
    assert names == sorted(theirs.get_variable_to_shape_map())
    assert len(names) > 50
    for name in names:
        np.testing.assert_array_equal(ours.get_tensor(name), theirs.get_tensor(name), name)


# `fit` killed at a file event (fault_helpers), then run again: it resumes from its last
# checkpoint and ends where an uninterrupted run ends, with no step logged twice and no
# temp file left. The suite kills at a checkpoint (above); `hatch run test-faults` kills
# before and after the rename of every file fit writes, and after each checkpoint.
# (metrics.jsonl is appended to; a line a kill cuts short is tested in test_run_writer.py.)
FIT_FILES = ("config.yaml", "tokenizer.json", "reference.npy", "summary.json")
EVERY_FIT_EVENT = ["after:checkpoint:1", "after:checkpoint:2", "before:checkpoint:2", *(
    f"{when}:{name}:1" for name in FIT_FILES for when in ("before", "after"))]  # fmt: skip


@pytest.mark.faults
@pytest.mark.parametrize("event", EVERY_FIT_EVENT)
def test_fit_killed_at_any_file_event_resumes(cache, tmp_path, compile_cache, event):
    env = cli_env(compile_cache)
    workdir = tmp_path / "run"
    assert killed(run_with_fault(event, CLI, *_fit_args(cache, workdir, steps=20), env=env))
    stopped_at = latest_step(workdir)
    resumed = run_with_fault(None, CLI, *_fit_args(cache, workdir, steps=20), env=env)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((workdir / "summary.json").read_text())
    assert summary["steps"] == 20
    assert summary["steps_this_run"] == 20 - stopped_at
    assert list(_losses(workdir)) == [5, 10, 15, 20]  # each logged step once, none lost
    assert np.load(workdir / "reference.npy").ndim == 2
    assert not list(workdir.glob(".*.tmp"))


def test_a_workdir_that_is_a_file_is_one_line_and_exit_2(cache, tmp_path, capsys):
    (tmp_path / "run").write_text("not a folder")
    assert main(["fit", "--data", str(cache), "--workdir", str(tmp_path / "run"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "is a file" in err[0]


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


def test_a_checkpoint_saved_before_the_seed_states_is_restored_with_a_warning(
    cache, tmp_path, monkeypatch, caplog
):
    # In this process (the checkpoint's contents, not a process, are the subject): on a
    # CPU the micro model's steps run on the graph executor, so nothing compiled stays here.
    workdir = tmp_path / "run"
    checkpoint = tf.train.Checkpoint
    with monkeypatch.context() as old:  # checkpoints as runs saved them before seed states
        old.setattr(tf.train, "Checkpoint", lambda seed_states, **kept: checkpoint(**kept))
        assert main(_fit_args(cache, workdir, steps=10)) == 0
    saved = tf.train.list_variables(str(workdir / "checkpoints" / "ckpt-10"))
    assert not any(name.startswith("seed_states") for name, _ in saved)
    caplog.clear()
    assert main(_fit_args(cache, workdir, steps=20)) == 0
    assert "ckpt-10 holds no dropout seed states; they start afresh" in caplog.text
    summary = json.loads((workdir / "summary.json").read_text())
    assert (summary["steps"], summary["steps_this_run"]) == (20, 10)
