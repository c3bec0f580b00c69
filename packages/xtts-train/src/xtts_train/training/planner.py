"""Per-bucket batch sizes that fill a memory budget (`train.memory_budget_gb`).

A frame budget gives every bucket the same padded frames per batch, whatever a frame of
that bucket costs; the planner gives each bucket the largest batch whose step fits the
budget instead, as NeMo's OOMptimizer does for dynamic shapes. A bucket's step memory is
linear in its batch (every activation has a batch axis), so two points give it: `fixed`
bytes at any batch and `per_row` bytes a row. They come from one of two sources:

- `measure_costs`: real train steps, as `fit` builds them, on the task's placeholder
  batch at each bucket's frame-budget batch size and twice it, in a fresh process (its
  memory and weights never touch the caller's). A step's bytes are TensorFlow's
  allocator peak during it less what was live before it
  (`tf.config.experimental.get_memory_info`); the baseline is what the process holds
  before any step: on a GPU the device allocator's live bytes; on a CPU its resident
  memory (TensorFlow, the model, the optimizer) plus `PIPELINE_BYTES` for the input
  pipeline, and there the step bytes are scaled by the resident bytes the process gained
  per tensor byte of its largest step (the traced programs, freed heap the C library
  keeps), measured in the same process.
- `estimate_costs`: `training_bytes`' arithmetic, no TensorFlow work at all, for sizes
  too large to run here (`xtts-train check --estimate`).

`plan_batches` then takes, per bucket, the largest multiple of `batch_multiple` whose
predicted peak (baseline + fixed + batch x per_row) stays within `FILL` of the budget.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf
import tqdm
import yaml

import xtts_data as xd
from xtts_data.host import physical_memory
from xtts_train.config import StackConfig
from xtts_train.errors import ConfigError
from xtts_train.training.build import build_steps
from xtts_train.training.compiler import device_kind
from xtts_train.training.memory import fixed_bytes, row_bytes
from xtts_train.training.process import peak_rss_bytes, rss_bytes
from xtts_train.training.steps import kept_dtype_policy

__all__ = [
    "FILL",
    "PIPELINE_BYTES",
    "BucketCost",
    "MemoryPlan",
    "batch_plan",
    "check_budget",
    "estimate_costs",
    "measure_costs",
    "measured_plan",
    "plan_batches",
]

FILL = 0.9  # of the budget the planned peaks may reach (NeMo's OOMptimizer aims at 90%)
# The input pipeline beside the steps on a CPU host: `xtts-data doctor` alone peaked at
# 0.70 GB with TensorFlow imported (0.3 GB of it TensorFlow's own), 600-clip cache.
PIPELINE_BYTES = 400 * 2**20
_GIB = 2**30


@dataclasses.dataclass(frozen=True)
class BucketCost:
    """A bucket's step memory as a line in its batch: `fixed + batch * per_row` bytes."""

    frames: int
    text_len: int
    fixed: int
    per_row: int

    def bytes(self, batch: int) -> int:
        return self.fixed + batch * self.per_row


@dataclasses.dataclass(frozen=True)
class MemoryPlan:
    """Batch sizes for a budget, and what they were planned from.

    Attributes:
        budget: bytes the process (a CPU) or the device (a GPU) may use.
        baseline: bytes held before any step (`measure_costs`), 0 for an estimate.
        costs: per bucket, shortest first.
        batch_sizes: the planned batch of each bucket (`data.batch_sizes`).
        source: `"measured"` or `"estimated"`.
    """

    budget: int
    baseline: int
    costs: tuple[BucketCost, ...]
    batch_sizes: tuple[int, ...]
    source: str

    def peak(self, index: int) -> int:
        """Predicted peak bytes of bucket `index` at its planned batch."""
        return self.baseline + self.costs[index].bytes(self.batch_sizes[index])

    def format(self) -> str:
        """A table: each bucket's shape, planned batch, rows x frames, predicted peak."""
        lines = [f"memory plan ({self.source}): budget {self.budget / _GIB:.2f} GiB, "
                 f"{FILL:.0%} of it planned; held before any step {self.baseline / _GIB:.2f} GiB",
                 f"{'frames':>7}{'text':>6}{'batch':>7}{'frames/batch':>14}{'MiB/row':>9}"
                 f"{'peak GiB':>10}"]  # fmt: skip
        for i, (cost, batch) in enumerate(zip(self.costs, self.batch_sizes, strict=True)):
            lines.append(f"{cost.frames:>7}{cost.text_len:>6}{batch:>7}"
                         f"{batch * cost.frames:>14}{cost.per_row / 2**20:>9.1f}"
                         f"{self.peak(i) / _GIB:>10.2f}")  # fmt: skip
        lines.append("data.batch_sizes=[" + ",".join(map(str, self.batch_sizes)) + "]")
        return "\n".join(lines)


