"""Every asv benchmark in benchmarks/ runs once on tiny inputs, so the suite cannot rot.

Called the way asv calls them: `setup_cache` once (in its own folder), its result passed
to `setup`, each benchmark method and `teardown`, after the parameters; every `track_`
must return a finite number.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import math
import os
import pathlib

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


def _benchmark_classes():
    for path in sorted(BENCHMARKS.glob("benchmarks_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
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
    params = getattr(cls, "params", ((),))
    combos = list(itertools.product(*params)) if params != ((),) else [()]
    methods = [m for m in dir(cls) if m.startswith(("time_", "track_"))]
    assert methods, f"{cls.__name__} has no benchmark methods"
    cache = _setup_cache(cls, tmp_path_factory.mktemp("setup_cache") / "cache")
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
