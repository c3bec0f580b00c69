"""A deterministic, speech-like demo corpus in LJSpeech layout, made offline.

The default engine ("synth") speaks a small synthesised "language": each letter of the
normalised text has a sound and a duration. Vowels and sonorants are a glottal sawtooth
through formant resonances (pitch with declination, vibrato and drift), fricatives are
band-passed noise, plosives a closure then a noise burst, spaces and punctuation short or
long silences. Sounds cross-fade with raised-cosine ramps (no clicks) and a faint noise
floor sits under everything, so a mel spectrogram shows harmonics, formants and pauses.

Same arguments give byte-identical files: utterance `i` draws everything from
`numpy.random.default_rng([seed, i])`, so it does not depend on `n` either.

`engine="espeak"` runs `espeak-ng` instead (`xtts_data._demo_espeak`), for real (robotic)
speech: English, or with `language` one of the languages with built-in sentences
(`xtts_data._demo_sentences`).
"""

from __future__ import annotations

import dataclasses
import logging
import wave
from pathlib import Path
from typing import Literal

import numpy as np
from tqdm import tqdm

from xtts_data._cleaners import espeak_voice
from xtts_data._demo_espeak import (
    ESPEAK_RATE,
    Espeak,
    english_utterance,
    find_espeak,
    sentence_utterance,
    spoken_words,
)
from xtts_data._demo_sentences import LANGUAGES, join_words
from xtts_data.errors import ConfigError, XttsDataError

__all__ = ["DEMO_SENTENCES", "DemoCorpus", "speak_demo", "write_demo_corpus"]

logger = logging.getLogger(__name__)

Engine = Literal["synth", "espeak"]

# Eval sentences of the demo language (its own words, within its 0.4–1.6 s utterances):
# what `train.eval_sentences` is in the demo's runs, as the Harvard sentences are in English.
DEMO_SENTENCES = ("The captain spoke.", "Her letter was old.")

_BETA = (3.3, 2.1)  # target duration shape: mean at 61% of [min, max], 6.5 s for 1–10 s
_OVERLAP = 0.012  # seconds each sound overlaps its neighbours (cross-fade is twice this)
_RING = 0.02  # seconds of room for filter ringing on either side of a sound
_PLOSIVE_DECAY = 0.012  # seconds, burst decay time constant
_PEAK = 0.5  # utterance peak before the noise floor
_NOISE_FLOOR = 1e-3  # RMS of the background noise (-60 dBFS)
_MAX_MISSES = 3  # words that did not fit before an utterance is complete


@dataclasses.dataclass(frozen=True)
class DemoCorpus:
    """What `write_demo_corpus` wrote.

    Attributes:
        path: corpus root, holding `metadata.csv` and `wavs/`.
        num_utterances: rows in `metadata.csv` (one wav each).
        total_seconds: summed duration of all wavs.
        speakers: number of distinct speakers.
    """

    path: Path
    num_utterances: int
    total_seconds: float
    speakers: int


@dataclasses.dataclass(frozen=True)
class _Voice:
    name: str
    f0: float  # Hz, centre of the pitch range
    formants: float  # scale of every formant and noise band (vocal tract length)
    rate: float  # speaking rate, 1 = table durations


def _voice(index: int) -> _Voice:
    # Golden-ratio steps spread any number of speakers over the ranges; higher voices get
    # higher formants, as with shorter vocal tracts.
    u = (0.3 + 0.618034 * index) % 1.0
    v = (0.5 + 0.754878 * index) % 1.0
    return _Voice(f"spk{index}", 95.0 + 140.0 * u, 0.92 + 0.22 * u, 0.85 + 0.3 * v)


@dataclasses.dataclass(frozen=True)
class _Phone:
    seconds: float  # duration at rate 1
    level: float  # RMS of the rendered sound; 0 = silence
    voice: float = 0.0  # gain of the glottal (sawtooth) source
    noise: float = 0.0  # gain of the noise source
    formants: tuple[float, ...] = ()  # resonance centres, Hz
    band: tuple[float, float] | None = None  # noise band edges, Hz
    closure: float = 0.0  # silent share before a plosive burst; 0 = sustained sound


_BANDWIDTHS = (120.0, 150.0, 200.0)  # Hz, per formant
_FORMANT_GAINS = (1.0, 0.5, 0.25)


def _vowel(f1: float, f2: float, f3: float, seconds: float = 0.11) -> _Phone:
    return _Phone(seconds, 0.2, voice=1.0, noise=0.04, formants=(f1, f2, f3))


