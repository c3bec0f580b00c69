"""Speech from espeak-ng's C library, into memory: what `espeak-ng -w` writes, with no
program on PATH (the phonemes extra's wheel ships the library; `_espeak_library` picks it).

espeak-ng's C API in synchronous mode: `espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS)`, a
synth callback that receives the samples, `espeak_SetVoiceByName`, the rate and pitch as
`espeak_SetParameter`s (what the program's `-s` and `-p` set), `espeak_Synth` of UTF-8
text with the program's pause at its end (`espeakENDPAUSE`) and `espeak_Synchronize`.

A loaded library carries state from one text to the next (measured: the same text came
out 39,552, then 39,464, then 39,460 samples long, differing from sample 1,464 on, and
neither `espeak_Terminate` + `espeak_Initialize` nor `espeak_ng_SetRandSeed` reset it),
while the program starts afresh for each. So each text is spoken by a private copy of the
library, loaded and unloaded around it (~20 ms): every text comes out as a fresh process
speaks it, whatever was spoken before. espeak-ng before 1.52 (Debian 12's system library)
draws its noise from the C library's `rand()`, which every copy shares: it is seeded as a
fresh process starts (`srand(1)`) before each text.
"""

from __future__ import annotations

import _ctypes
import contextlib
import ctypes
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from xtts_data._espeak_library import EspeakLibrary
from xtts_data.errors import XttsDataError

__all__ = ["library_has_voice", "library_speak"]

_SYNCHRONOUS = 2  # AUDIO_OUTPUT_SYNCHRONOUS
_RATE, _PITCH = 1, 3  # espeakRATE, espeakPITCH
_POS_CHARACTER = 1
_FLAGS = 1 | 0x1000  # espeakCHARS_UTF8 | espeakENDPAUSE: the program's pause after the text
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                             ctypes.c_void_p)  # fmt: skip
_LOCK = threading.Lock()  # one text at a time: the copies share the voice data files
_LIBC = ctypes.CDLL(None)  # this process's C library: `srand`


def library_has_voice(library: EspeakLibrary, voice: str) -> bool:
    """Whether espeak-ng's `library` knows `voice` (a voice name: `en-us`, `en-us+f1`)."""
    with _fresh(library) as lib:
        return lib.espeak_SetVoiceByName(voice.encode()) == 0


def library_speak(library: EspeakLibrary, text: str, *, voice: str, pitch: int,
                  speed: int) -> np.ndarray:  # fmt: skip
    """int16 [samples] at 22,050 Hz of `text` in `voice`, at espeak-ng's `pitch` (0–99)
    and `speed` (words per minute), as `espeak-ng -w -v voice -p pitch -s speed` writes it.

    Raises:
        XttsDataError: an unknown voice, or the library failed.
    """
    chunks: list[np.ndarray] = []

    def collect(samples, count, _events) -> int:
        if count > 0:
            chunks.append(np.ctypeslib.as_array(samples, shape=(count,)).copy())
        return 0  # go on

    callback = _CALLBACK(collect)  # referenced until the library is unloaded
    with _fresh(library) as lib:
        lib.espeak_SetSynthCallback(callback)
        if lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise XttsDataError(f"espeak-ng's library has no voice {voice!r}")
        lib.espeak_SetParameter(_RATE, int(speed), 0)
        lib.espeak_SetParameter(_PITCH, int(pitch), 0)
        data = text.encode("utf-8") + b"\0"
        code = lib.espeak_Synth(data, len(data), 0, _POS_CHARACTER, 0, _FLAGS, None, None)
        lib.espeak_Synchronize()
    if code != 0:
        raise XttsDataError(f"espeak-ng's library failed to speak {text[:40]!r} (error {code})")
    return np.concatenate(chunks).astype("<i2") if chunks else np.zeros(0, "<i2")


@contextlib.contextmanager
def _fresh(library: EspeakLibrary) -> Iterator[ctypes.CDLL]:
    """A private copy of `library`, initialised, unloaded on leaving."""
    with _LOCK, tempfile.TemporaryDirectory(prefix="xtts-espeak-") as folder:
        copy = Path(folder) / Path(library.library).name
        shutil.copyfile(library.library, copy)
        lib = ctypes.CDLL(str(copy))
        _LIBC.srand(1)  # `rand()` as a fresh process starts: glibc's seed before any srand
        try:
            lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint,
                                         ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
                                         ctypes.c_void_p, ctypes.c_void_p]  # fmt: skip
            home = str(Path(library.data).parent).encode() if library.data else None
            if lib.espeak_Initialize(_SYNCHRONOUS, 0, home, 0) <= 0:
                raise XttsDataError(f"espeak-ng's library {library.library} did not start "
                                    f"(its voice data: {library.data or 'its own'})")  # fmt: skip
            yield lib
            lib.espeak_Terminate()
        finally:
            _ctypes.dlclose(lib._handle)
