"""The regression gate: `asv continuous` between a base commit and HEAD, judged per metric.

`asv continuous` builds both commits into their own environments, runs the suite on each
and prints its comparison. Its own verdict assumes lower is better for every benchmark,
which is wrong for a throughput, a utilisation or a padding efficiency, and a factor
cannot say "must not grow at all" for a count. So the gate reads both commits' results and
judges each benchmark by its kind (from its name):

- counts (`COUNTS`: `track_traces`, `track_compiled_shapes`, `track_static_shapes`,
  `track_python_ops`, the count benchmarks of `benchmarks/`): any increase fails;
- higher is better (`track_*per_s`, `track_*utilization*`, `track_*efficiency`): a drop by
  more than the factor fails;
- everything else (times, CVs, milliseconds): a rise by more than the factor fails.

The factor comparison is asv's own (`asv compare`'s statistics when both sides have
several samples), and a benchmark that ran at the base but failed at HEAD fails the gate.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from asv.commands.compare import _is_result_better, unroll_result
from asv.config import Config
from asv.results import iter_results_for_machine_and_hash

from xtts_bench.errors import SettingsError
from xtts_bench.settings import GateConfig

__all__ = [
    "COUNT",
    "COUNTS",
    "HIGHER_IS_BETTER",
    "GateConfig",
    "Measurement",
    "read_results",
    "regressions",
    "run_gate",
]

COUNTS = ("track_traces", "track_compiled_shapes", "track_static_shapes", "track_python_ops")
COUNT = re.compile(r"\.(" + "|".join(COUNTS) + r")$")
HIGHER_IS_BETTER = re.compile(r"\.track_\w*(per_s|utilization\w*|efficiency)$")


class Measurement(NamedTuple):
    """One benchmark (one parameter combination) at one commit, as asv stored it."""

    value: float | None  # None: the benchmark failed
    stats: tuple  # (stats, samples) as `asv compare` passes them on
    version: str | None  # the benchmark's code version: results of two versions don't compare


def read_results(results_dir: Path, machine: str, commit: str) -> dict[str, Measurement]:
    """asv's results for `commit` on `machine`: {name with parameters: measurement}."""
    found = {}
    for result in iter_results_for_machine_and_hash(str(results_dir), machine, commit[:8]):
        for key in result.get_all_result_keys():
            params = result.get_result_params(key)
            unrolled = unroll_result(
                key, params, result.get_result_value(key, params),
                result.get_result_stats(key, params), result.get_result_samples(key, params),
            )  # fmt: skip
            for name, value, stats, samples in unrolled:
                version = result.benchmark_version.get(key)
                found[name] = Measurement(value, (stats, samples), version)
    return found


def _worse(name: str, base: Measurement, head: Measurement, factor: float) -> bool:
    if COUNT.search(name.split("(")[0]):
        return head.value > base.value
    if HIGHER_IS_BETTER.search(name.split("(")[0]):  # head lower than base by the factor
        return _is_result_better(head.value, base.value, head.stats, base.stats, factor)
    return _is_result_better(base.value, head.value, base.stats, head.stats, factor)


def regressions(base: Mapping[str, Measurement], head: Mapping[str, Measurement],
                factor: float) -> list[str]:  # fmt: skip
    """A line per benchmark that got worse from `base` to `head` (see the module doc).

    Benchmarks missing on either side, skipped (NaN) or of another code version are not
    compared; one that ran at `base` and failed at `head` is a regression.
    """
    lines = []
    for name in sorted(base.keys() & head.keys()):
        b, h = base[name], head[name]
        if b.value is None or b.value != b.value or b.version != h.version:
            continue
        if h.value is None:
            lines.append(f"{name}: failed at head (ran at base: {b.value:g})")
        elif h.value == h.value and _worse(name, b, h, factor):
            kind = "count grew" if COUNT.search(name.split("(")[0]) else "worse"
            lines.append(f"{name}: {b.value:g} -> {h.value:g} ({kind})")
    return lines


def _asv(config: GateConfig, *args: str) -> list[str]:
    return [sys.executable, "-m", "asv", *args, "--config", str(config.config)]


def _commit(revision: str, cwd: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--verify", f"{revision}^{{commit}}"], cwd=cwd,
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        raise SettingsError(f"not a commit of the repository at {cwd}: {revision!r}")
    return done.stdout.strip()


def run_gate(config: GateConfig, *, repo: Path = Path(".")) -> tuple[int, str]:
    """Run `asv continuous` on `config.base` and `config.head` in `repo`; judge the results.

    Returns:
        (0 if nothing got worse else 1, the verdict as text). asv's own output, with its
        comparison table, goes to stdout as it runs.

    Raises:
        SettingsError: a revision that is not a commit, or no asv configuration.
    """
    repo = repo.resolve()
    if not (repo / config.config).is_file():
        raise SettingsError(f"no asv configuration at {repo / config.config}")
    base, head = _commit(config.base, repo), _commit(config.head, repo)
    subprocess.run(_asv(config, "machine", "--yes", "--machine", config.machine), cwd=repo,
                   check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    selection = [arg for regex in config.bench for arg in ("--bench", regex)]
    # asv's exit code judges every benchmark as lower-is-better: the verdict below replaces it.
    subprocess.run(
        _asv(config, "continuous", "--factor", str(config.factor), "--machine", config.machine,
             "--show-stderr", *selection, *config.extra, base, head),
        cwd=repo,
    )  # fmt: skip
    results_dir = repo / Config.load(str(repo / config.config)).results_dir
    before = read_results(results_dir, config.machine, base)
    after = read_results(results_dir, config.machine, head)
    short = f"{base[:8]} -> {head[:8]}"
    if not before or not after:
        side = "base" if not before else "head"
        return 1, f"gate FAILED for {short}: no asv results for the {side} commit"
    worse = regressions(before, after, config.factor)
    if worse:
        lines = "\n".join(f"  {line}" for line in worse)
        return 1, f"gate FAILED for {short} (factor {config.factor}):\n{lines}"
    return 0, (f"gate passed for {short}: {len(before.keys() & after.keys())} benchmarks, "
               f"none worse by more than {config.factor}x, no count grew")  # fmt: skip
