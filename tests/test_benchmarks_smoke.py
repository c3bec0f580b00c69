"""Every asv benchmark in benchmarks/ runs once on tiny inputs, so the suite cannot rot.

Called the way asv calls them: `setup_cache` once (in its own folder), its result passed
to `setup`, each benchmark method and `teardown`, after the parameters; every `track_`
must return a finite number. The benchmarks that compile a train step run in a process
of their own, as asv runs every benchmark: TensorFlow never frees a compiled program, so
in the pytest worker their programs would stay. One process runs every class of such a
module, one after another as the others run here (TensorFlow is imported once, not once
a class), and reports each class's error.

    python tests/test_benchmarks_smoke.py BENCHMARK_MODULE SETUP_CACHES_JSON ERRORS_JSON
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import json
import math
import os
import pathlib
import subprocess
import sys
import traceback

import pytest

# Tiny inputs: this checks that each benchmark runs, not how fast (the modules read it on load).
os.environ.setdefault("XTTS_BENCH_CLIPS", "2")
os.environ.setdefault("XTTS_BENCH_UTTERANCES", "40")  # one batch of 32 per epoch
os.environ.setdefault("XTTS_BENCH_BATCHES", "3")
# One bucket shape of a one-layer model: benchmarks_train compiles its step once (~20-40 s).
os.environ.setdefault("XTTS_BENCH_TRAIN_UTTERANCES", "12")
os.environ.setdefault("XTTS_BENCH_TRAIN_BUCKETS", "1")
os.environ.setdefault("XTTS_BENCH_TRAIN_BATCH_SIZE", "4")
os.environ.setdefault("XTTS_BENCH_TRAIN_STEPS", "3")
os.environ.setdefault(
    "XTTS_BENCH_TRAIN_SET",
    "model.d_model=32,model.heads=1,model.ff_mult=1,model.text_convs=1,model.text_layers=1,"
    "model.cond_convs=1,model.cond_layers=1,model.cond_latents=1,model.decoder_layers=1,"
    "model.alignment=content,model.prenet_dim=16,model.postnet_layers=1,model.postnet_channels=16",
)

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
OWN_PROCESS = ("benchmarks_train",)  # modules whose benchmarks compile a train step


def _module(path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _classes(module):
    """(name, class) of each benchmark class of `module`."""
    return [(name, cls) for name, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and not name.startswith("_")]  # fmt: skip


MODULES = {path.stem: _module(path) for path in sorted(BENCHMARKS.glob("benchmarks_*.py"))}


_CACHES: dict = {}  # setup_cache results, once per function (asv: once per run)


def _setup_cache(cls, folder: pathlib.Path) -> tuple:
    build = getattr(cls, "setup_cache", None)
    if build is None:
        return ()
    if build not in _CACHES:
        folder.mkdir()
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            _CACHES[build] = build(cls())  # asv calls it as a method
        finally:
            os.chdir(cwd)
    return (_CACHES[build],)


_ERRORS: dict = {}  # {module: {class: its error in their own process, "" if none}}


def _errors_in_own_process(module, tmp_path_factory) -> dict[str, str]:
    """Every class of `module` run in one new process (see the docstring): {name: error}."""
    if module.__name__ not in _ERRORS:
        caches = {name: _setup_cache(cls, tmp_path_factory.mktemp("setup_cache") / "cache")
                  for name, cls in _classes(module)}  # fmt: skip
        errors = tmp_path_factory.mktemp("own_process") / "errors.json"
        done = subprocess.run(
            [sys.executable, __file__, module.__name__, json.dumps(caches), str(errors)],
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), capture_output=True, text=True,
            timeout=600 * len(caches),
        )  # fmt: skip
        crashed = f"exit {done.returncode}:\n{done.stderr[-3000:]}"
        found = json.loads(errors.read_text()) if done.returncode == 0 else None
        _ERRORS[module.__name__] = found or dict.fromkeys(caches, crashed)
    return _ERRORS[module.__name__]


# The train benchmarks run in a process of their own, as asv runs them: the slow tier.
@pytest.mark.parametrize("cls", [pytest.param(cls, id=f"{stem}.{name}",
                                              marks=[pytest.mark.slow] * (stem in OWN_PROCESS))
                                 for stem, module in MODULES.items()
                                 for name, cls in _classes(module)])  # fmt: skip
def test_benchmark_runs(cls, tmp_path_factory):
    assert _methods(cls), f"{cls.__name__} has no benchmark methods"
    if cls.__module__ not in OWN_PROCESS:
        _run(cls, _setup_cache(cls, tmp_path_factory.mktemp("setup_cache") / "cache"))
        return
    error = _errors_in_own_process(MODULES[cls.__module__], tmp_path_factory)[cls.__name__]
    assert not error, error


def _methods(cls) -> list[str]:
    return [m for m in dir(cls) if m.startswith(("time_", "track_"))]


def _run(cls, cache: tuple) -> None:
    """Every parameter combination of `cls`: `setup`, each benchmark method, `teardown`."""
    methods = _methods(cls)
    params = getattr(cls, "params", ((),))
    combos = list(itertools.product(*params)) if params != ((),) else [()]
    for combo in combos:
        bench = cls()
        bench.setup(*cache, *combo)
        try:
            for method in methods:
                value = getattr(bench, method)(*cache, *combo)
                if method.startswith("track_"):
                    assert isinstance(value, int | float), f"{method}{combo}: {value!r}"
                    assert math.isfinite(value), f"{method}{combo}: {value!r}"
        finally:
            getattr(bench, "teardown", lambda *a: None)(*cache, *combo)


def _run_each(module, caches: dict[str, list]) -> dict[str, str]:
    """Every class named in `caches`, given its setup_cache result: {name: error or ""}."""
    errors = {}
    for name, cache in caches.items():
        try:
            _run(getattr(module, name), tuple(cache))
            errors[name] = ""
        except Exception:  # reported for that class's test; the next class still runs
            errors[name] = traceback.format_exc()
    return errors


if __name__ == "__main__":  # the classes of one benchmark module in this process (docstring)
    module_name, caches, errors = sys.argv[1:]
    found = _run_each(MODULES[module_name], json.loads(caches))
    pathlib.Path(errors).write_text(json.dumps(found))
