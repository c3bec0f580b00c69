"""A deterministic, speech-like demo corpus in LJSpeech layout, made offline.

The writer draws, for utterance `i`, a random stream `numpy.random.default_rng([seed, i])`,
a voice (speaker `i % speakers`) and an LJSpeech-like length budget, asks an engine
(`xtts_data._demo_engine.DemoEngine`) for the text and its audio, and writes the wav and
the metadata row. Same arguments give byte-identical files, and utterance `i` does not
depend on `n`.

The default engine ("synth", `xtts_data._demo_synth`) speaks a small synthesised
English-like language: a formant synthesiser whose mel spectrograms show harmonics,
formants and pauses. `engine="espeak"` runs `espeak-ng` instead (`xtts_data._demo_espeak`),
for real (robotic) speech: English, or with `language` one of the languages with built-in
sentences (`xtts_data._demo_sentences`). English texts are sentences, or with `texts` inputs
a text-to-mel model is tested on alone: run-on sentences, texts that repeat, short phrases.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Literal

import numpy as np
from tqdm import tqdm

from xtts_audio import write_wav
from xtts_data._demo_engine import Bounds, DemoEngine, voice
from xtts_data._demo_espeak import ESPEAK_RATE, EspeakEngine, find_espeak
from xtts_data._demo_sentences import LANGUAGES, TEXT_KINDS
from xtts_data._demo_synth import SynthEngine, speak
from xtts_data.errors import ConfigError, XttsDataError

__all__ = ["DEMO_SENTENCES", "DemoCorpus", "speak_demo", "write_demo_corpus"]

logger = logging.getLogger(__name__)

Engine = Literal["synth", "espeak"]
Texts = Literal["sentences", "run-on", "repeated", "short"]  # `_demo_sentences.TEXT_KINDS`

# Eval sentences of the demo language (its own words, within its 0.4–1.6 s utterances):
# what `text_to_mel.eval_sentences` is in the demo's runs, as the Harvard sentences are in English.
DEMO_SENTENCES = ("The captain spoke.", "Her letter was old.")

_BETA = (3.3, 2.1)  # target duration shape: mean at 61% of [min, max], 6.5 s for 1–10 s
# Seconds a short phrase may take at the slowest voice (at most 1.3 s measured, leading
# silence included, with either engine): a smaller max_seconds would cut one.
_SHORT_MAX_SECONDS = 2.0


@dataclasses.dataclass(frozen=True)
class DemoCorpus:
    """What `write_demo_corpus` wrote.

    Attributes:
        path: corpus root, holding `metadata.csv` and `wavs/`.
        num_utterances: rows in `metadata.csv` (one wav each).
        total_seconds: summed duration of all wavs.
        speakers: number of distinct speakers, held-out ones included.
        held_out: the voices written to `path / "held-out"` instead (never trained on
            when the corpus at `path` is), e.g. `("spk13", "spk14", "spk15")`.
    """

    path: Path
    num_utterances: int
    total_seconds: float
    speakers: int
    held_out: tuple[str, ...] = ()


def _target_durations(
    n: int, rng: np.random.Generator, min_seconds: float, max_seconds: float
) -> np.ndarray:
    """LJSpeech-like target durations: a scaled beta, mean at 61% of the range.

    Returns:
        float64 [n], seconds in [min_seconds, max_seconds] (mean ≈ 6.5 s for 1–10 s).
    """
    return min_seconds + (max_seconds - min_seconds) * rng.beta(*_BETA, size=n)


def _sample_bounds(
    rng: np.random.Generator, sr: int, min_seconds: float, max_seconds: float,
    texts: Texts = "sentences",
) -> Bounds:  # fmt: skip
    """(fewest, target, most) samples of one utterance; fewest <= target <= most. A short
    phrase is as long as it is: its target is the fewest (no silence beyond the minimum)."""
    most = int(np.floor(max_seconds * sr))
    fewest = min(int(np.ceil(min_seconds * sr)), most)
    if texts == "short":
        return Bounds(fewest, fewest, most)
    target = round(float(_target_durations(1, rng, min_seconds, max_seconds)[0]) * sr)
    return Bounds(fewest, min(max(target, fewest), most), most)


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
    return speak(text, rng=rng, voice=voice(speaker), sample_rate=sample_rate)


def _row(uid: str, raw: str, spoken: str, speaker: str) -> str:
    """One `id|text|normalized_text|speaker` line of metadata.csv, empty trailing fields
    dropped; an empty normalized_text before a speaker tells the reader to use text."""
    return "|".join([uid, raw, spoken, speaker]).rstrip("|")


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
    held_out_speakers: int = 0,
    engine: Engine = "synth",
    min_seconds: float = 1.0,
    max_seconds: float = 10.0,
    language: str = "en",
    one_sentence: bool = False,
    texts: Texts = "sentences",
    progress: bool = False,
) -> DemoCorpus:
    """Write a deterministic demo corpus in LJSpeech layout, with no download.

    Writes `out/metadata.csv` (UTF-8, no header, `id|text|normalized_text` rows, plus a
    `speaker` column `spk0`, `spk1`, … when `speakers > 1`) and `out/wavs/<id>.wav` (16-bit
    PCM mono). Ids look like `DEMO001-0001`. About 20% of texts hold a number, amount or
    abbreviation ("1984", "$5.50", "3rd", "Dr.", "50%") spelled out in `normalized_text`.
    Utterance `i` goes to speaker `i % speakers`; speakers differ in pitch, formants and
    speaking rate, and with espeak-ng each of the first 48 also in its voice variant
    (`xtts_data._demo_espeak.VARIANTS`; past 48 the variants repeat at other pitches).

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
        held_out_speakers: the last this many voices are written to `out/held-out/`,
            a corpus of the same layout, not to `out`: voices a model trained on `out`
            never heard (for voice-cloning checks). Fewer than `speakers`.
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
        one_sentence: (English) every text is one sentence, its clauses joined by commas
            where the sentences would end: sentences as long as the utterances, e.g. longer
            than a model's training clips (`xtts-bench learning --long-form`).
        texts: (English) what a text is: "sentences" (the default); "run-on" (one sentence
            with no punctuation inside but its final period, clauses joined by plain words
            such as "and", "then", "while"); "repeated" (drawn per text: one word over and
            over, "the the the the", distinct common words with no commas, or whole numbers
            in digits, "4 7 12 30", that the normaliser spells out); "short" (one phrase of
            one or two words, "Yes.", "Thank you."). Run-on and repeated texts fill the
            targets between `min_seconds` and `max_seconds` as sentences do; a short phrase
            is as long as it is, padded with silence to `min_seconds` (pass a small one,
            e.g. 0.1, for wavs of the phrase alone), and needs `max_seconds` >=
            `_SHORT_MAX_SECONDS` (2 s) so that none is cut. Not with `one_sentence`.
        progress: show a tqdm progress bar.

    Returns:
        What was written.

    Raises:
        ConfigError: an argument is out of range, an unknown language or `texts`, a language
            other than "en" with the synth engine, `one_sentence` or `texts` other than
            "sentences", or `one_sentence` with such `texts`.
        XttsDataError: `out` is not empty, or espeak-ng is missing, has no voice for the
            language, or fails.
    """
    _check(n, speakers, seed, engine, sample_rate, min_seconds, max_seconds)
    _require(0 <= held_out_speakers < speakers, f"0 <= held_out_speakers < speakers={speakers}",
             f"held_out_speakers={held_out_speakers}")  # fmt: skip
    _check_language(engine, language)
    _require(not one_sentence or language == "en", "language='en' with one_sentence (the "
             "other languages speak their built-in sentences whole)",
             f"language={language!r}")  # fmt: skip
    _check_texts(texts, language=language, one_sentence=one_sentence, max_seconds=max_seconds)
    # the engine before any file: espeak-ng is looked up here
    backend = _engine(engine, sample_rate=sample_rate, language=language,
                      one_sentence=one_sentence, texts=texts)  # fmt: skip
    root = _empty_directory(out)
    seconds = (min_seconds, max_seconds)
    return _write_corpus(
        root, engine=backend, n=n, seed=seed, speakers=speakers, held_out=held_out_speakers,
        seconds=seconds, progress=progress, texts=texts,
    )  # fmt: skip


def _check_texts(texts: str, *, language: str, one_sentence: bool, max_seconds: float) -> None:
    _require(texts in TEXT_KINDS, f"texts one of {', '.join(TEXT_KINDS)}", f"texts={texts!r}")
    if texts == "sentences":
        return
    _require(language == "en", f"language='en' with texts={texts!r} (the other languages "
             f"speak their built-in sentences)", f"language={language!r}")  # fmt: skip
    _require(not one_sentence, f"one of one_sentence and texts={texts!r} (one_sentence "
             f"joins sentences; texts={texts!r} are no sentences to join)",
             f"one_sentence=True, texts={texts!r}")  # fmt: skip
    _require(texts != "short" or max_seconds >= _SHORT_MAX_SECONDS,
             f"max_seconds >= {_SHORT_MAX_SECONDS} with texts='short' (so that no phrase "
             f"is cut)", f"max_seconds={max_seconds}")  # fmt: skip


def _engine(engine: Engine, *, sample_rate: int, language: str, one_sentence: bool = False,
            texts: Texts = "sentences") -> DemoEngine:  # fmt: skip
    """The engine named `engine`; espeak-ng is looked up (and its voice checked) here."""
    if engine == "espeak":
        return EspeakEngine(binary=find_espeak(language), language=language,
                            one_sentence=one_sentence, texts=texts)  # fmt: skip
    return SynthEngine(sample_rate=sample_rate, one_sentence=one_sentence, texts=texts)


def _write_corpus(
    root: Path,
    *,
    engine: DemoEngine,
    n: int,
    seed: int,
    speakers: int,
    seconds: tuple[float, float],
    progress: bool,
    held_out: int = 0,
    texts: Texts = "sentences",
) -> DemoCorpus:
    """Utterances `0 .. n - 1` of `engine` into the empty corpus folder `root` (those of
    the last `held_out` voices into `root/held-out`).

    Args:
        root: an empty folder holding an empty `wavs/`.
        engine: what speaks every utterance.
        n: number of utterances.
        seed: first key of every utterance's random stream, `[seed, index]`.
        speakers: utterance `index` goes to voice `index % speakers`.
        seconds: (min_seconds, max_seconds) of every utterance.
        progress: show a tqdm progress bar.
        held_out: the last this many voices go to `root/held-out` (its own metadata.csv
            and wavs/).
        texts: the kind of text `engine` speaks (`_sample_bounds`: a short one fills no
            target).

    Returns:
        What was written.
    """
    rows, samples, sr = {root: [], root / "held-out": []}, 0, engine.sample_rate
    if held_out:
        (root / "held-out" / "wavs").mkdir(parents=True)
    for index in tqdm(range(n), desc="demo corpus", unit="utt", disable=not progress):
        uid, speaker = _utterance_id(index), voice(index % speakers)
        folder = root / "held-out" if speaker.index >= speakers - held_out else root
        rng = np.random.default_rng([seed, index])
        bounds = _sample_bounds(rng, sr, *seconds, texts)
        speech = engine.utterance(rng, voice=speaker, bounds=bounds)
        write_wav(folder / "wavs" / f"{uid}.wav", speech.pcm, sr)
        rows[folder].append(_row(uid, speech.raw, speech.spoken,
                                 speaker.name if speakers > 1 else ""))  # fmt: skip
        samples += len(speech.pcm)
    for folder, lines in rows.items():
        if lines:
            with open(folder / "metadata.csv", "w", encoding="utf-8", newline="\n") as metadata:
                metadata.writelines(row + "\n" for row in lines)
    logger.info("Wrote %d demo utterances (%.1f s) to %s", n, samples / sr, root)
    names = tuple(voice(i).name for i in range(speakers - held_out, speakers))
    return DemoCorpus(root, n, samples / sr, speakers, names)
