"""The demo corpus's espeak-ng engine: real (robotic) speech, in English or a built-in language.

English texts are drawn word by word, as the synth engine draws them; other languages join
built-in sentences (`xtts_data._demo_sentences.SENTENCES`). Both engines speak what the
model will read, the raw text through `normalize_text` (`spoken_text`; English word by word,
`spoken_words`, capitals kept for metadata.csv's normalized_text column). `EspeakEngine`
is the engine as the corpus writer asks for one (`xtts_data._demo_engine.DemoEngine`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import shutil
import subprocess
import tempfile
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from xtts_data._cleaners import espeak_voice
from xtts_data._demo_engine import Bounds, Speech, Voice
from xtts_data._demo_sentences import SENTENCES, join_sentences, join_words, words
from xtts_data._espeak_library import ENV, EspeakLibrary, espeak_library
from xtts_data._espeak_synth import library_has_voice, library_speak
from xtts_data.errors import ConfigError, XttsDataError
from xtts_data.text import TextConfig, normalize_text

__all__ = [
    "ESPEAK_RATE",
    "VARIANTS",
    "Espeak",
    "EspeakEngine",
    "english_utterance",
    "find_espeak",
    "sentence_utterance",
    "spoken_text",
    "spoken_words",
    "voice_name",
]

ESPEAK_RATE = 22050  # espeak-ng always writes 22050 Hz 16-bit mono
# espeak-ng's voice variants (`espeak-ng --voices=variant`, by file name), one per speaker
# after the first, which speaks the language's own voice. The first 15 (male and female
# timbres, the Klatt synthesiser's and two character voices) keep their places, so a
# 16-speaker corpus sounds as it always has; 32 more named voices follow, so up to 48
# speakers each get their own timbre (and, as always, their own pitch and rate). The last
# four are unlike each other (two female, two male) and are the held-out voices of a
# 48-speaker corpus with `held_out_speakers=4`.
VARIANTS = ("m1", "f1", "m2", "f2", "m3", "f3", "m4", "f4", "m5", "f5", "m6", "m7", "klatt",
            "croak", "grandma",
            "m8", "adam", "Alex", "Alicia", "Andrea", "Andy", "antonio", "aunty", "belinda",
            "benjamin", "caleb", "david", "Denis", "Diogo", "edward", "Gene", "gustave",
            "Henrique", "Hugo", "iven", "Jacky", "john", "Lee", "linda", "marcelo", "Mario",
            "Michael", "Mike", "Annie", "boris", "steph", "Storm")  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class Espeak:
    """One espeak-ng voice at one pitch and speed.

    Attributes:
        binary: path of the espeak-ng program; None: espeak-ng's library
            (`_espeak_library.espeak_library`: the system's or the phonemes extra's wheel).
        voice: espeak-ng voice name, e.g. "en-us", "fa", "cmn".
        pitch: espeak-ng pitch, 0–99.
        speed: words per minute (rounded when passed to espeak-ng).
    """

    binary: str | None
    voice: str
    pitch: int
    speed: float


@dataclasses.dataclass(frozen=True, kw_only=True)
class EspeakEngine:
    """espeak-ng as a `DemoEngine`: English words, or built-in sentences of `language`.

    Attributes:
        binary: path of the espeak-ng program, None for its library (`find_espeak`).
        language: "en" or a language of `xtts_data._demo_sentences.SENTENCES`.
        one_sentence: English texts are one sentence each (`_demo_sentences.words`).
        texts: what an English text is, one of `_demo_sentences.TEXT_KINDS`.
    """

    binary: str | None
    language: str
    one_sentence: bool = False
    texts: str = "sentences"

    @property
    def sample_rate(self) -> int:
        """Hz: espeak-ng's only rate, `ESPEAK_RATE`."""
        return ESPEAK_RATE

    def utterance(self, rng: np.random.Generator, *, voice: Voice, bounds: Bounds) -> Speech:
        """A text drawn from `rng` to fit `bounds`, spoken at `voice`'s pitch and rate.

        Returns:
            The raw text, the spoken English text ("" in other languages: the raw text is
            what the reader normalises) and int16 [fewest .. most] samples.
        """
        pitch = round(float(np.interp(voice.f0, [95.0, 235.0], [25.0, 75.0])))
        name = voice_name(self.language, voice)
        espeak = Espeak(binary=self.binary, voice=name, pitch=pitch, speed=165 * voice.rate)
        with tempfile.TemporaryDirectory(prefix="xtts-espeak-") as scratch:
            wav = Path(scratch) / "speech.wav"  # espeak-ng writes only files
            if self.language == "en":
                return Speech(*english_utterance(rng, espeak, bounds, wav,
                                                 one_sentence=self.one_sentence,
                                                 texts=self.texts))  # fmt: skip
            raw, pcm = sentence_utterance(rng, espeak, bounds, wav, self.language)
        return Speech(raw, "", pcm)


