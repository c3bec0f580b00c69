"""Warm-up: trace every program in turn, compile them on a pool of threads, time both.

Tracing is Python and holds the GIL, so the programs are traced one after another on the
calling thread; each traced program is handed at once to a pool that runs it once (XLA
compiles it then, or loads it from the persistent compile cache, outside the GIL). The
next trace overlaps the compiles already running, and with several workers compiles
overlap each other. Traces happen under `compile_cache.stable_names`, so the compiled
programs are found again by later processes, and inside `compile_cache.collect()`, which
publishes what was compiled.

With the compile cache on, each traced program is also stored (`xtts_train.compile.traces`)
and a later process registers the stored program instead of tracing it again (a
`StoredProgram`, `Program.stored`).

A program the compile cache holds (compiled by an earlier process, recognised by the
fingerprint of its trace) is not run: TensorFlow loads it at its first real call, so a
warm start pays for the one shape its first step needs instead of a placeholder step of
every shape.

A program for TensorFlow's graph executor (`xtts_train.compile.compiler`: `Job.compiler` graph) has
nothing to compile: it is traced and run once like the others (one at a time), or, when
registered from its stored trace, left to its first real call, and never looked up in or
written to the compile cache's executables.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from xtts_train.compile import compile_cache, traces
from xtts_train.compile.process import release_free_heap

__all__ = ["Job", "Program", "WarmUp", "cache_use", "compile_workers", "run_jobs"]


@dataclasses.dataclass(frozen=True)
class Job:
    """One program to build: `trace()` returns it (a concrete function), `run(program)`
    calls it once so that XLA compiles it. `name` keys its stable trace names; `compiler`
    `"graph"`: a graph-executor program (nothing to compile or cache). `key`: its stored
    trace's (`traces.key`), its captured inputs among `variables`; None: always traced."""

    name: str
    trace: Callable[[], Any]
    run: Callable[[Any], None]
    compiler: str = "xla"
    key: str | None = None
    variables: Sequence[Any] = ()


@dataclasses.dataclass(frozen=True)
class Program:
    """A built program: its job's name, and seconds of tracing (or registering its stored
    trace: `stored`) and of its first call (compiling, or loading from the cache, plus one
    run). A `deferred` program is held by the compile cache, or is a graph-executor program
    registered from its stored trace, and was not called: it loads (or is optimized by
    Grappler) at its first real call. `compiler`: `"xla"` or `"graph"` (TensorFlow's graph
    executor: its first call compiles nothing)."""

    name: str
    trace_seconds: float
    compile_seconds: float
    deferred: bool = False
    compiler: str = "xla"
    stored: bool = False


@dataclasses.dataclass(frozen=True)
class WarmUp:
    """What a warm-up did.

    Attributes:
        programs: in job order.
        seconds: wall time of the whole warm-up.
        workers: compile threads used.
        compiled: XLA programs compiled (entries written to the compile cache); the other
            XLA programs were loaded from it. None without a compile cache (all were
            compiled).
    """

    programs: tuple[Program, ...]
    seconds: float
    workers: int
    compiled: int | None

    @property
    def trace_seconds(self) -> float:
        """Time spent tracing (serial, on the calling thread)."""
        return sum(p.trace_seconds for p in self.programs)

    @property
    def compile_seconds(self) -> float:
        """The rest of the warm-up's wall time: waiting for compiles to finish."""
        return max(self.seconds - self.trace_seconds, 0.0)

    @property
    def graph_programs(self) -> int:
        """Programs for TensorFlow's graph executor (no XLA compile, no cache)."""
        return sum(p.compiler == "graph" for p in self.programs)

    @property
    def cache_hits(self) -> int | None:
        """XLA programs loaded from the compile cache (None without one)."""
        xla = len(self.programs) - self.graph_programs
        return None if self.compiled is None else xla - self.compiled

    @property
    def deferred(self) -> int:
        """Programs left to their first real call: held by the compile cache (loaded
        then), or graph programs registered from stored traces (optimized then)."""
        return sum(p.deferred for p in self.programs)

    @property
    def stored(self) -> int:
        """Programs registered from their stored traces (not traced)."""
        return sum(p.stored for p in self.programs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "trace_seconds": self.trace_seconds,
            "compile_seconds": self.compile_seconds,
            "workers": self.workers,
            "programs": {
                p.name: {
                    "trace_s": p.trace_seconds,
                    "compile_s": p.compile_seconds,
                    "deferred": p.deferred,
                    "compiler": p.compiler,
                    "stored": p.stored,
                }
                for p in self.programs
            },
            "graph_programs": self.graph_programs,
            "compiled": self.compiled,
            "cache_hits": self.cache_hits,
            "deferred": self.deferred,
            "stored": self.stored,
        }


