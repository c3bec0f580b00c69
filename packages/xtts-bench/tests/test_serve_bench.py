"""`xtts-bench serve`'s settings and its arithmetic (the measurement itself needs a trained
run and vocoder: the README's figures)."""

from __future__ import annotations

import pytest

from xtts_bench.errors import SettingsError
from xtts_bench.serve import ServeBenchConfig, _quantile, format_serve_table


@pytest.mark.parametrize(("settings", "message"), [
    ({"clients": ()}, r"clients: expected ints >= 1, received: clients=\(\)"),
    ({"clients": (1, 0)}, "clients: expected ints >= 1"),
    ({"slots": 0}, "slots: expected an int >= 1, received: slots=0"),
    ({"seconds": 0}, "seconds: expected a number > 0"),
])  # fmt: skip
def test_bad_settings_are_refused(runs, settings, message):
    with pytest.raises(SettingsError, match=message):
        ServeBenchConfig(run=runs[0], vocoder=runs[1], **settings)


def test_a_folder_that_is_not_a_run_is_refused(runs, tmp_path):
    with pytest.raises(SettingsError, match="vocoder: expected a run folder"):
        ServeBenchConfig(run=runs[0], vocoder=tmp_path)


def test_quantiles_are_nearest_rank():
    values = sorted(range(1, 21))
    assert (_quantile(values, 0.5), _quantile(values, 0.95), _quantile(values, 1.0)) == (10, 19, 20)
    assert _quantile([3.0], 0.95) == 3.0


def test_the_table_has_a_row_per_server_and_level():
    level = {"ttfa_p50_ms": 40.0, "ttfa_p95_ms": 80.0, "real_time_factor": 3.5,
             "requests_per_s": 2.0, "busy": 0, "requests": 40}  # fmt: skip
    table = format_serve_table({
        "cores": 2, "seconds_per_level": 20.0, "startup_cold_s": 9.5, "startup_warm_s": 8.0,
        "servers": {"8 slots": {1: level, 8: level}, "1 slot": {1: level}},
    })  # fmt: skip
    lines = table.splitlines()
    assert "start-up 9.5 s cold, 8.0 s warm" in lines[0]
    assert [line.split()[:3] for line in lines[2:]] == [
        ["8", "slots", "1"],
        ["8", "slots", "8"],
        ["1", "slot", "1"],
    ]


def test_a_voice_that_is_not_an_exported_folder_is_refused(runs, tmp_path):
    with pytest.raises(SettingsError, match=r"voice: expected a voice folder \(with voice.json"):
        ServeBenchConfig(run=runs[0], vocoder=runs[1], voice=tmp_path)


def test_the_table_names_the_onnx_servers_and_their_start_up():
    level = {"ttfa_p50_ms": 40.0, "ttfa_p95_ms": 80.0, "real_time_factor": 3.5,
             "requests_per_s": 2.0, "busy": 0, "requests": 40}  # fmt: skip
    table = format_serve_table({
        "cores": 2, "seconds_per_level": 20.0, "startup_cold_s": 9.5, "startup_warm_s": 8.0,
        "startup_onnx_s": 0.8, "servers": {"8 slots": {8: level}, "onnx 8 slots": {8: level}},
    })  # fmt: skip
    lines = table.splitlines()
    assert "; onnx 0.8 s" in lines[0]
    assert [line.split()[:4] for line in lines[2:]] == [["8", "slots", "8", "40"],
                                                         ["onnx", "8", "slots", "8"]]  # fmt: skip
