"""End to end: what a listener hears from the whole chain, text → frames → waveform.

`xtts-train evaluate --data CORPUS --split all --reference-from same-speaker --out DIR
--json > REPORT` writes each held-out sentence twice, `DIR/<id>.wav` (free-running, in
the voice of a clip) and `DIR/<id>.truth.wav` (the recording's own mel through the same
vocoder, or Griffin-Lim). Three sets of audio are scored the same way: the syntheses,
those vocoded recordings, and the recordings themselves:

- intelligibility: the word error rate of pocketsphinx (xtts-train's `make_recogniser`: a
  unigram over the sentences' words, the same recogniser for every set);
- quality: DNSMOS P.835 (overall, signal, background) and P.808, a non-intrusive MOS
  predictor whose networks ship in the `speechmos` wheel (the `mos` extra), run on 16 kHz
  audio as trained; it predicts what listeners rated for noisy and processed speech, so
  its figures compare sets here, they are not listening-test MOS;
- voice: `speakers.score_syntheses` (identified as the clip's voice, own and swapped,
  likeness to the clip beside two recordings').

Ratios are to the recordings' own figures (WER) and to two recordings' likeness (voice).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

import xtts_audio
import xtts_data as xd
from xtts_bench import intelligibility, speakers
from xtts_bench.errors import SettingsError, import_extra
from xtts_train import make_recogniser, transcribe, word_error_rate

__all__ = ["MOS_RATE", "format_end_to_end_table", "predicted_mos", "score_end_to_end"]

MOS_RATE = 16000  # DNSMOS's networks take 16 kHz audio
MOS_HINT = 'pip install "xtts-bench[mos]" (speechmos and onnxruntime)'
SETS = ("synthesis", "vocoded", "recorded")


def predicted_mos(audio: np.ndarray, sample_rate: int) -> dict[str, float]:
    """DNSMOS's predictions for one clip.

    Args:
        audio: float32 [samples] in [-1, 1] (clipped there), any rate.
        sample_rate: its rate; resampled to 16 kHz.

    Returns:
        `ovrl`, `sig`, `bak` (P.835: overall, speech signal, background) and `p808`.

    Raises:
        MissingExtraError: the `mos` extra is not installed.
    """
    dnsmos = import_extra("speechmos.dnsmos", hint=MOS_HINT)
    mono = np.asarray(audio, np.float32)
    if int(sample_rate) != MOS_RATE:
        mono = xtts_audio.resample(mono, orig_sr=int(sample_rate), target_sr=MOS_RATE).numpy()
    scores = dnsmos.run(np.clip(mono, -1.0, 1.0), MOS_RATE)
    return {key: float(scores[f"{key}_mos"]) for key in ("ovrl", "sig", "bak", "p808")}


def score_end_to_end(corpus: str | Path, report: Mapping, audio: str | Path, *,
                     encoder: str = "mfcc", progress: bool = True) -> dict[str, Any]:  # fmt: skip
    """Score `report`'s syntheses (evaluate's JSON over `corpus`, audio in `audio`), the
    recordings through the same vocoder and the recordings themselves.

    Returns:
        `sets`: {synthesis, vocoded, recorded: {wer, ovrl, sig, bak, p808}} (vocoded is
        None without `<id>.truth.wav` files); `wer_ratio` (synthesis / recorded);
        `wer_chance` (the recordings against the other sentences' texts); `voice`:
        `score_syntheses`'s figures with `likeness` (similarity ÷ two recordings');
        `pairing_mean` from the report; `sentences`.

    Raises:
        SettingsError: `corpus` is a cache, fewer than 2 rows, or a file is missing.
        MissingExtraError: the `asr` or `mos` extra (or `ge2e` for that encoder).
    """
    corpus, audio = Path(corpus), Path(audio)
    intelligibility.check_corpus(corpus)
    import_extra("speechmos.dnsmos", hint=MOS_HINT)  # the first thing to fix, before any work
    ids = [row["id"] for row in report["utterances"]]
    if len(ids) < 2:
        raise SettingsError(f"expected at least 2 evaluated rows, received: {len(ids)}")
    recorded = {row.id: Path(row.audio) for row in xd.read_corpus(corpus).rows}
    if unknown := [i for i in ids if i not in recorded]:
        raise SettingsError(f"Expected rows of {corpus}, received ids it lacks: {unknown[:5]}")
    paths = {"synthesis": [audio / f"{i}.wav" for i in ids],
             "vocoded": [audio / f"{i}.truth.wav" for i in ids],
             "recorded": [recorded[i] for i in ids]}  # fmt: skip
    if not any(p.is_file() for p in paths["vocoded"]):
        paths["vocoded"] = None
    references = intelligibility.corpus_references(corpus, ids)
    sets, words = {}, {}
    with tempfile.TemporaryDirectory() as scratch:
        recogniser = make_recogniser(references, Path(scratch))
        for name in SETS:
            if paths[name] is None:
                sets[name] = None
                continue
            words[name], mos = _listen(name, paths[name], recogniser, progress=progress)
            means = {key: statistics.mean(m[key] for m in mos) for key in mos[0]}
            sets[name] = {"wer": word_error_rate(references, words[name]), **means}
    voice = speakers.score_syntheses(corpus, report, audio, encoder=encoder)
    voice["likeness"] = voice["similarity"] / voice["similarity_truth"]
    chance = word_error_rate(references[1:] + references[:1], words["recorded"])
    wer_recorded = sets["recorded"]["wer"]
    return {"sentences": len(ids), "encoder": encoder, "sets": sets,
            "wer_ratio": sets["synthesis"]["wer"] / wer_recorded if wer_recorded else None,
            "wer_chance": chance, "voice": voice,
            "pairing_mean": report.get("summary", {}).get("pairing_mean")}  # fmt: skip


def _listen(name: str, paths: list[Path], recogniser, *,
            progress: bool) -> tuple[list[str], list[dict[str, float]]]:  # fmt: skip
    """The recogniser's words and DNSMOS's predictions for each file of one set."""
    words, mos = [], []
    for path in tqdm(paths, desc=name, unit="clip", disable=not progress):
        if not path.is_file():
            raise SettingsError(f"Expected the {name} audio {path}, received none")
        words.append(transcribe(recogniser, path))
        clip, rate = xtts_audio.load_wav(str(path))
        mos.append(predicted_mos(xtts_audio.to_mono(clip).numpy(), int(rate)))
    return words, mos


def format_end_to_end_table(result: dict[str, Any]) -> str:
    """One row per set of audio, then the voice figures."""
    rows = ["| audio | WER | DNSMOS overall | signal | background | P.808 |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for name in SETS:
        s = result["sets"][name]
        if s is not None:
            rows.append(f"| {name} | {s['wer']:.3f} | {s['ovrl']:.2f} | {s['sig']:.2f} | "
                        f"{s['bak']:.2f} | {s['p808']:.2f} |")  # fmt: skip
    v = result["voice"]
    ratio = "n/a" if result["wer_ratio"] is None else f"{result['wer_ratio']:.2f}"
    pairing = result["pairing_mean"]
    rows.append(
        f"{result['sentences']} sentences: WER ratio to the recordings {ratio} (chance "
        f"{result['wer_chance']:.2f}); voice ({result['encoder']}): identified "
        f"{v['top1']:.0%} as the clip's, likeness {v['similarity']:.3f} "
        f"({v['likeness']:.3f}x two recordings'); pairing "
        + ("n/a" if pairing is None else f"{pairing:.2f}")
    )
    return "\n".join(rows)
