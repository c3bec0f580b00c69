"""Long text: does a run say all of it? Held-out items of several sentences (and sentences
longer than the training clips), scored by how many sentences they hold, with the run's
sentence splitting and without it.

A corpus of long items is a demo corpus of longer targets, e.g. 24 items of 7-13 s
(`xtts-data demo-corpus long24 --engine espeak --n 24 --seed 2 --min-seconds 7
--max-seconds 13`): its sentences are drawn like the training corpus's, none reused (its
own seed). Each item is decoded free-running by `xtts-train evaluate` (`--split all`),
twice: as the run decodes by default (`decode.split_symbols`: a text longer than that
is spoken as pieces) and with splitting off (`decode.split_symbols=0`: the model
alone). The rows are grouped by the number of sentences in their text
(`xtts_data.sentences.sentences`), and each group reports its share of duration ratios
within 0.85-1.15 (the issue's band), the median ratio, the mean alignment score and
pairing, the share ended by the stop token, and the offline recogniser's word error rate
on the syntheses beside that on the recordings' own mels through the same Griffin-Lim
(`xtts_bench.intelligibility`: pocketsphinx with a unigram over the corpus's words), with
the words its alignment against the read text finds skipped and repeated and the share of
items with neither (`slips`; the recordings' beside them: the recogniser's own floor).

`xtts-bench peers --long-form` scores both systems' WAVs of the same items through its
one scorer (`scored_rows`: duration ratio, pairing and identification from each WAV's
features), so a row from `evaluate` and one from Glow-TTS are grouped alike; a system
without attention or stop token has no `alignment_mean` or `stopped_share`.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import xtts_data as xd
from xtts_audio import MelConfig
from xtts_bench.errors import import_extra
from xtts_bench.intelligibility import (
    ASR_HINT,
    check_corpus,
    corpus_references,
    make_recogniser,
    transcribe,
)
from xtts_bench.peers.scoring import score_mels, wav_mels
from xtts_data.sentences import sentences
from xtts_train import evaluate

__all__ = [
    "BAND",
    "MODES",
    "format_long_form",
    "group_rows",
    "hear",
    "score_long_form",
    "scored_rows",
    "slips",
]

BAND = (0.85, 1.15)  # a duration ratio within it: said all of it, at about the right pace
MODES = {"split": (), "whole": ("decode.split_symbols=0",)}


def score_long_form(run: Path, corpora: Sequence[Path], *, n: int, step: int | None = None,
                    progress: bool = False) -> dict[str, Any]:  # fmt: skip
    """Each corpus of long items scored at checkpoint `step` (None: the last), split and
    whole (`MODES`): `{corpus: {mode: {"groups": group_rows(...), "summary": ...}}}`.

    Raises:
        SettingsError: a corpus is a feature cache (the recogniser needs its words).
        MissingExtraError: the `asr` extra is not installed (checked before decoding).
    """
    for corpus in corpora:
        check_corpus(Path(corpus))
    import_extra("pocketsphinx", hint=ASR_HINT)
    result: dict[str, Any] = {}
    for corpus in corpora:
        result[str(corpus)] = {}
        for mode, overrides in MODES.items():
            with tempfile.TemporaryDirectory(prefix="xtts-long-form-") as scratch:
                report = evaluate(run, corpus, split="all", n=n, step=step, out=scratch,
                                  progress=progress, overrides=list(overrides))  # fmt: skip
                heard = _heard(Path(corpus), report.utterances, Path(scratch))
            result[str(corpus)][mode] = {"groups": group_rows(report.utterances, heard),
                                         "summary": report.summary}  # fmt: skip
    return result


def _heard(corpus: Path, rows: Sequence[dict[str, Any]],
           audio: Path) -> dict[str, tuple[str, str, str]]:  # fmt: skip
    """`hear` of `evaluate`'s WAVs in `audio` (`<id>.wav`, `<id>.truth.wav`)."""
    ids = [row["id"] for row in rows]
    return hear(corpus, ids, [audio / f"{i}.wav" for i in ids],
                [audio / f"{i}.truth.wav" for i in ids], audio)  # fmt: skip


