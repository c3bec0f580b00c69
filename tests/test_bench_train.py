"""`xtts-bench train` on tiny settings: traces and shapes on each side, every figure
reported (no timing is asserted)."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
import tensorflow as tf
from bench_helpers import POOLS, bench_in_process

from xtts_bench.cli import main
from xtts_bench.train import (
    _cv_within_shape,
    _run_steps,
    _side,
    configure_threads,
    format_train_table,
)

# One bucket shape, a one-layer model, two batches of the same four utterances (unshuffled:
# a batch is the whole corpus), so one dynamic shape: three compiles (static, the dynamic
# shape, fit's warm-up), the dynamic side's an XLA compile of most of a minute. Its second
# batch is a shape already seen: it must not trace again.
TINY = [
    "--batches", "2", "--utterances", "4", "--num-buckets", "1", "--batch-size", "4",
    "--fit-steps", "3", "--no-graph", "--dynamic-budget", "0",
    *[arg for override in (
        "data.shuffle_buffer=0",
        "model.d_model=32", "model.heads=1", "model.ff_mult=1", "model.text_convs=1",
        "model.text_layers=1", "model.cond_convs=1", "model.cond_layers=1",
        "model.cond_latents=1", "model.decoder_layers=1", "model.alignment=content", "model.prenet_dim=16",
        "model.postnet_layers=1", "model.postnet_channels=16",
    ) for arg in ("--set", override)],
]  # fmt: skip


@pytest.fixture(scope="module")
def benchmarked() -> tuple[dict, list]:
    """`xtts-bench train --json` on TINY, once, in this process (`bench_in_process`): its
    figures and thread-pool settings."""
    return bench_in_process("train", *TINY)


@pytest.fixture(scope="module")
def results(benchmarked) -> dict:
    return benchmarked[0]


def test_the_benchmark_sets_both_thread_pools_to_its_threads(benchmarked):
    results, pools = benchmarked
    threads = results["settings"]["threads"]
    assert pools == [(name, threads) for name in POOLS]
    # This process has run TensorFlow: a benchmark started here says to use a fresh one
    # (TensorFlow lets a pool be "set" to the size it has).
    with pytest.raises(RuntimeError, match="call it first in a fresh process"):
        configure_threads(tf.config.threading.get_intra_op_parallelism_threads() + 1)


def test_static_side_traces_once_per_compiled_shape(results):
    static = results["static"]
    assert static["traces"] == static["compiled_shapes"] == len(results["spec_shapes"]) == 1
    assert static["distinct_shapes"] == 1
    assert static["compile_seconds"] > 0
    assert static["step_ms_median"] > 0


def test_dynamic_side_traces_once_per_distinct_shape(results):
    dynamic = results["dynamic_xla"]
    assert dynamic["traces"] == dynamic["distinct_shapes"] >= 1
    assert dynamic["step_ms_median"] > 0  # the second batch: its shape seen, no trace
    # Cut to its longest row, a batch pads at most as much as the bucket shape does.
    assert dynamic["padding_efficiency"] >= results["static"]["padding_efficiency"]
    assert dynamic["total_seconds"] == pytest.approx(
        dynamic["compile_seconds"] + dynamic["steps_seconds"]
    )
    assert results["ratio"]["dynamic_xla_vs_static"] > 0
    assert dynamic["complete"]  # --dynamic-budget 0
    assert dynamic["batches_run"] == 2
    assert dynamic["projected_total_seconds"] == dynamic["total_seconds"]
    assert "dynamic_graph" not in results  # --no-graph


def test_steady_state_reports_fit_figures(results):
    steady = results["steady_state"]
    assert steady["steps"] == 3
    assert steady["traces"] == 1
    assert steady["retraces_after_warmup"] == 0
    assert steady["step_ms_median"] > 0
    assert steady["step_ms_cv"] >= 0
    assert steady["step_cv_within_shape"] >= 0  # 3 steps of the one shape
    assert "step_cv_vs_bare" in results  # None here: the static side ran 2 steps
    assert steady["host_overhead_ms"] >= 0
    assert 0 <= steady["input_bound_fraction"] <= 1


def test_table_names_each_row_and_figure(results):
    table = format_train_table(results)
    for label in ("CompiledSteps", "tf.function XLA, no signature", "dynamic_xla / static",
                  "steady state", "host overhead", "input-bound", "step-time CV within a shape", "target <= 1.25x"):  # fmt: skip
        assert label in table


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batches", "0"], "TrainBenchConfig.batches: expected an int >= 1"),
        (["--min-seconds", "2", "--max-seconds", "1"], "expected 0 < min_seconds <= max_seconds"),
        (["--preset", "huge"], "TrainBenchConfig.preset: expected one of"),
        (["--set", "model.bogus=1"], "unknown field(s) ['bogus']"),
        (["--dynamic-budget", "-1"], "TrainBenchConfig.dynamic_budget: expected a number >= 0"),
    ],
)
def test_bad_settings_exit_2_before_any_work(args, message, capsys):
    assert main(["train", *args]) == 2  # in this process: settings fail before TF is set up
    assert message in capsys.readouterr().err


def _batch(frames: int) -> dict[str, tf.Tensor]:
    return {"mel": tf.zeros([2, frames, 4]), "tokens": tf.zeros([2, 3], tf.int32),
            "mel_lengths": tf.constant([frames, frames - 1])}  # fmt: skip


class _FakeStep:
    """Costs 200 ms on a shape not seen before (a trace and compile), 1 ms otherwise."""

    def __init__(self) -> None:
        self.traces: dict = {}

    def __call__(self, batch, *, step):
        shape = tuple(batch["mel"].shape)
        if shape not in self.traces:
            self.traces[shape] = 1
            time.sleep(0.2)
        else:
            time.sleep(0.001)
        return {"loss": tf.constant(1.0)}


def test_budget_stops_a_side_and_projects_the_rest(capsys):
    # Shapes 10, 10, 11, 11, 12, 10, 13: four distinct; a 0.3 s budget stops after the
    # second compile (step 3), before shapes 12 and 13 are seen.
    batches = [_batch(f) for f in (10, 10, 11, 11, 12, 10, 13)]
    step = _FakeStep()
    seconds, traced, _ = _run_steps(step, batches, step.traces, "fake", True, 0.3)
    assert traced == [True, False, True]
    # The bar counts the budget (0.3 s: one second), spent at step 3 of 7.
    assert re.search(r"fake: 100%.*\| 1/1 \[.*s/s, step=3/7\]", capsys.readouterr().err)
    side = _side(batches, seconds, traced, sum(step.traces.values()), 0.0, 1.0)
    assert not side["complete"]
    assert side["batches_run"] == 3
    assert side["distinct_shapes"] == 2
    assert side["distinct_shapes_all_batches"] == 4
    compile_mean = (seconds[0] + seconds[2]) / 2
    expected = sum(seconds) + 2 * compile_mean + 2 * seconds[1]  # 12, 13 new; 11, 10 seen
    assert side["projected_total_seconds"] == pytest.approx(expected)
    assert side["padding_efficiency"] == pytest.approx((19 + 19 + 21) / (20 + 20 + 22))
    assert np.isfinite(side["frames_per_s"])


def test_no_budget_runs_every_batch(capsys):
    batches = [_batch(f) for f in (10, 11, 10)]
    step = _FakeStep()
    seconds, traced, _ = _run_steps(step, batches, step.traces, "fake", True)
    assert re.search(r"fake: 100%.*\| 3/3 \[.*step", capsys.readouterr().err)
    side = _side(batches, seconds, traced, sum(step.traces.values()), 0.0, 1.0)
    assert side["complete"]
    assert side["traces"] == side["distinct_shapes"] == 2
    assert side["projected_total_seconds"] == side["total_seconds"]


def test_cv_within_shape_takes_out_the_cost_of_each_shape():
    # Shape 10 steps cost 1, 1.1, 0.9 s; shape 20 steps 2, 2.2, 1.8 s: the same 10%
    # spread around each shape's mean, whatever the shapes' costs. Traced steps are left
    # out, and so is shape 30 (two steps).
    frames = (10, 10, 10, 10, 20, 20, 20, 30, 30)
    seconds = [60.0, 1.0, 1.1, 0.9, 2.0, 2.2, 1.8, 3.0, 5.0]
    traced = [True] + [False] * 8
    cv = _cv_within_shape([_batch(f) for f in frames], seconds, traced)
    assert cv == pytest.approx(np.std([1.0, 1.1, 0.9] * 2))
    assert _cv_within_shape([_batch(10)] * 2, [1.0, 2.0], [False, False]) is None
