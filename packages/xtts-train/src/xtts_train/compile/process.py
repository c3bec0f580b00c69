"""Figures of this process: time to the first step and its parts, peak memory.

`StartupClock` splits "process start → first step done" into the parts a user can act on:
`import` (interpreter, TensorFlow and the command line, before `fit` was called), `data`
(opening the cache, building the pipeline, the first batch), `model` (building the model
and optimizer), `trace` and `compile` (the warm-up) and `first_step`.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import multiprocessing
import multiprocessing.pool
import os
import resource
import sys
import time
from collections.abc import Iterator

from xtts_audio.startup import process_age_seconds

__all__ = [
    "StartupClock",
    "format_startup",
    "measuring_pool",
    "peak_rss_bytes",
    "peak_rss_mb",
    "release_free_heap",
    "rss_bytes",
]


class StartupClock:
    """Seconds per start-up part, from construction (or process start) to the first step."""

    def __init__(self) -> None:
        self._began = time.perf_counter()
        self._import = process_age_seconds()  # None where the OS does not tell
        self.parts: dict[str, float] = {}

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Add the block's wall time to part `name`."""
        begin = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - begin)

    def add(self, name: str, seconds: float) -> None:
        self.parts[name] = self.parts.get(name, 0.0) + seconds

    def add_warm_up(self, warm) -> None:
        """A `WarmUp`'s tracing and compiling, as parts `trace` and `compile`."""
        self.add("trace", warm.trace_seconds)
        self.add("compile", warm.compile_seconds)

    def report(self) -> dict:
        """`time_to_first_step_s` (from process start where known, else from the clock's
        construction) and `startup_s`, the parts."""
        since = time.perf_counter() - self._began
        parts = {"import": self._import, **self.parts} if self._import is not None else self.parts
        total = since + (self._import or 0.0)
        return {"time_to_first_step_s": total, "startup_s": parts}


def format_startup(report: dict) -> str:
    """`41.2 s (import 5.1, data 0.8, ...)` for a `StartupClock.report()`."""
    parts = ", ".join(f"{name.replace('_', ' ')} {seconds:.1f}"
                      for name, seconds in report["startup_s"].items())  # fmt: skip
    return f"{report['time_to_first_step_s']:.1f} s ({parts})"


def peak_rss_mb() -> float:
    """The largest resident set size this process has had, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def peak_rss_bytes() -> int:
    """The largest resident set size this process has had, in bytes."""
    return int(peak_rss_mb() * 2**20)


def rss_bytes() -> int:
    """This process's resident set size now, in bytes (Linux's /proc; the peak elsewhere)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize()
    except OSError:
        return int(peak_rss_mb() * 2**20)


def release_free_heap() -> None:
    """Give freed heap pages back to the OS (glibc's `malloc_trim`; a no-op elsewhere).

    XLA's compiler frees ~0.7 GB of working memory per compiled program of the tiny model,
    which glibc keeps in its arenas: after a warm-up of 8 programs the process held
    gigabytes it no longer used.
    """
    name = ctypes.util.find_library("c")
    if not name or sys.platform == "darwin":
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(name).malloc_trim(0)


@contextlib.contextmanager
def measuring_pool() -> Iterator[multiprocessing.pool.Pool]:
    """One fresh (spawned) worker process whose TensorFlow counts the bytes of CPU tensors.

    `tf.config.experimental.get_memory_info("CPU:0")` has figures only from a BFC
    allocator: oneDNN's, on by default where the CPU has AVX-512, else the one
    `TF_CPU_ALLOCATOR_USE_BFC` asks for, which the worker is started with (the variable
    is read at a process's first tensor, so it is set for the spawn and restored here).
    """
    context = multiprocessing.get_context("spawn")
    before = os.environ.get("TF_CPU_ALLOCATOR_USE_BFC")
    os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
    try:
        pool = context.Pool(1)
    finally:
        if before is None:
            del os.environ["TF_CPU_ALLOCATOR_USE_BFC"]
        else:
            os.environ["TF_CPU_ALLOCATOR_USE_BFC"] = before
    with pool:
        yield pool
