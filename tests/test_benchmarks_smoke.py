"""Every asv benchmark in benchmarks/ runs once on tiny inputs, so the suite cannot rot."""

from __future__ import annotations

import importlib.util
import inspect
import itertools
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
            if cls.__module__ == module.__name__:
                yield pytest.param(cls, id=f"{path.stem}.{name}")


@pytest.mark.parametrize("cls", list(_benchmark_classes()))
def test_benchmark_runs(cls):
    params = getattr(cls, "params", ((),))
    combos = list(itertools.product(*params)) if params != ((),) else [()]
    methods = [m for m in dir(cls) if m.startswith(("time_", "track_"))]
    assert methods, f"{cls.__name__} has no benchmark methods"
    for combo in combos:
        bench = cls()
        bench.setup(*combo)
        try:
            for method in methods:
                getattr(bench, method)(*combo)
        finally:
            getattr(bench, "teardown", lambda *a: None)(*combo)
