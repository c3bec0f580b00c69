"""Errors raised by xtts_bench where the user's settings and inputs are checked.

`xtts-bench` prints these (and the other packages' errors) as one line with exit 2;
anything else, a `ValueError` from a bug included, keeps its traceback.
"""

import importlib
from types import ModuleType

__all__ = ["MissingExtraError", "SettingsError", "XttsBenchError", "import_extra"]


class XttsBenchError(Exception):
    """Base class of every error xtts_bench raises itself."""

    # Keep Exception's constructor so AutoGraph re-raises it as this type while tracing.
    __init__ = Exception.__init__


class SettingsError(XttsBenchError, ValueError):
    """A benchmark setting, argument or input is invalid: the message names it, its value
    and the rule."""


class MissingExtraError(XttsBenchError, ImportError):
    """A package of an optional extra (e.g. `xtts-bench[asr]`) is not installed."""


def import_extra(name: str, *, hint: str) -> ModuleType:
    """The module `name` of an optional extra.

    Raises:
        MissingExtraError: it is not installed; the message ends with `hint`, how to fix.
    """
    try:
        return importlib.import_module(name)
    except ImportError as err:
        raise MissingExtraError(f"expected the {name} package ({err}); to fix: {hint}") from err
