"""The demo corpus's built-in engine: a formant synthesiser of a small English-like language.

Each letter of the normalised text has a sound and a duration. Vowels and sonorants are a
glottal sawtooth through formant resonances (pitch with declination, vibrato and drift),
fricatives are band-passed noise, plosives a closure then a noise burst, spaces and
punctuation short or long silences. Sounds cross-fade with raised-cosine ramps (no clicks)
and a faint noise floor sits under everything, so a mel spectrogram shows harmonics,
formants and pauses.

Text in, int16 samples out, no file I/O: `SynthEngine` draws English words to fill a
length budget (`xtts_data._demo_engine.DemoEngine`), `speak` says any given text. Every
random draw comes from the caller's generator, so a seed fixes the audio.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from xtts_data._demo_engine import Bounds, Speech, Voice
from xtts_data._demo_espeak import spoken_words
from xtts_data._demo_sentences import join_words

__all__ = ["SynthEngine", "speak"]

_OVERLAP = 0.012  # seconds each sound overlaps its neighbours (cross-fade is twice this)
_RING = 0.02  # seconds of room for filter ringing on either side of a sound
_PLOSIVE_DECAY = 0.012  # seconds, burst decay time constant
_PEAK = 0.5  # utterance peak before the noise floor
_NOISE_FLOOR = 1e-3  # RMS of the background noise (-60 dBFS)
_MAX_MISSES = 3  # words that did not fit before an utterance is complete


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


def _sounds(text: str, rng: np.random.Generator, voice: Voice, sr: int):
    """Phones of `text` and their lengths: (list of _Phone, int64 [len(text)] samples)."""
    phones = [_PHONES.get(char, _GAP) for char in text.lower()]
    seconds = np.array([p.seconds for p in phones]) * rng.uniform(0.8, 1.25, len(phones))
    return phones, np.round(seconds * sr / voice.rate).astype(np.int64)


def _compose(rng: np.random.Generator, voice: Voice, sr: int, target: int, most: int,
             one_sentence: bool = False, texts: str = "sentences"):  # fmt: skip
    """Words until the next would pass `target` samples (the first word may use `most`);
    with `one_sentence`, as one sentence; `texts`, the kind of text (`spoken_words`).

    Returns:
        (raw text, spoken text, phones, int64 [phones] lengths in samples); the first
        phone is the leading silence, trailing silences are dropped.
    """
    phones, lengths = [_GAP], [np.array([round(rng.uniform(0.1, 0.25) * sr)])]
    kept: list[tuple[str, str]] = []
    used, misses = int(lengths[0][0]), 0
    for raw, spoken in spoken_words(rng, one_sentence=one_sentence, texts=texts):
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


def _sources(n: int, voice: Voice, rng: np.random.Generator, sr: int):
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


def _render(phones: list[_Phone], lengths: np.ndarray, voice: Voice, rng, sr: int):
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


@dataclasses.dataclass(frozen=True, kw_only=True)
class SynthEngine:
    """The formant synthesiser as a `DemoEngine`: English words until `bounds` are filled.

    Attributes:
        sample_rate: Hz of the audio it returns.
        one_sentence: every text is one sentence (`_demo_sentences.words`).
        texts: what a text is, one of `_demo_sentences.TEXT_KINDS`.
    """

    sample_rate: int
    one_sentence: bool = False
    texts: str = "sentences"

    def utterance(self, rng: np.random.Generator, *, voice: Voice, bounds: Bounds) -> Speech:
        """Words drawn from `rng` while they fit `bounds.target` samples, spoken with `voice`.

        Returns:
            The raw and spoken text and int16 [max(target, min(rendered, most))] samples.
        """
        sr, target, most = self.sample_rate, bounds.target, bounds.most  # fewest <= target
        words = (self.one_sentence, self.texts)
        raw, spoken, phones, lengths = _compose(rng, voice, sr, target, most, *words)
        audio = _render(phones, lengths, voice, rng, sr)
        return Speech(raw, spoken, _finish(audio, rng, target, most, sr))


def speak(text: str, *, rng: np.random.Generator, voice: Voice, sample_rate: int) -> np.ndarray:
    """`text` spoken as the corpus's utterances are: a leading silence, then every character.

    Args:
        text: spoken-form text; every character is a sound, other characters a short gap.
        rng: every random draw of this rendering (timing, pitch, levels, noise).
        voice: the speaker.
        sample_rate: Hz.

    Returns:
        int16 [samples]: a leading silence, the text, and the corpus's noise floor.
    """
    phones, lengths = _sounds(text, rng, voice, sample_rate)
    lead = round(rng.uniform(0.1, 0.25) * sample_rate)
    phones, lengths = [_GAP, *phones], np.concatenate([[lead], lengths])
    audio = _render(phones, lengths, voice, rng, sample_rate)
    return _finish(audio, rng, len(audio), len(audio), sample_rate)
