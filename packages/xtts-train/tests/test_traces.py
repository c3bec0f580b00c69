"""Stored traces: a traced step saved, registered again in place of a trace, bound to
another model's variables, and keyed by everything its graph depends on."""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from xtts_data import BatchShape, DatasetSpec
from xtts_train import ModelConfig, TextToMel, dummy_batch
from xtts_train.compile import compile_cache, traces
from xtts_train.config import TextToMelConfig, TrainConfig
from xtts_train.tasks.text_to_mel import TextToMelTask
from xtts_train.training.optim import AdamW
from xtts_train.training.steps import CompiledSteps

MICRO = ModelConfig.from_preset(
    "tiny", d_model=32, heads=2, text_layers=1, decoder_layers=1, alignment="content",
    cond_layers=1, cond_latents=2, prenet_dim=32, postnet_layers=1, postnet_channels=32,
    text_convs=1, cond_convs=1,
)  # fmt: skip
SPEC = DatasetSpec((BatchShape(frames=8, text_len=4, batch_size=2),), n_mels=80, cond_frames=8)
CONFIG = TrainConfig(compiler="graph")


def _steps(model_config: ModelConfig = MICRO, config: TrainConfig = CONFIG) -> CompiledSteps:
    keras.utils.set_random_seed(0)  # the same initial weights in every build
    model = TextToMel(model_config)
    model(dummy_batch(model_config))
    return CompiledSteps(TextToMelTask(model, TextToMelConfig()), AdamW(model.trainable_variables),
                         SPEC, config)  # fmt: skip


def _job(steps: CompiledSteps):
    return steps._train.job(SPEC.shapes[0])


def _batch():
    batch = dummy_batch(MICRO, batch_size=2, text_len=4, frames=8, cond_frames=8)
    noise = tf.random.stateless_normal(batch["mel"].shape, seed=[1, 2])
    return {**batch, "mel": batch["mel"] + noise}


def _step(program, steps: CompiledSteps):
    outputs = program(_batch(), tf.constant(True), steps.hyper(0))
    return {k: v.numpy() for k, v in outputs.items()}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """(folder, job, traced program's fingerprint, its first step's outputs, the weights
    after it, the program)."""
    folder = tmp_path_factory.mktemp("traces")
    steps = _steps()
    job = _job(steps)
    with compile_cache.stable_names(job.name):
        program = job.trace()
    assert traces.save(folder, job.key, program, job.variables) == traces.fingerprint(program)
    outputs = _step(program, steps)
    weights = [v.numpy() for v in steps.model.trainable_variables]
    return folder, job, traces.fingerprint(program), outputs, weights, program


def test_a_registered_trace_steps_another_model_exactly_as_the_traced_one(stored):
    folder, job, fingerprint, outputs, weights, _ = stored
    steps = _steps()  # a new model, the same initial weights
    again = _job(steps)
    assert again.key == job.key
    program = traces.load(folder, again.key, again.variables)
    assert isinstance(program, traces.StoredProgram)
    assert program.fingerprint == fingerprint
    got = _step(program, steps)
    assert got.keys() == outputs.keys()
    for name in outputs:
        np.testing.assert_array_equal(got[name], outputs[name], err_msg=name)
    for after, expected in zip(steps.model.trainable_variables, weights, strict=True):
        np.testing.assert_array_equal(after.numpy(), expected)  # the update reached them
    assert int(steps.optimizer.iterations.numpy()) == 1
    assert steps.traces == {}  # nothing traced


def test_the_key_changes_with_what_the_graph_depends_on(stored):
    _, job, *_ = stored
    wider = dataclasses.replace(MICRO, prenet_dim=48)
    accumulated = dataclasses.replace(CONFIG, grad_accum=2)
    longer = dataclasses.replace(CONFIG, steps=5000, learning_rate=0.01, log_every=1)
    assert _job(_steps(wider)).key != job.key
    assert _job(_steps(config=accumulated)).key != job.key
    assert _job(_steps(config=longer)).key == job.key  # the schedule is an input
    shape = BatchShape(frames=16, text_len=4, batch_size=2)
    steps = _steps()
    steps._train.spec = DatasetSpec((shape,), n_mels=80, cond_frames=8)
    assert steps._train.job(shape).key != job.key


def test_a_missing_or_damaged_trace_is_none_and_the_damaged_one_deleted(stored, tmp_path, caplog):
    folder, job, *_ = stored
    assert traces.load(tmp_path, job.key, job.variables) is None
    damaged = tmp_path / f"{job.key}.trace"
    data = (folder / f"{job.key}.trace").read_bytes()
    damaged.write_bytes(data[: len(data) - 100])
    assert traces.load(tmp_path, job.key, job.variables) is None
    assert not damaged.exists()
    assert "damaged" in caplog.text


def test_a_capture_outside_the_variables_is_not_stored(stored, tmp_path):
    _, job, *_, program = stored
    assert traces.save(tmp_path, job.key, program, job.variables[1:]) is None
    assert not list(tmp_path.iterdir())
