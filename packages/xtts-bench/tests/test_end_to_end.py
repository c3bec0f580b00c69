"""`xtts-bench end-to-end`: three sets of audio (syntheses, vocoded recordings, the
recordings) scored the same way: WER by one recogniser, DNSMOS means, the voice figures;
the arithmetic with a scripted recogniser and MOS network, DNSMOS itself where installed."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest
import soundfile

from xtts_bench import end_to_end, speakers
from xtts_bench.cli import main
from xtts_bench.errors import MissingExtraError, SettingsError

RATE = 22050
TEXTS = {"a": "red fox runs", "b": "blue bird sings", "c": "old man walks"}


def _tone(loudness: float) -> np.ndarray:
    t = np.arange(RATE // 2) / RATE
    return (loudness * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


@pytest.fixture
def evaluated(tmp_path, monkeypatch):
    """A corpus of three sentences, evaluate's report and audio folder; a recogniser that
    hears the recordings right and one word of each synthesis wrong; a DNSMOS whose
    overall score is 10 × the clip's peak (0.1 recorded, 0.2 vocoded, 0.3 synthesis)."""
    corpus, audio = tmp_path / "corpus", tmp_path / "eval"
    (corpus / "wavs").mkdir(parents=True)
    audio.mkdir()
    rows = []
    for i, uid in enumerate(TEXTS):
        soundfile.write(corpus / "wavs" / f"{uid}.wav", _tone(0.1), RATE)
        soundfile.write(audio / f"{uid}.truth.wav", _tone(0.2), RATE)
        soundfile.write(audio / f"{uid}.wav", _tone(0.3), RATE)
        rows.append({"id": uid, "speaker": i, "reference": uid, "reference_speaker": i})
    (corpus / "metadata.csv").write_text(
        "".join(f"{uid}|{text}|{text}|spk{uid}\n" for uid, text in TEXTS.items())
    )

    def transcribe(recogniser, path):
        words = TEXTS[path.name.split(".")[0]].split()
        return " ".join(words if path.parent.name == "wavs" else ["no", *words[1:]])

    def dnsmos_run(clip, rate):
        assert rate == end_to_end.MOS_RATE
        assert clip.shape == (RATE // 2 * 16000 // RATE,)
        peak = float(np.abs(clip).max())
        return {"ovrl_mos": 10 * peak, "sig_mos": 1.0, "bak_mos": 2.0, "p808_mos": 3.0}

    fake = types.ModuleType("speechmos.dnsmos")
    fake.run = dnsmos_run
    monkeypatch.setitem(sys.modules, "speechmos", types.ModuleType("speechmos"))
    monkeypatch.setitem(sys.modules, "speechmos.dnsmos", fake)
    monkeypatch.setattr(end_to_end, "make_recogniser", lambda refs, scratch: object())
    monkeypatch.setattr(end_to_end, "transcribe", transcribe)
    voice = {"top1": 1.0, "own_voice": 1.0, "similarity": 0.8, "similarity_truth": 0.9}
    monkeypatch.setattr(speakers, "score_syntheses", lambda *a, **k: dict(voice))
    report = {"utterances": rows, "summary": {"pairing_mean": 0.55}}
    return corpus, report, audio


def test_each_set_is_scored_by_the_same_recogniser_and_mos_network(evaluated):
    pytest.importorskip("jiwer")
    corpus, report, audio = evaluated
    result = end_to_end.score_end_to_end(corpus, report, audio, progress=False)
    sets = result["sets"]
    assert sets["recorded"]["wer"] == 0.0
    assert sets["synthesis"]["wer"] == pytest.approx(1 / 3)  # one word of three, each
    assert sets["vocoded"]["wer"] == pytest.approx(1 / 3)
    for name, peak in (("recorded", 0.1), ("vocoded", 0.2), ("synthesis", 0.3)):
        assert sets[name]["ovrl"] == pytest.approx(10 * peak, rel=0.02)  # resampled peak
        assert (sets[name]["sig"], sets[name]["bak"], sets[name]["p808"]) == (1.0, 2.0, 3.0)
    assert result["wer_ratio"] is None  # the recordings' WER is 0: no ratio
    assert result["wer_chance"] == 1.0  # every word of the other sentences wrong
    assert result["voice"]["likeness"] == pytest.approx(0.8 / 0.9)
    assert result["pairing_mean"] == 0.55
    assert result["sentences"] == 3
    table = end_to_end.format_end_to_end_table(result)
    assert "| synthesis | 0.333 | 3.00 | 1.00 | 2.00 | 3.00 |" in table
    assert "likeness 0.800 (0.889x two recordings'); pairing 0.55" in table


def test_without_vocoded_files_that_row_is_absent_and_missing_audio_is_named(evaluated):
    pytest.importorskip("jiwer")
    corpus, report, audio = evaluated
    for path in audio.glob("*.truth.wav"):
        path.unlink()
    result = end_to_end.score_end_to_end(corpus, report, audio, progress=False)
    assert result["sets"]["vocoded"] is None
    assert "| vocoded |" not in end_to_end.format_end_to_end_table(result)
    (audio / "b.wav").unlink()
    with pytest.raises(SettingsError, match=r"synthesis audio .*b\.wav"):
        end_to_end.score_end_to_end(corpus, report, audio, progress=False)


def test_the_cli_prints_the_table_and_refuses_bad_input(evaluated, tmp_path, capsys):
    pytest.importorskip("jiwer")
    corpus, report, audio = evaluated
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    assert main(["end-to-end", str(corpus), "--syntheses", str(path), "--audio", str(audio),
                 "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["sets"]["recorded"]["wer"] == 0.0
    path.write_text(json.dumps({"utterances": report["utterances"][:1]}))
    assert main(["end-to-end", str(corpus), "--syntheses", str(path), "--audio", str(audio)]) == 2
    assert "at least 2 evaluated rows" in capsys.readouterr().err
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "manifest.json").write_text("{}")
    assert main(["end-to-end", str(tmp_path / "cache"), "--syntheses", str(path),
                 "--audio", str(audio)]) == 2  # fmt: skip
    assert "to be a corpus" in capsys.readouterr().err


def test_a_missing_mos_extra_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "speechmos", None)  # as if not installed
    with pytest.raises(MissingExtraError, match=r"xtts-bench\[mos\]"):
        end_to_end.predicted_mos(_tone(0.1), RATE)


def test_dnsmos_rates_speech_above_the_same_speech_in_noise(tmp_path):
    pytest.importorskip("speechmos.dnsmos")
    from xtts_data._demo_espeak import ESPEAK_RATE, Espeak, find_espeak
    from xtts_data._demo_espeak import speak as espeak_speak
    from xtts_data.errors import XttsDataError

    try:
        binary = find_espeak("en")
    except XttsDataError as error:
        pytest.skip(f"no espeak-ng: {error}")
    pcm = espeak_speak(Espeak(binary=binary, voice="en-us", pitch=50, speed=175),
                       "the winter was sudden and the river froze", tmp_path / "s.wav")  # fmt: skip
    speech = 0.5 * pcm / np.abs(pcm).max()
    noisy = speech + 0.1 * np.random.default_rng(0).standard_normal(speech.shape)
    clean, dirty = (end_to_end.predicted_mos(a.astype(np.float32), ESPEAK_RATE)
                    for a in (speech, noisy))  # fmt: skip
    assert clean["bak"] > dirty["bak"] + 0.5, (clean, dirty)
    assert clean["ovrl"] > dirty["ovrl"], (clean, dirty)
