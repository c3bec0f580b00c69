"""Running an `xtts-bench` command in the test's process (on pytest's `pythonpath`)."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
import tensorflow as tf

from xtts_bench.cli import main

# TensorFlow's thread-pool setters, which a benchmark calls first in its process.
POOLS = ("set_intra_op_parallelism_threads", "set_inter_op_parallelism_threads")


def bench_in_process(*argv: str) -> tuple[dict, list[tuple[str, int]]]:
    """`xtts-bench ARGV --json` in this process (a new process would import TensorFlow
    again): its figures, and the thread-pool settings it made, in order. The benchmarks
    set TensorFlow's thread pools first, which only a fresh process allows (the command
    is one): here TensorFlow's setters only record what they are given."""
    pools: list[tuple[str, int]] = []
    printed = io.StringIO()  # for a module fixture: capsys is a test's
    with pytest.MonkeyPatch.context() as patch:
        for name in POOLS:
            patch.setattr(tf.config.threading, name,
                          lambda threads, name=name: pools.append((name, threads)))  # fmt: skip
        with contextlib.redirect_stdout(printed):
            assert main([*argv, "--json"]) == 0
    return json.loads(printed.getvalue()), pools
