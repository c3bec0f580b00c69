"""Writing 16-bit WAV: the one writer of the stack (synthesis, copy synthesis,
evaluation's audio, the demo corpora, the benchmarks, the server's responses).

Samples are quantised as `tf.audio.encode_wav` quantises them (`pcm16`: scaled by 32768,
rounded half away from zero, clipped to the int16 range), so a file is the same bytes
whichever wrote it; `WavWriter` grows a file chunk by chunk, a whole WAV after each
(streaming); `wav_bytes` is a whole WAV in memory, and `stream_wav_header` the header of
one whose length is not known yet (a stream sent over the network).
"""

from __future__ import annotations

import io
import struct
import wave
from pathlib import Path
from types import TracebackType

import numpy as np

from xtts_audio.errors import InputError

__all__ = ["WAV_HEADER_BYTES", "WavWriter", "pcm16", "stream_wav_header", "wav_bytes",
           "write_wav"]  # fmt: skip

WAV_HEADER_BYTES = 44  # RIFF, fmt (16-bit PCM) and data chunk headers
_UNKNOWN = 0xFFFFFFFF  # a chunk size no reader takes literally: the stream's end is its end


def write_wav(path: str | Path, samples: np.ndarray, sample_rate: int) -> None:
    """Write `samples` to `path` as a 16-bit WAV.

    Args:
        path: the file (its folder must exist).
        samples: float [samples] (mono) or [samples, channels] in [-1, 1] (louder is
            clipped), or int16 PCM of those shapes, written as it is.
        sample_rate: samples per second.

    Raises:
        InputError: samples of another rank.
    """
    samples = np.asarray(samples)
    channels = samples.shape[1] if samples.ndim == 2 else 1
    with WavWriter(path, sample_rate, channels=channels) as writer:
        writer.write(samples)


class WavWriter:
    """A 16-bit WAV written chunk by chunk: after each `write` the file is a whole WAV
    of the samples so far (the header is rewritten). A context manager.

    Args:
        path: the file (its folder must exist), or a `BytesIO` to write into (left open).
        sample_rate: samples per second.
        channels: channels of every chunk (1: mono).
    """

    def __init__(self, path: str | Path | io.BytesIO, sample_rate: int, *,
                 channels: int = 1) -> None:  # fmt: skip
        self.channels = channels
        if isinstance(path, io.BytesIO):  # in memory (`wav_bytes`)
            self._file = path
        else:
            self._file = open(path, "wb")  # noqa: SIM115 (closed by __exit__)
        self._wav = wave.open(self._file, "wb")  # noqa: SIM115 (closed by __exit__)
        self._wav.setnchannels(channels)
        self._wav.setsampwidth(2)
        self._wav.setframerate(sample_rate)

    def write(self, samples: np.ndarray) -> None:
        """Append float samples in [-1, 1] (clipped) or int16 PCM: [samples] for one
        channel, [samples, channels] for more."""
        samples = np.asarray(samples)
        shape = (samples.shape[0], self.channels) if samples.ndim == 2 else None
        if samples.shape != shape and not (samples.ndim == 1 and self.channels == 1):
            expected = "[samples]" if self.channels == 1 else f"[samples, {self.channels}]"
            raise InputError(
                f"Expected samples {expected} ({self.channels} channel(s)), received: "
                f"shape={samples.shape}"
            )
        self._wav.writeframes(pcm16(samples).astype("<i2").tobytes())  # header patched
        self._file.flush()  # on disk: a reader sees a whole WAV

    def __enter__(self) -> WavWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:  # fmt: skip
        self._wav.close()
        if not isinstance(self._file, io.BytesIO):
            self._file.close()


def wav_bytes(samples: np.ndarray, sample_rate: int) -> bytes:
    """The bytes `write_wav` would write: a whole 16-bit WAV of `samples` (float in
    [-1, 1], louder clipped, or int16), mono [samples] or [samples, channels]."""
    samples = np.asarray(samples)
    buffer = io.BytesIO()
    channels = samples.shape[1] if samples.ndim == 2 else 1
    with WavWriter(buffer, sample_rate, channels=channels) as writer:
        writer.write(samples)
    return buffer.getvalue()


def stream_wav_header(sample_rate: int) -> bytes:
    """The 44-byte header of a 16-bit mono WAV of unknown length (its RIFF and data sizes
    0xFFFFFFFF), sent before a stream's samples (`pcm16`): players read on to the end."""
    return b"".join([
        b"RIFF", struct.pack("<I", _UNKNOWN), b"WAVE",
        b"fmt ", struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, 2 * sample_rate, 2, 16),
        b"data", struct.pack("<I", _UNKNOWN),
    ])  # fmt: skip


def pcm16(samples: np.ndarray) -> np.ndarray:
    """float → int16 samples as `tf.audio.encode_wav` quantises them (int16 passes
    unchanged): what a WAV of them holds."""
    samples = np.asarray(samples)
    if samples.dtype == np.int16:
        return samples
    scaled = samples.astype(np.float32) * 32768.0
    rounded = np.trunc(scaled + np.copysign(0.5, scaled))  # C's roundf, as TF's
    return np.clip(rounded, -32768, 32767).astype(np.int16)
