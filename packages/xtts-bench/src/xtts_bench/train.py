"""xtts-train's step, compiled once per static shape, against the dynamic-shape step of
training scripts in the wild, and the steady state of `fit`, in one process.

- Compile + steps: the same `batches` batches of the bucketed `make_dataset` pipeline go
  through (1) `CompiledSteps`: `warm_up` compiles every `DatasetSpec` shape, then one
  update per batch; (2) `baselines.dynamic_train_step`: XLA with no `input_signature`, on
  the batches cut to their own longest row, so each new shape traces and compiles in the
  middle of training (it also pads less, which favours it); (3) optionally the same
  dynamic step without XLA (it still retraces per shape: `TextToMel` needs static shapes,
  so `reduce_retracing`'s generic trace is not an option). Each side gets a fresh model
  and optimizer with the same seed; its total wall time counts every trace and compile,
  and a counter in each traced function counts the traces. The batches are read before
  timing: this part measures the steps, not the input pipeline.
- Steady state: `fit` for `fit_steps` steps on the same cache (input pipeline included):
  median step time, its CV, host overhead per step and input-bound fraction, from the
  `summary.json` it writes.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import os
import pathlib
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping

import numpy as np
import tensorflow as tf
import tqdm

import xtts_data as xd
from xtts_bench import baselines
from xtts_bench.data import corpus_summary
from xtts_bench.settings import TrainBenchConfig
from xtts_data.stats import cv_within_groups
from xtts_train import StackConfig, build_steps, fit, kept_dtype_policy, timed_step

__all__ = [
    "TrainInputs",
    "bench_dynamic",
    "bench_static",
    "bench_steady_state",
    "configure_threads",
    "format_train_table",
    "prepare_inputs",
    "read_inputs",
    "run_train_benchmarks",
    "write_cache",
]


@dataclasses.dataclass(frozen=True)
class TrainInputs:
    """What every side runs on.

    Attributes:
        stack: the stack config, `model.vocab_size` set from the cache's tokenizer.
        cache: the feature cache folder.
        spec: the static batch shapes of the bucketed pipeline.
        batches: the first `batches` batches of that pipeline (shapes of `spec`).
    """

    stack: StackConfig
    cache: pathlib.Path
    spec: xd.DatasetSpec
    batches: list[dict[str, tf.Tensor]]


def prepare_inputs(bench: TrainBenchConfig, work: pathlib.Path) -> TrainInputs:
    """Write the demo corpus and its feature cache into `work`, and read the batches."""
    return read_inputs(bench, write_cache(bench, work))


def write_cache(bench: TrainBenchConfig, work: pathlib.Path) -> pathlib.Path:
    """Write the demo corpus and its feature cache into `work`; returns the cache folder."""
    stack = bench.stack()
    xd.write_demo_corpus(work / "corpus", n=bench.utterances, min_seconds=bench.min_seconds,
                         max_seconds=bench.max_seconds, seed=bench.seed)  # fmt: skip
    xd.prepare(work / "corpus", work / "cache", audio=stack.audio, data=stack.data,
               workers=bench.threads)  # fmt: skip
    return work / "cache"


def read_inputs(bench: TrainBenchConfig, cache: pathlib.Path) -> TrainInputs:
    """The first `bench.batches` batches of the bucketed pipeline over `cache`."""
    stack = bench.stack()
    opened = xd.FeatureCache.open(cache, audio=stack.audio, data=stack.data)
    model = dataclasses.replace(stack.model, vocab_size=opened.tokenizer.vocab_size)
    stack = dataclasses.replace(stack, model=model)
    pipeline = xd.make_dataset(opened, stack.data, "train", repeat=True)
    batches = list(itertools.islice(pipeline.dataset, bench.batches))
    return TrainInputs(stack, cache, pipeline.spec, batches)


def _run_steps(
    step: Callable,
    batches: list,
    traces: Mapping,
    label: str,
    progress: bool,
    budget_seconds: float | None = None,
) -> tuple[list[float], list[bool], float]:
    """Each batch through `step`, waiting for its loss: (seconds per step, whether the step
    traced, the last loss). Stops after the step that takes the total past `budget_seconds`."""
    seconds, traced, loss = [], [], float("nan")
    with _side_bar(len(batches), label, progress, budget_seconds) as bar:
        for index, batch in enumerate(batches):
            before_traces = sum(traces.values())
            took, loss = timed_step(step, batch, step=index)
            seconds.append(took)
            traced.append(sum(traces.values()) > before_traces)
            _advance(bar, step=index + 1, steps=len(batches), spent=sum(seconds),
                     budget=budget_seconds)  # fmt: skip
            if budget_seconds is not None and sum(seconds) > budget_seconds:
                break
    return seconds, traced, loss


def _side_bar(steps: int, label: str, progress: bool, budget: float | None) -> tqdm.tqdm:
    """A side's progress bar: its steps, or with a `budget` (which may end it first) that
    budget's seconds of step time, the step beside (`_advance`)."""
    if budget is None:
        return tqdm.tqdm(total=steps, desc=label, unit="step", disable=not progress)
    return tqdm.tqdm(total=max(1, round(budget)), desc=label, unit="s", disable=not progress)


