"""Audio files read without TensorFlow, and the checks a reference clip must pass: the
one owner of both for the training side (`xtts_data._audio_io`, `load_reference`) and for
the runtime (`xtts_runtime`), which imports no TensorFlow.

- `file_bytes` / `read_clip`: a file's bytes (unreadable and empty files refused), and
  any format libsndfile reads (WAV, FLAC, OGG) as mono float32 at its own rate.
- `check_samples`: enough samples for one STFT frame.
- `check_clip_audio` / `check_clip_voice`: a clip that gives a voice lasts at most a
  server's bound, is not silent, and keeps at least the frames the run conditions on
  once its silence is trimmed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile

from xtts_audio.config import MelConfig
from xtts_data.errors import XttsDataError

__all__ = [
    "SILENT_PEAK",
    "BadAudioError",
    "ClipError",
    "check_clip_audio",
    "check_clip_voice",
    "check_samples",
    "decode_soundfile",
    "file_bytes",
    "min_samples",
    "read_clip",
]

# A reference whose peak is under -60 dBFS holds no voice to condition on.
SILENT_PEAK = 10 ** (-60 / 20)


class BadAudioError(XttsDataError, ValueError):
    """The file cannot be used; `str(error)` is the reason written to the report."""


class ClipError(XttsDataError, ValueError):
    """A reference clip that decodes but gives no voice: too long, silent, or too short."""


def file_bytes(path: Path) -> bytes:
    """The bytes of the audio file at `path`.

    Raises:
        BadAudioError: the file cannot be read, or is empty.
    """
    try:
        contents = Path(path).read_bytes()
    except OSError as error:
        raise BadAudioError(f"cannot read file: {error.strerror}") from error
    if not contents:
        raise BadAudioError("empty file (0 bytes)")
    return contents


def decode_soundfile(path: Path) -> tuple[np.ndarray, int]:
    """float32 [samples] mono (the channels' mean) and the rate of the audio file at `path`.

    Raises:
        BadAudioError: libsndfile cannot decode it.
    """
    try:
        wave, rate = soundfile.read(path, dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as error:
        raise BadAudioError(f"unreadable audio ({path.suffix or 'no suffix'}): {error}") from None
    return wave.mean(axis=1, dtype=np.float32), int(rate)


def read_clip(path: Path) -> tuple[np.ndarray, int]:
    """`decode_soundfile` of the file at `path`, refused when it is empty or holds no
    samples.

    Raises:
        BadAudioError: unreadable, empty, not audio, or no samples.
    """
    path = Path(path)
    file_bytes(path)
    wave, rate = decode_soundfile(path)
    if wave.size == 0:
        raise BadAudioError("no audio samples")
    return wave, rate


def min_samples(config: MelConfig) -> int:
    """Fewest samples that give at least one STFT frame under `config`."""
    if config.center:
        return config.n_fft // 2 + 1 if config.pad_mode == "reflect" else 1
    return config.n_fft


def check_samples(samples: int, config: MelConfig) -> None:
    """Raises BadAudioError when `samples` at `config.sample_rate` give no STFT frame."""
    if samples < min_samples(config):
        raise BadAudioError(
            f"too short: {samples} samples at {config.sample_rate} Hz, the STFT needs at "
            f"least {min_samples(config)}"
        )


def check_clip_audio(name: str, *, seconds: float, peak: float,
                     max_seconds: float | None = None) -> None:  # fmt: skip
    """A clip of `seconds` whose loudest sample is `peak` (at the run's rate), checked.

    Raises:
        ClipError: longer than `max_seconds` (a server's bound on uploads), or silent (its
            peak under -60 dBFS).
    """
    if max_seconds is not None and seconds > max_seconds:
        raise ClipError(f"Expected a clip of at most {max_seconds:g} s, received: "
                        f"{name} of {seconds:.1f} s; send its best {max_seconds:g} s")  # fmt: skip
    if peak < SILENT_PEAK:
        loudness = f"{20 * np.log10(peak):.0f} dBFS" if peak > 0 else "all zeros"
        raise ClipError(f"{name} is silent (peak {loudness}): give a clip of the voice to "
                        f"speak in")  # fmt: skip


def check_clip_voice(name: str, *, frames: int, need: int, top_db: float | None,
                     config: MelConfig) -> None:  # fmt: skip
    """A clip's `frames` of mel features after its silence is trimmed at `top_db`, checked
    against the `need` (`data.cond_frames`) the run conditions on.

    Raises:
        ClipError: fewer than `need` frames (naming how many seconds of speech it takes).
    """
    if frames < need:
        seconds = (need - 1) * config.hop_length / config.sample_rate
        raise ClipError(
            f"{name} gives {frames} frames of voice (silence trimmed at {top_db} dB), the run "
            f"conditions on data.cond_frames={need}: give a clip of at least {seconds:.2f} s "
            f"of speech"
        )
