"""The `xtts-audio demo` chain on one utterance, timed, with audio you can listen to.

decode → mono → resample → trim → mel features (XLA) → Griffin-Lim → WAV.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Iterator

import numpy as np
import tensorflow as tf

import xtts_audio as xa
from xtts_audio.config import MelConfig
from xtts_audio.wav_write import write_wav

__all__ = ["run_demo", "synthetic_utterance"]

_VOWELS = {"a": (730, 1090, 2440), "i": (270, 2290, 3010), "u": (300, 870, 2240)}


def synthetic_utterance(*, sample_rate: int = 44100, seed: int = 0) -> np.ndarray:
    """A speech-like test signal: voiced vowels with formants, a fricative, pauses.

    Returns:
        float32 [samples, 2]: stereo, the right channel 6 dB quieter.
    """
    rng = np.random.default_rng(seed)
    pieces = [np.zeros(sample_rate // 4)]
    for vowel in "aisu":
        if vowel == "s":  # fricative: noise above 4 kHz
            noise = rng.standard_normal(sample_rate // 5)
            spectrum = np.fft.rfft(noise)
            spectrum[: int(4000 * len(noise) / sample_rate)] = 0
            pieces.append(0.05 * np.fft.irfft(spectrum, len(noise)))
        else:
            pieces.append(_voiced(_VOWELS[vowel], sample_rate=sample_rate))
        pieces.append(np.zeros(sample_rate // 10))
    pieces.append(np.zeros(sample_rate // 4))
    mono = np.concatenate(pieces).astype(np.float32)
    return np.stack([mono, 0.5 * mono], axis=1)


def _voiced(formants: tuple[int, int, int], *, sample_rate: int) -> np.ndarray:
    t = np.arange(int(0.35 * sample_rate)) / sample_rate
    f0 = 110 + 40 * t / t[-1]  # rising pitch
    phase = 2 * np.pi * np.cumsum(f0) / sample_rate
    out = np.zeros_like(t)
    for k in range(1, int(5000 / f0.max())):
        gain = sum(np.exp(-(((k * f0 - f) / 90.0) ** 2)) for f in formants) + 0.02
        out += gain * np.sin(k * phase) / k
    envelope = np.sqrt(np.maximum(np.sin(np.pi * t / t[-1]), 0.0))  # sin(pi) can round below 0
    return 0.3 * out * envelope / np.abs(out).max()


def run_demo(
    *, source: pathlib.Path | None, out: pathlib.Path, preset: str, iterations: int, top_db: float
) -> Iterator[str]:
    """Run the chain, yielding a line on what each stage produced as it finishes.

    Args:
        source: a WAV file; None writes a synthetic 44.1 kHz stereo utterance to
            `out / "input.wav"` and uses it.
        out: output folder (created); receives `griffin_lim.wav`.
        preset: the `MelConfig` preset.
        iterations: Griffin-Lim iterations.
        top_db: silence threshold for trimming, dB below the peak.

    Raises:
        ConfigError: an unknown preset.
        tf.errors.InvalidArgumentError: `source` is not a WAV file `decode_wav` reads.
    """
    config = MelConfig.from_preset(preset)
    out.mkdir(parents=True, exist_ok=True)
    source = source or _write_synthetic(out / "input.wav")
    yield f"input      {source}"
    audio, rate = xa.load_wav(str(source))
    rate = int(rate)
    mono = xa.to_mono(audio)
    resampled = xa.resample(mono, orig_sr=rate, target_sr=config.sample_rate)
    trimmed = xa.trim_silence(resampled, top_db=top_db)
    seconds = trimmed.shape[0] / config.sample_rate
    yield f"decoded    {audio.shape[0] / rate:.2f} s, {audio.shape[1]} channel(s) at {rate} Hz"
    yield f"prepared   mono, {config.sample_rate} Hz, {seconds:.2f} s after trimming"

    features_fn = tf.function(
        lambda w: xa.mel_features(w, config), jit_compile=True, autograph=False
    )
    features = features_fn(trimmed)  # compile outside the timed part
    start = time.perf_counter()
    features = features_fn(trimmed).numpy()
    elapsed = time.perf_counter() - start
    yield (f"features   {features.shape} ({preset}) in {elapsed * 1e3:.1f} ms, "
           f"{seconds / elapsed:.0f}× real time")  # fmt: skip

    mel = xa.denormalize(features, config)
    rebuilt = xa.griffin_lim(mel, config, n_iter=iterations)
    convergence = _spectral_convergence(mel, xa.mel_spectrogram(rebuilt, config), config)
    target = out / "griffin_lim.wav"
    write_wav(target, rebuilt.numpy(), config.sample_rate)
    yield (f"rebuilt    {target} ({iterations} Griffin-Lim iterations, "
           f"mel spectral convergence {convergence:.3f})")  # fmt: skip


def _write_synthetic(path: pathlib.Path) -> pathlib.Path:
    audio = synthetic_utterance(sample_rate=44100)
    write_wav(path, audio, 44100)
    return path


def _spectral_convergence(mel, rebuilt, config: MelConfig) -> float:
    a, b = np.asarray(mel), np.asarray(rebuilt)
    if config.power == 2.0:
        a, b = np.sqrt(a), np.sqrt(b)
    return float(np.linalg.norm(a - b) / np.linalg.norm(a))
