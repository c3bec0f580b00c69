"""The speaker measure: fitted on recordings only, it tells synthetic voices apart (pitch
and timbre), scores likeness, and refuses what it cannot measure."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile

from xtts_bench.cli import main
from xtts_bench.errors import SettingsError
from xtts_bench.speakers import SpeakerMeasure, ground_truth, read_voices, voice_vector

RATE = 16000
# (pitch Hz, spectral tilt): three voices apart in both
VOICES = {"low": (110.0, 1.0), "mid": (180.0, 2.0), "high": (260.0, 0.5)}


def _clip(voice: str, seed: int) -> np.ndarray:
    """A second of a harmonic 'voice': its pitch wobbling, harmonics falling off by tilt."""
    pitch, tilt = VOICES[voice]
    rng = np.random.default_rng(seed)
    t = np.arange(RATE) / RATE
    f0 = pitch * (1 + 0.03 * np.sin(2 * np.pi * rng.uniform(2, 5) * t))
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    audio = sum(np.sin(k * phase) / k**tilt for k in range(1, 20) if k * pitch < RATE / 2)
    audio = audio + 0.01 * rng.standard_normal(RATE)
    return (0.3 * audio / np.abs(audio).max()).astype(np.float32)


@pytest.fixture(scope="module")
def vectors():
    return {v: [voice_vector(_clip(v, s), RATE) for s in range(3)] for v in VOICES}


def test_recordings_are_told_apart_and_alike_within_a_voice(vectors):
    truth = ground_truth(vectors)
    assert truth["top1"] == 1.0  # leave one out: 9 of 9
    assert truth["chance"] == pytest.approx(1 / 3)
    assert truth["similarity_same"] > truth["similarity_other"] + 0.5


def test_a_clip_of_a_known_voice_is_named_and_most_like_its_own(vectors):
    measure = SpeakerMeasure.fit({v: clips[:2] for v, clips in vectors.items()})
    for voice, clips in vectors.items():
        assert measure.identify(clips[2]) == voice
        own = measure.similarity(clips[2], clips[0])
        others = [measure.similarity(clips[2], c[0]) for v, c in vectors.items() if v != voice]
        assert own > max(others)


def test_silence_one_voice_and_single_clips_are_refused(vectors):
    with pytest.raises(SettingsError, match="silence"):
        voice_vector(np.zeros(RATE, np.float32), RATE)
    with pytest.raises(SettingsError, match="at least two voices"):
        SpeakerMeasure.fit({"low": vectors["low"]})
    with pytest.raises(SettingsError, match="at least two clips"):
        ground_truth({v: clips[:1] for v, clips in vectors.items()})


def test_the_cli_reads_a_corpus_by_speaker(tmp_path, capsys):
    (tmp_path / "wavs").mkdir()
    rows = []
    for voice in VOICES:
        for seed in range(3):
            uid = f"{voice}-{seed}"
            soundfile.write(tmp_path / "wavs" / f"{uid}.wav", _clip(voice, seed), RATE)
            rows.append(f"{uid}|Some words.|Some words.|{voice}")
    (tmp_path / "metadata.csv").write_text("\n".join(rows) + "\n")
    assert sorted(read_voices(tmp_path)) == sorted(VOICES)
    assert main(["speakers", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "top-1 identification (leave one out)  100.0%   chance 33.3%" in out
    assert main(["speakers", str(tmp_path), "--per-voice", "1"]) == 2
