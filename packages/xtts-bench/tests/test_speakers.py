"""The speaker measure: fitted on recordings only, it tells synthetic voices apart (pitch
and timbre), scores likeness, and refuses what it cannot measure."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import soundfile

from xtts_bench.cli import main
from xtts_bench.errors import MissingExtraError, SettingsError
from xtts_bench.speakers import (
    SpeakerMeasure,
    ge2e_vector,
    ground_truth,
    read_voices,
    score_syntheses,
    voice_vector,
)

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


def _corpus(root):
    """3 clips of each voice in LJSpeech layout with a speaker column."""
    (root / "wavs").mkdir(parents=True)
    rows = []
    for voice in VOICES:
        for seed in range(3):
            uid = f"{voice}-{seed}"
            soundfile.write(root / "wavs" / f"{uid}.wav", _clip(voice, seed), RATE)
            rows.append(f"{uid}|Some words.|Some words.|{voice}")
    (root / "metadata.csv").write_text("\n".join(rows) + "\n")
    return root


def test_syntheses_are_judged_against_their_reference_s_voice(tmp_path, capsys):
    corpus, audio = _corpus(tmp_path / "corpus"), tmp_path / "eval"
    audio.mkdir()
    names = sorted(VOICES)  # evaluate's speaker indices: the corpus's sorted speakers
    rows = []
    for i, voice in enumerate(names):
        other = names[(i + 1) % 3]
        # a "synthesis" in the reference's voice (followed), and one in its own (ignored)
        soundfile.write(audio / f"{voice}-f.wav", _clip(other, 7), RATE)
        soundfile.write(audio / f"{voice}-i.wav", _clip(voice, 8), RATE)
        soundfile.write(audio / f"{voice}-f.truth.wav", _clip(voice, 9), RATE)  # vocoded
        for suffix in ("f", "i"):
            rows.append({"id": f"{voice}-{suffix}", "speaker": i, "reference": f"{other}-0",
                         "reference_speaker": (i + 1) % 3})  # fmt: skip
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"utterances": rows}))
    result = score_syntheses(corpus, {"utterances": rows}, audio)
    assert result["syntheses"] == 6
    assert result["top1"] == 0.5  # the followed half
    assert result["own_voice"] == 0.5  # the ignored half
    assert result["truth"]["top1"] == 1.0
    assert result["vocoded_top1"] == 1.0  # the recordings' own mels: their own voices
    for voice in names:  # each reference's voice: one followed, one not
        assert result["confusion"][voice][voice] == 1
        assert sum(result["confusion"][voice].values()) == 2
    assert main(["speakers", str(corpus), "--syntheses", str(report), "--audio", str(audio)]) == 0
    assert ("identified as the reference's voice 50.0% (ground truth 100.0%; through the same "
            "vocoder 100.0%, chance 33.3%)") in capsys.readouterr().out  # fmt: skip
    assert main(["speakers", str(corpus), "--syntheses", str(report)]) == 2  # no --audio
    with pytest.raises(SettingsError, match="reference-from"):
        score_syntheses(corpus, {"utterances": [{**rows[0], "reference": "run"}]}, audio)
    assert result["vocoded_similarity"] is None  # no row spoken with its own voice's clip


def test_a_vocoded_recording_is_scored_against_its_own_voice_s_clip(tmp_path, capsys):
    corpus, audio = _corpus(tmp_path / "corpus"), tmp_path / "eval"
    audio.mkdir()
    names, rows = sorted(VOICES), []
    for i, voice in enumerate(names):
        soundfile.write(audio / f"{voice}-s.wav", _clip(voice, 7), RATE)
        soundfile.write(audio / f"{voice}-s.truth.wav", _clip(voice, 9), RATE)
        rows.append({"id": f"{voice}-s", "speaker": i, "reference": f"{voice}-0",
                     "reference_speaker": i})  # fmt: skip
    result = score_syntheses(corpus, {"utterances": rows}, audio)
    measure = SpeakerMeasure.fit(read_voices(corpus))

    def vector(path):
        return voice_vector(*soundfile.read(path, dtype="float32"))

    expected = np.mean([measure.similarity(vector(audio / f"{voice}-s.truth.wav"),
                                           vector(corpus / "wavs" / f"{voice}-0.wav"))
                        for voice in names])  # fmt: skip
    assert result["vocoded_similarity"] == pytest.approx(expected, rel=1e-4)
    assert result["vocoded_similarity"] > result["truth"]["similarity_other"] + 0.5
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"utterances": rows}))
    assert main(["speakers", str(corpus), "--syntheses", str(report), "--audio", str(audio)]) == 0
    assert f"a recording through the same vocoder: {expected:.3f}" in capsys.readouterr().out


def test_the_cli_reads_a_corpus_by_speaker(tmp_path, capsys):
    _corpus(tmp_path)
    assert sorted(read_voices(tmp_path)) == sorted(VOICES)
    assert main(["speakers", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "top-1 identification (leave one out)  100.0%   chance 33.3%" in out
    assert main(["speakers", str(tmp_path), "--per-voice", "1"]) == 2
    assert main(["speakers", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["encoder"] == "mfcc"


def test_an_unknown_encoder_and_a_missing_extra_are_named(tmp_path, monkeypatch):
    _corpus(tmp_path)
    with pytest.raises(SettingsError, match=r"Expected an encoder of \('mfcc', 'ge2e'\)"):
        read_voices(tmp_path, encoder="xvector")
    monkeypatch.setitem(sys.modules, "resemblyzer", None)  # as if not installed
    with pytest.raises(MissingExtraError, match=r"xtts-bench\[ge2e\]"):
        ge2e_vector(_clip("low", 0), RATE)


def test_the_ge2e_encoder_embeds_a_clip_as_a_unit_vector():
    pytest.importorskip("resemblyzer", reason="the ge2e extra (hatch env voices)")
    first, again = ge2e_vector(_clip("low", 0), RATE), ge2e_vector(_clip("low", 0), RATE)
    assert first.shape == (256,)
    assert first.dtype == np.float64
    assert np.linalg.norm(first) == pytest.approx(1.0, abs=1e-4)
    np.testing.assert_allclose(first, again, atol=1e-6)  # the same clip, the same vector
    other = ge2e_vector(_clip("high", 0), RATE)
    assert not np.allclose(first, other, atol=1e-3)
    with pytest.raises(SettingsError, match="silence"):
        ge2e_vector(np.zeros(RATE, np.float32), RATE)
