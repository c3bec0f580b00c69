"""`xtts-train demo`: the whole stack on a CPU in a few minutes.

demo corpus (xtts-data) → feature cache → tiny model trained with one compiled step per
batch shape → free-running evaluation on sentences it never saw → a synthesized sentence
beside its ground truth; then a closing summary of what happened.

Two engines speak the corpus. `espeak` (the default): English sentences spoken by
espeak-ng (its library from the phonemes extra's wheel), read as phonemes, with the
settings the peer benchmark measured best on a CPU (docs/train/peers.md), trained for
a few minutes; its unseen sentences are also scored by an offline recogniser's word error
rate beside their recordings' (the asr extra). `synth`: a small synthesised language of
short words, 600 steps, faster, and what most tests train on.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tqdm

import xtts_audio as xa
import xtts_data as xd
from xtts_train.compile.process import StartupClock, format_startup
from xtts_train.compile.warmup import cache_use
from xtts_train.config import StackConfig, load_stack_config
from xtts_train.errors import ConfigError
from xtts_train.evaluation.held_out import EvalReport, evaluate
from xtts_train.evaluation.scores import dtw_distance
from xtts_train.evaluation.words import (
    ASR_HINT,
    asr_available,
    make_recogniser,
    reference_words,
    transcribe,
    word_error_rate,
)
from xtts_train.inference.vocoding import check_vocoder
from xtts_train.synthesize import synthesize
from xtts_train.tasks.registry import fit

__all__ = ["DEMO_SETTINGS", "DEMO_TEXT", "ENGINES", "ESPEAK_DEMO_SETTINGS", "run_demo"]

DEMO_TEXT = "Dr. Ray was quiet."  # within the corpus's lengths (0.4–1.6 s), "Dr." read out

# Short utterances and two buckets: the compiles and steps fit a CPU. Silence trimmed
# (the demo corpus pads utterances with silence of random length, which no stop token
# can predict); two frames per decoder step (measured: docs/train/learning.md). No
# evals inside the run: the demo speaks and scores its unseen sentences at the end.
DEMO_SETTINGS = (
    "data.batch_size=8", "data.num_buckets=2", "data.cond_frames=32", "data.val_fraction=0.0",
    "data.trim_top_db=40", "model.reduction_factor=2", "train.warmup_steps=10",
    "train.learning_rate=0.002", "train.log_every=10", "train.checkpoint_every=50",
    "train.eval_every=0",
)  # fmt: skip

# The peer benchmark's xtts settings (docs/train/peers.md: pairing 0.332 against
# Glow-TTS's 0.372 after 45 minutes on one core): phonemes, four frames a decoder step,
# six buckets, cosine from 2e-3 over a 20,000-step schedule that the minutes end first.
ESPEAK_DEMO_SETTINGS = (
    "data.text.phonemes=true", "data.batch_size=16", "data.num_buckets=6",
    "data.cond_frames=64", "data.val_fraction=0.0", "data.trim_top_db=40",
    "model.reduction_factor=4", "train.warmup_steps=50", "train.learning_rate=0.002",
    "train.log_every=20", "train.checkpoint_every=200", "train.eval_every=0",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _Demo:
    """What one engine's demo writes and trains: `corpus`, `write_demo_corpus`'s keywords;
    `utterances` and `held_out`, the corpora's sizes; `steps` and `minutes`, the defaults
    of `run_demo`'s (None: no time budget)."""

    settings: tuple[str, ...]
    corpus: dict[str, Any]
    utterances: int
    held_out: int
    steps: int
    minutes: float | None


_DEMOS = {
    "espeak": _Demo(ESPEAK_DEMO_SETTINGS, dict(engine="espeak", min_seconds=1.0, max_seconds=4.0),
                    utterances=600, held_out=24, steps=20000, minutes=5.0),
    # the demo language's eval sentences are recorded in the run's config.yaml: a longer
    # run on its cache with `--config run/config.yaml --set train.eval_every=N` speaks them
    "synth": _Demo((*DEMO_SETTINGS, "text_to_mel.eval_sentences="
                    + json.dumps(list(xd.DEMO_SENTENCES))),
                   dict(engine="synth", min_seconds=0.4, max_seconds=1.6),
                   utterances=96, held_out=8, steps=600, minutes=None),
}  # fmt: skip
ENGINES = tuple(_DEMOS)


