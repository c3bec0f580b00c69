"""Tests of the demo corpus writer with a fake engine: what it asks, what it writes."""

from __future__ import annotations

import dataclasses
import wave
from pathlib import Path

import numpy as np
import pytest

from xtts_data import demo_corpus
from xtts_data._demo_engine import Bounds, Speech, Voice
from xtts_data._demo_espeak import ESPEAK_RATE, EspeakEngine
from xtts_data._demo_synth import SynthEngine
from xtts_data.demo_corpus import DemoCorpus


@dataclasses.dataclass
class FakeEngine:
    """Returns fixed texts and samples; the samples' length and first value come from `rng`."""

    sample_rate: int = 8000
    spoken: bool = True  # False: "" as spoken text, as espeak-ng in a language other than en
    fail_at: int | None = None  # raise on this call
    calls: list[tuple[Voice, Bounds]] = dataclasses.field(default_factory=list)
    returned: list[Speech] = dataclasses.field(default_factory=list)

    def utterance(self, rng: np.random.Generator, *, voice: Voice, bounds: Bounds) -> Speech:
        if len(self.calls) == self.fail_at:
            raise RuntimeError("engine failed")
        self.calls.append((voice, bounds))
        first = int(rng.integers(-1000, 1000))
        pcm = np.arange(first, first + 100 + len(self.calls), dtype=np.int16)
        text = f"Text {len(self.calls)} by {voice.name}."
        self.returned.append(Speech(text, text.upper() if self.spoken else "", pcm))
        return self.returned[-1]


def _write(root: Path, engine: FakeEngine, **kwargs) -> DemoCorpus:
    (root / "wavs").mkdir(parents=True)
    args = {"n": 3, "seed": 0, "speakers": 1, "seconds": (0.5, 2.0), "progress": False}
    return demo_corpus._write_corpus(root, engine=engine, **{**args, **kwargs})


def _samples(path: Path) -> tuple[int, np.ndarray]:
    with wave.open(str(path), "rb") as wav:
        assert (wav.getnchannels(), wav.getsampwidth()) == (1, 2)
        return wav.getframerate(), np.frombuffer(wav.readframes(wav.getnframes()), "<i2")


def _pcms(root: Path) -> dict[str, np.ndarray]:
    return {p.name: _samples(p)[1] for p in sorted((root / "wavs").iterdir())}


def test_writes_exactly_the_engines_samples(tmp_path):
    engine = FakeEngine()

    result = _write(tmp_path, engine)

    wavs = sorted((tmp_path / "wavs").iterdir())
    assert [p.name for p in wavs] == ["DEMO001-0001.wav", "DEMO001-0002.wav", "DEMO001-0003.wav"]
    for path, speech in zip(wavs, engine.returned, strict=True):
        rate, pcm = _samples(path)
        assert rate == engine.sample_rate
        np.testing.assert_array_equal(pcm, speech.pcm)
    total = sum(len(s.pcm) for s in engine.returned) / engine.sample_rate
    assert result == DemoCorpus(tmp_path, 3, total, 1)


@pytest.mark.parametrize(
    ("speakers", "spoken", "rows"),
    [
        (1, True, ["DEMO001-0001|Text 1 by spk0.|TEXT 1 BY SPK0."]),
        (1, False, ["DEMO001-0001|Text 1 by spk0."]),
        (2, True, ["DEMO001-0001|Text 1 by spk0.|TEXT 1 BY SPK0.|spk0"]),
        (2, False, ["DEMO001-0001|Text 1 by spk0.||spk0", "DEMO001-0002|Text 2 by spk1.||spk1"]),
    ],
)
def test_metadata_rows(tmp_path, speakers, spoken, rows):
    _write(tmp_path, FakeEngine(spoken=spoken), n=2, speakers=speakers)

    written = (tmp_path / "metadata.csv").read_bytes().decode("utf-8")
    assert written.endswith("\n")
    assert "\r" not in written
    assert written.splitlines()[: len(rows)] == rows


def test_asks_for_voices_in_turn_and_bounds_within_the_seconds(tmp_path):
    engine = FakeEngine(sample_rate=16000)

    _write(tmp_path, engine, n=5, speakers=2, seconds=(0.5, 2.0))

    assert [v.name for v, _ in engine.calls] == ["spk0", "spk1", "spk0", "spk1", "spk0"]
    assert engine.calls[0][0] == engine.calls[2][0]
    for _, bounds in engine.calls:
        assert (bounds.fewest, bounds.most) == (8000, 32000)
        assert bounds.fewest <= bounds.target <= bounds.most
    assert len({bounds.target for _, bounds in engine.calls}) == 5  # drawn per utterance


def test_utterance_streams_depend_on_seed_and_index_only(tmp_path):
    _write(tmp_path / "a", FakeEngine(), n=3, speakers=2)
    _write(tmp_path / "b", FakeEngine(), n=2, speakers=2)  # a prefix: same first two
    _write(tmp_path / "seed", FakeEngine(), n=3, speakers=2, seed=1)

    full, prefix, seeded = (_pcms(tmp_path / name) for name in ("a", "b", "seed"))
    assert all(np.array_equal(prefix[name], full[name]) for name in prefix)
    assert not any(np.array_equal(seeded[name], full[name]) for name in full)


def test_an_engine_failing_midway_leaves_no_metadata(tmp_path):
    # metadata.csv is written last, so a folder without it is not a corpus a reader takes;
    # the wavs already written stay (they are not written atomically).
    with pytest.raises(RuntimeError, match="engine failed"):
        _write(tmp_path, FakeEngine(fail_at=2), n=3)

    assert not (tmp_path / "metadata.csv").exists()
    assert sorted(_pcms(tmp_path)) == ["DEMO001-0001.wav", "DEMO001-0002.wav"]  # not atomic


def test_engine_names_choose_the_engines(monkeypatch):
    monkeypatch.setattr(demo_corpus, "find_espeak", lambda language: f"/bin/espeak-{language}")

    assert demo_corpus._engine("synth", sample_rate=16000, language="en") == SynthEngine(
        sample_rate=16000
    )
    espeak = demo_corpus._engine("espeak", sample_rate=ESPEAK_RATE, language="fa")
    assert espeak == EspeakEngine(binary="/bin/espeak-fa", language="fa")
