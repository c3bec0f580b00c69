"""Micro-benchmarks (pytest-benchmark) of the input pipeline over the shared test cache.

Marked `benchmark`: skipped by the default test command; `hatch run bench-micro` runs them.
Side-by-side figures against the baselines are in `xtts-bench compare`.
"""

from __future__ import annotations

import itertools

import pytest
from data_helpers import AUDIO, DATA

import xtts_data as xd

pytestmark = pytest.mark.benchmark


def test_next_batch_from_cache(benchmark, cache):
    pipeline = xd.make_dataset(cache, DATA, "all", audio=AUDIO, repeat=True)
    batches = iter(pipeline.dataset)
    next(batches)  # fill the prefetch buffer
    batch = benchmark(lambda: next(batches))
    assert tuple(batch["mel"].shape) in {(s.batch_size, s.frames, AUDIO.n_mels)
                                         for s in pipeline.spec.shapes}  # fmt: skip


def test_epoch_of_batches(benchmark, cache):
    pipeline = xd.make_dataset(cache, DATA, "all", audio=AUDIO)
    count = benchmark(lambda: sum(1 for _ in itertools.islice(pipeline.dataset, 1000)))
    assert count >= 1
