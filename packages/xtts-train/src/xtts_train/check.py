"""`xtts-train check`: does the step compile once per shape, start fast and run steadily?

Builds the pipeline and the compiled steps as `fit` does, compiles every shape (timed:
trace and compile, cache hits), then draws an epoch of batches, and more until every
shape has run `repeats` times, timing each step. A trace after warm-up (a shape traced
twice, or one the spec did not list) fails the check: exit 1. Reports the time to the
first step and its parts, and the peak memory. With `train.memory_budget_gb`, the
buckets' batch sizes are planned first, from measured steps (`training.planner`), and the
plan is printed.

`estimate` (`check --estimate`) runs nothing: each bucket's estimated step memory
(`training_bytes`) at the frame budget's batches and, with a budget, the batches planned
from the estimates, for sizes too large to run here.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path

import xtts_data as xd
from xtts_data.plan import MemoryPlan, plan_batches
from xtts_data.stats import cv
from xtts_train.compile import compile_cache
from xtts_train.compile.compiler import choices
from xtts_train.compile.memory import parameter_count
from xtts_train.compile.process import StartupClock, format_startup, peak_rss_mb
from xtts_train.compile.warmup import WarmUp, cache_use
from xtts_train.config import StackConfig
from xtts_train.tasks.registry import build_steps, task_class
from xtts_train.training.planner import estimate_costs, measured_plan
from xtts_train.training.steps import kept_dtype_policy, timed_step
from xtts_train.training.task import check_task_settings

__all__ = ["CheckReport", "check", "estimate"]


@dataclasses.dataclass(frozen=True)
class CheckReport:
    """Per shape (its key: batch, text, frames of a text-to-mel batch; batch, frames,
    samples of a vocoder's): traces, step times in ms; the shapes the spec lists; the
    warm-up, the time to the first step (`StartupClock.report()`), the peak RSS, the
    compile cache, the compiler of each role (`xtts_train.compile.compiler.choices`) and
    the task (`train.task`)."""

    traces: dict[tuple[int, ...], int]
    step_ms: dict[tuple[int, ...], list[float]]
    spec_shapes: frozenset[tuple[int, ...]]
    warm_up: WarmUp
    startup: dict
    peak_rss_mb: float
    cache: dict | None
    compiler: dict[str, str]
    task: str = "text_to_mel"
    plan: MemoryPlan | None = None

    @property
    def compile_seconds(self) -> float:
        return self.warm_up.seconds

    @property
    def unknown_shapes(self) -> list[tuple[int, ...]]:
        """Shapes traced that the spec does not list: each one a retrace in `fit`."""
        return sorted(set(self.traces) - self.spec_shapes)

    @property
    def retraced(self) -> bool:
        """A shape traced more than once, or traced at all without being in the spec."""
        return bool(self.unknown_shapes) or any(n != 1 for n in self.traces.values())

    def format(self) -> str:
        warm = self.warm_up
        cache = cache_use(warm.to_dict())
        if self.cache is not None:
            cache += f" ({self.cache['dir']})"
        c = self.compiler
        axes = "batch x frames x samples" if self.task == "vocoder" else "batch x text x frames"
        lines = [] if self.plan is None else [self.plan.format()]
        lines += [f"task: {self.task}",
                 f"compiler: train {c['train']}, eval {c['eval']}, decode {c['decode']} "
                 f"(train.compiler={c['setting']} on {c['device']})",
                 f"built {len(warm.programs)} shape(s) in {warm.seconds:.1f} s on "
                 f"{warm.workers} thread(s) (tracing {warm.trace_seconds:.1f} s); {cache}",
                 f"time to first step {format_startup(self.startup)}",
                 f"peak RSS {self.peak_rss_mb:.0f} MB",
                 f"{axes:<26}{'traces':>7}{'trace s':>9}{'compile s':>11}"
                 f"{'step ms':>10}{'CV':>7}"]  # fmt: skip
        programs = {p.name: p for p in warm.programs}
        for shape, times in sorted(self.step_ms.items()):
            mean = statistics.mean(times)
            label = " x ".join(map(str, shape))
            program = programs.get("train " + "x".join(map(str, shape)))
            timing = (f"{program.trace_seconds:>9.1f}{program.compile_seconds:>11.1f}"
                      if program else f"{'-':>9}{'-':>11}")  # fmt: skip
            unknown = "  not in the spec" if shape not in self.spec_shapes else ""
            lines.append(f"{label:<26}{self.traces.get(shape, 0):>7}{timing}{mean:>10.1f}"
                         f"{cv(times):>7.1%}{unknown}")  # fmt: skip
        lines.append(self._verdict())
        return "\n".join(lines)

    def _verdict(self) -> str:
        if self.unknown_shapes:
            return (f"RETRACED: {len(self.unknown_shapes)} shape(s) outside the spec were "
                    f"traced after the warm-up: {self.unknown_shapes}")  # fmt: skip
        if self.retraced:
            return "RETRACED: a shape was traced more than once"
        if self.warm_up.stored:
            return (f"ok: one trace per shape ({self.warm_up.stored} registered from stored "
                    f"traces instead), no retrace")  # fmt: skip
        return "ok: one trace per shape, no retrace"


def check(stack: StackConfig, cache: str | Path, *, repeats: int = 2,
          max_batches: int = 500) -> CheckReport:  # fmt: skip
    """Compile every shape of the cache's pipeline, then draw at least one epoch of
    batches, running each shape `repeats` times (drawing on up to `max_batches` batches
    when a shape is rare).

    A batch of a shape outside the spec is traced and reported (`CheckReport.retraced`),
    not an error: the check runs with `train.allow_retrace`.
    """
    clock = StartupClock()
    with clock.part("data"):
        task = task_class(stack.train.task)
        check_task_settings(task, stack)
        opened = xd.FeatureCache.open(cache, audio=stack.audio, data=stack.data)
        train = dataclasses.replace(stack.train, allow_retrace=True)
        stack = task.configure(dataclasses.replace(stack, train=train), opened.tokenizer)
        pipeline = task.pipeline(opened, stack.data, "train", repeat=True)
    plan = None
    if stack.train.memory_budget_gb is not None and stack.data.batch_sizes is None:
        with clock.part("plan"):
            plan = measured_plan(task, stack, pipeline.spec)
        data = dataclasses.replace(stack.data, batch_sizes=plan.batch_sizes)
        stack = dataclasses.replace(stack, data=data)
        with clock.part("data"):
            pipeline = task.pipeline(opened, data, "train", repeat=True)
    with kept_dtype_policy():
        with clock.part("model"):
            steps = build_steps(stack, pipeline.spec)
        warm = steps.warm_up(defer_cached=False)  # each shape's timed steps: no load in them
        clock.add_warm_up(warm)
        times: dict[tuple[int, ...], list[float]] = {s.key: [] for s in pipeline.spec.shapes}
        startup, waited = None, time.perf_counter()
        # A whole epoch is drawn (steps run only for shapes still short of `repeats`): a
        # shape outside the spec may come at any batch of it.
        drawn = max(pipeline.batches_per_epoch, max_batches)
        for i, batch in zip(range(drawn), pipeline.dataset, strict=False):
            key = pipeline.spec.key_of(batch)
            if len(times.get(key, [])) < repeats:
                seconds, _ = timed_step(steps.train, batch, step=0)
                times.setdefault(key, []).append(1e3 * seconds)
                if startup is None:
                    clock.add("data", time.perf_counter() - seconds - waited)
                    clock.add("first_step", seconds)
                    startup = clock.report()
            if i + 1 >= pipeline.batches_per_epoch and all(
                len(t) >= repeats for t in times.values()
            ):
                break
    expected = frozenset(s.key for s in pipeline.spec.shapes)
    return CheckReport(dict(steps.traces), times, expected, warm, startup or clock.report(),
                       peak_rss_mb(), compile_cache.describe(),
                       choices(stack.train.compiler, task.compilers),
                       stack.train.task, plan)  # fmt: skip


def estimate(stack: StackConfig, cache: str | Path) -> tuple[str, MemoryPlan | None]:
    """Each bucket's estimated train-step memory at the frame budget's batch sizes and,
    with `train.memory_budget_gb`, the batch sizes planned from those estimates; nothing
    is built or run (`check --estimate`).

    Returns:
        The printed lines, and the plan (None without a budget).
    """
    opened = xd.FeatureCache.open(cache, audio=stack.audio, data=stack.data)
    task = task_class(stack.train.task)
    stack = task.configure(stack, opened.tokenizer)
    model = stack.model
    spec = task.pipeline(opened, stack.data, "train", repeat=True).spec
    costs = estimate_costs(stack, spec.shapes)
    lines = [f"model: {model.d_model} wide, {model.decoder_layers} decoder layers, "
             f"{model.heads} heads ({parameter_count(model) / 1e6:,.0f}M parameters); "
             f"estimated step memory (float32, xtts_train.compile.memory.training_bytes):",
             f"{'batch x text x frames':<24}{'GiB':>8}"]  # fmt: skip
    for shape, cost in zip(spec.shapes, costs, strict=True):
        label = " x ".join(map(str, shape.key))
        lines.append(f"{label:<24}{cost.bytes(shape.batch_size) / 2**30:>8.2f}")
    plan = None
    if stack.train.memory_budget_gb is not None:
        plan = plan_batches(costs, stack.train.memory_budget_gb, source="estimated",
                            multiple=stack.data.batch_multiple)  # fmt: skip
        lines.append(plan.format())
    return "\n".join(lines), plan
