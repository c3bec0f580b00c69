"""`fit` and the compiled steps: one trace per shape, no retrace, skipped NaN updates, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from xtts_data import BatchShape, DatasetSpec, prepare, write_demo_corpus
from xtts_train import ModelConfig, TextToMel, XttsTrainError, dummy_batch
from xtts_train.cli import main
from xtts_train.config import TrainConfig, load_stack_config
from xtts_train.steps import CompiledSteps, RetraceError
from xtts_train.synthesize import synthesize
from xtts_train.trainer import fit, latest_step

# Two small buckets, short utterances: each compiled step costs seconds, not minutes.
OVERRIDES = [
    "data.batch_size=4", "data.num_buckets=2", "data.cond_frames=16", "data.val_fraction=0.0",
    "train.warmup_steps=4", "train.learning_rate=0.002", "train.log_every=5",
    "train.checkpoint_every=10", "train.eval_every=0",
]  # fmt: skip


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    write_demo_corpus(root / "corpus", n=40, min_seconds=0.4, max_seconds=1.0, seed=3)
    stack = load_stack_config(None, OVERRIDES)
    prepare(root / "corpus", root / "cache", audio=stack.audio, data=stack.data)
    return root / "cache"


@pytest.fixture(scope="module")
def run(cache, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("run") / "run"
    stack = load_stack_config(None, [*OVERRIDES, "train.steps=30"])
    return fit(stack, cache, workdir, progress=False), workdir


def test_every_shape_is_compiled_once_and_never_again(run):
    summary, _ = run
    assert summary["traces"] == summary["compiled_shapes"] == summary["spec_shapes"] == 2
    assert summary["retraces_after_warmup"] == 0
    assert summary["steps"] == 30
    assert summary["nonfinite_skipped"] == 0


def test_outputs_of_a_run(run):
    summary, workdir = run
    lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [5, 10, 15, 20, 25, 30]
    for line in lines:
        assert {"step", "loss", "step_ms", "data_wait_ms"} <= set(line)
    assert lines[-1]["loss"] < 0.75 * lines[0]["loss"]  # it learns
    assert json.loads((workdir / "summary.json").read_text()) == summary
    for key in ("step_ms_median", "step_ms_cv", "input_bound_fraction", "final_loss"):
        assert summary[key] is not None
    assert 0 <= summary["input_bound_fraction"] < 1
    assert sorted(p.name for p in (workdir / "checkpoints").glob("*.index")) == [
        "ckpt-10.index", "ckpt-20.index", "ckpt-30.index",
    ]  # fmt: skip
    assert list((workdir / "tensorboard").glob("events.out.tfevents.*"))
    assert "model" in (workdir / "config.yaml").read_text()


def test_the_same_command_resumes_from_the_last_checkpoint(run, cache):
    summary, workdir = run
    stack = load_stack_config(None, [*OVERRIDES, "train.steps=35"])
    resumed = fit(stack, cache, workdir, progress=False)
    assert resumed["steps"] == 35
    assert resumed["steps_this_run"] == 5
    steps = [
        json.loads(line)["step"] for line in (workdir / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps[-2:] == [30, 35]
    assert resumed["final_loss"] < 2 * summary["final_loss"]  # continues, not from scratch


def test_a_workdir_of_another_model_is_refused(run, cache, capsys):
    _, workdir = run
    sets = [arg for override in OVERRIDES for arg in ("--set", override)]
    code = main(["fit", "--data", str(cache), "--workdir", str(workdir), "--quiet",
                 "--set", "model.d_model=64", *sets])  # fmt: skip
    assert code == 2
    assert "another model config" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("override", "key"),
    [("train.steps=0", "steps"), ("train.bogus=1", "bogus"), ("data.policy=round", "policy"),
     ("nosuch.key=1", "section"), ("model.heads=3", "heads")],
)  # fmt: skip
def test_bad_config_exits_2_naming_the_key(override, key, tmp_path, capsys):
    code = main(
        ["fit", "--data", str(tmp_path), "--workdir", str(tmp_path / "r"), "--set", override]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert key in err
    assert len(err.strip().splitlines()) == 1


# -- the compiled steps, on a model smaller than tiny ---------------------------------------

MICRO = ModelConfig.from_preset(
    "tiny", d_model=32, heads=2, text_layers=1, decoder_layers=1, cond_layers=1, cond_latents=2,
    prenet_dim=32, postnet_layers=1, postnet_channels=32, text_convs=1, cond_convs=1,
)  # fmt: skip
SPEC = DatasetSpec((BatchShape(8, 4, 2),), n_mels=80, cond_frames=8)


@pytest.fixture(scope="module")
def steps():
    model = TextToMel(MICRO)
    model(dummy_batch(MICRO))
    optimizer = keras.optimizers.AdamW(1e-3)
    optimizer.build(model.trainable_variables)
    compiled = CompiledSteps(model, optimizer, SPEC, TrainConfig(max_nonfinite=2))
    compiled.warm_up()
    return compiled


def _batch(*, nan: bool = False):
    batch = dummy_batch(MICRO, batch_size=2, text_len=4, frames=8, cond_frames=8)
    if nan:
        batch["mel"] = tf.fill(batch["mel"].shape, float("nan"))
    return batch


def test_warm_up_changes_no_weight_and_counts_one_trace(steps):
    assert steps.traces == {(2, 4, 8): 1}
    assert int(steps.optimizer.iterations) == 0


def test_a_nan_batch_is_skipped_and_counted(steps):
    before = [v.numpy().copy() for v in steps.model.trainable_variables]
    outputs = steps.train(_batch(nan=True))
    assert not bool(outputs["finite"])
    assert int(steps.nonfinite) == 1
    assert int(steps.consecutive_nonfinite) == 1
    for old, new in zip(before, steps.model.trainable_variables, strict=True):
        np.testing.assert_array_equal(old, new.numpy())
    assert bool(steps.train(_batch())["finite"])
    assert int(steps.consecutive_nonfinite) == 0
    assert int(steps.nonfinite) == 1
    assert steps.traces == {(2, 4, 8): 1}  # still the one trace


def test_a_shape_outside_the_spec_is_a_retrace_error(steps):
    batch = dummy_batch(MICRO, batch_size=2, text_len=4, frames=16, cond_frames=8)
    with pytest.raises(RetraceError, match=r"\(2, 4, 16\)"):
        steps.train(batch)
    assert steps.traces == {(2, 4, 8): 1}


def _compiled(config: TrainConfig) -> CompiledSteps:
    model = TextToMel(MICRO)
    model(dummy_batch(MICRO))
    optimizer = keras.optimizers.AdamW(1e-3)
    optimizer.build(model.trainable_variables)
    compiled = CompiledSteps(model, optimizer, SPEC, config)
    compiled.warm_up()
    return compiled


def test_gradient_accumulation_updates_once_per_batch():
    compiled = _compiled(TrainConfig(grad_accum=2))
    outputs = compiled.train(_batch())
    assert bool(outputs["finite"])
    assert int(compiled.optimizer.iterations) == 1  # two micro-batches, one update


def test_mixed_float16_scales_the_loss_and_stays_finite():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        compiled = _compiled(TrainConfig(precision="mixed_float16"))
        outputs = compiled.train(_batch())
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert outputs["loss"].dtype == tf.float32
    assert bool(outputs["finite"])
    assert float(compiled.loss_scale) == 2.0**15
    assert int(compiled.optimizer.iterations) == 1


def test_synthesize_writes_a_non_silent_wav_and_a_picture(run, tmp_path):
    _, workdir = run
    out = tmp_path / "speech.wav"
    result = synthesize(workdir, "Dr. Smith paid $5.", out, max_frames=48)
    audio, rate = tf.audio.decode_wav(tf.io.read_file(str(out)))
    assert int(rate) == 22050
    assert audio.shape[0] > 1000
    assert float(tf.math.reduce_std(audio)) > 0.01  # not silence
    assert result.png.read_bytes()[:4] == b"\x89PNG"
    assert 1 <= result.frames <= 48


def test_synthesize_needs_a_trained_run(tmp_path):
    with pytest.raises(XttsTrainError, match="not a training run"):
        synthesize(tmp_path, "hello", tmp_path / "x.wav")


def test_demo_runs_the_whole_stack(tmp_path, capsys):
    assert main(["demo", "--workdir", str(tmp_path / "demo"), "--steps", "4",
                 "--utterances", "24"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "retraces" in out
    assert "0 retraces" in out
    assert (tmp_path / "demo" / "run" / "demo.wav").stat().st_size > 1000


def test_check_reports_one_trace_per_shape(cache, capsys):
    sets = [arg for override in OVERRIDES for arg in ("--set", override)]
    assert main(["check", "--data", str(cache), *sets, "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    assert "compiled 2 shape(s)" in out
    assert "ok: one trace per shape, no retrace" in out
    rows = [line for line in out.splitlines() if line[:1].isdigit()]
    assert len(rows) == 2
    assert all(line.split()[5] == "1" for line in rows)  # traces column


def test_killed_training_resumes_with_the_same_command(cache, tmp_path):
    workdir = tmp_path / "run"
    sets = [arg for override in OVERRIDES for arg in ("--set", override)]
    command = [sys.executable, "-m", "xtts_train.cli", "fit", "--data", str(cache),
               "--workdir", str(workdir), "--quiet", *sets]  # fmt: skip
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
    lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    steps = [line["step"] for line in lines]
    assert steps == sorted(set(steps))  # no step logged twice
    assert lines[-1]["loss"] < lines[0]["loss"]  # the curve continues downwards
