"""Shared fixtures: the speech clip, and `run`, which runs an op in each execution mode."""

from __future__ import annotations

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf

DATA = pathlib.Path(__file__).parent / "data"
# Every xtts_audio op must give the same numbers in each of these modes.
MODES = ("eager", "function", "xla", "dataset")


@pytest.fixture(scope="session")
def speech() -> tuple[np.ndarray, int]:
    """Real (espeak-ng synthesised) English speech: float32 [samples], 22050 Hz, ~4 s.

    Made with `espeak-ng -v en-us -s 160 "The quick brown fox jumps over the lazy dog,
    she said."` and converted to 16-bit 22050 Hz by sox; decoded here without xtts_audio.
    """
    import soundfile

    audio, rate = soundfile.read(DATA / "speech_22050.wav", dtype="float32")
    return audio, rate


@pytest.fixture(scope="session")
def chirp() -> np.ndarray:
    """A 3 s linear chirp from 50 Hz to 11 kHz at 22050 Hz, amplitude 0.5: float32 [samples]."""
    t = np.arange(3 * 22050) / 22050
    phase = 2 * np.pi * (50 * t + (11000 - 50) / (2 * 3) * t**2)
    return (0.5 * np.sin(phase)).astype(np.float32)


def run_in_mode(mode: str, fn, *args):
    """Run `fn(*args)` in `mode` (one of MODES); args are NumPy arrays or Python scalars.

    Returns the result with every tensor converted to NumPy.
    """
    tensors = [tf.constant(a) for a in args]
    if mode == "eager":
        out = fn(*tensors)
    elif mode == "function":
        out = tf.function(fn)(*tensors)
    elif mode == "xla":
        out = tf.function(fn, jit_compile=True)(*tensors)
    elif mode == "dataset":
        dataset = tf.data.Dataset.from_tensors(tuple(tensors)).map(lambda *a: fn(*a))
        out = next(iter(dataset))
    else:
        raise ValueError(f"unknown mode {mode!r}")
    return tf.nest.map_structure(lambda t: np.asarray(t), out)


@pytest.fixture(params=MODES)
def run(request):
    """`run(fn, *args)`: `fn(*args)` in one execution mode; tests using it run in all four."""

    def _run(fn, *args):
        return run_in_mode(request.param, fn, *args)

    _run.mode = request.param
    return _run
