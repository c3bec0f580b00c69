"""`xtts-bench attention`: its settings and its table, on made-up rows (the measurement
builds and times train steps for minutes)."""

from __future__ import annotations

import pytest

from xtts_bench.attention import format_attention_table, run_attention_benchmark
from xtts_bench.cli import main
from xtts_bench.errors import SettingsError

ROWS = [
    {"frames": 256, "block": 0, "compiler": "graph", "step_ms": 80.0, "step_mib": 140.0},
    {"frames": 256, "block": 128, "compiler": "graph", "step_ms": 84.0, "step_mib": 120.0},
    {"frames": 512, "block": 0, "compiler": "graph", "step_ms": 160.0, "step_mib": 350.0},
    {"frames": 512, "block": 128, "compiler": "graph", "step_ms": 144.0, "step_mib": 210.0},
]


def test_the_table_gives_each_setting_against_dense_and_its_growth():
    table = format_attention_table({"batch_size": 8, "text_len": 64, "threads": 2,
                                    "overrides": [], "rows": ROWS})  # fmt: skip
    lines = table.splitlines()
    assert lines[0] == "batch 8 x text 64, 2 threads, defaults"
    assert lines[3].split() == ["256", "128", "84", "1.05", "120", "0.86"]
    assert lines[4].split() == ["512", "dense", "160", "1.00", "350", "1.00", "2.50x"]
    assert lines[5].split() == ["512", "128", "144", "0.90", "210", "0.60", "1.75x"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"frames": (0,)}, "frames"), ({"blocks": (-1,)}, "blocks"), ({"steps": 0}, "steps"),
     ({"overrides": ("model.nope=1",)}, "nope")],
)  # fmt: skip
def test_bad_settings_are_refused_before_any_process_starts(kwargs, match):
    with pytest.raises(Exception, match=match) as refused:
        run_attention_benchmark(**kwargs)
    assert isinstance(refused.value, SettingsError | ValueError)


def test_the_cli_refuses_a_list_that_is_not_ints(capsys):
    assert main(["attention", "--frames", "256,many"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--frames: expected comma-separated ints, received: '256,many'" in line
