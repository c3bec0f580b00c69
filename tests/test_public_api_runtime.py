"""The public surface of xtts_runtime is a contract: exact `__all__`, `__init__` only
re-exports, every name documented, errors typed."""

from __future__ import annotations

import inspect

import pytest
from surface_helpers import check_public_surface

import xtts_runtime

EXPECTED = {
    "FORMAT", "VERSION", "InputError", "Row", "Slots", "Speech", "Spoken", "Voice",
    "VoiceError", "XttsRuntimeError", "read_manifest",
}  # fmt: skip


def test_all_is_exactly_the_contract():
    assert set(xtts_runtime.__all__) == EXPECTED


def test_init_only_reexports_and_nothing_public_is_missing():
    check_public_surface("xtts_runtime")


@pytest.mark.parametrize("name", sorted(EXPECTED - {"FORMAT", "VERSION"}))
def test_every_public_name_has_a_docstring(name):
    assert inspect.getdoc(getattr(xtts_runtime, name))


@pytest.mark.parametrize("error", ["VoiceError", "InputError"])
def test_errors_subclass_the_package_error_and_value_error(error):
    assert issubclass(getattr(xtts_runtime, error), xtts_runtime.XttsRuntimeError)
    assert issubclass(getattr(xtts_runtime, error), ValueError)