def hear(corpus: Path, ids: Sequence[str], syntheses: Sequence[Path],
         recordings: Sequence[Path], scratch: Path) -> dict[str, tuple[str, str, str]]:  # fmt: skip
    """Per id: (the words read in `corpus`, the recogniser's of its synthesis, of its
    recording through the same vocoder); the recogniser's unigram file goes to `scratch`."""
    references = corpus_references(corpus, list(ids))
    recogniser = make_recogniser(references, scratch)
    return {i: (r, transcribe(recogniser, s), transcribe(recogniser, t))
            for i, r, s, t in zip(ids, references, syntheses, recordings, strict=True)}  # fmt: skip


def scored_rows(corpus: Path, ids: Sequence[str], wavs: Sequence[Path],
                truth: Sequence[np.ndarray], audio: MelConfig, *,
                trim_top_db: float | None) -> list[dict[str, Any]]:  # fmt: skip
    """One row per item, from its WAV through `xtts-bench peers`' scorer: `id`, `text`
    (the corpus's), `duration_ratio` (its features' frames over its recording's),
    `pairing` and `distance` against the items' recordings `truth` (`score_mels`), and
    `identified` (its nearest recording is its own)."""
    texts = {row.id: row.text for row in xd.read_corpus(corpus).rows}
    mels = wav_mels(wavs, audio, trim_top_db=trim_top_db)
    scores = score_mels(mels, truth)
    return [{"id": i, "text": texts[i], "duration_ratio": len(mel) / len(true),
             "pairing": scores["pairing"][k], "distance": scores["distance"][k],
             "identified": scores["nearest"][k] == k}
            for k, (i, mel, true) in enumerate(zip(ids, mels, truth, strict=True))]  # fmt: skip