def voice_name(language: str, voice: Voice) -> str:
    """The espeak-ng voice of a demo speaker: the language's voice for speaker 0 (a
    one-speaker corpus sounds as it always has), then that voice with `VARIANTS[i - 1]`
    (`en-us+f1`), cycling past the last."""
    name = espeak_voice(language)
    if voice.index == 0:
        return name
    return f"{name}+{VARIANTS[(voice.index - 1) % len(VARIANTS)]}"


def find_espeak(language: str) -> str | None:
    """The espeak-ng program on PATH, or None for espeak-ng's library (where no program is,
    or with `XTTS_ESPEAK=wheel`), checked to have the voice of `language`.

    Raises:
        XttsDataError: neither a program nor a library, or no such voice.
    """
    binary = shutil.which("espeak-ng") if os.environ.get(ENV) != "wheel" else None
    voice = espeak_voice(language)
    if binary is None:
        try:
            library = _speech_library()
        except ConfigError as error:
            raise XttsDataError(
                f"Expected espeak-ng for engine='espeak' (the program on PATH or its "
                f"library), found none: {error}. Or use the default engine='synth', which "
                f"needs no external tool."
            ) from None
        if not library_has_voice(library, voice):
            raise XttsDataError(f"Expected espeak-ng's {library.source} library to have the "
                                f"voice {voice!r} for language={language!r}; choose another "
                                f"language")  # fmt: skip
        return None
    done = subprocess.run([binary, "-q", "-v", voice, "a"], capture_output=True, text=True)
    if done.returncode != 0:
        raise XttsDataError(
            f"Expected espeak-ng to have the voice {voice!r} for language={language!r}, "
            f"received: exit {done.returncode}: {done.stderr.strip()}. Install espeak-ng's "
            f"voice data (e.g. `apt-get install espeak-ng-data`) or choose another language."
        )
    return binary


@functools.cache
def _speech_library() -> EspeakLibrary:
    return espeak_library()  # looked up once: finding a system library runs ldconfig


def speak(espeak: Espeak, text: str, path: Path) -> np.ndarray:
    """Speak `text` with espeak-ng (the program writes `path`); returns its int16
    [samples]."""
    if espeak.binary is None:
        return library_speak(_speech_library(), text, voice=espeak.voice, pitch=espeak.pitch,
                             speed=round(espeak.speed))  # fmt: skip
    command = [espeak.binary, "-w", str(path), "-v", espeak.voice, "-p", str(espeak.pitch)]
    command += ["-s", str(round(espeak.speed))]
    # Text on stdin, so a text starting with "-" is never read as an option.
    done = subprocess.run([*command, "--stdin"], input=text, text=True, capture_output=True)
    if done.returncode != 0:
        raise XttsDataError(f"espeak-ng failed (exit {done.returncode}): {done.stderr.strip()}")
    with wave.open(str(path), "rb") as wav:
        layout = (wav.getframerate(), wav.getnchannels(), wav.getsampwidth())
        frames = wav.readframes(wav.getnframes())
    if layout != (ESPEAK_RATE, 1, 2):
        expected = f"Expected espeak-ng to write {ESPEAK_RATE} Hz mono 16-bit audio"
        raise XttsDataError(f"{expected}, received: (rate, channels, bytes)={layout}")
    return np.frombuffer(frames, dtype="<i2")


