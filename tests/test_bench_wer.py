"""`xtts-bench wer`: reference words, the WER arithmetic and chance, a real recogniser on
espeak-ng speech (skipped without espeak-ng or the asr extra), and its errors."""

from __future__ import annotations

import pytest
import soundfile

from xtts_bench.cli import main
from xtts_bench.intelligibility import word_error_rates
from xtts_data._demo_espeak import ESPEAK_RATE, Espeak, find_espeak
from xtts_data._demo_espeak import speak as espeak_speak
from xtts_data.errors import XttsDataError
from xtts_train import make_recogniser, reference_words, transcribe


def test_reference_words_spell_out_what_is_read():
    assert reference_words("Dr. Ray paid $5, at 10%!") == (
        "doctor ray paid five dollars at ten percent"
    )


def test_wer_ratio_and_chance():
    pytest.importorskip("jiwer")
    refs = ["red fox runs", "blue bird sings", "old man walks"]
    truth = ["red fox runs", "blue bird sings", "old man talks"]  # 1 error in 9 words
    synthesis = ["red box runs", "blue bird", "old man talks"]  # 3 errors in 9 words
    rates = word_error_rates(refs, synthesis, truth)
    assert rates["wer_truth"] == pytest.approx(1 / 9)
    assert rates["wer_synthesis"] == pytest.approx(3 / 9)
    assert rates["ratio"] == pytest.approx(3.0)
    assert rates["wer_chance"] > 0.8  # the truth against the other sentences' words
    with pytest.raises(ValueError, match="at least 2"):
        word_error_rates(refs[:1], synthesis[:1], truth[:1])


def test_the_recogniser_hears_espeak_speech(tmp_path):
    pytest.importorskip("pocketsphinx")
    try:  # the espeak-ng program, or its library (the phonemes extra's wheel)
        binary = find_espeak("en")
    except XttsDataError as error:
        pytest.skip(f"no espeak-ng: {error}")
    references = ["window castle old new gathered", "the winter was sudden"]
    recogniser = make_recogniser(references, tmp_path)
    heard = []
    for i, text in enumerate(references):
        wav = tmp_path / f"{i}.wav"
        pcm = espeak_speak(Espeak(binary=binary, voice="en-us", pitch=50, speed=175), text, wav)
        soundfile.write(wav, pcm, ESPEAK_RATE)
        heard.append(transcribe(recogniser, wav))
    assert word_error_rates(references, heard, heard)["wer_truth"] <= 0.5, heard


def test_a_cache_as_held_out_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text("{}")
    assert main(["wer", str(tmp_path / "run"), "--held-out", str(tmp_path)]) == 2
    assert "expected --held-out to be a corpus" in capsys.readouterr().err
