"""Step timings of a training loop: per shape, host overhead, input-bound fraction, and
the sums between two log lines."""

from __future__ import annotations

import collections
import statistics

import numpy as np

from xtts_data.stats import cv, cv_within_groups

__all__ = ["Interval", "Timings", "cv"]


class Timings:
    """Per step: data wait, the step call, host time around them; by batch shape.

    `wall` runs from one `next(iterator)` to the next, so the walls sum to the loop's time;
    host overhead is what is left after the data wait and the step call.
    """

    def __init__(self) -> None:
        self.waits, self.walls, self.hosts = [], [], []
        self.shapes: list[tuple[int, int, int]] = []  # (batch, text, frames) of each step

    def add(self, shape, before: float, got: float, called: float, after: float) -> None:
        self.waits.append(got - before)
        self.walls.append(after - before)
        self.hosts.append(after - called)  # bookkeeping after the step call returned
        self.shapes.append(shape)

    def summary(self) -> dict:
        skip = len(self.walls) // 10  # the first steps fill buffers and caches
        walls = [w * 1e3 for w in self.walls[skip:]]
        return {
            "step_ms_median": statistics.median(walls) if walls else 0.0,
            "step_ms_cv": cv(walls),
            # Each step over its shape's mean: the steadiness of a step of fixed work,
            # comparable with the bare compiled step's (`xtts-bench train`).
            "step_cv_within_shape": cv_within_groups(_by_shape(self.shapes[skip:], walls).values()),
            "step_ms_by_shape": {
                "x".join(map(str, shape)): {
                    "steps": len(times),
                    "median": statistics.median(times) * 1e3,
                    "cv": cv(times[len(times) // 10 :]),
                }
                for shape, times in sorted(_by_shape(self.shapes, self.walls).items())
            },
            "host_overhead_ms": statistics.median(self.hosts[skip:]) * 1e3 if walls else 0.0,
            "input_bound_fraction": sum(self.waits) / sum(self.walls) if self.walls else 0.0,
        }


def _by_shape(shapes: list, values: list[float]) -> dict[tuple[int, int, int], list[float]]:
    grouped = collections.defaultdict(list)
    for shape, value in zip(shapes, values, strict=True):
        grouped[shape].append(value)
    return grouped


class Interval:
    """Sums between two log lines; reading the losses is the interval's one host sync."""

    def __init__(self) -> None:
        self.waits, self.walls, self.outputs, self.samples = [], [], [], 0

    def add(self, wait: float, wall: float, outputs: dict, batch: dict) -> None:
        self.waits.append(wait)
        self.walls.append(wall)
        self.outputs.append(outputs)
        self.samples += int(batch["mel"].shape[0])  # utterances (or segments) per batch

    def flush(self) -> dict:
        # The task's losses and metrics, and the gradient norm; `finite` is the gate's.
        names = [k for k in self.outputs[0] if k != "finite"]
        losses = {k: float(np.mean([float(o[k]) for o in self.outputs])) for k in names}
        wall = sum(self.walls)
        values = {
            **losses,
            "step_ms": 1e3 * wall / len(self.walls),
            "data_wait_ms": 1e3 * sum(self.waits) / len(self.waits),
            "samples_per_s": self.samples / wall if wall else 0.0,
        }
        self.__init__()
        return values