def group_rows(rows: Sequence[dict[str, Any]],
               heard: dict[str, tuple[str, str, str]]) -> dict[str, dict[str, float]]:  # fmt: skip
    """Rows (`evaluate`'s, or `scored_rows`') grouped by the sentences in their text ("1",
    "2", ..., and "all"): n, `in_band` (share of duration ratios within `BAND`),
    `ratio_median` (and min, max), `pairing_mean`, `pieces_mean`, and `wer`, `wer_truth`
    of the group's transcripts (`heard`: per id, the words read and the recogniser's of
    the synthesis and of the recording), `skipped`, `repeated` and `clean_share` of the
    syntheses' transcripts and `skipped_truth`, `repeated_truth`, `clean_share_truth` of
    the recordings' (`slips`); with `evaluate`'s rows `alignment_mean` and
    `stopped_share`, with `scored_rows`' `top1`."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(len(sentences(row["text"]))), []).append(row)
    groups = dict(sorted(groups.items(), key=lambda item: int(item[0])))
    groups["all"] = list(rows)
    return {name: _figures(members, heard) for name, members in groups.items()}


def _figures(rows: list[dict[str, Any]], heard: dict[str, tuple[str, str, str]]
             ) -> dict[str, float]:  # fmt: skip
    jiwer = import_extra("jiwer", hint=ASR_HINT)
    read, synthesis, truth = zip(*(heard[row["id"]] for row in rows), strict=True)
    ratios = [row["duration_ratio"] for row in rows]
    figures = {
        "n": len(rows),
        "in_band": sum(BAND[0] <= r <= BAND[1] for r in ratios) / len(rows),
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "pairing_mean": statistics.fmean(row["pairing"] for row in rows),
        "pieces_mean": statistics.fmean(row.get("pieces", 1) for row in rows),
        "wer": float(jiwer.wer(list(read), list(synthesis))),
        "wer_truth": float(jiwer.wer(list(read), list(truth))),
        **slips(read, synthesis),
        **{f"{key}_truth": value for key, value in slips(read, truth).items()},
    }
    if all("alignment" in row for row in rows):  # an attention model's rows (`evaluate`)
        figures["alignment_mean"] = statistics.fmean(row["alignment"] for row in rows)
        figures["stopped_share"] = sum(bool(row["stopped"]) for row in rows) / len(rows)
    if all("identified" in row for row in rows):  # rows of `scored_rows`
        figures["top1"] = sum(bool(row["identified"]) for row in rows) / len(rows)
    return figures


def slips(read: Sequence[str], heard: Sequence[str]) -> dict[str, float]:
    """Words skipped and repeated in transcripts `heard` of texts `read` (one per item), as
    the recogniser's alignment counts them (`jiwer.process_words`): `skipped`, its
    deletions, and `repeated`, its insertions, both summed over the items, and
    `clean_share`, the share of items with neither (the issue's "no word skipped or
    repeated"). Every insertion counts as a repeat: the alignment cannot tell a word said
    twice from another word inserted. Substitutions count in neither."""
    jiwer = import_extra("jiwer", hint=ASR_HINT)
    aligned = jiwer.process_words(list(read), list(heard))
    clean = sum(not any(chunk.type in ("delete", "insert") for chunk in chunks)
                for chunks in aligned.alignments)  # fmt: skip
    return {"skipped": int(aligned.deletions), "repeated": int(aligned.insertions),
            "clean_share": clean / len(aligned.alignments)}  # fmt: skip


def format_long_form(result: dict[str, Any]) -> str:
    """One row per corpus, mode (or system and mode) and sentence count; "-" where a
    system has no such figure."""
    head = (f"{'corpus':<24}{'mode':<13}{'sent.':>6}{'n':>4}{'in band':>9}{'ratio':>7}"
            f"{'range':>13}{'align':>7}{'pair':>6}{'top-1':>7}{'stop':>6}{'pieces':>8}"
            f"{'WER':>6}{'truth':>7}{'skip':>6}{'rep.':>6}{'clean':>7}{'t.skip':>8}{'t.rep':>7}"
            f"{'t.clean':>9}")  # fmt: skip
    rows = [head]
    for corpus, modes in result.items():
        for mode, scored in modes.items():
            for name, g in scored["groups"].items():
                rows.append(
                    f"{Path(corpus).name[:23]:<24}{mode:<13}{name:>6}{g['n']:>4}"
                    f"{g['in_band']:>9.0%}{g['ratio_median']:>7.2f}"
                    f"{g['ratio_min']:>7.2f}-{g['ratio_max']:<5.2f}"
                    f"{_or_dash(g, 'alignment_mean', '7.2f')}{g['pairing_mean']:>6.2f}"
                    f"{_or_dash(g, 'top1', '7.0%')}{_or_dash(g, 'stopped_share', '6.0%')}"
                    f"{g['pieces_mean']:>8.1f}{g['wer']:>6.2f}{g['wer_truth']:>7.2f}"
                    f"{g['skipped']:>6}{g['repeated']:>6}{g['clean_share']:>7.0%}"
                    f"{g['skipped_truth']:>8}{g['repeated_truth']:>7}"
                    f"{g['clean_share_truth']:>9.0%}"
                )  # fmt: skip
    rows.append(f"in band: duration ratio within {BAND[0]}-{BAND[1]}; split: the run's "
                f"decode.split_symbols; whole: decode.split_symbols=0; WER: the "
                f"recogniser's on the syntheses, truth: on the recordings' mels, both through "
                f"Griffin-Lim; skip, rep.: words its alignment finds skipped and repeated "
                f"(every inserted word counts as a repeat), clean: share of items with "
                f"neither; t.: the same on the recordings")  # fmt: skip
    return "\n".join(rows)


def _or_dash(figures: dict[str, float], key: str, spec: str) -> str:
    width = int(spec.split(".")[0])
    return format(figures[key], ">" + spec) if key in figures else "-".rjust(width)