def run_demo(workdir: str | Path, *, engine: str = "espeak", steps: int | None = None,
             minutes: float | None = None, utterances: int | None = None,
             held_out: int | None = None, overrides: Sequence[str] = (),
             vocoder: str | Path | None = None) -> str:  # fmt: skip
    """Run the demo of `engine` (`ENGINES`) in `workdir` (reusing a corpus or cache already
    there); returns the closing summary. `steps` and `minutes` bound the training (None:
    the engine's defaults, 20,000 steps or 5 minutes for espeak, 600 steps for synth);
    `utterances` sizes a new corpus (None: the engine's, 600 or 96), and a corpus or cache
    reused must be of that size; `held_out` likewise sizes the held-out sentences scored
    after training (None: the engine's, 24 or 8; at least 2, which pairing compares).
    `overrides` are `SECTION.KEY=VALUE` settings over the engine's; `vocoder`, a vocoder
    run of the demo's audio settings, speaks instead of Griffin-Lim (both checked before
    anything is built)."""
    if engine not in _DEMOS:
        raise ConfigError(f"Expected --engine to be one of {ENGINES}, received: {engine!r}")
    demo, workdir = _DEMOS[engine], Path(workdir)
    started, clock = time.perf_counter(), StartupClock()
    for key, flag in (("train.steps", "--steps"), ("train.minutes", "--minutes")):
        if any(item.replace(" ", "").startswith(f"{key}=") for item in overrides):
            raise ConfigError(f"the demo's {key} is {flag}, received: --set {key}")
    minutes = demo.minutes if minutes is None and steps is None else minutes
    budget = [f"train.steps={demo.steps if steps is None else steps}"]
    budget += [] if minutes is None else [f"train.minutes={minutes}"]
    stack = load_stack_config(None, [*demo.settings, *overrides, *budget])
    corpus, cache, run = workdir / "corpus", workdir / "cache", workdir / "run"
    held_out_dir = workdir / "held-out"
    if held_out is not None and held_out < 2:
        raise ConfigError(f"Expected --held-out >= 2 (pairing compares sentences), received: "
                          f"--held-out {held_out}")  # fmt: skip
    _check_reused_size(corpus, cache, utterances)
    _check_reused_size(held_out_dir, None, held_out, flag="--held-out")
    if vocoder is not None:  # a misfit is refused before the corpus, cache and training
        check_vocoder(Path(vocoder), run, stack)
    tqdm.tqdm.write(f"xtts-train demo: working in {workdir.resolve()}")  # progress lines
    with clock.part("data"):  # the corpus and cache count as the run's data start-up
        if not (corpus / "metadata.csv").exists():
            size = demo.utterances if utterances is None else utterances
            xd.write_demo_corpus(corpus, n=size, progress=True, **demo.corpus)
        if not xd.FeatureCache.is_cache(cache):
            result = xd.prepare(corpus, cache, audio=stack.audio, data=stack.data, progress=True)
            tqdm.tqdm.write(xd.format_summary(result))
    summary = fit(stack, cache, run, clock=clock)
    if not (held_out_dir / "metadata.csv").exists():
        size = demo.held_out if held_out is None else held_out
        xd.write_demo_corpus(held_out_dir, n=size, seed=1, **demo.corpus)
    report = evaluate(run, held_out_dir, split="all", out=run / "held-out", progress=True,
                      vocoder=vocoder)  # fmt: skip
    text, truth = _demo_sentence(engine, held_out_dir, report, stack)
    speech = synthesize(run, text, run / "demo.wav", truth=truth, vocoder=vocoder)
    distance = dtw_distance(speech.mel, truth)
    losses = [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()
              if "loss" in json.loads(line)]  # fmt: skip
    scores, through = report.summary, "Griffin-Lim" if vocoder is None else f"the vocoder {vocoder}"
    spent = " (its minutes spent)" if summary.get("out_of_minutes") else ""
    return "\n".join([
        "",
        f"corpus   {corpus}",
        f"cache    {cache}",
        f"run      {run} (metrics.jsonl, summary.json, tensorboard/, checkpoints/)",
        f"training {summary['steps']} steps{spent}, loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
        f"{summary['retraces_after_warmup']} retraces; step {summary['step_ms_median']:.0f} ms "
        f"median; input-bound {summary['input_bound_fraction']:.1%} of the time",
        f"start-up time to first step {format_startup(summary)}; {cache_use(summary['warm_up'])}",
        f"held-out {len(report.utterances)} sentences it never saw, spoken free-running: "
        f"median duration ratio {scores['duration_ratio_median']:.2f}, alignment "
        f"{scores['alignment_mean']:.2f}, pairing {scores['pairing_mean']:.2f} (1.0: ignores "
        f"the text), identified as their own sentence {scores['top1']:.0%} (chance "
        f"{1 / len(report.utterances):.0%}), stop token in {scores['stopped_share']:.0%}; "
        f"listen: {run / 'held-out'}",
        *([_words_line(report, held_out_dir, run / "held-out", through)] if engine == "espeak"
          else []),
        f"speech   {speech.wav} ({speech.seconds:.2f} s, "
        f"{'ended by its stop token' if speech.stopped else 'no stop token'}, alignment score "
        f"{speech.alignment:.2f}, DTW distance to the ground truth {distance:.2f}) and "
        f"{speech.png} (its mel and attention, the ground truth's mel); audio by {through}",
        f"total    {time.perf_counter() - started:.0f} s, peak RSS {summary['peak_rss_mb']:.0f} MB",
    ])  # fmt: skip