def _advance(bar: tqdm.tqdm, *, step: int, steps: int, spent: float,
             budget: float | None) -> None:  # fmt: skip
    """`bar` after `step` of `steps` (1-based), `spent` seconds of step time in."""
    if budget is None:
        bar.update(1)
        return
    bar.set_postfix_str(f"step={step}/{steps}", refresh=False)
    bar.update((bar.total if spent > budget else min(int(spent), bar.total)) - bar.n)


def _side(batches: list, seconds: list[float], traced: list[bool], traces: int,
          compile_seconds: float, loss: float) -> dict:  # fmt: skip
    """The figures of one side; steps that traced count as compile time, whole.

    `batches` are all the side was given; the first `len(seconds)` ran. When the side
    stopped early (`complete` false), `projected_total_seconds` adds what the rest would
    cost at the measured rates: the mean traced step for each batch of a shape not yet
    seen, the median steady step for every other batch. `frames_per_s` is padded mel
    frames per second of the steps that did not trace: step speed with the batches'
    different sizes taken out. `step_cv_within_shape` is the coefficient of variation of
    those steps, each divided by the mean of its shape's: how steady a step of fixed work
    is, run back to back on stored batches (for the static side, the reference for the
    step-time CV of `fit`, which adds the pipeline and the host loop).
    """
    ran = batches[: len(seconds)]
    steady = [s for s, t in zip(seconds, traced, strict=True) if not t]
    compiles = [s for s, t in zip(seconds, traced, strict=True) if t]
    compile_seconds += sum(compiles)
    total = compile_seconds + sum(steady)
    real = sum(int(tf.reduce_sum(b["mel_lengths"])) for b in ran)
    padded = [int(np.prod(b["mel"].shape[:2])) for b in ran]
    steady_frames = sum(f for f, t in zip(padded, traced, strict=True) if not t)
    seen = {xd.DatasetSpec.key_of(b) for b in ran}
    projected = total
    for batch in batches[len(seconds) :]:
        shape = xd.DatasetSpec.key_of(batch)
        if shape in seen:
            projected += statistics.median(steady) if steady else 0.0
        else:
            seen.add(shape)
            projected += statistics.fmean(compiles) if compiles else 0.0
    return {
        "batches_run": len(seconds),
        "complete": len(seconds) == len(batches),
        "traces": traces,
        "distinct_shapes": len({xd.DatasetSpec.key_of(b) for b in ran}),
        "distinct_shapes_all_batches": len(seen),
        "compile_seconds": compile_seconds,
        "steps_seconds": sum(steady),
        "total_seconds": total,
        "projected_total_seconds": projected,
        "step_ms_median": 1e3 * statistics.median(steady) if steady else None,
        "frames_per_s": steady_frames / sum(steady) if steady else None,
        "step_cv_within_shape": _cv_within_shape(ran, seconds, traced),
        "padding_efficiency": real / sum(padded),
        "final_loss": loss,
        "load_average": os.getloadavg()[0],
    }


def _cv_within_shape(batches: list, seconds: list[float], traced: list[bool]) -> float | None:
    """CV of the steps that did not trace, each relative to its shape's mean (shapes with
    fewer than 3 such steps left out); None when no shape has 3."""
    by_shape = collections.defaultdict(list)
    for batch, second, was_traced in zip(batches, seconds, traced, strict=True):
        if not was_traced:
            by_shape[xd.DatasetSpec.key_of(batch)].append(second)
    return cv_within_groups(by_shape.values())