def plan_batches(costs: Sequence[BucketCost], budget_gb: float, *, baseline: int = 0,
                 multiple: int = 1, source: str = "measured") -> MemoryPlan:  # fmt: skip
    """The largest batch of each bucket, a multiple of `multiple`, whose predicted peak
    stays within `FILL` of the budget.

    Raises:
        ConfigError: a bucket has no room for `multiple` rows: names the bucket that needs
            the most and the smallest budget (rounded up to 0.01 GiB) that fits every one.
    """
    budget = int(budget_gb * _GIB)
    room = FILL * budget - baseline
    sizes = [int((room - cost.fixed) // cost.per_row) // multiple * multiple for cost in costs]
    if min(sizes) < multiple:
        cost = max(costs, key=lambda c: c.bytes(multiple))
        least = math.ceil((baseline + cost.bytes(multiple)) / FILL / _GIB * 100) / 100
        raise ConfigError(
            f"Expected train.memory_budget_gb >= {least:.2f} ({multiple} row(s) of the "
            f"{cost.frames}-frame x {cost.text_len}-token bucket need it, with "
            f"{baseline / _GIB:.2f} GiB held before the steps), received: "
            f"memory_budget_gb={budget_gb}"
        )
    return MemoryPlan(budget, baseline, tuple(costs), tuple(sizes), source)


def estimate_costs(stack: StackConfig, shapes: Sequence) -> list[BucketCost]:
    """`training_bytes`' line of every shape (`BatchShape`s: frames, text_len)."""
    model, cond = stack.model, stack.data.cond_frames
    return [BucketCost(s.frames, s.text_len, fixed_bytes(model),
                       row_bytes(model, s.text_len, s.frames, cond)) for s in shapes]  # fmt: skip


def measure_costs(stack: StackConfig, shapes: Sequence) -> tuple[list[BucketCost], int]:
    """Measured lines of every shape (`BatchShape`s), and the baseline, from real steps at
    each shape's batch size and twice it, in a fresh process (see the module docstring).

    The spawned process imports the caller's main module: a script must guard its work
    with `if __name__ == "__main__":` (the console scripts do).
    """
    keys = [(s.frames, s.text_len, s.batch_size) for s in shapes]
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(_measure, (stack, keys))


def _measure(stack: StackConfig,
             keys: list[tuple[int, int, int]]) -> tuple[list[BucketCost], int]:  # fmt: skip
    """`measure_costs` in the child process."""
    shapes = tuple(xd.BatchShape(frames=f, text_len=t, batch_size=b * n)
                   for f, t, b in keys for n in (1, 2))  # fmt: skip
    spec = xd.DatasetSpec(shapes, stack.model.n_mels, stack.data.cond_frames)
    device = "GPU:0" if device_kind() == "GPU" else "CPU:0"
    with kept_dtype_policy():
        steps = build_steps(stack, spec)
        held = (tf.config.experimental.get_memory_info(device)["current"]
                if device == "GPU:0" else rss_bytes())  # fmt: skip
        steps.warm_up(workers=1, defer_cached=False)
        peaks = {}
        for shape, signature in zip(shapes, spec.signatures, strict=True):
            batch = steps.task.placeholder_batch(signature)
            live = tf.config.experimental.get_memory_info(device)["current"]
            tf.config.experimental.reset_memory_stats(device)
            steps.train(batch, step=0)["loss"].numpy()
            peaks[shape.key] = tf.config.experimental.get_memory_info(device)["peak"] - live
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


def batch_plan(stack: StackConfig, spec: xd.DatasetSpec, config_yaml: Path,
               progress: bool = False) -> tuple[int, ...]:  # fmt: skip
    """`fit`'s batch sizes for `train.memory_budget_gb`: those its run's `config_yaml`
    recorded under the same budget (a resume trains on the shapes it began with), else a
    new measured plan of `spec`'s buckets (printed through tqdm with `progress`)."""
    if config_yaml.exists():
        before = yaml.safe_load(config_yaml.read_text()) or {}
        recorded = (before.get("data") or {}).get("batch_sizes")
        budget = (before.get("train") or {}).get("memory_budget_gb")
        if recorded and budget == stack.train.memory_budget_gb:
            return tuple(recorded)
    plan = measured_plan(stack, spec)
    if progress:
        tqdm.tqdm.write(plan.format())
    return plan.batch_sizes


def measured_plan(stack: StackConfig, spec: xd.DatasetSpec) -> MemoryPlan:
    """The plan of `spec`'s buckets for `train.memory_budget_gb`, from measured steps.

    Raises:
        ConfigError: a budget over this machine's memory, or too small for a bucket.
    """
    check_budget(stack)
    costs, baseline = measure_costs(stack, spec.shapes)
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
