"""The compiled steps on a model smaller than tiny: warm-up, NaN gate, retrace guard,
gradient accumulation, float16 loss scaling."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from xtts_data import BatchShape, DatasetSpec
from xtts_train import ModelConfig, TextToMel, XttsTrainError, dummy_batch
from xtts_train.config import TextToMelConfig, TrainConfig
from xtts_train.tasks.text_to_mel import TextToMelTask
from xtts_train.training.optim import AdamW
from xtts_train.training.steps import CompiledSteps, RetraceError

MICRO = ModelConfig.from_preset(
    "tiny", d_model=32, heads=2, text_layers=1, decoder_layers=1, alignment="content",
    cond_layers=1, cond_latents=2, prenet_dim=32, postnet_layers=1, postnet_channels=32,
    text_convs=1, cond_convs=1,
)  # fmt: skip
# Two shapes of one batch size: the graph executor's steps warm up both, which shows that
# warm-up builds every shape once (TensorFlow never frees a compiled program, so each
# compile stays in the worker).
SPEC = DatasetSpec((BatchShape(frames=8, text_len=4, batch_size=2),
                    BatchShape(frames=16, text_len=4, batch_size=2)), n_mels=80, cond_frames=8)  # fmt: skip
# One shape: the XLA steps of the default tier, and the float16 test (its programs differ
# from float32's).
ONE_SHAPE = DatasetSpec((BatchShape(frames=8, text_len=4, batch_size=2),), n_mels=80, cond_frames=8)
NAMES = {(2, 4, 8): "train 2x4x8", (2, 4, 16): "train 2x4x16"}  # the programs, by shape
# The compiled steps the tests share, by name: (compiler, spec). An XLA compile of this
# train step costs 20-30 s on two cores, a graph-executor program nothing but its trace.
# Warm-up handles each shape alike whatever the compiler (a trace, one run, a count), so
# the default tier shows "every shape once" on the graph executor's two shapes and XLA's
# compile on one shape; XLA on both shapes, the combination, runs in the slow tier.
KINDS = {"xla": ("xla", ONE_SHAPE), "graph": ("graph", SPEC), "xla-two-shapes": ("xla", SPEC)}


@pytest.fixture(scope="module")
def warmed():
    """`warmed(kind)`: the `KINDS` steps of that name, built at their first use and shared
    by the module's tests (each test reads counts relative to what it found)."""
    built = {}

    def get(kind: str) -> CompiledSteps:
        if kind not in built:
            built[kind] = _warmed(*KINDS[kind])
        return built[kind]

    return get


@pytest.fixture(scope="module",
                params=["xla", "graph", pytest.param("xla-two-shapes", marks=pytest.mark.slow)])  # fmt: skip
def steps(request, warmed):
    """The `KINDS` steps of each name in turn (XLA on both shapes in the slow tier)."""
    return warmed(request.param)


def _warmed(compiler: str, spec: DatasetSpec) -> CompiledSteps:
    """Steps with two micro-batches per update by `compiler`; `seen` holds the warm-up's
    progress calls; `before` and `after` every variable the step reads (weights, dropout
    seeds, the optimizer's and the gate's state) around the warm-up, `seeds_after` and
    `iterations_after` the dropout seeds and the optimizer's updates after it.

    One compile thread: two at once would double the worker's peak memory for the
    duration (the check CLI test covers the concurrent warm-up, in its own process)."""
    seen = []
    config = TrainConfig(max_nonfinite=2, grad_accum=2, compiler=compiler)
    compiled = _compiled(config, spec, workers=1,
                         progress=lambda done, total, program: seen.append((done, total)))  # fmt: skip
    compiled.seen = seen
    compiled.after = [v.numpy() for v in compiled.functions.variables()]
    compiled.seeds_after = [seed.numpy() for seed in compiled.model.seed_states()]
    compiled.iterations_after = int(compiled.optimizer.iterations)
    return compiled


def _compiled(config: TrainConfig, spec: DatasetSpec = SPEC, *,
              losses: TextToMelConfig | None = None, **warm_up) -> CompiledSteps:  # fmt: skip
    model = TextToMel(MICRO)
    model(dummy_batch(MICRO))
    task = TextToMelTask(model, losses or TextToMelConfig())
    compiled = CompiledSteps(task, _adamw(model), spec, config)
    compiled.seeds_before = [seed.numpy() for seed in model.seed_states()]
    compiled.before = [v.numpy() for v in compiled.functions.variables()]
    compiled.report = compiled.warm_up(**warm_up)
    return compiled


def _adamw(model: TextToMel) -> AdamW:
    return AdamW(model.trainable_variables)


def _batch(frames: int = 8, *, nan: bool = False):
    batch = dummy_batch(MICRO, batch_size=2, text_len=4, frames=frames, cond_frames=8)
    if nan:
        batch["mel"] = tf.fill(batch["mel"].shape, float("nan"))
    return batch


def _once_each(steps: CompiledSteps) -> dict[tuple[int, int, int], int]:
    """One trace for every shape of `steps`' spec."""
    return {shape.key: 1 for shape in steps.spec.shapes}


