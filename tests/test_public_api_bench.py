"""The public surface of xtts_bench is a contract: exact `__all__`, `__init__` only
re-exports, every name documented, errors typed."""

from __future__ import annotations

import inspect

import pytest
from surface_helpers import check_public_surface

import xtts_bench

EXPECTED = {
    "AudioBenchConfig", "CompilerBenchConfig", "DataBenchConfig", "GateConfig",
    "LearningBenchConfig", "MissingExtraError", "PeersBenchConfig", "ProfileBenchConfig",
    "SettingsError", "StartupBenchConfig", "TrainBenchConfig", "XttsBenchError",
    "run_audio_benchmarks", "run_compiler_benchmark", "run_data_benchmarks",
    "run_decode_benchmark", "run_gate", "run_learning_benchmark", "run_peers_benchmark",
    "run_profile_benchmark", "run_startup_benchmarks",
    "run_train_benchmarks", "run_wer_benchmark",
}  # fmt: skip


def test_all_is_exactly_the_contract():
    assert set(xtts_bench.__all__) == EXPECTED


def test_init_only_reexports_and_nothing_public_is_missing():
    check_public_surface("xtts_bench")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_public_name_has_a_docstring(name):
    assert inspect.getdoc(getattr(xtts_bench, name))


@pytest.mark.parametrize(
    ("error", "builtin"), [("SettingsError", ValueError), ("MissingExtraError", ImportError)]
)
def test_errors_subclass_the_package_error_and_the_builtin_they_mean(error, builtin):
    assert issubclass(getattr(xtts_bench, error), xtts_bench.XttsBenchError)
    assert issubclass(getattr(xtts_bench, error), builtin)