def _sonorant(f1: float, f2: float, f3: float) -> _Phone:
    return _Phone(0.065, 0.08, voice=1.0, noise=0.02, formants=(f1, f2, f3))


def _fricative(lo: float, hi: float, level: float, voice: float = 0.0) -> _Phone:
    voice_bar = (250.0,) if voice else ()
    return _Phone(0.09, level, voice=voice, noise=1.0, formants=voice_bar, band=(lo, hi))


def _plosive(lo: float, hi: float, *, voiced: bool) -> _Phone:
    seconds, closure = (0.06, 0.45) if voiced else (0.075, 0.6)
    return _Phone(seconds, 0.05, noise=1.0, band=(lo, hi), closure=closure)


_K = _plosive(1500, 3500, voiced=False)
_PAUSE, _COMMA, _STOP = _Phone(0.05, 0.0), _Phone(0.2, 0.0), _Phone(0.35, 0.0)
# fmt: off
_PHONES = {
    "a": _vowel(730, 1090, 2440), "e": _vowel(530, 1840, 2480),
    "i": _vowel(390, 1990, 2550, 0.09), "o": _vowel(570, 840, 2410),
    "u": _vowel(440, 1020, 2240, 0.09), "y": _vowel(300, 2200, 2950, 0.08),
    "m": _sonorant(250, 1100, 2200), "n": _sonorant(250, 1700, 2600),
    "l": _sonorant(360, 1300, 2700), "r": _sonorant(420, 1300, 1600),
    "w": _sonorant(300, 610, 2200),
    "s": _fricative(4000, 9000, 0.07), "z": _fricative(4000, 9000, 0.06, voice=0.5),
    "f": _fricative(1200, 7000, 0.03), "v": _fricative(1200, 7000, 0.04, voice=0.6),
    "h": _fricative(500, 3000, 0.025), "j": _fricative(1800, 5000, 0.06, voice=0.5),
    "x": _fricative(3500, 8000, 0.07),
    "p": _plosive(400, 1500, voiced=False), "b": _plosive(400, 1500, voiced=True),
    "t": _plosive(3000, 7000, voiced=False), "d": _plosive(2500, 6000, voiced=True),
    "k": _K, "c": _K, "q": _K, "g": _plosive(1200, 3000, voiced=True),
    " ": _PAUSE, ",": _COMMA, ";": _COMMA, ":": _COMMA, ".": _STOP, "?": _STOP, "!": _STOP,
}
# fmt: on
_GAP = _Phone(0.03, 0.0)  # any other character (apostrophe, hyphen)


def _target_durations(
    n: int, rng: np.random.Generator, min_seconds: float, max_seconds: float
) -> np.ndarray:
    """LJSpeech-like target durations: a scaled beta, mean at 61% of the range.

    Returns:
        float64 [n], seconds in [min_seconds, max_seconds] (mean ≈ 6.5 s for 1–10 s).
    """
    return min_seconds + (max_seconds - min_seconds) * rng.beta(*_BETA, size=n)


def _sample_bounds(
    rng: np.random.Generator, sr: int, min_seconds: float, max_seconds: float
) -> tuple[int, int, int]:
    """(fewest, target, most) samples of one utterance; fewest <= target <= most."""
    most = int(np.floor(max_seconds * sr))
    fewest = min(int(np.ceil(min_seconds * sr)), most)
    target = round(float(_target_durations(1, rng, min_seconds, max_seconds)[0]) * sr)
    return fewest, min(max(target, fewest), most), most


def _sounds(text: str, rng: np.random.Generator, voice: _Voice, sr: int):
    """Phones of `text` and their lengths: (list of _Phone, int64 [len(text)] samples)."""
    phones = [_PHONES.get(char, _GAP) for char in text.lower()]
    seconds = np.array([p.seconds for p in phones]) * rng.uniform(0.8, 1.25, len(phones))
    return phones, np.round(seconds * sr / voice.rate).astype(np.int64)