def test_warm_up_compiles_every_shape_once_and_changes_no_weight(steps):
    shapes = len(steps.spec.shapes)
    assert steps.traces == _once_each(steps)
    assert steps.compiled_shapes == shapes
    # What the warm-up left (read when it ended: the module's other tests train these steps).
    assert len(steps.after) == len(steps.before)
    for before, after in zip(steps.before, steps.after, strict=True):
        np.testing.assert_array_equal(before, after)
    assert steps.iterations_after == 0
    # Its compiling runs moved the dropout seeds; it puts them back, so a run whose
    # programs came from the compile cache (and did not run here) draws the same dropout.
    assert len(steps.seeds_after) == len(steps.seeds_before) > 1
    for before, seed in zip(steps.seeds_before, steps.seeds_after, strict=True):
        np.testing.assert_array_equal(before, seed)
    report = steps.report
    assert report.workers == 1
    assert [p.name for p in report.programs] == [NAMES[s.key] for s in steps.spec.shapes]
    assert {p.compiler for p in report.programs} == {steps.config.compiler}
    assert steps.compilers == dict.fromkeys(["train", "eval"], steps.config.compiler)
    assert all(p.trace_seconds > 0 and p.compile_seconds > 0 for p in report.programs)
    assert steps.seen == [(done, shapes) for done in range(1, shapes + 1)]
    assert report.seconds >= report.trace_seconds


def test_every_program_runs_and_none_retraces(steps):
    for shape in steps.spec.shapes:
        assert bool(steps.train(_batch(shape.frames), step=5)["finite"])
    assert steps.traces == _once_each(steps)


def test_gradient_accumulation_updates_once_per_batch(steps):
    before = int(steps.optimizer.iterations)
    outputs = steps.train(_batch(), step=5)
    assert bool(outputs["finite"])
    assert int(steps.optimizer.iterations) == before + 1  # two micro-batches, one update


def test_a_nan_batch_is_skipped_and_counted(steps):
    nonfinite = int(steps.nonfinite)
    iterations = int(steps.optimizer.iterations)
    before = [v.numpy().copy() for v in steps.model.trainable_variables]
    outputs = steps.train(_batch(nan=True), step=5)
    assert not bool(outputs["finite"])
    assert int(steps.nonfinite) == nonfinite + 1
    assert int(steps.consecutive_nonfinite) == 1
    assert int(steps.optimizer.iterations) == iterations
    for old, new in zip(before, steps.model.trainable_variables, strict=True):
        np.testing.assert_array_equal(old, new.numpy())
    assert bool(steps.train(_batch(), step=5)["finite"])
    assert int(steps.consecutive_nonfinite) == 0
    assert int(steps.nonfinite) == nonfinite + 1
    assert steps.traces == _once_each(steps)  # still one trace each


def test_a_shape_outside_the_spec_is_a_retrace_error(steps):
    with pytest.raises(RetraceError, match=r"\(2, 4, 12\)"):
        steps.train(_batch(12), step=5)
    assert steps.traces == _once_each(steps)


def test_xla_and_the_graph_executor_compute_the_same_step(warmed):
    # Every variable the step reads (the weights, the dropout seeds, the optimizer's and
    # the gate's state) copied from the XLA steps to the graph executor's: the two programs
    # then compute one function of those and the batch, dropout included (its masks are
    # stateless draws from the seeds, the same under either compiler).
    xla, graph = warmed("xla"), warmed("graph")
    for mine, theirs in zip(xla.functions.variables(), graph.functions.variables(),
                            strict=True):  # fmt: skip
        theirs.assign(mine)
    weights, batch, outputs = xla.model.get_weights(), _batch(), []
    for steps in (xla, graph):
        out = steps.train(batch, step=50)  # mid warm-up: a learning rate > 0
        outputs.append(({k: float(out[k]) for k in ("loss", "grad_norm")},
                        steps.model.get_weights()))  # fmt: skip
    (xla, xla_weights), (graph, graph_weights) = outputs
    assert xla == pytest.approx(graph, rel=1e-4)
    for a, b in zip(xla_weights, graph_weights, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    assert any(not np.array_equal(a, b) for a, b in zip(weights, xla_weights, strict=True))


def test_batch_sizes_must_divide_by_the_micro_batches():
    model = TextToMel(MICRO)
    model(dummy_batch(MICRO))
    train = TrainConfig(grad_accum=3)
    with pytest.raises(XttsTrainError, match=r"divisible by 3 .*batch_size=2"):
        CompiledSteps(TextToMelTask(model, TextToMelConfig()), _adamw(model), SPEC, train)


def test_mixed_float16_scales_the_loss_and_stays_finite():
    # Seeded: some random initialisations overflow float16 at a loss scale of 2**15 on the
    # first step (the update is then skipped and the scale halved, as it should be); so
    # does this one with the guided-attention loss at its default weight of 10.
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        config = TrainConfig(precision="mixed_float16")
        losses = TextToMelConfig(guided_attention_weight=1.0)
        compiled = _compiled(config, ONE_SHAPE, losses=losses, workers=1)
        outputs = compiled.train(_batch(), step=5)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert outputs["loss"].dtype == tf.float32
    assert bool(outputs["finite"])
    assert float(compiled.loss_scale.scale) == 2.0**15
    assert int(compiled.optimizer.iterations) == 1