def bench_static(inputs: TrainInputs, *, progress: bool = False) -> dict:
    """`CompiledSteps`: warm-up (compile every spec shape, timed), then every batch."""
    steps = build_steps(inputs.stack, inputs.spec)
    started = time.perf_counter()
    steps.warm_up(defer_cached=False)  # timed steps: no program loads in them
    compile_seconds = time.perf_counter() - started
    seconds, traced, loss = _run_steps(
        steps.train, inputs.batches, steps.traces, "static", progress
    )
    side = _side(inputs.batches, seconds, traced, sum(steps.traces.values()), compile_seconds,
                 loss)  # fmt: skip
    return {**side, "compiled_shapes": steps.compiled_shapes,
            "spec_shapes": len(inputs.spec.shapes)}  # fmt: skip


def bench_dynamic(inputs: TrainInputs, *, jit_compile: bool = True, progress: bool = False,
                  budget_seconds: float | None = None) -> dict:  # fmt: skip
    """`baselines.dynamic_train_step` on the batches cut to their longest row; a fresh
    model and optimizer built as `bench_static`'s (same seed). With `budget_seconds`, it
    stops after the step that takes its elapsed time past the budget."""
    built = build_steps(inputs.stack, inputs.spec)  # its compiled steps are never traced
    step = baselines.dynamic_train_step(
        built.model,
        built.optimizer,
        inputs.stack.train,
        inputs.stack.text_to_mel,
        jit_compile=jit_compile,
    )
    batches = [baselines.trim_to_longest(batch) for batch in inputs.batches]
    label = "dynamic XLA" if jit_compile else "dynamic graph"
    seconds, traced, loss = _run_steps(step, batches, step.traces, label, progress,
                                       budget_seconds)  # fmt: skip
    return _side(batches, seconds, traced, sum(step.traces.values()), 0.0, loss)


def bench_steady_state(inputs: TrainInputs, workdir: pathlib.Path) -> dict:
    """`fit` on the cache for `train.steps` steps; the figures of its summary.json.

    `host_overhead_ms` is fit's own measure: the median host time per step spent outside
    the data wait and the step call (bookkeeping after the call returned).
    """
    summary = fit(inputs.stack, inputs.cache, workdir, progress=False)
    by_shape = summary.get("step_ms_by_shape") or {}
    return {
        "steps": summary["steps"],
        "compile_seconds": summary["compile_seconds"],
        "traces": summary["traces"],
        "retraces_after_warmup": summary["retraces_after_warmup"],
        "step_ms_median": summary["step_ms_median"],
        "step_ms_cv": summary["step_ms_cv"],
        "step_cv_within_shape": summary["step_cv_within_shape"],
        "step_ms_cv_worst_shape": max((s["cv"] for s in by_shape.values()), default=None),
        "step_ms_by_shape": by_shape,
        "host_overhead_ms": summary.get("host_overhead_ms"),
        "input_bound_fraction": summary["input_bound_fraction"],
        "final_loss": summary["final_loss"],
    }