def _compose(rng: np.random.Generator, voice: _Voice, sr: int, target: int, most: int):
    """Words until the next would pass `target` samples (the first word may use `most`).

    Returns:
        (raw text, spoken text, phones, int64 [phones] lengths in samples); the first
        phone is the leading silence, trailing silences are dropped.
    """
    phones, lengths = [_GAP], [np.array([round(rng.uniform(0.1, 0.25) * sr)])]
    kept: list[tuple[str, str]] = []
    used, misses = int(lengths[0][0]), 0
    for raw, spoken in spoken_words(rng):
        sounds, samples = _sounds(spoken + " ", rng, voice, sr)
        # A first word too long even for `most` is kept after many tries; _finish cuts it.
        if used + samples.sum() <= (target if kept else most) or misses >= 50:
            kept.append((raw, spoken))
            phones, used, misses = phones + sounds, used + samples.sum(), 0
            lengths.append(samples)
        elif (misses := misses + 1) >= _MAX_MISSES and kept:
            break
    lengths = np.concatenate(lengths)
    while phones[-1].level == 0:
        phones, lengths = phones[:-1], lengths[:-1]
    raw, spoken = (join_words([word[i] for word in kept]) for i in (0, 1))
    return raw, spoken, phones, lengths


def _sources(n: int, voice: _Voice, rng: np.random.Generator, sr: int):
    """Glottal sawtooth and white noise, (float64 [n], float32 [n]).

    The pitch declines over the utterance, with vibrato and a slow random drift; it is
    computed every `hop` samples and interpolated, which is plenty for such slow changes.
    """
    hop = 64
    t = np.arange(n // hop + 2) * (hop / sr)  # control points
    rates, phases = rng.uniform(0.3, 2.0, 3), rng.uniform(0.0, 2 * np.pi, 4)
    f0 = voice.f0 * rng.uniform(0.92, 1.08) * (1.1 - 0.2 * t / t[-1])  # declination
    f0 *= 1 + 0.01 * np.sin(2 * np.pi * rng.uniform(4.5, 6.0) * t + phases[3])  # vibrato
    f0 *= 1 + 0.12 * np.sin(2 * np.pi * rates[:, None] * t + phases[:3, None]).mean(axis=0)
    f0 = np.interp(np.arange(n), np.arange(len(t)) * hop, f0)
    saw = 2.0 * (np.cumsum(f0 / sr) % 1.0) - 1.0
    return saw, rng.standard_normal(n, dtype=np.float32)


def _windows(signal: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """Rows `signal[o : o + width]` for each offset: [len(offsets), width] copies."""
    return np.lib.stride_tricks.sliding_window_view(signal, width)[offsets]


def _envelopes(phones: list[_Phone], spans: np.ndarray, ring: int, overlap: int, nfft: int, sr):
    """Amplitude envelopes, float32 [sounds, nfft]; a sound's span starts at index `ring`.

    Sustained sounds rise and fall with raised-cosine ramps of 2 × `overlap` samples, so
    neighbours cross-fade to a constant sum; plosives stay silent, then burst and decay.
    """
    fade, t = 2 * overlap, np.arange(nfft, dtype=np.float32) - ring  # t: sample in span
    rise = np.sin(0.5 * np.pi * np.clip(t / fade, 0.0, 1.0)) ** 2  # (nfft,)
    # fall[s, j] = rise reflected to end at spans[s]: windows of one reversed ramp.
    ramp = np.sin(0.5 * np.pi * np.clip(np.arange(2 * nfft, -1, -1) - nfft, 0, fade) / fade) ** 2
    fall = _windows(ramp.astype(np.float32), nfft - spans - ring, nfft)  # (S, nfft)
    envelopes = np.minimum(rise, fall)
    plosive = np.flatnonzero([p.closure > 0 for p in phones])
    closure = np.array([phones[i].closure for i in plosive])[:, None]  # (P, 1)
    after = t - (overlap + closure * (spans[plosive, None] - fade))  # (P, nfft)
    decay = np.exp(-np.maximum(after, 0.0) / (_PLOSIVE_DECAY * sr))
    envelopes[plosive] = np.clip(after / (0.0015 * sr), 0.0, 1.0) * decay * fall[plosive]
    return envelopes


def _spectrum(phone: _Phone, scale: float, freqs: np.ndarray) -> np.ndarray:
    """Zero-phase magnitude response of one phone's vocal tract, float64 [freqs]."""
    response = 0.3 * phone.voice / np.sqrt(1.0 + (freqs / 300.0) ** 2)  # glottal low end
    for centre, width, gain in zip(phone.formants, _BANDWIDTHS, _FORMANT_GAINS, strict=False):
        response = response + gain / (1.0 + ((freqs - centre * scale) / (width / 2)) ** 2)
    if phone.band is not None:
        low, high = np.log(np.asarray(phone.band) * scale)
        log_f = np.log(freqs + 1.0)
        response = response + 1.0 / (1.0 + np.exp((low - log_f) / 0.15))
        response = response / (1.0 + np.exp((log_f - high) / 0.15))
    return response


def _render(phones: list[_Phone], lengths: np.ndarray, voice: _Voice, rng, sr: int):
    """Audio of phones with int64 [P] `lengths`: float64 [lengths.sum()].

    Every sound is cut from the shared sources into its own row, shaped by its envelope,
    filtered in one batched FFT and overlap-added back.
    """
    total, starts = int(lengths.sum()), np.cumsum(lengths) - lengths
    loud = np.array([i for i, p in enumerate(phones) if p.level > 0], dtype=np.int64)
    sounding = [phones[i] for i in loud]
    overlap, ring = round(_OVERLAP * sr), round(_RING * sr)
    spans = lengths[loud] + 2 * overlap  # (S,)
    nfft = -(-int(spans.max() + 2 * ring) // 512) * 512
    voiced, noise = _sources(total + 2 * nfft, voice, rng, sr)  # margin of nfft each side
    offsets = starts[loud] - overlap - ring + nfft  # (S,) row start on the padded axis
    gains = np.array([[p.voice, p.noise] for p in sounding], dtype=np.float32)  # (S, 2)
    frames = gains[:, :1] * _windows(voiced.astype(np.float32), offsets, nfft)
    frames += gains[:, 1:] * _windows(noise, offsets, nfft)
    frames *= _envelopes(sounding, spans, ring, overlap, nfft, sr)  # (S, nfft)
    freqs = np.fft.rfftfreq(nfft, 1.0 / sr)
    responses = {p: _spectrum(p, voice.formants, freqs).astype(np.float32) for p in set(sounding)}
    spectra = np.fft.rfft(frames, axis=1) * np.stack([responses[p] for p in sounding])
    shaped = np.fft.irfft(spectra, n=nfft, axis=1)  # (S, nfft)
    levels = np.array([p.level for p in sounding]) * rng.uniform(0.7, 1.0, len(sounding))
    rms = np.sqrt(np.einsum("ij,ij->i", shaped, shaped) / lengths[loud])
    shaped *= (levels / np.maximum(rms, 1e-12))[:, None].astype(np.float32)
    out = np.zeros(total + 2 * nfft)
    for row, offset in zip(shaped, offsets, strict=True):  # one add per sound, not sample
        out[offset : offset + nfft] += row
    return out[nfft : nfft + total]


def _finish(audio: np.ndarray, rng, target: int, most: int, sr: int) -> np.ndarray:
    """Peak-normalise, cut to `most` / pad to `target` samples, add the noise floor.

    Returns:
        int16 [max(target, min(len(audio), most))].
    """
    audio = audio * (_PEAK / max(float(np.abs(audio).max()), 1e-12))
    if len(audio) > most:
        audio = audio[:most] * np.minimum(1.0, np.arange(most, 0, -1) / (0.01 * sr))
    audio = np.pad(audio, (0, max(target - len(audio), 0)))
    audio = np.clip(audio + _NOISE_FLOOR * rng.standard_normal(len(audio)), -1.0, 1.0)
    return np.round(audio * 32767.0).astype("<i2")


def _synth_utterance(rng, voice: _Voice, sr: int, seconds: tuple[float, float]):
    """(raw text, spoken text, int16 [samples]) of one synthesised utterance."""
    _, target, most = _sample_bounds(rng, sr, *seconds)
    raw, spoken, phones, lengths = _compose(rng, voice, sr, target, most)
    audio = _render(phones, lengths, voice, rng, sr)
    return raw, spoken, _finish(audio, rng, target, most, sr)


def speak_demo(text: str, *, seed: int = 0, speaker: int = 0, sample_rate: int = 22050,
               speakers: int = 1) -> np.ndarray:  # fmt: skip
    """Any text spoken by the "synth" engine, as its corpus utterances are: the ground
    truth of a sentence a demo model was never trained on.

    Timing and pitch are random per call seed (as they are per utterance of the corpus),
    so compare a synthesis with it through DTW, not frame by frame.

    Args:
        text: spoken-form text (normalised: numbers and abbreviations written out);
            every character is a sound, other characters a short gap.
        seed: the random draws of this rendering.
        speaker: the voice, `0 .. speakers - 1`, as `write_demo_corpus` assigns them.
        sample_rate: Hz.
        speakers: the number of speakers of the corpus the voice belongs to.

    Returns:
        int16 [samples]: a leading silence, the text, and the corpus's noise floor.

    Raises:
        ConfigError: an empty text or an argument out of range.
    """
    _require(bool(text.strip()), "a non-empty text", f"text={text!r}")
    _check(max(speakers, 1), speakers, seed, "synth", sample_rate, 0.1, 0.1)
    _require(0 <= speaker < speakers, f"0 <= speaker < speakers={speakers}", f"speaker={speaker}")
    rng = np.random.default_rng([seed, 1 << 30])  # not a corpus utterance's stream
    voice = _voice(speaker)
    phones, lengths = _sounds(text, rng, voice, sample_rate)
    lead = round(rng.uniform(0.1, 0.25) * sample_rate)
    phones, lengths = [_GAP, *phones], np.concatenate([[lead], lengths])
    audio = _render(phones, lengths, voice, rng, sample_rate)
    return _finish(audio, rng, len(audio), len(audio), sample_rate)


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Engine:
    """One engine speaking one language within duration bounds."""

    sample_rate: int
    seconds: tuple[float, float]  # (min_seconds, max_seconds)
    language: str
    espeak: str | None  # the espeak-ng program, or None for the synth engine

    def utterance(self, rng: np.random.Generator, voice: _Voice, wav: Path):
        """(raw text, spoken text or "" for "read the raw text", int16 [samples]).

        espeak-ng writes into `wav` on the way; the caller writes the final audio there.
        """
        if self.espeak is None:
            return _synth_utterance(rng, voice, self.sample_rate, self.seconds)
        pitch = round(float(np.interp(voice.f0, [95.0, 235.0], [25.0, 75.0])))
        voice_name = espeak_voice(self.language)
        espeak = Espeak(binary=self.espeak, voice=voice_name, pitch=pitch, speed=165 * voice.rate)
        bounds = _sample_bounds(rng, ESPEAK_RATE, *self.seconds)
        if self.language == "en":
            return english_utterance(rng, espeak, bounds, wav)
        raw, pcm = sentence_utterance(rng, espeak, bounds, wav, self.language)
        return raw, "", pcm


def _row(uid: str, raw: str, spoken: str, speaker: str) -> str:
    """One `id|text|normalized_text|speaker` line of metadata.csv, empty trailing fields
    dropped; an empty normalized_text before a speaker tells the reader to use text."""
    return "|".join([uid, raw, spoken, speaker]).rstrip("|")


def _write_wav(path: Path, pcm: np.ndarray, sr: int) -> None:
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(sr)
        wav.writeframes(pcm.tobytes())


def _utterance_id(index: int) -> str:
    return f"DEMO{index // 1000 + 1:03d}-{index % 1000 + 1:04d}"


def _require(ok: bool, expected: str, received: str) -> None:
    if not ok:
        raise ConfigError(f"Expected {expected}, received: {received}")


def _check(n, speakers, seed, engine, sample_rate, min_seconds, max_seconds) -> None:
    _require(n >= 1, "n >= 1", f"n={n}")
    _require(speakers >= 1, "speakers >= 1", f"speakers={speakers}")
    _require(speakers <= n, "speakers <= n (one utterance each)", f"speakers={speakers}, n={n}")
    _require(seed >= 0, "seed >= 0", f"seed={seed}")
    _require(engine in ("synth", "espeak"), "engine 'synth' or 'espeak'", f"engine={engine!r}")
    _require(sample_rate >= 8000, "sample_rate >= 8000", f"sample_rate={sample_rate}")
    _require(min_seconds > 0, "min_seconds > 0", f"min_seconds={min_seconds}")
    bounds = f"max_seconds={max_seconds}, min_seconds={min_seconds}"
    _require(max_seconds >= min_seconds, "max_seconds >= min_seconds", bounds)
    espeak_ok = engine != "espeak" or sample_rate == ESPEAK_RATE
    rule = f"sample_rate={ESPEAK_RATE} with engine='espeak' (espeak-ng's rate; no resampling)"
    _require(espeak_ok, rule, f"sample_rate={sample_rate}")


def _check_language(engine: str, language: str) -> None:
    known = f"a language with built-in sentences, one of {', '.join(LANGUAGES)}"
    _require(language in LANGUAGES, known, f"language={language!r}")
    rule = (
        "language='en' with engine='synth' (the synth engine speaks only its own "
        "English-like language; use engine='espeak')"
    )
    _require(engine != "synth" or language == "en", rule, f"language={language!r}")


def _empty_directory(out: str | Path) -> Path:
    root = Path(out)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise XttsDataError(
            f"Expected an empty or missing directory for the demo corpus, received: "
            f"out={root}, which is not empty. Choose an empty directory; the demo corpus "
            f"never overwrites existing files."
        )
    (root / "wavs").mkdir(parents=True, exist_ok=True)
    return root


def write_demo_corpus(
    out: str | Path,
    *,
    n: int = 200,
    seed: int = 0,
    sample_rate: int = 22050,
    speakers: int = 1,
    engine: Engine = "synth",
    min_seconds: float = 1.0,
    max_seconds: float = 10.0,
    language: str = "en",
    progress: bool = False,
) -> DemoCorpus:
    """Write a deterministic demo corpus in LJSpeech layout, with no download.

    Writes `out/metadata.csv` (UTF-8, no header, `id|text|normalized_text` rows, plus a
    `speaker` column `spk0`, `spk1`, … when `speakers > 1`) and `out/wavs/<id>.wav` (16-bit
    PCM mono). Ids look like `DEMO001-0001`. About 20% of texts hold a number, amount or
    abbreviation ("1984", "$5.50", "3rd", "Dr.", "50%") spelled out in `normalized_text`.
    Utterance `i` goes to speaker `i % speakers`; speakers differ in pitch, formants and
    speaking rate.

    In a language other than English, rows are `id|text` (`id|text||speaker` with
    speakers): built-in sentences as written, digits included (about a quarter hold a
    number), which the corpus reader then normalises itself. espeak-ng speaks the same
    text through `normalize_text` with `TextConfig(language=language)`.

    Args:
        out: directory to create, or an existing empty one.
        n: number of utterances.
        seed: same seed and arguments give byte-identical files.
        sample_rate: Hz; must be 22050 with `engine="espeak"`.
        speakers: number of speakers, at most `n`.
        engine: "synth" (built-in speech-like synthesiser) or "espeak" (espeak-ng, which
            must be installed; durations then follow the text, best effort within bounds).
        min_seconds: shortest utterance.
        max_seconds: longest utterance. Targets follow an LJSpeech-like distribution over
            [min_seconds, max_seconds] with mean at 61% of the range (6.5 s for 1–10 s);
            words are added while they fit and the rest is trailing silence. Only a
            single word longer than `max_seconds` is cut (its text stays whole).
        language: "en", or with `engine="espeak"` a language with built-in sentences:
            "fa" (Persian), "ar" (Arabic), "ru" (Russian), "de" (German), "fr" (French),
            "es" (Spanish), "zh" (Mandarin). Sentences are joined until the target
            duration; one that would pass `max_seconds` is left out (a first one is cut).
        progress: show a tqdm progress bar.

    Returns:
        What was written.

    Raises:
        ConfigError: an argument is out of range, an unknown language, or a language other
            than "en" with the synth engine.
        XttsDataError: `out` is not empty, or espeak-ng is missing, has no voice for the
            language, or fails.
    """
    _check(n, speakers, seed, engine, sample_rate, min_seconds, max_seconds)
    _check_language(engine, language)
    espeak = find_espeak(language) if engine == "espeak" else None
    root = _empty_directory(out)
    seconds = (min_seconds, max_seconds)
    synthesis = _Engine(sample_rate=sample_rate, seconds=seconds, language=language, espeak=espeak)
    rows, samples = [], 0
    for index in tqdm(range(n), desc="demo corpus", unit="utt", disable=not progress):
        uid, voice = _utterance_id(index), _voice(index % speakers)
        rng, wav = np.random.default_rng([seed, index]), root / "wavs" / f"{uid}.wav"
        raw, spoken, pcm = synthesis.utterance(rng, voice, wav)
        _write_wav(wav, pcm, sample_rate)
        rows.append(_row(uid, raw, spoken, voice.name if speakers > 1 else ""))
        samples += len(pcm)
    with open(root / "metadata.csv", "w", encoding="utf-8", newline="\n") as metadata:
        metadata.writelines(row + "\n" for row in rows)
    logger.info("Wrote %d demo utterances (%.1f s) to %s", n, samples / sample_rate, root)
    return DemoCorpus(root, n, samples / sample_rate, speakers)
