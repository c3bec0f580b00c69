"""Tests of the demo corpus's engines on their own: no writer, no corpus folder."""

from __future__ import annotations

import shutil
import tempfile

import numpy as np
import pytest
from data_helpers import espeak_speaks

from xtts_data._demo_engine import Bounds, Speech, voice
from xtts_data._demo_espeak import (
    ESPEAK_RATE,
    VARIANTS,
    Espeak,
    EspeakEngine,
    find_espeak,
    voice_name,
)
from xtts_data._demo_espeak import speak as espeak_speak
from xtts_data._demo_synth import SynthEngine, speak
from xtts_data.text import TextConfig, normalize_text

SR = 16000
needs_espeak = pytest.mark.skipif(not espeak_speaks(), reason="no espeak-ng, program or library")


def _bounds(min_seconds: float, target_seconds: float, max_seconds: float, sr: int) -> Bounds:
    return Bounds(round(min_seconds * sr), round(target_seconds * sr), round(max_seconds * sr))


def _synth(seed: int, speaker: int = 0, bounds: Bounds | None = None) -> Speech:
    bounds = bounds or _bounds(0.5, 1.2, 2.0, SR)
    engine = SynthEngine(sample_rate=SR)
    return engine.utterance(np.random.default_rng(seed), voice=voice(speaker), bounds=bounds)


