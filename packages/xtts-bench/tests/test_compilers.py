"""`xtts-bench compiler`: its settings, the choice per role and the table, on made-up runs
(the measurement itself trains nothing here: it takes minutes of XLA compiles)."""

from __future__ import annotations

import pytest

from xtts_bench.compilers import _choices, format_compiler_table
from xtts_bench.errors import SettingsError
from xtts_bench.settings import CompilerBenchConfig, TrainBenchConfig


def _run(threads: int, compiler: str, train: float, eval_: float, decode: float) -> dict:
    return {
        "threads": threads, "compiler": compiler, "warm_up": {"seconds": 10.0},
        "train_ms": {"16x80x328": train, "26x48x200": train}, "eval_ms": {"16x80x328": eval_},
        "decode": {"ms": decode, "first_s": 1.0, "rtf": 20.0},
        "train_flops": {"16x80x328": 2e10, "26x48x200": 2e10}, "matmul_peak_flops": 2e11,
    }  # fmt: skip


RUNS = [_run(1, "xla", 600, 250, 100), _run(1, "graph", 180, 50, 150),
        _run(2, "xla", 350, 140, 120), _run(2, "graph", 110, 35, 430)]  # fmt: skip


def test_the_faster_compiler_is_chosen_per_role_and_thread_count():
    assert _choices(RUNS) == {
        "1": {"train": "graph", "eval": "graph", "decode": "xla"},
        "2": {"train": "graph", "eval": "graph", "decode": "xla"},
    }
    slower_graph = [_run(1, "xla", 100, 250, 100), _run(1, "graph", 180, 50, 99)]
    assert _choices(slower_graph) == {"1": {"train": "xla", "eval": "graph", "decode": "graph"}}


def test_the_table_gives_ratios_and_mfu():
    table = format_compiler_table({"runs": RUNS, "choice": _choices(RUNS)})
    assert "      1  train     1200.0     360.0      3.33x  graph" in table
    assert "      2  decode     120.0     430.0      0.28x  xla" in table
    # 2 x 20 GFLOP in 0.36 s against 200 GFLOP/s: 55.6%
    assert "      1  graph          10.0      20.00        200.0  55.6%" in table


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"threads": ()}, r"^CompilerBenchConfig\.threads: expected a tuple of ints >= 1, received: threads=\(\)$"),
        ({"threads": (1, 0)}, r"threads=\(1, 0\)"),
        ({"steps": 0}, r"^CompilerBenchConfig\.steps: expected an int >= 1, received: steps=0$"),
        ({"preset": "huge"}, r"TrainBenchConfig\.preset: expected one of"),
    ],
)  # fmt: skip
def test_bad_settings_say_what_was_expected(fields, match, tmp_path):
    with pytest.raises(SettingsError, match=match):
        CompilerBenchConfig(**fields)
    with pytest.raises(SettingsError, match=r"expected a feature cache folder"):
        CompilerBenchConfig(data=tmp_path / "missing")


@pytest.mark.parametrize("owner", [TrainBenchConfig, CompilerBenchConfig])
def test_overrides_must_be_a_tuple_of_strings(owner):
    with pytest.raises(SettingsError, match=r"overrides: expected a tuple of 'section\.key=value' strings, received: 'model\.d_model=8'$"):  # fmt: skip
        owner(overrides="model.d_model=8")