def cache_use(warm: Mapping[str, Any]) -> str:
    """What a warm-up (`WarmUp.to_dict()`) took from the compile cache, as one phrase:
    `2 of 8 programs loaded from the compile cache, 6 compiled`, or `8 programs on the
    graph executor (nothing to compile)`, then how many were registered from stored
    traces (`8 of 8 traces stored`) when any were."""
    graph = warm.get("graph_programs", 0)  # absent from summaries older than the switch
    programs = len(warm["programs"]) - graph
    on_graph = f"{graph} programs on the graph executor (nothing to compile)"
    stored = warm.get("stored", 0)  # absent from summaries older than stored traces
    traced = f", {stored} of {len(warm['programs'])} traces stored" if stored else ""
    if not programs:
        return on_graph + traced
    if warm["cache_hits"] is None:
        phrase = f"{programs} programs compiled (no compile cache)"
    else:
        phrase = (f"{warm['cache_hits']} of {programs} programs loaded from the compile "
                  f"cache, {warm['compiled']} compiled")  # fmt: skip
    return (f"{phrase}, {on_graph}" if graph else phrase) + traced


def compile_workers(requested: int, jobs: int) -> int:
    """`requested` threads, or (0) one per CPU this process may use; at most one per job."""
    if requested:
        return max(1, min(requested, jobs))
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, jobs))


def run_jobs(
    jobs: Sequence[Job], *, workers: int, defer_cached: bool = True,
    progress: Callable[[int, int, Program], None] | None = None,
) -> tuple[list, WarmUp]:  # fmt: skip
    """Trace every job on this thread and run each traced program once on `workers` threads.

    Args:
        jobs: the programs to build.
        workers: compile threads (see `compile_workers`).
        defer_cached: leave programs the compile cache holds to load at their first real
            call, and graph programs registered from stored traces to be optimized then
            (False: run every program once here, as a measurement wants).
        progress: called as `progress(done, total, program)` when a program is compiled
            (from a worker thread) or deferred.

    Returns:
        The traced programs in job order, and the `WarmUp` report.
    """
    started = time.perf_counter()
    traced: list[Any] = []
    programs: dict[int, Program] = {}
    compiled: dict[str, set[str]] = {}  # fingerprint -> entries that appeared meanwhile
    lock = threading.Lock()
    # Graph-executor programs run one at a time: two functions run at once by the eager
    # runtime can share one step's resource container, and Grappler's temporaries
    # (ArithmeticOptimizer's TemporaryVariable, named alike in every program) then collide
    # (AlreadyExistsError; seen when stored traces made every program ready at once).
    graph_lock = threading.Lock()

    def finish(built: Program, index: int) -> None:
        with lock:
            programs[index] = built
            done = len(programs)
        if progress is not None:
            progress(done, len(jobs), built)

    def compile_one(index: int, job: Job, program: Any, trace_seconds: float, key,
                    stored: bool) -> None:  # fmt: skip
        begin, before = time.perf_counter(), cache.staged() if key else set()
        with graph_lock if job.compiler == "graph" else contextlib.nullcontext():
            job.run(program)
        if key:
            compiled[key] = cache.staged() - before
        seconds = time.perf_counter() - begin
        finish(Program(job.name, trace_seconds, seconds, compiler=job.compiler,
                       stored=stored), index)  # fmt: skip

    with compile_cache.collect() as collected, \
            concurrent.futures.ThreadPoolExecutor(workers, "xtts-compile") as pool:  # fmt: skip
        cache, futures = compile_cache.active(), []
        folder = traces.folder_of(cache.store if cache is not None else None)
        try:
            for index, job in enumerate(jobs):
                begin = time.perf_counter()
                program, stored, key = _built(job, folder), True, None
                if program is None:
                    (program, key), stored = _traced(job, folder), False
                cached = cache is not None and job.compiler == "xla"  # graph compiles nothing
                key = (key or traces.fingerprint(program)) if cached else None
                traced.append(program)
                trace_seconds = time.perf_counter() - begin
                # Nothing to do ahead for a program its cache holds, or for a registered
                # graph program (its first call optimizes it, a second or two).
                held = (key and cache.holds(key)) or (stored and job.compiler == "graph")
                if defer_cached and held:
                    finish(Program(job.name, trace_seconds, 0.0, deferred=True,
                                   compiler=job.compiler, stored=stored), index)  # fmt: skip
                else:
                    futures.append(pool.submit(compile_one, index, job, program,
                                               trace_seconds, key, stored))  # fmt: skip
        finally:  # a failed trace: let the compiles already running finish, then raise
            for future in concurrent.futures.as_completed(futures):
                future.result()
    for key, entries in compiled.items():
        if entries:  # compiled here (a program loaded from the cache writes nothing)
            cache.remember(key, entries)
    report = WarmUp(
        programs=tuple(programs[i] for i in range(len(jobs))),
        seconds=time.perf_counter() - started,
        workers=workers,
        compiled=len(collected.written) if cache is not None else None,
    )
    release_free_heap()  # the compilers' working memory
    return traced, report


def _built(job: Job, folder) -> Any:
    """`job`'s program registered from its stored trace, or None (none stored, no store)."""
    if folder is None or job.key is None:
        return None
    return traces.load(folder, job.key, job.variables)


def _traced(job: Job, folder) -> tuple[Any, str | None]:
    """`job`'s program traced (under stable names), and stored when there is a store;
    with its fingerprint when stored (the library is serialized once)."""
    with compile_cache.stable_names(job.name):
        program = job.trace()
    if folder is not None and job.key is not None:
        return program, traces.save(folder, job.key, program, job.variables)
    return program, None