def _frame_rms(pcm: np.ndarray, sr: int, seconds: float = 0.02) -> np.ndarray:
    """RMS of consecutive `seconds` frames of int16 [samples], full scale 1."""
    size = round(seconds * sr)
    frames = pcm[: len(pcm) // size * size].astype(np.float64).reshape(-1, size) / 32767
    return np.sqrt(np.mean(frames**2, axis=1))


def _median_pitch(pcm: np.ndarray, sr: int, size: int = 1024) -> float:
    """Median autocorrelation pitch (80–400 Hz) of the loud frames of int16 [samples]."""
    audio = pcm.astype(np.float64) / 32767
    frames = np.lib.stride_tricks.sliding_window_view(audio, size)[::256] * np.hanning(size)
    loud = frames[np.sqrt(np.mean(frames**2, axis=1)) > 0.05]
    correlation = np.fft.irfft(np.abs(np.fft.rfft(loud, 2 * size)) ** 2)[:, :size]
    lags = np.arange(sr // 400, sr // 80 + 1)
    return float(np.median(sr / lags[np.argmax(correlation[:, lags], axis=1)]))


def test_synth_is_deterministic_for_a_seed():
    first = _synth(3)

    assert first.pcm.dtype == np.int16
    again = _synth(3)
    assert (again.raw, again.spoken) == (first.raw, first.spoken)
    np.testing.assert_array_equal(again.pcm, first.pcm)
    other = _synth(4).pcm
    assert not np.array_equal(other[: len(first.pcm)], first.pcm[: len(other)])


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(
    "seconds", [(0.5, 1.2, 2.0), (0.5, 0.5, 0.5), (2.0, 4.0, 6.0), (0.1, 0.1, 0.15)]
)
def test_synth_length_is_within_the_bounds(seed, seconds):
    bounds = _bounds(*seconds, SR)

    speech = _synth(seed, bounds=bounds)

    assert bounds.target <= len(speech.pcm) <= bounds.most  # padded to target, cut at most
    assert speech.raw  # a first word too long for `most` is cut, not dropped
    assert speech.spoken


def test_one_sentence_runs_the_same_words_on_as_clauses():
    from xtts_data.sentences import sentences

    bounds = _bounds(4.0, 8.0, 10.0, SR)
    for seed in range(4):
        plain = _synth(seed, bounds=bounds)
        engine = SynthEngine(sample_rate=SR, one_sentence=True)
        one = engine.utterance(np.random.default_rng(seed), voice=voice(0), bounds=bounds)
        assert len(sentences(one.raw)) == 1
        assert one.raw.endswith(".")
        # The same draws, other marks (a comma's pause is shorter: a word more may fit).
        shared = min(len(_words(one.raw)), len(_words(plain.raw)))
        assert shared > 10
        assert _words(one.raw)[:shared] == _words(plain.raw)[:shared]
    assert max(len(sentences(_synth(s, bounds=bounds).raw)) for s in range(4)) > 1


def _words(text: str) -> list[str]:
    return [w.strip(",.?!").lower() for w in text.split()]


def test_synth_text_is_what_the_normaliser_reads():
    config = TextConfig()
    for seed in range(20):
        speech = _synth(seed)
        assert normalize_text(speech.spoken, config) == normalize_text(speech.raw, config)


def test_speakers_sound_different():
    low, high = sorted([voice(0), voice(1)], key=lambda v: v.f0)
    rng = np.random.default_rng

    quiet = speak("aaa rrr aaa", rng=rng(0), voice=low, sample_rate=SR)
    bright = speak("aaa rrr aaa", rng=rng(0), voice=high, sample_rate=SR)

    assert not np.array_equal(quiet[: len(bright)], bright[: len(quiet)])
    assert _median_pitch(bright, SR) > 1.3 * _median_pitch(quiet, SR)


def test_a_full_stop_is_a_pause():
    rng = np.random.default_rng

    stopped = _frame_rms(speak("aaaa. aaaa", rng=rng(1), voice=voice(0), sample_rate=SR), SR)
    running = _frame_rms(speak("aaaaaaaaaa", rng=rng(1), voice=voice(0), sample_rate=SR), SR)

    def inner_silence(rms: np.ndarray) -> int:
        """Frames (20 ms) of the longest run near the noise floor between loud frames."""
        loud = np.flatnonzero(rms > 0.03)
        quiet = rms[loud[0] : loud[-1]] < 0.005
        runs = np.diff(np.flatnonzero(np.diff(np.concatenate([[0], quiet, [0]]))))[::2]
        return int(runs.max(initial=0))

    assert inner_silence(stopped) >= 10  # >= 0.2 s: a full stop is 0.35 s at rate 1
    assert inner_silence(running) == 0


def test_speak_starts_with_silence_and_is_peak_normalised():
    pcm = speak("a quiet river.", rng=np.random.default_rng(0), voice=voice(0), sample_rate=SR)

    assert np.abs(pcm[: round(0.09 * SR)]).max() / 32767 < 0.01  # lead >= 0.1 s
    assert 0.45 < np.abs(pcm).max() / 32767 < 0.55


def test_each_espeak_speaker_has_its_own_voice_variant():
    names = [voice_name("en", voice(i)) for i in range(1 + len(VARIANTS))]
    assert names[0] == "en-us"  # a one-speaker corpus: the language's own voice
    assert len(set(names)) == len(names) >= 48
    assert voice_name("fa", voice(2)) == "fa+f1"


@needs_espeak
def test_espeak_has_every_voice_variant(tmp_path):
    # Each variant speaks, and differently from the plain voice (the same word, the same
    # pitch and speed).
    binary, word = find_espeak("en"), "garden"
    plain = espeak_speak(Espeak(binary=binary, voice="en-us", pitch=50, speed=165), word,
                  tmp_path / "plain.wav")  # fmt: skip
    for variant in VARIANTS:
        pcm = espeak_speak(Espeak(binary=binary, voice=f"en-us+{variant}", pitch=50, speed=165),
                           word,
                           tmp_path / f"{variant}.wav")  # fmt: skip
        assert len(pcm) > ESPEAK_RATE // 10, variant
        assert len(pcm) != len(plain) or not np.array_equal(pcm, plain), variant


def test_espeak_engine_rate_is_espeak_ngs():
    assert EspeakEngine(binary="espeak-ng", language="en").sample_rate == ESPEAK_RATE


@needs_espeak
@pytest.mark.parametrize(("language", "spoken"), [("en", True), ("fa", False)])
def test_espeak_engine_fits_the_bounds_and_leaves_no_file(tmp_path, monkeypatch, language, spoken):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where its scratch wav goes
    engine = EspeakEngine(binary=find_espeak(language), language=language)
    bounds = _bounds(1.0, 2.0, 4.0, ESPEAK_RATE)

    speech = engine.utterance(np.random.default_rng(0), voice=voice(1), bounds=bounds)

    assert speech.pcm.dtype == np.int16
    assert bounds.fewest <= len(speech.pcm) <= bounds.most
    assert speech.raw
    assert bool(speech.spoken) == spoken  # other languages: the reader normalises raw
    assert list(tmp_path.iterdir()) == []


@needs_espeak
def test_espeak_speaks_one_long_sentence(tmp_path):
    from xtts_data.sentences import sentences

    engine = EspeakEngine(binary=find_espeak("en"), language="en", one_sentence=True)
    bounds = _bounds(6.0, 8.0, 10.0, ESPEAK_RATE)
    speech = engine.utterance(np.random.default_rng(0), voice=voice(0), bounds=bounds)
    assert len(sentences(speech.raw)) == 1
    assert len(speech.raw.split()) > 15  # far past one of the corpus's 4-12-word sentences
    assert bounds.fewest <= len(speech.pcm) <= bounds.most


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="no espeak-ng program to compare")
def test_the_library_speaks_what_the_program_writes(tmp_path, monkeypatch):
    """The same install's program and library (`XTTS_ESPEAK=system`), the same voice,
    pitch and rate: the same samples. (The wheel's library is of its own version.)"""
    from xtts_data import _demo_espeak

    monkeypatch.setenv("XTTS_ESPEAK", "system")
    _demo_espeak._speech_library.cache_clear()
    try:
        for voice_name in ("en-us", "en-us+f3", "fa"):
            args = dict(voice=voice_name, pitch=40, speed=150)
            program = espeak_speak(Espeak(binary=shutil.which("espeak-ng"), **args),
                                   "The garden was quiet.", tmp_path / "p.wav")  # fmt: skip
            library = espeak_speak(Espeak(binary=None, **args), "The garden was quiet.",
                                   tmp_path / "l.wav")  # fmt: skip
            np.testing.assert_array_equal(library, program, err_msg=voice_name)
    finally:
        _demo_espeak._speech_library.cache_clear()


def test_the_library_speaks_each_text_as_a_fresh_process_would():
    """A loaded espeak-ng library carries state between texts; each is spoken by a fresh
    copy, so the same text gives the same samples whatever came before."""
    if not espeak_speaks():
        pytest.skip("no espeak-ng, program or library")
    speaker = Espeak(binary=None, voice="en-us+f3", pitch=50, speed=165)
    first = espeak_speak(speaker, "Hello world, this is a test.", None)
    espeak_speak(speaker, "Something else entirely, and longer.", None)
    again = espeak_speak(speaker, "Hello world, this is a test.", None)
    assert len(first) > ESPEAK_RATE  # over a second of speech
    np.testing.assert_array_equal(again, first)


@pytest.mark.parametrize("texts", ["run-on", "repeated", "short"])
def test_synth_speaks_each_kind_of_text_as_the_normaliser_reads_it(texts):
    config = TextConfig()
    engine = SynthEngine(sample_rate=SR, texts=texts)
    bounds = _bounds(0.2, 2.0, 3.0, SR)
    for seed in range(4):
        speech = engine.utterance(np.random.default_rng(seed), voice=voice(seed), bounds=bounds)
        assert normalize_text(speech.spoken, config) == normalize_text(speech.raw, config)
        assert bounds.target <= len(speech.pcm) <= bounds.most
        assert speech.raw[-1] in ".?!"
        if texts == "short":
            assert 1 <= len(speech.raw.split()) <= 2
        else:  # one sentence, no punctuation inside
            assert not any(mark in speech.raw[:-1] for mark in ",.?!;:")


@needs_espeak
def test_espeak_speaks_a_run_on_sentence_and_a_short_phrase():
    from xtts_data.sentences import sentences

    bounds = _bounds(6.0, 8.0, 10.0, ESPEAK_RATE)
    binary = find_espeak("en")
    run_on = EspeakEngine(binary=binary, language="en", texts="run-on")
    speech = run_on.utterance(np.random.default_rng(0), voice=voice(0), bounds=bounds)
    assert len(sentences(speech.raw)) == 1
    assert len(speech.raw.split()) > 15  # far past one of the corpus's 4-12-word sentences
    assert not any(mark in speech.raw[:-1] for mark in ",.?!;:")
    assert bounds.fewest <= len(speech.pcm) <= bounds.most
    short = EspeakEngine(binary=binary, language="en", texts="short")
    tight = _bounds(0.1, 0.1, 2.0, ESPEAK_RATE)
    speech = short.utterance(np.random.default_rng(0), voice=voice(0), bounds=tight)
    assert 1 <= len(speech.raw.split()) <= 2
    assert 0.2 * ESPEAK_RATE < len(speech.pcm) < 1.5 * ESPEAK_RATE  # the phrase, no padding
