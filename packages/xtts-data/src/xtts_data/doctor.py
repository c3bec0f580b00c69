"""`doctor`: is the input pipeline the bottleneck? Numbers, a verdict and a picture.

The pipeline is timed alone, then fed to a simulated accelerator that needs `device_ms`
per batch and is dispatched to asynchronously, as TensorFlow dispatches to a GPU: the
host sleeps while the device is busy (freeing its CPU for the input pipeline), and the
device idles when its next batch has not arrived. Device utilization is busy time over
the span of the device's timeline.

Either pipeline is measured the same way: the text-to-mel batches of `make_dataset` and
the vocoder's segment batches of `make_segment_dataset`.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf
from matplotlib.figure import Figure

from xtts_data.errors import CorpusError
from xtts_data.pipeline import DataPipeline
from xtts_data.segments import SegmentPipeline
from xtts_data.stats import cv

__all__ = [
    "PYTHON_OPS",
    "DoctorReport",
    "Timing",
    "diagnose",
    "plot",
    "python_ops",
    "time_batches",
    "verdict",
]

PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


def python_ops(dataset: tf.data.Dataset) -> list[str]:
    """Names of Python-calling ops (`py_function`, `numpy_function`) in the dataset graph.

    Reads the serialized dataset graph, including every function in its library, so
    ops nested inside `map`/`filter`/`interleave` functions are found.
    """
    graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())
    found = [f"{node.name} ({node.op})" for node in graph.node if node.op in PYTHON_OPS]
    for function in graph.library.function:
        found += [
            f"{function.signature.name}/{node.name} ({node.op})"
            for node in function.node_def
            if node.op in PYTHON_OPS
        ]
    return sorted(found)


@dataclasses.dataclass(frozen=True)
class Timing:
    """Per-batch timings of one pass over a dataset of dict batches: text-to-mel batches
    with `mel`, `mel_lengths` and `tokens`, or segment batches with `mel` and `audio`
    (xtts_data's and the baselines' alike).

    `shapes` holds each batch's shape in its spec shape's `key` order: (batch, text,
    frames) for text-to-mel, (batch, frames, samples) for segments."""

    waits: np.ndarray  # seconds the consumer waited for each batch [n]
    ends: np.ndarray  # seconds since the pass started, at the end of each step [n]
    samples: int
    real_frames: int
    padded_frames: int
    shapes: list[tuple[int, int, int]]  # of each batch, as its spec's shape keys
    wall: float
    device_ms: float | None = None
    busy: float = 0.0  # seconds of simulated device steps
    span: float = 0.0  # seconds from the first step's start to the last step's end
    device_starts: np.ndarray | None = None  # step start times, seconds since the pass began
    cpu: float = 0.0  # CPU seconds of the whole process (every thread) during the pass

    def summary(self) -> dict[str, float | None]:
        """samples/s, batch wait mean / p50 / p99 / CV, device utilization, padding, the
        process's CPU milliseconds per sample (the input pipeline's threads, mostly) and
        the real (unpadded) frames per sample."""
        waits_ms = self.waits * 1e3
        mean = float(waits_ms.mean())
        return {
            "samples_per_s": self.samples / self.wall,
            "batch_ms_mean": mean,
            "batch_ms_p50": float(np.percentile(waits_ms, 50)),
            "batch_ms_p99": float(np.percentile(waits_ms, 99)),
            "batch_ms_cv": cv(waits_ms),
            "device_utilization": min(self.busy / self.span, 1.0) if self.device_ms else None,
            "padding_efficiency": self.real_frames / max(self.padded_frames, 1),
            "cpu_ms_per_sample": 1e3 * self.cpu / self.samples if self.samples else None,
            "frames_per_sample": self.real_frames / self.samples if self.samples else None,
        }


def _next(iterator):
    try:
        return next(iterator)
    except StopIteration:
        raise CorpusError(
            "Expected the pipeline to give batches, received none: the split has fewer "
            "utterances than its batch size (batches are full, partial ones are dropped); "
            "lower data.batch_size or use a larger corpus"
        ) from None


def _batch_shape(batch: dict[str, Any]) -> tuple[tuple[int, int, int], int]:
    """A batch's shape, as its spec's shape `key` orders it, and its real mel frames.

    Args:
        batch: a text-to-mel batch (`tokens` int32 [B, T], `mel` float32 [B, F, M],
            `mel_lengths` int32 [B]) or a segment batch (`mel` float32 [B, F, M], `audio`
            float32 [B, S]).

    Returns:
        ((B, T, F), sum of `mel_lengths`) for text-to-mel, ((B, F, S), B * F) for
        segments: a segment's frames are all real.
    """
    b, f = batch["mel"].shape[:2]
    if "tokens" in batch:
        return (b, batch["tokens"].shape[1], f), int(np.sum(batch["mel_lengths"]))
    return (b, f, batch["audio"].shape[1]), b * f


def time_batches(iterator, *, batches: int, device_ms: float | None = None) -> Timing:
    """Draw `batches` batches from `iterator`, optionally feeding a simulated device.

    The device is modelled as TensorFlow drives a GPU: steps are dispatched
    asynchronously, one runs while one more waits queued, and the host blocks (sleeping,
    so its CPU goes to the input pipeline) only when the queue is full. Each step takes
    `device_ms`; it starts when the device is free and its batch has arrived. The device
    timeline is computed from the real arrival times of the batches, so no Python thread
    (and no GIL hand-over) stands in for the device. Utilization is step time over the
    span from the first step's start to the last step's end.
    """
    device = _Device(device_ms / 1e3) if device_ms else None
    waits, ends, shapes = [], [], []
    samples = real = padded = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(batches):
        before = time.perf_counter()
        batch = _next(iterator)
        arrived = time.perf_counter()
        waits.append(arrived - before)
        b, f = batch["mel"].shape[:2]
        shape, frames = _batch_shape(batch)
        shapes.append(shape)
        samples += b
        padded += b * f
        real += frames
        if device is not None:
            device.dispatch(arrived)
        ends.append(time.perf_counter() - start)
    if device is not None:
        device.finish()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    if device is None:
        return Timing(np.array(waits), np.array(ends), samples, real, padded, shapes, wall,
                      cpu=cpu)  # fmt: skip
    return Timing(
        np.array(waits), np.array(ends), samples, real, padded, shapes, wall, device_ms,
        device.busy, device.span, np.array(device.starts) - start, cpu,
    )  # fmt: skip


class _Device:
    """The timeline of a simulated accelerator with one step running and one queued."""

    def __init__(self, step: float):
        self.step = step
        self.starts: list[float] = []
        self.ends: list[float] = []

    def dispatch(self, arrived: float) -> None:
        """Queue a step for a batch that arrived at `arrived`; block while the queue is full."""
        free = self.ends[-1] if self.ends else arrived
        self.starts.append(max(arrived, free))
        self.ends.append(self.starts[-1] + self.step)
        if len(self.starts) >= 2:  # the queue slot frees when the previous step starts
            _sleep_until(self.starts[-2])

    def finish(self) -> None:
        _sleep_until(self.ends[-1])

    @property
    def busy(self) -> float:
        return self.step * len(self.starts)

    @property
    def span(self) -> float:
        return self.ends[-1] - self.starts[0]


def _sleep_until(moment: float) -> None:
    remaining = moment - time.perf_counter()
    if remaining > 0:
        time.sleep(remaining)


@dataclasses.dataclass(frozen=True)
class DoctorReport:
    """Measurements of one pipeline (see `to_dict` for the JSON keys)."""

    alone: Timing
    device: Timing | None
    device_ms: float | None
    python_ops: list[str]
    spec_shapes: list[tuple[int, int, int]]
    startup_s: float

    def to_dict(self) -> dict[str, Any]:
        out = self.alone.summary()
        out |= {
            "device_ms": self.device_ms,
            "device_utilization": None,
            "shapes": [list(s) for s in sorted(set(self.alone.shapes))],
            "shapes_outside_spec": [
                list(s) for s in sorted(set(self.alone.shapes) - set(self.spec_shapes))
            ],
            "spec_shapes": [list(s) for s in self.spec_shapes],
            "python_ops": self.python_ops,
            "batches": len(self.alone.waits),
            "startup_s": self.startup_s,
        }
        if self.device is not None:
            device = self.device.summary()
            out["device_utilization"] = device["device_utilization"]
            out["device_wait_ms_mean"] = device["batch_ms_mean"]
            out["device_wait_ms_p99"] = device["batch_ms_p99"]
            out["device_wait_ms_cv"] = device["batch_ms_cv"]
        out["verdict"] = verdict(out)
        return out


def diagnose(
    pipeline: DataPipeline | SegmentPipeline,
    *,
    batches: int = 200,
    device_ms: float | None = None,
    warmup: int = 5,
) -> DoctorReport:
    """Time `batches` batches alone and, with `device_ms`, fed to a simulated device.

    Args:
        pipeline: from `make_dataset` or `make_segment_dataset` (with `repeat=True` for as
            many batches as wanted; a one-epoch dataset is repeated whole, dropping each
            epoch's partial batches).
        batches: batches timed per pass (after `warmup` untimed ones).
        device_ms: simulated device step per batch in milliseconds.
        warmup: batches drawn first, so start-up (file opening, autotune) is not counted.
    """
    dataset = pipeline.dataset.repeat()
    started = time.perf_counter()
    iterator = iter(dataset)
    for _ in range(warmup):
        _next(iterator)
    startup = time.perf_counter() - started
    alone = time_batches(iterator, batches=batches)
    device = time_batches(iterator, batches=batches, device_ms=device_ms) if device_ms else None
    spec_shapes = [s.key for s in pipeline.spec.shapes]
    return DoctorReport(
        alone, device, device_ms, python_ops(pipeline.dataset), spec_shapes, startup
    )


def verdict(report: dict[str, Any]) -> str:
    """One plain sentence: what limits training, and why."""
    notes = []
    if report["python_ops"]:
        notes.append(
            f"{len(report['python_ops'])} Python op(s) in the graph hold the GIL per element"
        )
    if report["shapes_outside_spec"]:
        notes.append(f"{len(report['shapes_outside_spec'])} batch shape(s) outside the spec")
    if report["padding_efficiency"] < 0.8:
        waste = 1 - report["padding_efficiency"]
        notes.append(f"padding wastes {waste:.0%} of mel frames (try policy: buckets)")
    util = report["device_utilization"]
    if util is None:
        head = (
            f"pipeline alone: {report['samples_per_s']:.0f} samples/s, a batch every "
            f"{report['batch_ms_mean']:.1f} ms; pass --device-ms with your step time to judge it"
        )
    elif util >= 0.95:
        head = f"not input-bound: device busy {util:.1%} of the time"
    else:
        head = (
            f"input-bound: device idle {1 - util:.0%} of the time (waits "
            f"{report['device_wait_ms_mean']:.1f} ms per {report['device_ms']:g} ms step)"
        )
    return head + "".join(f"; {n}" for n in notes)


def plot(report: DoctorReport, path: str | Path) -> None:
    """Batch latency over time (and device utilization per window) as a PNG."""
    runs = [("pipeline alone", report.alone)]
    if report.device is not None:
        runs.append((f"with a {report.device_ms:g} ms device step", report.device))
    figure = Figure(figsize=(10, 3.2 * len(runs)))  # no pyplot: no GUI backend, no global state
    axes = figure.subplots(len(runs), 1, squeeze=False)
    for axis, (title, run) in zip(axes[:, 0], runs, strict=True):
        axis.plot(run.ends, run.waits * 1e3, lw=0.8, label="wait for batch (ms)")
        axis.set_xlabel("time (s)")
        axis.set_ylabel("batch wait (ms)")
        axis.set_title(title)
        if run is report.device:
            twin = axis.twinx()
            window = max(len(run.waits) // 20, 1)
            starts, step = run.device_starts, report.device_ms / 1e3
            util = [
                window * step / (starts[i + window - 1] + step - starts[i])
                for i in range(0, len(starts) - window + 1, window)
            ]
            twin.step(
                run.ends[window - 1 :: window][: len(util)],
                np.array(util) * 100,
                color="tab:red",
                where="pre",
                label="device busy (%)",
            )
            twin.set_ylim(0, 105)
            twin.set_ylabel("device busy (%)", color="tab:red")
    figure.suptitle(verdict(report.to_dict()), fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
