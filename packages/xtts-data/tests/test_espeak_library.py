"""Which espeak-ng library speaks when no program is on PATH: a system library named by
`find_library` (a bare soname on Linux: a stock desktop's `libespeak-ng1` without the
`espeak-ng` program), one that is missing or broken, and the wheel's (`XTTS_ESPEAK`).

Each case runs `xtts-data demo-corpus --engine espeak` as a user would: speech comes out,
or one line naming `XTTS_ESPEAK` and exit 2, never a traceback.
"""

from __future__ import annotations

import _ctypes
import ctypes
import ctypes.util
import logging
import os
import shutil
import sys
from pathlib import Path

import pytest

from xtts_data import _demo_espeak, _espeak_library
from xtts_data.cli import main
from xtts_data.errors import ConfigError

espeakng_loader = pytest.importorskip("espeakng_loader")
WHEEL = os.path.realpath(espeakng_loader.get_library_path())
SONAME = "libespeak-ng.so.1"  # what find_library answers on Linux: a name, not a file


@pytest.fixture
def library_found_as(monkeypatch):
    """No espeak-ng program; `find_library("espeak-ng")` answers the given name and
    `XTTS_ESPEAK` is the given choice, each looked up afresh."""

    def found(name: str, choice: str) -> None:
        monkeypatch.setattr(shutil, "which", lambda program: None)
        monkeypatch.setattr(ctypes.util, "find_library", lambda library: name)
        monkeypatch.delenv("PHONEMIZER_ESPEAK_LIBRARY", raising=False)
        monkeypatch.setenv(_espeak_library.ENV, choice)
        _demo_espeak._speech_library.cache_clear()

    yield found
    _demo_espeak._speech_library.cache_clear()
    _espeak_library.forget_choice()


@pytest.fixture
def wheel_loaded(monkeypatch):
    """The wheel's library loaded by its path (so the loader finds its soname among the
    loaded ones, on any machine), told where its voice data is (as a system library knows
    its own); unloaded after, so that no later lookup of the name finds it."""
    monkeypatch.setenv("ESPEAK_DATA_PATH", os.path.dirname(espeakng_loader.get_data_path()))
    loaded = ctypes.CDLL(WHEEL)
    yield
    _ctypes.dlclose(loaded._handle)


def _mapped_files() -> set[str]:
    """The real paths of the files mapped into this process (Linux)."""
    fields = [line.split(maxsplit=5) for line in Path("/proc/self/maps").read_text().splitlines()]
    return {os.path.realpath(f[5]) for f in fields if len(f) == 6 and f[5].startswith("/")}


def _demo_corpus(tmp_path) -> int:
    return main(["demo-corpus", str(tmp_path / "c"), "--engine", "espeak", "--n", "1"])


@pytest.mark.parametrize("choice", ["auto", "system"])
def test_a_library_found_by_name_is_loaded_from_its_file(tmp_path, library_found_as,
                                                          wheel_loaded, choice):  # fmt: skip
    library_found_as(SONAME, choice)

    chosen = _espeak_library.espeak_library()
    assert chosen.source == "system"
    # A file the loader mapped for that name: the wheel's, or a system library phonemes
    # loaded earlier in this process (its soname is the same)
    assert os.path.isabs(chosen.library)
    assert chosen.library in _mapped_files()
    assert _demo_corpus(tmp_path) == 0
    assert len(list((tmp_path / "c" / "wavs").glob("*.wav"))) == 1


@pytest.fixture(params=["missing", "stale_name", "broken", "not_espeak"])
def unusable(request, tmp_path) -> str:
    """A library `find_library` (or `PHONEMIZER_ESPEAK_LIBRARY`) might name that does not
    load as espeak-ng: a missing file, a name the loader no longer finds (a stale ldconfig
    cache), a file that is no library, a library that is not espeak-ng."""
    if request.param == "missing":
        return str(tmp_path / "gone" / SONAME)
    if request.param == "stale_name":
        return "libespeak-ng.so.99"
    if request.param == "broken":
        (tmp_path / SONAME).write_bytes(b"\x7fELF but not really a library")
        return str(tmp_path / SONAME)
    return ctypes.util.find_library("m") or "libm.so.6"  # loads, but is no espeak-ng


def test_an_unusable_system_library_falls_back_to_the_wheel(tmp_path, library_found_as,
                                                            unusable, caplog):  # fmt: skip
    library_found_as(unusable, "auto")
    with caplog.at_level(logging.WARNING, logger=_espeak_library.__name__):
        assert _demo_corpus(tmp_path) == 0

    assert len(list((tmp_path / "c" / "wavs").glob("*.wav"))) == 1
    [line] = [r.getMessage() for r in caplog.records if r.name == _espeak_library.__name__]
    assert unusable in line
    assert "XTTS_ESPEAK=wheel" in line


def test_an_unusable_system_library_chosen_is_one_line(tmp_path, library_found_as, unusable,
                                                       capsys):  # fmt: skip
    library_found_as(unusable, "system")
    with pytest.raises(ConfigError, match=r"XTTS_ESPEAK=system: expected a usable espeak-ng"):
        _espeak_library.espeak_library()

    assert _demo_corpus(tmp_path) == 2
    err = capsys.readouterr().err.strip()
    assert "XTTS_ESPEAK" in err
    assert unusable in err
    assert len(err.splitlines()) == 1  # one line: no traceback
    assert not (tmp_path / "c").exists()


def test_no_wheel_after_an_unusable_library_names_both(library_found_as, unusable,
                                                       monkeypatch):  # fmt: skip
    library_found_as(unusable, "auto")
    monkeypatch.setitem(sys.modules, "espeakng_loader", None)  # the wheel not installed
    with pytest.raises(ConfigError, match=r"XTTS_ESPEAK=auto.*does not load.*phonemes"):
        _espeak_library.espeak_library()
