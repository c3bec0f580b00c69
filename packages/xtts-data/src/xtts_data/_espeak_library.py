"""Which espeak-ng library phonemes come from: the system's, or the copy the
`espeakng-loader` wheel ships (library and voice data; `pip install "xtts-data[phonemes]"`
brings it), so phoneme input needs no system package.

`XTTS_ESPEAK` chooses: `auto` (the default: a system library where one is found, else the
wheel's), `system` or `wheel`. phonemizer is pointed at the choice once per process, and
the choice is logged.
"""

from __future__ import annotations

import ctypes.util
import dataclasses
import functools
import logging
import os

from xtts_data.errors import ConfigError

__all__ = [
    "CHOICES",
    "ENV",
    "EspeakLibrary",
    "espeak_library",
    "forget_choice",
    "phonemizer_library",
]

logger = logging.getLogger(__name__)

ENV = "XTTS_ESPEAK"
CHOICES = ("auto", "system", "wheel")
_WHEEL_HINT = 'pip install "xtts-data[phonemes]" (its espeakng-loader wheel ships espeak-ng)'


@dataclasses.dataclass(frozen=True)
class EspeakLibrary:
    """An espeak-ng shared library.

    Attributes:
        source: `"system"` or `"wheel"`.
        library: the shared library's path (or the name the loader finds it by).
        data: the voice data folder it needs (the wheel's), None for the library's own.
    """

    source: str
    library: str
    data: str | None = None


def espeak_library() -> EspeakLibrary:
    """The library `XTTS_ESPEAK` chooses (see the module docstring).

    Raises:
        ConfigError: an unknown choice, or the chosen library is not there (naming the fix).
    """
    choice = os.environ.get(ENV, "auto")
    if choice not in CHOICES:
        raise ConfigError(f"{ENV}: expected one of {CHOICES}, received: {choice!r}")
    system = os.environ.get("PHONEMIZER_ESPEAK_LIBRARY") or ctypes.util.find_library("espeak-ng")
    if choice == "system" or (choice == "auto" and system):
        if not system:
            raise ConfigError(f"{ENV}=system: expected an espeak-ng library on this machine, "
                              f"found none; install espeak-ng (e.g. apt-get install espeak-ng) "
                              f"or set {ENV}=wheel after {_WHEEL_HINT}")  # fmt: skip
        return EspeakLibrary("system", system)
    try:
        import espeakng_loader  # the phonemes extra
    except ImportError:
        raise ConfigError(f"expected espeak-ng for phonemes ({ENV}={choice}), found neither "
                          f"a system library nor the wheel's; {_WHEEL_HINT}") from None  # fmt: skip
    return EspeakLibrary("wheel", espeakng_loader.get_library_path(),
                         espeakng_loader.get_data_path())  # fmt: skip


def phonemizer_library() -> EspeakLibrary | None:
    """Point phonemizer's espeak backend at `espeak_library()` (once a process, until
    `forget_choice`). None for a phonemizer without that backend's wrapper (a test's
    stand-in)."""
    try:
        from phonemizer.backend.espeak.wrapper import EspeakWrapper
    except ImportError:
        return None
    return _pointed(EspeakWrapper)


@functools.cache
def _pointed(wrapper) -> EspeakLibrary:
    library = espeak_library()
    wrapper.set_library(library.library)
    if library.data is not None:
        wrapper.set_data_path(library.data)
    logger.info("phonemes from the %s espeak-ng library %s", library.source, library.library)
    return library


def forget_choice() -> None:
    """Choose again at the next `phonemizer_library` (after `XTTS_ESPEAK` changed)."""
    _pointed.cache_clear()
