"""What the demo corpus writer asks of an engine, and what it gets back.

The writer (`xtts_data.demo_corpus`) draws one random stream, voice and length budget per
utterance and hands them to a `DemoEngine`; the engine chooses the words and returns a
`Speech`. Two engines implement it: the built-in formant synthesiser
(`xtts_data._demo_synth.SynthEngine`) and espeak-ng (`xtts_data._demo_espeak.EspeakEngine`).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple, Protocol

import numpy as np

__all__ = ["Bounds", "DemoEngine", "Speech", "Voice", "voice"]


@dataclasses.dataclass(frozen=True)
class Voice:
    """One demo speaker; both engines read it.

    Attributes:
        name: speaker name in metadata.csv, `spk<index>`.
        f0: Hz, centre of the pitch range (95–235 Hz).
        formants: scale of every formant and noise band (vocal tract length).
        rate: speaking rate, 1 = table durations.
        index: the speaker's number, `0 ..` (espeak-ng gives each its own voice variant).
    """

    name: str
    f0: float
    formants: float
    rate: float
    index: int = 0


def voice(index: int) -> Voice:
    """The voice of speaker `index` (`0 ..`); the same index always gives the same voice."""
    # Golden-ratio steps spread any number of speakers over the ranges; higher voices get
    # higher formants, as with shorter vocal tracts.
    u = (0.3 + 0.618034 * index) % 1.0
    v = (0.5 + 0.754878 * index) % 1.0
    return Voice(f"spk{index}", 95.0 + 140.0 * u, 0.92 + 0.22 * u, 0.85 + 0.3 * v, index)


class Bounds(NamedTuple):
    """Length budget of one utterance in samples; fewest <= target <= most."""

    fewest: int
    target: int
    most: int


class Speech(NamedTuple):
    """One spoken utterance.

    Attributes:
        raw: the text as written (metadata.csv's text column).
        spoken: what was said (its normalized_text column), or "" for "read the raw text".
        pcm: int16 [samples] at the engine's `sample_rate`.
    """

    raw: str
    spoken: str
    pcm: np.ndarray


class DemoEngine(Protocol):
    """Speaks one utterance of the demo corpus: text chosen to fit `bounds`, and its audio."""

    @property
    def sample_rate(self) -> int:
        """Hz of every `Speech.pcm` it returns."""
        ...

    def utterance(self, rng: np.random.Generator, *, voice: Voice, bounds: Bounds) -> Speech:
        """Draw a text from `rng` that fits `bounds` and speak it with `voice`."""
        ...
