"""Words: an offline recogniser's word error rate on speech, for English.

pocketsphinx (its acoustic model ships inside the PyPI package, the `asr` extra)
transcribes a WAV file, and jiwer scores the words against what the speaker read.

The recogniser's language model is a unigram over the sentences' words, a closed
vocabulary as in a task grammar: the synthetic corpora read random word sequences, which
a general English model fights (on 16 original espeak-ng recordings its WER was 0.92).
Every set of audio scored against the same sentences gets the same recogniser, so their
rates compare the audio only.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import re
from pathlib import Path
from types import ModuleType

import numpy as np

import xtts_audio
from xtts_data.text import TextConfig, normalize_text
from xtts_train.errors import ConfigError, MissingExtraError

__all__ = [
    "ASR_HINT",
    "RECOGNISER_RATE",
    "asr_available",
    "make_recogniser",
    "reference_words",
    "transcribe",
    "word_error_rate",
]

RECOGNISER_RATE = 16000  # pocketsphinx's en-us model is trained on 16 kHz audio
ASR_HINT = 'pip install "xtts-train[asr]" (pocketsphinx and jiwer)'


def asr_available() -> bool:
    """Whether the `asr` extra (pocketsphinx and jiwer) is installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("pocketsphinx", "jiwer"))


def reference_words(text: str) -> str:
    """What a speaker reads aloud in `text`, as lowercase words: the english cleaners
    (numbers, abbreviations and symbols spelt out), punctuation dropped."""
    cleaned = normalize_text(text, TextConfig(language="en"))
    return " ".join(re.sub(r"[^a-z' ]+", " ", cleaned).split())


def word_error_rate(references: list[str], transcripts: list[str]) -> float:
    """Corpus WER of `transcripts` against `references` (jiwer).

    Raises:
        MissingExtraError: the `asr` extra is not installed.
    """
    return float(_extra("jiwer").wer(references, transcripts))


def make_recogniser(references: list[str], scratch: Path):
    """A pocketsphinx decoder whose language model is a uniform unigram over the words
    of `references` that its dictionary knows (its file is written into `scratch`).

    Raises:
        MissingExtraError: the `asr` extra is not installed.
        ConfigError: no word of `references` is in the recogniser's English dictionary.
    """
    words = sorted({w for r in references for w in r.split()})
    decoder = _extra("pocketsphinx").Decoder(samprate=RECOGNISER_RATE, loglevel="FATAL")
    known = [w for w in words if decoder.lookup_word(w) is not None]
    if not known:
        raise ConfigError(f"no word of the sentences is in the English dictionary: "
                          f"{words[:10]}")  # fmt: skip
    log_p = math.log10(1.0 / (len(known) + 1))  # + </s>
    arpa = Path(scratch) / "unigram.arpa"
    arpa.write_text(
        "\\data\\\n"
        f"ngram 1={len(known) + 2}\n\n\\1-grams:\n-99 <s>\n{log_p:.4f} </s>\n"
        + "".join(f"{log_p:.4f} {w}\n" for w in known)
        + "\n\\end\\\n"
    )
    decoder.add_lm_file("unigram", str(arpa))  # the acoustic model stays loaded
    decoder.activate_search("unigram")
    return decoder


def transcribe(recogniser, path: Path) -> str:
    """The recogniser's words for a WAV file (any rate, mixed to mono, resampled)."""
    audio, rate = xtts_audio.load_wav(str(path))
    mono = xtts_audio.to_mono(audio)
    if int(rate) != RECOGNISER_RATE:
        mono = xtts_audio.resample(mono, orig_sr=int(rate), target_sr=RECOGNISER_RATE)
    pcm = np.round(np.clip(np.asarray(mono), -1.0, 1.0) * 32767)
    recogniser.start_utt()
    recogniser.process_raw(pcm.astype(np.int16).tobytes(), full_utt=True)
    recogniser.end_utt()
    hypothesis = recogniser.hyp()
    return hypothesis.hypstr if hypothesis is not None else ""


def _extra(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as err:
        raise MissingExtraError(f"expected the {name} package ({err}); to fix: {ASR_HINT}") from err
