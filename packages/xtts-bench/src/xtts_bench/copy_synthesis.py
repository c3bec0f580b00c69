"""`xtts-bench vocoder`: a vocoder scored as the field scores one, by copy synthesis of
recordings it never trained on, beside Griffin-Lim on the same files.

`xtts-train vocode` writes, for each held-out recording, `<id>.recording.wav` (the
recording as the features saw it), `<id>.wav` (its own mel through the vocoder) and
`<id>.gl.wav` (the same mel through Griffin-Lim). Each re-synthesis is scored against the
recording:
- PESQ, wide band (ITU-T P.862.2, the `pesq` package): both signals resampled to 16 kHz
  with xtts-audio's resampler; 1 to about 4.6, higher is better;
- STOI (`pystoi`), at the recording's rate (it resamples to 10 kHz itself); 0 to 1;
- the log-mel distance `vocode` prints.

With the `asr` extra, pocketsphinx transcribes all three (`xtts_bench.intelligibility`:
a unigram over the held-out sentences' words) and each word error rate is reported with
its ratio to the recordings' own.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import xtts_audio as xa
from xtts_bench.errors import import_extra
from xtts_bench.intelligibility import (
    ASR_HINT,
    check_corpus,
    corpus_references,
    make_recogniser,
    transcribe,
)
from xtts_train import vocode

__all__ = ["QUALITY_HINT", "format_vocoder_table", "quality_scores", "run_vocoder_benchmark"]

QUALITY_HINT = (
    'pip install "xtts-bench[quality]" (pesq, which builds with a C compiler, and pystoi)'
)
PESQ_RATE = 16000  # wide-band PESQ is defined at 16 kHz
_SUFFIXES = {"recording": ".recording.wav", "vocoder": ".wav", "griffin_lim": ".gl.wav"}


def quality_scores(recording: np.ndarray, resynthesis: np.ndarray, *,
                   sample_rate: int) -> dict[str, float]:  # fmt: skip
    """Wide-band PESQ and STOI of a re-synthesis against its recording.

    Args:
        recording, resynthesis: float32 [samples] at `sample_rate`, one timing (copy
            synthesis keeps the recording's); the longer is cut to the shorter.
        sample_rate: their rate in Hz.

    Raises:
        MissingExtraError: the `quality` extra is not installed.
    """
    pesq = import_extra("pesq", hint=QUALITY_HINT).pesq
    stoi = import_extra("pystoi", hint=QUALITY_HINT).stoi
    n = min(len(recording), len(resynthesis))
    pair = np.stack([recording[:n], resynthesis[:n]]).astype(np.float32)  # (2, n)
    wide = pair
    if sample_rate != PESQ_RATE:
        wide = np.asarray(xa.resample(pair, orig_sr=sample_rate, target_sr=PESQ_RATE))
    wide, pair = wide.astype(np.float64), pair.astype(np.float64)
    return {"pesq": float(pesq(PESQ_RATE, wide[0], wide[1], "wb")),
            "stoi": float(stoi(pair[0], pair[1], sample_rate))}  # fmt: skip


def run_vocoder_benchmark(vocoder: str | Path, held_out: str | Path, *, n: int | None = None,
                          step: int | None = None, out: str | Path | None = None,
                          griffin_lim_iters: int = 60, wer: bool = True,
                          progress: bool = True) -> dict[str, Any]:  # fmt: skip
    """Copy-synthesise `n` recordings of the corpus `held_out` with the vocoder run and
    Griffin-Lim (`xtts-train vocode`), and score them (see the module docstring).

    Args:
        vocoder: a vocoder run.
        held_out: a corpus the vocoder never trained on (its words are the WER's
            reference); without `wer`, a feature cache with waveforms will do: an
            `xtts-train gta` cache gives ground-truth-aligned copy synthesis (the acoustic
            model's teacher-forced frames through the vocoder, against the recordings).
        n: the first `n` recordings by id (None: all).
        step: the vocoder's checkpoint (None: the last).
        out: keep the WAV files here (None: a temporary folder).
        griffin_lim_iters: iterations of the Griffin-Lim baseline.
        wer: transcribe with pocketsphinx (the `asr` extra).
        progress: progress bars.

    Raises:
        SettingsError: `held_out` is a feature cache and `wer` is on.
        MissingExtraError: the `quality` extra (or, with `wer`, the `asr` extra) is missing.
        XttsTrainError, XttsDataError: what `xtts-train vocode` rejects.
    """
    held_out = Path(held_out)
    if wer:  # the recogniser's reference is the corpus's words
        check_corpus(held_out)
    needed = [("pesq", QUALITY_HINT), ("pystoi", QUALITY_HINT)]
    needed += [("pocketsphinx", ASR_HINT), ("jiwer", ASR_HINT)] if wer else []
    for name, hint in needed:
        import_extra(name, hint=hint)  # before any work: the first thing to fix
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(out) if out is not None else Path(scratch)
        report = vocode(vocoder, held_out, folder, split="all", n=n, step=step,
                        griffin_lim_iters=griffin_lim_iters, progress=progress)  # fmt: skip
        rows = [_score(u, folder) for u in report.utterances]
        ids = [u["id"] for u in report.utterances]
        words = _word_error_rates(held_out, ids, folder, Path(scratch)) if wer else None
    return _result(report, rows, words)


def _score(utterance: dict[str, Any], folder: Path) -> dict[str, Any]:
    """PESQ and STOI of one recording's two re-syntheses, with vocode's log-mel distances."""
    i = utterance["id"]
    recording, rate = _read(folder / f"{i}{_SUFFIXES['recording']}")
    row = {"id": i, "seconds": utterance["seconds"],
           "log_mel": {k: utterance[k] for k in ("vocoder", "griffin_lim")}}  # fmt: skip
    for kind in ("vocoder", "griffin_lim"):
        wave, _ = _read(folder / f"{i}{_SUFFIXES[kind]}")
        row[kind] = quality_scores(recording, wave, sample_rate=rate)
    return row


def _result(report, rows: list[dict], words: dict | None) -> dict[str, Any]:
    means = {}
    for kind in ("vocoder", "griffin_lim"):
        means[kind] = {m: float(np.mean([r[kind][m] for r in rows])) for m in ("pesq", "stoi")}
        means[kind]["log_mel"] = float(np.mean([r["log_mel"][kind] for r in rows]))
    return {"vocoder_run": str(report.run), "held_out": str(report.data), "step": report.step,
            "griffin_lim_iters": report.griffin_lim_iters, "recordings": len(rows),
            "realtime": report.realtime, "means": means, "wer": words,
            "utterances": rows}  # fmt: skip


def _word_error_rates(held_out: Path, ids: list[str], folder: Path,
                      scratch: Path) -> dict[str, Any]:  # fmt: skip
    jiwer = import_extra("jiwer", hint=ASR_HINT)
    references = corpus_references(held_out, ids)
    recogniser = make_recogniser(references, scratch)
    heard = {kind: [transcribe(recogniser, folder / f"{i}{suffix}") for i in ids]
             for kind, suffix in _SUFFIXES.items()}  # fmt: skip
    rates = {kind: float(jiwer.wer(references, words)) for kind, words in heard.items()}
    raw = rates["recording"]
    return {"rates": rates,
            "ratio_to_recording": {kind: (rate / raw if raw else float("inf"))
                                   for kind, rate in rates.items()},
            "transcripts": {"reference": references, **heard}}  # fmt: skip


def _read(path: Path) -> tuple[np.ndarray, int]:
    """float32 [samples] (mono) and the rate of a WAV file."""
    audio, rate = xa.load_wav(str(path))
    return np.asarray(xa.to_mono(audio), np.float32), int(rate)


def format_vocoder_table(result: dict[str, Any]) -> str:
    """PESQ, STOI, log-mel distance and WER of the vocoder and Griffin-Lim (and the
    recordings' own WER)."""
    m, words = result["means"], result["wer"]
    lines = [f"{'':<22}{'PESQ (wb)':>10}{'STOI':>8}{'log-mel':>9}{'WER':>7}{'x rec.':>8}"]
    names = {"recording": "recordings", "vocoder": "vocoder",
             "griffin_lim": f"Griffin-Lim ({result['griffin_lim_iters']} it.)"}  # fmt: skip
    for kind, name in names.items():
        scores = m.get(kind)
        row = f"{name:<22}"
        row += (f"{scores['pesq']:>10.2f}{scores['stoi']:>8.3f}{scores['log_mel']:>9.3f}"
                if scores else f"{'-':>10}{'-':>8}{'-':>9}")  # fmt: skip
        if words:
            row += f"{words['rates'][kind]:>7.3f}{words['ratio_to_recording'][kind]:>8.2f}"
        lines.append(row)
    lines.append(
        f"{result['recordings']} held-out recordings of {result['held_out']}, vocoder "
        f"{result['vocoder_run']} step {result['step']}, {result['realtime']:.0f}x faster "
        f"than real time"
    )
    return "\n".join(lines)