def configure_threads(threads: int) -> None:
    """`threads` intra- and inter-op threads for TensorFlow: only possible before it runs
    anything, so a benchmark that sets them is called first in a fresh process."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError as error:
        raise RuntimeError(
            "this benchmark sets TensorFlow's thread pools, which is only possible before "
            "TensorFlow runs anything: call it first in a fresh process (its `xtts-bench` "
            "command does)"
        ) from error


def run_train_benchmarks(bench: TrainBenchConfig, *, progress: bool = False) -> dict:
    """Static vs dynamic on the same batches, then `fit`; returns all figures.

    Args:
        progress: progress bars on stderr (the dynamic side can run for many minutes).
    """
    configure_threads(bench.threads)
    load_before = os.getloadavg()[0]
    with kept_dtype_policy(), tempfile.TemporaryDirectory(prefix="xtts-bench-train-") as folder:
        inputs = prepare_inputs(bench, pathlib.Path(folder))
        sides = {"static": bench_static(inputs, progress=progress)}
        budget = bench.dynamic_budget * sides["static"]["total_seconds"] or None
        if bench.dynamic:
            sides["dynamic_xla"] = bench_dynamic(inputs, progress=progress,
                                                 budget_seconds=budget)  # fmt: skip
        if bench.dynamic and bench.graph:
            sides["dynamic_graph"] = bench_dynamic(
                inputs, jit_compile=False, progress=progress, budget_seconds=budget
            )
        steady = bench_steady_state(inputs, pathlib.Path(folder) / "run")
        corpus = corpus_summary(inputs.cache, inputs.stack.audio)
    static = sides["static"]["total_seconds"]
    return {
        "settings": dataclasses.asdict(bench),
        "corpus": corpus,
        "spec_shapes": [list(s.key) for s in inputs.spec.shapes],
        **sides,
        # Measured: a lower bound when the side stopped early. Projected: every batch.
        "ratio": {
            f"{name}_vs_static": side["total_seconds"] / static
            for name, side in sides.items()
            if name != "static"
        },
        "ratio_projected": {
            f"{name}_vs_static": side["projected_total_seconds"] / static
            for name, side in sides.items()
            if name != "static"
        },
        "steady_state": steady,
        # fit's step (pipeline and host loop included) against the bare compiled step on
        # stored batches: how much steadiness the loop gives up (target <= 1.25).
        "step_cv_vs_bare": _ratio(
            steady["step_cv_within_shape"], sides["static"]["step_cv_within_shape"]
        ),
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg()[0],
        },
        "tensorflow": tf.__version__,
    }


_ROWS = {
    "static": "xtts CompiledSteps (XLA, spec signatures)",
    "dynamic_xla": "tf.function XLA, no signature",
    "dynamic_graph": "tf.function no XLA, no signature",
}


def format_train_table(results: dict) -> str:
    """The figures as a plain table; a side stopped by the budget shows its batches run, a
    ratio prefixed `>=` and the projection for every batch."""
    s, c = results["settings"], results["corpus"]
    lines = [
        f"corpus: {c['utterances']} utterances, {c['min_seconds']:.1f}-{c['max_seconds']:.1f} s; "
        f"{s['preset']} model; batches of {s['batch_size']} in {len(results['spec_shapes'])} "
        f"bucket shapes; {s['batches']} batches per side; load average "
        f"{results['machine']['load_average_before']:.1f} -> "
        f"{results['machine']['load_average_after']:.1f} on {results['machine']['cpus']} CPUs",
        f"{'step':<42}{'batches':>8}{'traces':>7}{'shapes':>7}{'compile s':>10}{'steps s':>9}"
        f"{'total s':>9}{'step ms':>9}{'frames/s':>9}{'padding':>9}",
    ]
    for name, label in _ROWS.items():
        if name in results:
            r = results[name]
            lines.append(
                f"{label:<42}{r['batches_run']:>8}{r['traces']:>7}{r['distinct_shapes']:>7}{r['compile_seconds']:>10.1f}"
                f"{r['steps_seconds']:>9.1f}{r['total_seconds']:>9.1f}"
                f"{_number(r['step_ms_median']):>9}{_number(r['frames_per_s'], '.0f'):>9}"
                f"{r['padding_efficiency']:>9.1%}"
            )
    for name, ratio in results["ratio"].items():
        side = results[name.removesuffix("_vs_static")]
        line = f"total time {name.replace('_vs_', ' / ')}: "
        if side["complete"]:
            line += f"{ratio:.2f}x"
        else:
            line += (
                f">= {ratio:.2f}x (stopped by the budget after {side['batches_run']} of "
                f"{s['batches']} batches; projected for all {s['batches']}, "
                f"{side['distinct_shapes_all_batches']} shapes: "
                f"{results['ratio_projected'][name]:.1f}x)"
            )
        lines.append(line)
    f = results["steady_state"]
    lines += [
        f"steady state (fit, {f['steps']} steps): step {f['step_ms_median']:.1f} ms median, "
        f"CV {f['step_ms_cv']:.1%} (worst shape {_percent(f['step_ms_cv_worst_shape'])}), "
        f"host overhead {_number(f['host_overhead_ms'], '.3f')} ms, input-bound "
        f"{f['input_bound_fraction']:.2%}, {f['retraces_after_warmup']} retraces",
        f"step-time CV within a shape: fit {_percent(f['step_cv_within_shape'])}, the bare "
        f"compiled step on stored batches (static side) "
        f"{_percent(results['static']['step_cv_within_shape'])}: "
        f"{_number(results['step_cv_vs_bare'], '.2f')}x (target <= 1.25x)",
    ]
    return "\n".join(lines)


def _ratio(value: float | None, reference: float | None) -> float | None:
    return value / reference if value is not None and reference else None


def _number(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"
