"""The public surface of xtts_train is a contract: exact `__all__`, `__init__` only
re-exports, every name documented, errors typed."""

from __future__ import annotations

import inspect

import pytest
from surface_helpers import check_public_surface

import xtts_train

EXPECTED = {
    "PRESETS", "ConfigError", "ModelConfig", "TextToMel", "XttsTrainError", "dummy_batch",
    "masked_l1", "stop_loss", "total_loss",
}  # fmt: skip


def test_all_is_exactly_the_contract():
    assert set(xtts_train.__all__) == EXPECTED


def test_init_only_reexports_and_nothing_public_is_missing():
    check_public_surface("xtts_train")


@pytest.mark.parametrize("name", sorted(EXPECTED - {"PRESETS"}))
def test_every_public_name_has_a_docstring(name):
    assert inspect.getdoc(getattr(xtts_train, name))


def test_errors_subclass_the_package_error_and_the_builtin_they_mean():
    assert issubclass(xtts_train.ConfigError, xtts_train.XttsTrainError)
    assert issubclass(xtts_train.ConfigError, ValueError)
