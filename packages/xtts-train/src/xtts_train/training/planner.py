"""Per-bucket batch sizes that fill a memory budget (`train.memory_budget_gb`): the step
costs a plan is made from (`xtts_data.plan`: `BucketCost`, `plan_batches`, the plan file).

A bucket's step memory is linear in its batch (every activation has a batch axis), so two
points give it: `fixed` bytes at any batch and `per_row` bytes a row. They come from one
of two sources:

- `measure_costs`: real train steps, as `fit` builds them, on the task's placeholder
  batch at each bucket's frame-budget batch size and twice it, in a fresh process (its
  memory and weights never touch the caller's). A step's bytes are TensorFlow's
  allocator peak during it less what was live before it
  (`tf.config.experimental.get_memory_info`), the largest of three such steps; the
  baseline is what the process holds before any step: on a GPU the device allocator's
  live bytes; on a CPU its resident memory (TensorFlow, the model, the optimizer) plus
  `PIPELINE_BYTES` for the input pipeline, and there the step bytes are scaled by the
  resident bytes the process gained per tensor byte of its largest step (the traced
  programs, freed heap the C library keeps), measured in the same process.
- `estimate_costs`: `training_bytes`' arithmetic, no TensorFlow work at all, for sizes
  too large to run here (`xtts-train check --estimate`).

`xtts_data.plan.plan_batches` then takes, per bucket, the largest multiple of
`batch_multiple` whose predicted peak (baseline + fixed + batch x per_row) stays within
`FILL` of the budget; `fit` keeps the plan in its run (`memory_plan.json`), which
`xtts-data doctor --plan` prints and times the pipeline with.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf
import tqdm
import yaml

import xtts_data as xd
from xtts_data.host import physical_memory
from xtts_data.plan import PLAN_FILE, BucketCost, MemoryPlan, plan_batches, write_plan
from xtts_train.compile.compiler import device_kind
from xtts_train.compile.memory import fixed_bytes, row_bytes
from xtts_train.compile.process import measuring_pool, peak_rss_bytes, rss_bytes
from xtts_train.config import StackConfig
from xtts_train.errors import ConfigError
from xtts_train.training.build import build_task_steps
from xtts_train.training.steps import kept_dtype_policy
from xtts_train.training.task import Task

__all__ = [
    "PIPELINE_BYTES",
    "batch_plan",
    "check_budget",
    "estimate_costs",
    "measure_costs",
    "measured_plan",
]

# The input pipeline beside the steps on a CPU host: `xtts-data doctor` alone peaked at
# 0.70 GB with TensorFlow imported (0.3 GB of it TensorFlow's own), 600-clip cache.
PIPELINE_BYTES = 400 * 2**20
# Steps measured per shape, the largest peak kept: the executor runs independent ops in
# whichever order its threads reach them, and the order moves a step's peak (one step of
# the micro model's 64-frame bucket ranged 3-8 MiB a row here, 143 MiB once on CI).
_REPEATS = 3
_GIB = 2**30


def estimate_costs(stack: StackConfig, shapes: Sequence) -> list[BucketCost]:
    """`training_bytes`' line of every shape (`BatchShape`s: frames, text_len)."""
    model, cond = stack.model, stack.data.cond_frames
    return [BucketCost(s.frames, s.text_len, fixed_bytes(model),
                       row_bytes(model, s.text_len, s.frames, cond)) for s in shapes]  # fmt: skip


def measure_costs(task: type[Task], stack: StackConfig,
                  shapes: Sequence) -> tuple[list[BucketCost], int]:  # fmt: skip
    """Measured lines of every shape (`BatchShape`s), and the baseline, from real steps of
    `task` at each shape's batch size and twice it, in a fresh process (see the module
    docstring).

    The spawned process imports the caller's main module: a script must guard its work
    with `if __name__ == "__main__":` (the console scripts do).
    """
    keys = [(s.frames, s.text_len, s.batch_size) for s in shapes]
    with measuring_pool() as pool:
        return pool.apply(_measure, (task, stack, keys))