def _words_line(report: EvalReport, held_out: Path, audio: Path, through: str) -> str:
    """The recogniser's word error rate on the unseen sentences: the syntheses, their
    recordings' mels through the same vocoder or Griffin-Lim, the recordings."""
    if not asr_available():
        return f"words    not scored: the recogniser is not installed ({ASR_HINT})"
    ids = [u["id"] for u in report.utterances]
    rows = {row.id: row for row in xd.read_corpus(held_out).rows}
    references = [reference_words(rows[i].text) for i in ids]
    sets = {"synthesis": [audio / f"{i}.wav" for i in ids],
            "truth": [audio / f"{i}.truth.wav" for i in ids],
            "recorded": [Path(rows[i].audio) for i in ids]}  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        recogniser = make_recogniser(references, Path(scratch))
        rate = {name: word_error_rate(references, [transcribe(recogniser, p) for p in paths])
                for name, paths in sets.items()}  # fmt: skip
    return (
        f"words    word error rate {rate['synthesis']:.2f} (pocketsphinx); the recordings "
        f"{rate['recorded']:.2f}, their mels through {through} {rate['truth']:.2f}"
    )


def _demo_sentence(engine: str, held_out: Path, report: EvalReport,
                   stack: StackConfig) -> tuple[str, np.ndarray]:  # fmt: skip
    """The sentence the demo speaks at the end, and its ground truth's features: synth,
    `DEMO_TEXT` in the demo language; espeak, the first unseen sentence."""
    if engine == "synth":
        return DEMO_TEXT, _ground_truth(DEMO_TEXT, stack)
    first = report.utterances[0]["id"]
    row = next(row for row in xd.read_corpus(held_out).rows if row.id == first)
    wave, rate = xa.load_wav(str(row.audio))
    wave = xa.to_mono(wave)
    if int(rate) != stack.audio.sample_rate:
        wave = xa.resample(wave, orig_sr=int(rate), target_sr=stack.audio.sample_rate)
    return row.text, _features(np.asarray(wave, np.float32), stack)


def _check_reused_size(corpus: Path, cache: Path | None, utterances: int | None, *,
                       flag: str = "--utterances") -> None:  # fmt: skip
    """A corpus (or, without one, a cache) already in the work dir is reused: a size
    (`utterances`, given as `flag`) it was not written with is refused rather than
    dropped."""
    if utterances is None:
        return
    if (corpus / "metadata.csv").exists():
        found = xd.read_corpus(corpus)
        where, size = corpus, len(found.rows) + len(found.skipped)
    elif cache is not None and xd.FeatureCache.is_cache(cache):
        counts = xd.FeatureCache.open(cache).manifest.counts
        where, size = cache, counts.ok + counts.skipped
    else:
        return
    if size != utterances:
        raise ConfigError(
            f"Expected {flag} to be the size of the demo corpus already in {where} "
            f"({size} utterances, reused), received: {flag} {utterances}; leave out "
            f"{flag} to reuse it, or give a new --workdir"
        )


def _ground_truth(text: str, stack: StackConfig) -> np.ndarray:
    """The demo engine speaking `text` (normalised as the model reads it), as features:
    float32 [frames, n_mels], trimmed as the cache is."""
    spoken = xd.normalize_text(text, stack.data.text)
    pcm = xd.speak_demo(spoken, sample_rate=stack.audio.sample_rate)
    return _features(pcm.astype(np.float32) / 32768.0, stack)


def _features(wave: np.ndarray, stack: StackConfig) -> np.ndarray:
    """float32 [frames, n_mels] of a float32 [samples] waveform, trimmed as the cache is."""
    if stack.data.trim_top_db is not None:
        wave = xa.trim_silence(wave, top_db=stack.data.trim_top_db)
    return xa.mel_features(wave, stack.audio).numpy()
