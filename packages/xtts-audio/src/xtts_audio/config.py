"""`MelConfig`: every setting of a mel-spectrogram recipe, validated once.

Field names follow `librosa.feature.melspectrogram`; the scaling fields describe how each
recipe turns the linear mel into model features (see `xtts_audio.mel_features`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

from xtts_audio.errors import ConfigError
from xtts_audio.frozen_config import FrozenConfig

__all__ = ["PRESETS", "MelConfig"]

PadMode = Literal["constant", "reflect"]
LogScale = Literal["none", "ln", "log10", "db"]
Window = Literal["hann", "hamming"]

_PAD_MODES = ("constant", "reflect")
_LOG_SCALES = ("none", "ln", "log10", "db")
_WINDOWS = ("hann", "hamming")


# Each recipe as its source computes it; the parity tests reproduce the source computation.
PRESETS: dict[str, dict[str, Any]] = {
    # librosa 0.11 `librosa.feature.melspectrogram` defaults, then `librosa.power_to_db`
    # defaults (ref=1.0, amin=1e-10, top_db=80).
    "librosa": dict(
        sample_rate=22050,
        n_fft=2048,
        hop_length=512,
        n_mels=128,
        pad_mode="constant",
        power=2.0,
        htk=False,
        norm="slaney",
        log="db",
        amin=1e-10,
        top_db=80.0,
    ),
    # Coqui TTS XTTS (TorchMelSpectrogram, from tortoise-tts): torchaudio MelSpectrogram with
    # power 2, f_max 8000, HTK mel scale (torchaudio's default) with slaney norm, reflect
    # padding, then `log(clamp(x, min=1e-5))`.
    "xtts": dict(
        sample_rate=22050,
        n_fft=1024,
        hop_length=256,
        win_length=1024,
        n_mels=80,
        fmin=0.0,
        fmax=8000.0,
        pad_mode="reflect",
        power=2.0,
        htk=True,
        norm="slaney",
        log="ln",
        amin=1e-5,
    ),
    # Coqui TTS `AudioProcessor` with `BaseAudioConfig` defaults (TTS/config/shared_configs.py):
    # |STFT| (reflect), slaney filters to sr/2, 20*log10(max(1e-5, x)) - ref_level_db 20,
    # then (S + 100) / 100 scaled to [-4, 4] and clipped.
    "coqui": dict(
        sample_rate=22050,
        n_fft=1024,
        hop_length=256,
        win_length=1024,
        n_mels=80,
        fmin=0.0,
        pad_mode="reflect",
        power=1.0,
        htk=False,
        norm="slaney",
        log="db",
        amin=1e-5,
        ref_level_db=20.0,
        min_level_db=-100.0,
        max_norm=4.0,
        symmetric_norm=True,
        clip_norm=True,
    ),
    # TensorFlowTTS LJSpeech preprocessing (preprocess/ljspeech_preprocess.yaml and
    # `logmelfilterbank`): |STFT| (reflect), 80 slaney mels over 80-7600 Hz,
    # log10(max(1e-10, x)).
    "tacotron2": dict(
        sample_rate=22050,
        n_fft=1024,
        hop_length=256,
        n_mels=80,
        fmin=80.0,
        fmax=7600.0,
        pad_mode="reflect",
        power=1.0,
        htk=False,
        norm="slaney",
        log="log10",
        amin=1e-10,
    ),
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class MelConfig(FrozenConfig):
    """A mel-spectrogram recipe: STFT, filterbank and feature scaling.

    Spectral fields (librosa names and meanings):
        sample_rate: Hz of the waveform the recipe expects.
        n_fft: FFT size; frames have `n_fft // 2 + 1` frequency bins.
        hop_length: samples between frame starts.
        win_length: window length, zero-padded to `n_fft`; `None` means `n_fft`.
        window: periodic window function, `"hann"` or `"hamming"`.
        n_mels: number of mel bands.
        fmin, fmax: band edges in Hz; `fmax=None` means `sample_rate / 2`.
        center: pad `n_fft // 2` samples on both sides so frame `t` is centred at `t * hop`.
        pad_mode: `"constant"` (zeros) or `"reflect"` padding when `center` is true.
        power: exponent of the STFT magnitude: 1.0 magnitude, 2.0 power.
        htk: HTK mel scale instead of Slaney's.
        norm: `"slaney"` area normalisation of the filters, or `None`.

    Feature scaling (applied by `mel_features`, undone by `denormalize`):
        log: `"none"`, `"ln"` (natural log), `"log10"`, or `"db"` (`20 / power * log10`,
            i.e. librosa's `power_to_db` for power 2 and Coqui's `amp_to_db` for power 1).
        amin: floor applied to the mel before the log.
        top_db: with `"db"`, clamp each example to at most this many dB below its maximum.
        ref_level_db: with `"db"`, subtracted from the dB values (Coqui's reference level).
        min_level_db: with `"db"`, enables Coqui's normalisation `(S - min) / -min`;
            `None` leaves dB values as they are.
        max_norm, symmetric_norm, clip_norm: Coqui's scaling of the normalised values to
            `[-max_norm, max_norm]` (symmetric) or `[0, max_norm]`, optionally clipped.

    `MelConfig.from_preset("xtts", n_mels=64)` or `from_dict({"preset": "xtts", ...})`
    starts from a recipe of `PRESETS`; `from_dict` without one needs `sample_rate`, `n_fft`,
    `hop_length` and `n_mels`; `to_dict` gives every field resolved (`win_length`, `fmax`).
    """

    error_type = ConfigError
    presets = PRESETS

    sample_rate: int
    n_fft: int
    hop_length: int
    win_length: int | None = None
    window: Window = "hann"
    n_mels: int
    fmin: float = 0.0
    fmax: float | None = None
    center: bool = True
    pad_mode: PadMode = "constant"
    power: float = 2.0
    htk: bool = False
    norm: Literal["slaney"] | None = "slaney"
    log: LogScale = "none"
    amin: float = 1e-10
    top_db: float | None = None
    ref_level_db: float = 0.0
    min_level_db: float | None = None
    max_norm: float = 4.0
    symmetric_norm: bool = True
    clip_norm: bool = True

    def __post_init__(self) -> None:
        if self.win_length is None:
            object.__setattr__(self, "win_length", self.n_fft)
        if self.fmax is None:
            object.__setattr__(self, "fmax", self.sample_rate / 2)
        self._check_spectral()
        self._check_scaling()

    def _check_spectral(self) -> None:
        for name in ("sample_rate", "n_fft", "hop_length", "win_length", "n_mels"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                self._fail(name, value, "a positive int")
        if self.n_fft < 2:
            self._fail("n_fft", self.n_fft, "an int >= 2")
        if self.win_length > self.n_fft:
            self._fail("win_length", self.win_length, f"<= n_fft ({self.n_fft})")
        if self.hop_length > self.win_length:
            self._fail("hop_length", self.hop_length, f"<= win_length ({self.win_length})")
        if self.window not in _WINDOWS:
            self._fail("window", self.window, f"one of {_WINDOWS}")
        if self.pad_mode not in _PAD_MODES:
            self._fail("pad_mode", self.pad_mode, f"one of {_PAD_MODES}")
        if self.power not in (1.0, 2.0):
            self._fail("power", self.power, "1.0 (magnitude) or 2.0 (power)")
        if self.norm not in ("slaney", None):
            self._fail("norm", self.norm, "'slaney' or None")
        nyquist = self.sample_rate / 2
        if not 0.0 <= self.fmin < nyquist:
            self._fail("fmin", self.fmin, f"0 <= fmin < sample_rate / 2 ({nyquist:g})")
        if not self.fmin < self.fmax <= nyquist:
            self._fail(
                "fmax", self.fmax, f"fmin ({self.fmin:g}) < fmax <= sample_rate / 2 ({nyquist:g})"
            )

    def _check_scaling(self) -> None:
        if self.log not in _LOG_SCALES:
            self._fail("log", self.log, f"one of {_LOG_SCALES}")
        if not (math.isfinite(self.amin) and self.amin > 0):
            self._fail("amin", self.amin, "a finite float > 0")
        db_only = {"top_db": self.top_db is not None, "min_level_db": self.min_level_db is not None}
        db_only["ref_level_db"] = self.ref_level_db != 0.0
        for name, used in db_only.items():
            if used and self.log != "db":
                self._fail(
                    name, getattr(self, name), f"its default unless log='db' (log={self.log!r})"
                )
        if self.top_db is not None and not self.top_db > 0:
            self._fail("top_db", self.top_db, "None or a float > 0")
        if self.min_level_db is not None and not self.min_level_db < 0:
            self._fail("min_level_db", self.min_level_db, "None or a float < 0")
        if not self.max_norm > 0:
            self._fail("max_norm", self.max_norm, "a float > 0")

    @property
    def n_freqs(self) -> int:
        """Frequency bins per STFT frame: `n_fft // 2 + 1`."""
        return self.n_fft // 2 + 1
