"""Time to the first training step, cold and warm, measured as a user meets it.

Each run is a new `xtts-train fit --steps 1` process (the console script, so its clock
starts when the process does) whose `summary.json` gives `time_to_first_step_s`, its
parts (import, data, model, trace, compile, first step), the warm-up's programs and the
peak RSS. Per workload, side by side:

- cold, one compile thread: an empty compile cache, `train.compile_workers=1` (tracing
  still overlaps the one compile running);
- cold, concurrent: an empty compile cache, one compile thread per core (the default);
- warm: a second process on the cache the concurrent run filled (its executables and
  its stored traces: the warm run registers every program instead of tracing it).

Workloads: `demo` is `xtts-train demo`'s training (its corpus and settings); `default` is
the default configuration (8 bucket shapes) on a corpus of longer utterances (`corpus`,
or a synthetic one of `utterances` clips of 1-10 s).

`project_cold` estimates the cold time on other core counts from the one-thread run: the
traces stay serial on one core, each program's compile starts when it is traced and one
of the other cores' threads is free, and a compile keeps the time it took in the measured
run (where XLA used ~1.3 cores of the two).
"""

from __future__ import annotations

import heapq
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import tqdm

from xtts_bench.settings import StartupBenchConfig

__all__ = ["format_startup_table", "project_cold", "run_startup_benchmarks"]

_SCENARIOS = (("cold, 1 compile thread", 1, "fresh"), ("cold, concurrent", 0, "fresh"),
              ("warm (second process)", 0, "reuse"))  # fmt: skip


def run_startup_benchmarks(bench: StartupBenchConfig, *, progress: bool = True) -> dict:
    """Every scenario of every workload; figures from each run's `summary.json`."""
    results: dict = {"workloads": {}, "cores": len(os.sched_getaffinity(0)),
                     "compiler": bench.compiler}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="xtts-bench-startup-") as tmp:
        work = pathlib.Path(tmp)
        for workload in bench.workloads:
            cache, settings = _workload(bench, workload, work / workload)
            runs, root = {}, None
            for label, workers, cache_use in tqdm.tqdm(_SCENARIOS, desc=workload,
                                                       disable=not progress):  # fmt: skip
                if cache_use == "fresh":
                    root = pathlib.Path(tempfile.mkdtemp(dir=work, prefix="xla-"))
                summary = _fit(cache, work / f"{workload}-{len(runs)}", root,
                               [*settings, f"train.compile_workers={workers}"])  # fmt: skip
                runs[label] = _figures(summary)
            cold = runs["cold, 1 compile thread"]
            results["workloads"][workload] = {
                "runs": runs,
                "warm_vs_cold": runs["warm (second process)"]["time_to_first_step_s"]
                / runs["cold, concurrent"]["time_to_first_step_s"],
                "projected_cold_s": {n: project_cold(cold, n) for n in (1, 2, 4, 8, 16)},
            }
    return results


def _workload(bench: StartupBenchConfig, name: str, work: pathlib.Path):
    """The feature cache and `--set` settings of a workload."""
    import xtts_data as xd
    from xtts_train import DEMO_SETTINGS, load_stack_config

    settings = [*(DEMO_SETTINGS if name == "demo" else []), f"train.compiler={bench.compiler}"]
    stack = load_stack_config(None, settings)
    corpus = bench.corpus if name == "default" else None
    if corpus is None:
        corpus = work / "corpus"
        if name == "demo":  # as `xtts-train demo` writes it
            xd.write_demo_corpus(corpus, n=96, min_seconds=0.4, max_seconds=1.6)
        else:
            xd.write_demo_corpus(corpus, n=bench.synthetic_utterances, min_seconds=1.0,
                                 max_seconds=10.0, seed=bench.seed)  # fmt: skip
    xd.prepare(corpus, work / "cache", audio=stack.audio, data=stack.data)
    return work / "cache", settings


def _fit(cache: pathlib.Path, workdir: pathlib.Path, root: pathlib.Path,
         settings: list[str]) -> dict:  # fmt: skip
    command = [sys.executable, "-m", "xtts_train.cli", "fit", "--data", str(cache),
               "--workdir", str(workdir), "--steps", "1", "--quiet",
               *[arg for s in settings for arg in ("--set", s)]]  # fmt: skip
    environment = {**os.environ, "XTTS_COMPILE_CACHE": str(root)}
    done = subprocess.run(command, env=environment, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-4000:]}")
    return json.loads((workdir / "summary.json").read_text())


def _figures(summary: dict) -> dict:
    warm = summary["warm_up"]
    return {
        "time_to_first_step_s": summary["time_to_first_step_s"],
        "startup_s": summary["startup_s"],
        "programs": warm["programs"],
        "compiled": warm["compiled"],
        "cache_hits": warm["cache_hits"],
        "stored": warm.get("stored", 0),
        "workers": warm["workers"],
        "peak_rss_mb": summary["peak_rss_mb"],
    }


def project_cold(run: dict, cores: int) -> float:
    """Time to first step of a cold run on `cores` cores, from a one-thread cold run.

    The traces run one after another on one core; program i is ready when its trace ends
    and compiles on the first of `cores - 1` threads (at least one) to be free, for its
    measured compile time. Everything else (import, data, model, first step) is as
    measured. On the measuring host's 2 cores this is the one-thread run itself.
    """
    free = [0.0] * max(cores - 1, 1)
    traced = finished = 0.0
    for program in run["programs"].values():
        traced += program["trace_s"]
        start = max(traced, heapq.heappop(free))
        heapq.heappush(free, start + program["compile_s"])
        finished = max(finished, start + program["compile_s"])
    other = sum(v for k, v in run["startup_s"].items() if k not in ("trace", "compile"))
    return other + max(finished, traced)


def format_startup_table(results: dict) -> str:
    """The runs of every workload, then the projections."""
    lines = [
        f"time to first step (xtts-train fit, new process each), {results['cores']} cores, "
        f"train.compiler={results['compiler']}"
    ]
    for workload, figures in results["workloads"].items():
        lines.append(f"\n{workload}")
        lines.append(f"{'run':<26}{'first step s':>13}{'trace s':>9}{'compile s':>11}"
                     f"{'step 1 s':>10}{'compiled':>10}{'hits':>6}{'stored':>8}"
                     f"{'peak RSS MB':>13}")  # fmt: skip
        for label, run in figures["runs"].items():
            parts = run["startup_s"]
            lines.append(
                f"{label:<26}{run['time_to_first_step_s']:>13.1f}{parts['trace']:>9.1f}"
                f"{parts['compile']:>11.1f}{parts['first_step']:>10.1f}"
                f"{_count(run['compiled']):>10}"
                f"{_count(run['cache_hits']):>6}{run['stored']:>8}{run['peak_rss_mb']:>13.0f}"
            )
        lines.append(f"warm / cold (concurrent): {figures['warm_vs_cold']:.0%}")
        projected = ", ".join(
            f"{n} cores {s:.0f} s" for n, s in figures["projected_cold_s"].items()
        )
        lines.append(f"cold, projected from the one-thread run: {projected}")
    return "\n".join(lines)


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)
