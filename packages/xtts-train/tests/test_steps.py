"""The compiled steps on a model smaller than tiny: warm-up, NaN gate, retrace guard,
gradient accumulation, float16 loss scaling."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from xtts_data import BatchShape, DatasetSpec
from xtts_train import ModelConfig, TextToMel, XttsTrainError, dummy_batch
from xtts_train.config import TrainConfig
from xtts_train.optim import AdamW
from xtts_train.steps import CompiledSteps, RetraceError

MICRO = ModelConfig.from_preset(
    "tiny", d_model=32, heads=2, text_layers=1, decoder_layers=1, cond_layers=1, cond_latents=2,
    prenet_dim=32, postnet_layers=1, postnet_channels=32, text_convs=1, cond_convs=1,
)  # fmt: skip
SPEC = DatasetSpec((BatchShape(frames=8, text_len=4, batch_size=2),), n_mels=80, cond_frames=8)


@pytest.fixture(scope="module")
def steps():
    model = TextToMel(MICRO)
    model(dummy_batch(MICRO))
    compiled = CompiledSteps(model, _adamw(model), SPEC, TrainConfig(max_nonfinite=2))
    compiled.warm_up()
    return compiled


def _adamw(model: TextToMel) -> AdamW:
    return AdamW(model.trainable_variables)


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
    outputs = steps.train(_batch(nan=True), step=5)
    assert not bool(outputs["finite"])
    assert int(steps.nonfinite) == 1
    assert int(steps.consecutive_nonfinite) == 1
    for old, new in zip(before, steps.model.trainable_variables, strict=True):
        np.testing.assert_array_equal(old, new.numpy())
    assert bool(steps.train(_batch(), step=5)["finite"])
    assert int(steps.consecutive_nonfinite) == 0
    assert int(steps.nonfinite) == 1
    assert steps.traces == {(2, 4, 8): 1}  # still the one trace


def test_a_shape_outside_the_spec_is_a_retrace_error(steps):
    batch = dummy_batch(MICRO, batch_size=2, text_len=4, frames=16, cond_frames=8)
    with pytest.raises(RetraceError, match=r"\(2, 4, 16\)"):
        steps.train(batch, step=5)
    assert steps.traces == {(2, 4, 8): 1}


def _compiled(config: TrainConfig, spec: DatasetSpec = SPEC, **warm_up) -> CompiledSteps:
    model = TextToMel(MICRO)
    model(dummy_batch(MICRO))
    compiled = CompiledSteps(model, _adamw(model), spec, config)
    compiled.report = compiled.warm_up(**warm_up)
    return compiled


def test_gradient_accumulation_updates_once_per_batch():
    compiled = _compiled(TrainConfig(grad_accum=2))
    outputs = compiled.train(_batch(), step=5)
    assert bool(outputs["finite"])
    assert int(compiled.optimizer.iterations) == 1  # two micro-batches, one update


def test_batch_sizes_must_divide_by_the_micro_batches():
    model = TextToMel(MICRO)
    model(dummy_batch(MICRO))
    with pytest.raises(XttsTrainError, match=r"divisible by 3 .*batch_size=2"):
        CompiledSteps(model, _adamw(model), SPEC, TrainConfig(grad_accum=3))


def test_mixed_float16_scales_the_loss_and_stays_finite():
    # Seeded: some random initialisations overflow float16 at a loss scale of 2**15 on the
    # first step (the update is then skipped and the scale halved, as it should be); so
    # does this one with the guided-attention loss at its default weight of 10.
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        config = TrainConfig(precision="mixed_float16", guided_attention_weight=1.0)
        compiled = _compiled(config)
        outputs = compiled.train(_batch(), step=5)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert outputs["loss"].dtype == tf.float32
    assert bool(outputs["finite"])
    assert float(compiled.loss_scale.scale) == 2.0**15
    assert int(compiled.optimizer.iterations) == 1


def test_concurrent_warm_up_compiles_every_shape_exactly_once():
    spec = DatasetSpec((BatchShape(frames=8, text_len=4, batch_size=2),
                        BatchShape(frames=16, text_len=4, batch_size=1)), n_mels=80, cond_frames=8)  # fmt: skip
    seen = []
    compiled = _compiled(TrainConfig(), spec, workers=2,
                         progress=lambda done, total, program: seen.append((done, total)))  # fmt: skip
    assert compiled.traces == {(2, 4, 8): 1, (1, 4, 16): 1}
    assert compiled.compiled_shapes == 2
    report = compiled.report
    assert report.workers == 2
    assert [p.name for p in report.programs] == ["train 2x4x8", "train 1x4x16"]
    assert all(p.trace_seconds > 0 and p.compile_seconds > 0 for p in report.programs)
    assert sorted(seen) == [(1, 2), (2, 2)]
    assert report.seconds >= report.trace_seconds
    for shape in ((2, 4, 8), (1, 4, 16)):  # every program runs, none retraces
        b, t, f = shape
        batch = dummy_batch(MICRO, batch_size=b, text_len=t, frames=f, cond_frames=8)
        assert bool(compiled.train(batch, step=5)["finite"])
    assert sum(compiled.traces.values()) == 2
    assert int(compiled.optimizer.iterations) == 2