def _fit(pcm: np.ndarray, fewest: int, most: int) -> np.ndarray:
    """Cut to `most` samples, pad with silence to `fewest`: int16 [fewest .. most]."""
    return np.pad(pcm[:most], (0, max(fewest - len(pcm), 0)))


def english_utterance(rng: np.random.Generator, espeak: Espeak, bounds: Bounds, path: Path, *,
                      one_sentence: bool = False, texts: str = "sentences"):  # fmt: skip
    """(raw text, spoken text, int16 [samples]) of drawn English words, spoken into `path`
    (with `one_sentence`, as one sentence; `texts`, the kind of text: `spoken_words`).

    The word count aims at the target of `bounds` (fewest, target, most samples); texts
    whose audio passes `most` are shortened and spoken again (a single word that is still
    too long is cut). Audio shorter than `fewest` is padded with silence.
    """
    fewest, target, most = bounds
    count = max(1, round(target / ESPEAK_RATE * espeak.speed / 60 * 0.85))
    stream = spoken_words(rng, one_sentence=one_sentence, texts=texts)
    drawn = list(itertools.islice(stream, count))
    while True:
        raw, spoken = (join_words([word[i] for word in drawn]) for i in (0, 1))
        pcm = speak(espeak, spoken, path)
        if len(pcm) <= most or len(drawn) == 1:
            break
        drawn = drawn[: max(1, min(len(drawn) - 1, len(drawn) * most // len(pcm)))]
    return raw, spoken, _fit(pcm, fewest, most)


def spoken_text(raw: str, language: str, *, lowercase: bool = True) -> str:
    """What the demo says for a raw text of `language`: the text the model will read
    (`normalize_text`; `lowercase=False` keeps the raw text's capitals)."""
    return normalize_text(raw, TextConfig(language=language, lowercase=lowercase))


def spoken_words(rng: np.random.Generator, *, one_sentence: bool = False,
                 texts: str = "sentences") -> Iterator[tuple[str, str]]:  # fmt: skip
    """`(raw, spoken)` English words (`_demo_sentences.words`, `one_sentence` and `texts`
    passed on: endless but for `texts="short"`), each spoken as the normaliser reads it
    ("Mrs. Hale" -> "Misess Hale"), capitals kept: `join_words` of the spoken words
    normalises to what the joined raw words normalise to."""
    drawn = words(rng, one_sentence=one_sentence, texts=texts)
    return ((raw, _spoken_word(raw)) for raw in drawn)


@functools.lru_cache(maxsize=4096)  # a few hundred distinct words: normalise each once
def _spoken_word(raw: str) -> str:
    return spoken_text(raw, "en", lowercase=False)


def sentence_utterance(
    rng: np.random.Generator,
    espeak: Espeak,
    bounds: Bounds,
    path: Path,
    language: str,
) -> tuple[str, np.ndarray]:
    """(raw text, int16 [samples]) of built-in sentences of `language`, spoken into `path`.

    Sentences are drawn without repeats and joined until the audio reaches the target of
    `bounds` (fewest, target, most samples); a sentence that takes it past `most` is left
    out and ends the utterance, unless it is the first (its audio is then cut). Audio
    shorter than `fewest` is padded with silence.
    """
    fewest, target, most = bounds
    table = SENTENCES[language]
    kept, pcm = [], np.zeros(0, dtype="<i2")
    for index in rng.permutation(len(table)):
        candidate = [*kept, table[index]]
        audio = speak(espeak, spoken_text(join_sentences(candidate, language), language), path)
        if len(audio) > most and kept:
            break
        kept, pcm = candidate, audio
        if len(pcm) >= target:
            break
    return join_sentences(kept, language), _fit(pcm, fewest, most)
