"""Every asv benchmark in benchmarks/ runs once on tiny inputs, so the suite cannot rot.

Called the way asv calls them: `setup_cache` once (in its own folder), its result passed
to `setup`, each benchmark method and `teardown`, after the parameters; every `track_`
must return a finite number. The benchmarks that compile a train step run in their own
process, as asv runs every benchmark: TensorFlow never frees a compiled program, so in
the pytest worker their programs would stay.

    python tests/test_benchmarks_smoke.py BENCHMARK_FILE CLASS SETUP_CACHE_JSON
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
    "model.prenet_dim=16,model.postnet_layers=1,model.postnet_channels=16",
)

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
OWN_PROCESS = ("benchmarks_train",)  # modules whose benchmarks compile a train step


def _module(path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _benchmark_classes():
    for path in sorted(BENCHMARKS.glob("benchmarks_*.py")):
        module = _module(path)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and not name.startswith("_"):
                yield pytest.param(cls, id=f"{path.stem}.{name}")


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


@pytest.mark.parametrize("cls", list(_benchmark_classes()))
def test_benchmark_runs(cls, tmp_path_factory):
    assert _methods(cls), f"{cls.__name__} has no benchmark methods"
    cache = _setup_cache(cls, tmp_path_factory.mktemp("setup_cache") / "cache")
    if cls.__module__ not in OWN_PROCESS:
        _run(cls, cache)
        return
    path = BENCHMARKS / f"{cls.__module__}.py"
    done = subprocess.run(
        [sys.executable, __file__, str(path), cls.__name__, json.dumps(cache)],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


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


if __name__ == "__main__":  # one benchmark class in this process (see the docstring)
    benchmark_file, class_name, setup_cache = sys.argv[1:]
    _run(getattr(_module(pathlib.Path(benchmark_file)), class_name), tuple(json.loads(setup_cache)))