def _measure(task: type[Task], stack: StackConfig,
             keys: list[tuple[int, int, int]]) -> tuple[list[BucketCost], int]:  # fmt: skip
    """`measure_costs` in the child process."""
    shapes = tuple(xd.BatchShape(frames=f, text_len=t, batch_size=b * n)
                   for f, t, b in keys for n in (1, 2))  # fmt: skip
    spec = xd.DatasetSpec(shapes, stack.model.n_mels, stack.data.cond_frames)
    device = "GPU:0" if device_kind() == "GPU" else "CPU:0"
    with kept_dtype_policy():
        steps = build_task_steps(task, stack, spec)
        held = (tf.config.experimental.get_memory_info(device)["current"]
                if device == "GPU:0" else rss_bytes())  # fmt: skip
        steps.warm_up(workers=1, defer_cached=False)
        peaks = {}
        for shape, signature in zip(shapes, spec.signatures, strict=True):
            batch = steps.task.placeholder_batch(signature)
            peaks[shape.key] = max(_step_peak(steps, batch, device) for _ in range(_REPEATS))
    baseline, resident = held, 1.0
    if device == "CPU:0":  # resident bytes per tensor byte: programs, freed heap kept
        baseline += PIPELINE_BYTES
        resident = max((peak_rss_bytes() - held) / max(peaks.values()), 1.0)
    costs = []
    for frames, text, batch in keys:
        low, high = peaks[(batch, text, frames)], peaks[(2 * batch, text, frames)]
        per_row = max((high - low) / batch, 1.0)
        fixed = max(low - batch * per_row, 0.0)
        costs.append(BucketCost(frames, text, int(resident * fixed), int(resident * per_row)))
    return costs, baseline


def _step_peak(steps, batch: dict, device: str) -> int:
    """The allocator's peak bytes during one train step on `batch`, less those live before."""
    live = tf.config.experimental.get_memory_info(device)["current"]
    tf.config.experimental.reset_memory_stats(device)
    steps.train(batch, step=0)["loss"].numpy()
    return tf.config.experimental.get_memory_info(device)["peak"] - live


def batch_plan(task: type[Task], stack: StackConfig, spec: xd.DatasetSpec, config_yaml: Path,
               progress: bool = False) -> tuple[int, ...]:  # fmt: skip
    """`fit`'s batch sizes for `train.memory_budget_gb`: those its run's `config_yaml`
    recorded under the same budget (a resume trains on the shapes it began with), else a
    new measured plan of `spec`'s buckets, written beside `config_yaml` (`PLAN_FILE`, for
    `xtts-data doctor --plan`) and printed through tqdm with `progress`."""
    if config_yaml.exists():
        before = yaml.safe_load(config_yaml.read_text()) or {}
        recorded = (before.get("data") or {}).get("batch_sizes")
        budget = (before.get("train") or {}).get("memory_budget_gb")
        if recorded and budget == stack.train.memory_budget_gb:
            return tuple(recorded)
    plan = measured_plan(task, stack, spec)
    write_plan(plan, config_yaml.parent / PLAN_FILE)
    if progress:
        tqdm.tqdm.write(plan.format())
    return plan.batch_sizes


def measured_plan(task: type[Task], stack: StackConfig, spec: xd.DatasetSpec) -> MemoryPlan:
    """The plan of `spec`'s buckets for `train.memory_budget_gb`, from measured steps of
    `task` (a `bucketed` one).

    Raises:
        ConfigError: a budget over this machine's memory, or too small for a bucket.
    """
    check_budget(stack)
    costs, baseline = measure_costs(task, stack, spec.shapes)
    return plan_batches(costs, stack.train.memory_budget_gb, baseline=baseline,
                        multiple=stack.data.batch_multiple)  # fmt: skip


def check_budget(stack: StackConfig) -> None:
    """Refuse a budget over this machine's memory before anything is measured."""
    budget = stack.train.memory_budget_gb
    if budget is not None and budget * _GIB > physical_memory():
        raise ConfigError(
            f"Expected train.memory_budget_gb <= {physical_memory() / _GIB:.1f} (this "
            f"machine's memory), received: memory_budget_gb={budget}"
        )
