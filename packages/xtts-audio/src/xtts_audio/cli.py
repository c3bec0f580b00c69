"""`xtts-audio demo`: the whole chain on one utterance, timed, with audio you can listen to.

decode → mono → resample → trim → mel features (XLA) → Griffin-Lim → WAV.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
import time

import numpy as np
import tensorflow as tf

import xtts_audio as xa
from xtts_audio.config import PRESETS, MelConfig
from xtts_audio.errors import XttsAudioError

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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xtts-audio",
        description="TensorFlow-native audio ops for TTS that match librosa.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="run decode → resample → trim → mel → Griffin-Lim on one utterance",
        description=(
            "Decode a WAV (default: a synthetic 44.1 kHz stereo utterance written first), "
            "downmix, resample to the preset's rate, trim silence, compute mel features "
            "under XLA, reconstruct audio with Griffin-Lim and write it next to the input."
        ),
    )
    demo.add_argument(
        "--input", type=pathlib.Path, help="a WAV file to use instead of the synthetic one"
    )
    demo.add_argument(
        "--out",
        type=pathlib.Path,
        default=pathlib.Path("xtts-demo"),
        help="output folder (default: %(default)s)",
    )
    demo.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="xtts",
        help="mel recipe (default: %(default)s)",
    )
    demo.add_argument(
        "--iterations", type=int, default=32, help="Griffin-Lim iterations (default: %(default)s)"
    )
    demo.add_argument(
        "--top-db",
        type=float,
        default=40.0,
        help="silence threshold for trimming (default: %(default)s)",
    )
    return parser  # fmt: skip


def demo(args: argparse.Namespace) -> None:
    """Run the demo chain and print what each stage produced."""
    config = MelConfig.from_preset(args.preset)
    args.out.mkdir(parents=True, exist_ok=True)
    source = args.input or _write_synthetic(args.out / "input.wav")
    print(f"input      {source}")
    audio, rate = xa.load_wav(str(source))
    rate = int(rate)
    mono = xa.to_mono(audio)
    resampled = xa.resample(mono, orig_sr=rate, target_sr=config.sample_rate)
    trimmed = xa.trim_silence(resampled, top_db=args.top_db)
    seconds = trimmed.shape[0] / config.sample_rate
    print(f"decoded    {audio.shape[0] / rate:.2f} s, {audio.shape[1]} channel(s) at {rate} Hz")
    print(f"prepared   mono, {config.sample_rate} Hz, {seconds:.2f} s after trimming")

    features_fn = tf.function(lambda w: xa.mel_features(w, config), jit_compile=True)
    features = features_fn(trimmed)  # compile outside the timed part
    start = time.perf_counter()
    features = features_fn(trimmed).numpy()
    elapsed = time.perf_counter() - start
    print(f"features   {features.shape} ({args.preset}) in {elapsed * 1e3:.1f} ms, "
          f"{seconds / elapsed:.0f}× real time")  # fmt: skip

    mel = xa.denormalize(features, config)
    rebuilt = xa.griffin_lim(mel, config, n_iter=args.iterations)
    convergence = _spectral_convergence(mel, xa.mel_spectrogram(rebuilt, config), config)
    target = args.out / "griffin_lim.wav"
    clipped = tf.clip_by_value(rebuilt, -1.0, 1.0)[:, None]
    tf.io.write_file(str(target), tf.audio.encode_wav(clipped, config.sample_rate))
    print(f"rebuilt    {target} ({args.iterations} Griffin-Lim iterations, "
          f"mel spectral convergence {convergence:.3f})")  # fmt: skip


def _write_synthetic(path: pathlib.Path) -> pathlib.Path:
    audio = synthetic_utterance(sample_rate=44100)
    tf.io.write_file(str(path), tf.audio.encode_wav(audio, 44100))
    return path


def _spectral_convergence(mel, rebuilt, config: MelConfig) -> float:
    a, b = np.asarray(mel), np.asarray(rebuilt)
    if config.power == 2.0:
        a, b = np.sqrt(a), np.sqrt(b)
    return float(np.linalg.norm(a - b) / np.linalg.norm(a))


def _reason(error: tf.errors.InvalidArgumentError) -> str:
    """The decoder's own message, without TensorFlow's graph traceback around it."""
    found = re.search(r"assertion failed: \[(.*?)\]", error.message)
    return found.group(1) if found else error.message.strip().splitlines()[-1]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `xtts-audio` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    if args.input is not None and not args.input.is_file():
        print(f"xtts-audio: error: no such file: {args.input}", file=sys.stderr)
        return 2
    try:
        demo(args)
    except (XttsAudioError, OSError) as error:
        print(f"xtts-audio: error: {error}", file=sys.stderr)
        return 2
    except tf.errors.InvalidArgumentError as error:  # the user's file cannot be decoded
        print(f"xtts-audio: error: cannot read {args.input}: {_reason(error)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
