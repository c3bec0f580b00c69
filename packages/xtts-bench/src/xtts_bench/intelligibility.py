"""Intelligibility: an offline recogniser's word error rate on free-running synthesis.

`xtts-train evaluate --out` writes each held-out sentence twice: `<id>.wav`, synthesised
free-running, and `<id>.truth.wav`, its ground-truth mel through the same Griffin-Lim.
xtts-train's recogniser (`xtts_train.evaluation.words`: pocketsphinx with a unigram over
the held-out sentences' words, jiwer; the `asr` extra) transcribes both, so the ratio
compares the audio only.

Chance level: the ground-truth audio scored against the other sentences' texts, i.e. the
best a model that ignores its text could do.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import xtts_data as xd
from xtts_bench.errors import SettingsError, import_extra
from xtts_train import (
    RECOGNISER_RATE,
    evaluate,
    make_recogniser,
    reference_words,
    transcribe,
    word_error_rate,
)

__all__ = [
    "RECOGNISER_RATE",
    "check_corpus",
    "corpus_references",
    "format_wer_table",
    "make_recogniser",
    "reference_words",
    "run_wer_benchmark",
    "transcribe",
    "word_error_rate",
    "word_error_rates",
]

ASR_HINT = 'pip install "xtts-bench[asr]" (pocketsphinx and jiwer)'


def word_error_rates(references: list[str], synthesis: list[str],
                     truth: list[str]) -> dict[str, float]:  # fmt: skip
    """Corpus WER of each transcript set, their ratio, and chance (truth vs the texts
    shifted by one: right voice, wrong words)."""
    if len(references) < 2:
        raise SettingsError(f"expected at least 2 sentences, received: {len(references)}")
    wer_synthesis = word_error_rate(references, synthesis)
    wer_truth = word_error_rate(references, truth)
    return {
        "wer_synthesis": wer_synthesis,
        "wer_truth": wer_truth,
        "ratio": wer_synthesis / wer_truth if wer_truth else math.inf,
        "wer_chance": word_error_rate(references[1:] + references[:1], truth),
    }


def run_wer_benchmark(run: str | Path, held_out: str | Path, *, n: int | None = None,
                      step: int | None = None, out: str | Path | None = None,
                      progress: bool = True,
                      vocoder: str | Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Synthesise `n` sentences of the corpus `held_out` with `run`, transcribe synthesis
    and ground truth, and return the word error rates (see the module docstring). With
    `vocoder` (a vocoder run), both go through it instead of Griffin-Lim.

    Raises:
        SettingsError: `held_out` is not a corpus (a cache keeps tokens, not words).
        MissingExtraError: the `asr` extra is not installed.
        XttsTrainError: what `xtts-train evaluate` rejects.
    """
    held_out = Path(held_out)
    check_corpus(held_out)
    import_extra("pocketsphinx", hint=ASR_HINT)  # before any synthesis: the first thing to fix
    with tempfile.TemporaryDirectory() as scratch:
        audio_dir = Path(out) if out is not None else Path(scratch)
        report = evaluate(run, held_out, split="all", n=n, out=audio_dir, step=step,
                          progress=progress, vocoder=vocoder)  # fmt: skip
        ids = [u["id"] for u in report.utterances]
        references = corpus_references(held_out, ids)
        recogniser = make_recogniser(references, Path(scratch))
        synthesis = [transcribe(recogniser, audio_dir / f"{i}.wav") for i in ids]
        truth = [transcribe(recogniser, audio_dir / f"{i}.truth.wav") for i in ids]
    return {
        "run": str(run),
        "held_out": str(held_out),
        "vocoder": None if vocoder is None else str(vocoder),
        "step": report.step,
        "sentences": len(ids),
        **word_error_rates(references, synthesis, truth),
        "pairing_mean": report.summary["pairing_mean"],
        "utterances": [
            {"id": i, "reference": r, "synthesis": s, "truth": t}
            for i, r, s, t in zip(ids, references, synthesis, truth, strict=True)
        ],
    }


def format_wer_table(result: dict[str, Any]) -> str:
    """Each sentence's transcripts, then the word error rates."""
    rows = []
    for u in result["utterances"]:
        rows += [f"{u['id']}", f"  read:        {u['reference']}",
                 f"  synthesis:   {u['synthesis']}", f"  truth:       {u['truth']}"]  # fmt: skip
    through = "Griffin-Lim" if result["vocoder"] is None else f"vocoder {result['vocoder']}"
    rows.append(
        f"{result['sentences']} sentences, step {result['step']}: WER synthesis "
        f"{result['wer_synthesis']:.2f}, ground truth through the same {through} "
        f"{result['wer_truth']:.2f} (ratio {result['ratio']:.2f}), chance "
        f"{result['wer_chance']:.2f}; pairing {result['pairing_mean']:.2f}"
    )
    return "\n".join(rows)


def corpus_references(held_out: Path, ids: list[str]) -> list[str]:
    """The words read in each of `ids` of the corpus `held_out` (`reference_words`)."""
    texts = {row.id: row.text for row in xd.read_corpus(held_out).rows}
    return [reference_words(texts[i]) for i in ids]


def check_corpus(held_out: Path) -> None:
    """Raises SettingsError unless `held_out` is a corpus (a cache keeps no words)."""
    if xd.FeatureCache.is_cache(held_out):
        raise SettingsError(
            f"expected --held-out to be a corpus (metadata.csv or a filelist: the "
            f"recogniser needs the sentences' words), received the feature cache {held_out}"
        )
