"""Which espeak-ng library phonemes come from: the system's, or the copy the
`espeakng-loader` wheel ships (library and voice data; `pip install "xtts-data[phonemes]"`
brings it), so phoneme input needs no system package.

`XTTS_ESPEAK` chooses: `auto` (the default: a system library where one is found, else the
wheel's), `system` or `wheel`. phonemizer is pointed at the choice once per process, and
the choice is logged.

A system library is found by `PHONEMIZER_ESPEAK_LIBRARY` (a path) or by
`ctypes.util.find_library`, which on Linux answers a bare soname (`libespeak-ng.so.1`), not
a file: a stock desktop has speech-dispatcher's `libespeak-ng1` without the `espeak-ng`
program. Either is loaded once by the dynamic loader and named by the file it loaded
(glibc's `dlinfo`), so callers always get a real path to copy or load. A system library
that does not load (a missing file, not a shared library, no espeak-ng API in it) is
refused with `XTTS_ESPEAK=system`, and with `auto` the wheel's is used, in one logged line.
"""

from __future__ import annotations

import _ctypes
import ctypes
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
    "loaded_path",
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
    """The library `XTTS_ESPEAK` chooses (see the module docstring), by its file's path.

    Raises:
        ConfigError: an unknown choice, or the chosen library is not there or does not
            load (naming the fix).
    """
    choice = os.environ.get(ENV, "auto")
    if choice not in CHOICES:
        raise ConfigError(f"{ENV}: expected one of {CHOICES}, received: {choice!r}")
    system = os.environ.get("PHONEMIZER_ESPEAK_LIBRARY") or ctypes.util.find_library("espeak-ng")
    unusable = None
    if choice == "system" or (choice == "auto" and system):
        if not system:
            raise ConfigError(f"{ENV}=system: expected an espeak-ng library on this machine, "
                              f"found none; install espeak-ng (e.g. apt-get install espeak-ng) "
                              f"or set {ENV}=wheel after {_WHEEL_HINT}")  # fmt: skip
        try:
            return EspeakLibrary("system", loaded_path(system))
        except OSError as error:
            unusable = f"the system's espeak-ng library {system!r} does not load ({error})"
        if choice == "system":
            raise ConfigError(f"{ENV}=system: expected a usable espeak-ng library, received: "
                              f"{unusable}; reinstall espeak-ng (e.g. apt-get install "
                              f"--reinstall libespeak-ng1) or set {ENV}=wheel after "
                              f"{_WHEEL_HINT}")  # fmt: skip
    try:
        import espeakng_loader  # the phonemes extra
    except ImportError:
        found = unusable or "found neither a system library nor the wheel's"
        raise ConfigError(f"expected espeak-ng for phonemes ({ENV}={choice}), {found}; "
                          f"{_WHEEL_HINT}") from None  # fmt: skip
    if unusable is not None:
        logger.warning("%s: using the wheel's instead (%s=wheel says so)", unusable, ENV)
    return EspeakLibrary("wheel", espeakng_loader.get_library_path(),
                         espeakng_loader.get_data_path())  # fmt: skip


class _LinkMap(ctypes.Structure):
    """The head of glibc's `struct link_map`: what `dlinfo(RTLD_DI_LINKMAP)` points to."""

    _fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p)]


_RTLD_DI_LINKMAP = 2
_API = ("espeak_Initialize", "espeak_SetVoiceByName", "espeak_Synth", "espeak_TextToPhonemes")


def loaded_path(library: str) -> str:
    """The real file of the espeak-ng library `library` (a path, or a name the dynamic
    loader finds, such as `find_library`'s bare `libespeak-ng.so.1`): loaded once, checked
    to have espeak-ng's API, named by the file the loader loaded, unloaded.

    Raises:
        OSError: it does not load, lacks espeak-ng's API, or its file cannot be named.
    """
    lib = ctypes.CDLL(library)  # OSError: no such file, or not a shared library
    try:
        missing = [name for name in _API if not hasattr(lib, name)]
        if missing:
            raise OSError(f"not espeak-ng: it lacks {', '.join(missing)}")
        if os.sep in library:
            return os.path.realpath(library)
        link_map = ctypes.POINTER(_LinkMap)()
        dlinfo = getattr(ctypes.CDLL(None), "dlinfo", None)  # glibc's; absent elsewhere
        if dlinfo is None or dlinfo(ctypes.c_void_p(lib._handle), _RTLD_DI_LINKMAP,
                                    ctypes.byref(link_map)) != 0:  # fmt: skip
            raise OSError(f"cannot tell which file the loader found for {library!r}")
        return os.path.realpath(link_map.contents.l_name.decode())
    finally:
        _ctypes.dlclose(lib._handle)


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
