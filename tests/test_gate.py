"""`xtts-bench gate` on planted regressions: a throwaway git repository whose benchmarks
get slower, trace more or lose throughput between two commits, measured by real `asv
continuous` runs.

asv runs the benchmark suite of the working tree against each commit's installed project,
so the regression is planted in the toy project (`toy.py`, copied into each commit's
environment: no build, so each asv run takes seconds); the gate code under test is the
same that runs on this repository. The toy reports its step's time as a number
(`track_step_ms`, judged lower-is-better like a `time_*` benchmark) rather than sleeping:
a sleep's wall time on a loaded machine would make the verdict depend on the load.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from xtts_bench.cli import main
from xtts_bench.gate import COUNT, COUNTS, GateConfig, Measurement, regressions, run_gate

SUITE_DIR = Path(__file__).resolve().parents[1] / "benchmarks"

PROJECT = """
STEP_MS = {step_ms}
TRACES = {traces}
SAMPLES_PER_S = {rate}
"""

SUITE = """
import toy


def track_step_ms():
    return toy.STEP_MS


def track_traces():
    return toy.TRACES


def track_samples_per_s():
    return toy.SAMPLES_PER_S
"""

# The "build" keeps the commit's toy.py in asv's build cache; the install copies it into
# the environment (asv formats the {...} fields; the commands run without a shell).
BUILD = "python -c \"import shutil; shutil.copy('{build_dir}/toy.py', '{build_cache_dir}')\""
INSTALL = (
    'python -c "import shutil, sysconfig; '
    "shutil.copy('{build_cache_dir}/toy.py', sysconfig.get_paths()['purelib'])\""
)


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def _commit(repo: Path, message: str, *, step_ms: float = 100.0, traces: int = 2,
            rate: float = 1000.0) -> str:  # fmt: skip
    (repo / "toy.py").write_text(PROJECT.format(step_ms=step_ms, traces=traces, rate=rate))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def env_dir(tmp_path_factory) -> Path:
    """asv's environments, shared by the toy repositories: creating the virtualenv is most
    of a gate run. asv reuses an environment from run to run (as in this repository's
    `.asv/env`) and installs into it the commit it measures, built into a cache keyed by
    the commit's hash, so no repository sees another's toy.py."""
    return tmp_path_factory.mktemp("asv-env")


@pytest.fixture
def repo(tmp_path, env_dir) -> Path:
    repo = tmp_path / "toy"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "benchmarks" / "benchmarks_toy.py").write_text(SUITE)
    conf = {
        "version": 1, "project": "toy", "repo": ".", "branches": ["main"],
        "environment_type": "virtualenv",
        "pythons": [f"{sys.version_info.major}.{sys.version_info.minor}"],
        "build_command": [BUILD], "install_command": [INSTALL], "uninstall_command": [],
        "env_dir": str(env_dir), "results_dir": ".asv/results", "html_dir": ".asv/html",
    }  # fmt: skip
    (repo / "asv.conf.json").write_text(json.dumps(conf))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "gate@test")
    _git(repo, "config", "user.name", "gate test")
    _commit(repo, "base")
    return repo


def _gate(repo: Path, **kwargs) -> tuple[int, str]:
    # One sample per benchmark (asv compares them by the factor alone): fast.
    config = GateConfig(machine="gate-test", extra=("--quick",), **kwargs)
    return run_gate(config, repo=repo)


def test_gate_passes_a_slowdown_within_the_factor_and_a_throughput_gain(repo):
    # 100 -> 105 ms is 5%, under the 1.1 factor; higher samples/s is better: no regression.
    _commit(repo, "faster pipeline", step_ms=105.0, rate=2000.0)
    code, verdict = _gate(repo)
    assert code == 0, verdict
    assert verdict.startswith("gate passed")
    assert "3 benchmarks" in verdict


def test_gate_fails_a_planted_slowdown(repo):
    _commit(repo, "slower step", step_ms=300.0)
    code, verdict = _gate(repo)
    assert code == 1
    assert "benchmarks_toy.track_step_ms: 100 -> 300 (worse)" in verdict
    assert "track_traces" not in verdict
    assert "track_samples_per_s" not in verdict


def test_gate_fails_a_throughput_drop(repo):
    _commit(repo, "slower pipeline", rate=500.0)
    code, verdict = _gate(repo)
    assert code == 1
    assert "benchmarks_toy.track_samples_per_s: 1000 -> 500 (worse)" in verdict


def test_gate_fails_one_more_trace_that_the_factor_lets_through(repo):
    # 20 -> 21 traces is 5%, under the 1.1 factor: a count must not grow at all.
    _commit(repo, "base with 20 traces", traces=20)
    _commit(repo, "one retrace", traces=21)
    code, verdict = _gate(repo)
    assert code == 1
    assert "benchmarks_toy.track_traces: 20 -> 21 (count grew)" in verdict


def _m(value: float | None, version: str = "v1") -> Measurement:
    return Measurement(value, (None, None), version)


def test_regressions_by_kind_of_benchmark():
    base = {"a.track_traces": _m(3), "b.track_compiled_shapes(16)": _m(2),
            "c.time_step": _m(1.0), "d.track_device_utilization_20ms": _m(0.9),
            "e.time_other": _m(1.0), "f.time_changed": _m(1.0),
            "g.track_padding_efficiency": _m(0.8), "i.time_slower": _m(0.1)}  # fmt: skip
    head = {"a.track_traces": _m(2), "b.track_compiled_shapes(16)": _m(4),
            "c.time_step": _m(1.05), "d.track_device_utilization_20ms": _m(0.7),
            "e.time_other": _m(None), "f.time_changed": _m(9.0, "v2"),
            "g.track_padding_efficiency": _m(0.95), "h.track_traces": _m(9),
            "i.time_slower": _m(0.3)}  # fmt: skip
    assert regressions(base, head, 1.1) == [
        "b.track_compiled_shapes(16): 2 -> 4 (count grew)",
        "d.track_device_utilization_20ms: 0.9 -> 0.7 (worse)",
        "e.time_other: failed at head (ran at base: 1)",
        "i.time_slower: 0.1 -> 0.3 (worse)",
    ]


def _suite_track_benchmarks() -> set[str]:
    """The `track_*` benchmarks of this repository's asv suite, named as asv names them
    (`module.Class.method`)."""
    names = set()
    for path in sorted(SUITE_DIR.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                owner, body = f"{path.stem}.{node.name}", node.body
            else:
                owner, body = path.stem, [node]
            names |= {f"{owner}.{f.name}" for f in body
                      if isinstance(f, ast.FunctionDef) and f.name.startswith("track_")}  # fmt: skip
    return names


def test_the_gate_counts_exactly_the_suites_count_benchmarks():
    # A count pattern without a benchmark would look like protection and guard nothing.
    tracked = _suite_track_benchmarks()
    assert tracked, f"no track_* benchmark found under {SUITE_DIR}"
    counted = {name.rsplit(".", 1)[1] for name in tracked if COUNT.search(name)}
    assert counted == set(COUNTS), (sorted(set(COUNTS) - counted), sorted(tracked))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["gate", "--factor", "0.9"], "GateConfig.factor: expected a number >= 1.0"),
        (["gate", "no-such-revision"], "not a commit of the repository"),
    ],
)
def test_bad_gate_arguments_exit_2(repo, monkeypatch, capsys, args, message):
    monkeypatch.chdir(repo)
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_gate_needs_an_asv_config(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["gate"]) == 2
    assert "no asv configuration" in capsys.readouterr().err
