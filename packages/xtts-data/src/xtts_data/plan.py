"""Per-bucket batch sizes that fill a memory budget, and the file that keeps them.

A frame budget gives every bucket the same padded frames per batch, whatever a frame of
that bucket costs; a memory plan gives each bucket the largest batch whose step fits the
budget instead, as NeMo's OOMptimizer does for dynamic shapes. A bucket's step memory is
linear in its batch (every activation has a batch axis), so two numbers give it: `fixed`
bytes at any batch and `per_row` bytes a row (`BucketCost`). Where they come from is the
trainer's business (`xtts_train.training.planner` measures real steps or estimates them);
the arithmetic from costs to batch sizes (`plan_batches`) and the plan's file
(`write_plan`, `read_plan`: `memory_plan.json`, which `xtts-train fit` writes into its
run and `xtts-data doctor --plan` reads) are the data side's, since the batch sizes are
the pipeline's (`DataConfig.batch_sizes`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path

from xtts_data.errors import ConfigError
from xtts_data.files import write_json_atomic

__all__ = ["FILL", "PLAN_FILE", "BucketCost", "MemoryPlan", "plan_batches", "read_plan",
           "write_plan"]  # fmt: skip

FILL = 0.9  # of the budget the planned peaks may reach (NeMo's OOMptimizer aims at 90%)
PLAN_FILE = "memory_plan.json"  # in a run folder
_FORMAT = 1
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
        baseline: bytes held before any step, 0 for an estimate.
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

    @property
    def buckets(self) -> list[tuple[int, int]]:
        """(frames, text_len) of each bucket, shortest first."""
        return [(cost.frames, cost.text_len) for cost in self.costs]

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
    (`baseline + fixed + batch * per_row`) stays within `FILL` of the budget.

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


def write_plan(plan: MemoryPlan, path: str | Path) -> None:
    """Write `plan` to `path` as JSON, atomically (`read_plan` reads it back)."""
    value = {"format": _FORMAT, **dataclasses.asdict(plan)}
    write_json_atomic(Path(path), value)


def read_plan(path: str | Path) -> MemoryPlan:
    """The plan `write_plan` wrote to `path`, or to `path/memory_plan.json` for a folder
    (a run).

    Raises:
        ConfigError: no such file, or one that is not a memory plan of this format.
    """
    file = Path(path) / PLAN_FILE if Path(path).is_dir() else Path(path)
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
        version = value.pop("format")
        if version != _FORMAT:
            raise ValueError(f"format {version!r}, not {_FORMAT}")
        costs = tuple(BucketCost(**cost) for cost in value.pop("costs"))
        return MemoryPlan(costs=costs, batch_sizes=tuple(value.pop("batch_sizes")), **value)
    except FileNotFoundError:
        raise ConfigError(
            f"Expected a memory plan (`xtts-train fit` with train.memory_budget_gb writes "
            f"RUN/{PLAN_FILE}; `xtts-train check --save-plan FILE` too), received: "
            f"{file} does not exist"
        ) from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as error:
        raise ConfigError(f"Expected a memory plan written by xtts-train, received: {file} "
                          f"({type(error).__name__}: {error})") from None  # fmt: skip
