"""Learning curves: does the model say what it reads, and how soon?

One `xtts-train fit` keeps a checkpoint every `every` steps; `xtts-train evaluate` then
scores each on held-out sentences, free-running: pairing score, DTW distance, duration
ratio and alignment, against steps and against the wall minutes of training on this
machine (time to first step, compile included, plus the measured step times). Given an
existing run instead (`LearningBenchConfig.run`), it scores that run's kept checkpoints
where they are and trains nothing.

In voices mode (`LearningBenchConfig.voices`) the held-out corpus holds voices the run never
trained on: each checkpoint speaks every sentence with a clip of its own speaker
(`evaluate --reference-from same-speaker`, which gives the pairing and the other scores
too) and with a clip of the next speaker (`other-speaker`), and the speaker measure fitted
on that corpus's recordings (`xtts_bench.speakers`) says whose voice each synthesis is.

A scale for the pairing score: the held-out ground truth blurred by a Gaussian of sigma
frames and sigma mel bins, scored as a synthesis would be (`blurred_truth_pairing`). A
model whose pairing is p is, by this measure, as specific to its text as the truth
blurred to where that scale crosses p.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from scipy.ndimage import gaussian_filter

import xtts_data as xd
from xtts_bench import speakers
from xtts_bench.long_form import format_long_form, score_long_form
from xtts_bench.settings import LearningBenchConfig
from xtts_train import (
    XttsTrainError,
    dtw_distances,
    evaluate,
    fit,
    kept_steps,
    load_run,
    load_stack_config,
    pairing_scores,
)

__all__ = ["blurred_truth_pairing", "format_learning_table", "run_learning_benchmark"]

BLUR_SIGMAS = (1, 2, 4, 8)  # frames and mel bins


def run_learning_benchmark(config: LearningBenchConfig, *, progress: bool = True) -> dict:
    """Train (or take `config.run`), score every `every`th checkpoint, write `curve.json`
    and `curve.png` into `out`.

    Raises:
        XttsTrainError: an existing run without a finished `summary.json` or without a
            checkpoint the curve scores (checked before any is scored).
    """
    config.out.mkdir(parents=True, exist_ok=True)  # before the scoring, not after it
    if config.run is None:
        run = config.out / "run"
        settings = [*config.overrides, f"train.steps={config.steps}",
                    f"train.checkpoint_every={config.every}",
                    f"train.keep_checkpoints={config.steps // config.every + 1}"]  # fmt: skip
        summary = fit(load_stack_config(None, settings), config.data, run, progress=progress)
    else:
        run, summary = config.run, _scorable_run(config)
    logged = _training_minutes(run, summary)
    vectors = speakers.read_voices(config.held_out) if config.voices else None
    points = []
    for step in range(config.every, config.steps + 1, config.every):
        minutes = _minutes_at(logged, step)
        if vectors is None:
            report = evaluate(run, config.held_out, split=config.split, n=config.n, step=step)
            points.append({"step": step, "minutes": minutes, **report.summary})
        else:
            report, voice = _voices(config, run, step, vectors)
            points.append({"step": step, "minutes": minutes, **report.summary, **voice})
    stack, _, tokenizer = load_run(run)
    truth = xd.read_utterances(config.held_out, stack.data, config.split, audio=stack.audio,
                               tokenizer=tokenizer, limit=config.n)  # fmt: skip
    result = {
        "settings": {
            **{k: str(v) for k, v in dataclasses.asdict(config).items()},
            "overrides": list(config.overrides),
        },
        "time_to_first_step_s": summary["time_to_first_step_s"],
        "step_ms_median": summary["step_ms_median"],
        "points": points,
        "blurred_truth_pairing": blurred_truth_pairing([u.mel for u in truth]),
    }
    if config.long_form:
        result["long_form"] = score_long_form(run, config.long_form, n=config.n,
                                              step=config.steps, progress=progress)  # fmt: skip
    (config.out / "curve.json").write_text(json.dumps(result, indent=1))
    plot_curve(points, config.out / "curve.png", result["blurred_truth_pairing"])
    return result


def _scorable_run(config: LearningBenchConfig) -> dict:
    """`config.run`'s `summary.json`, once every checkpoint the curve scores is known kept."""
    run, wanted = config.run, range(config.every, config.steps + 1, config.every)
    if not (run / "summary.json").is_file():
        raise XttsTrainError(f"Expected a run that has stopped (its summary.json written), "
                             f"received: {run}")  # fmt: skip
    kept = kept_steps(run)
    missing = [step for step in wanted if step not in kept]
    if missing:
        raise XttsTrainError(f"Expected {run} to keep a checkpoint at every {config.every} "
                             f"steps up to {config.steps}, received: steps {missing} missing "
                             f"(kept: {kept}); choose --every and --steps among them")  # fmt: skip
    return json.loads((run / "summary.json").read_text())


def _minutes_at(logged: dict[int, float], step: int) -> float:
    """Wall minutes at `step`, interpolated between the logged steps around it."""
    steps = sorted(logged)
    return float(np.interp(step, steps, [logged[s] for s in steps]))


def _voices(config: LearningBenchConfig, run: Path, step: int, vectors) -> tuple[Any, dict]:
    """Checkpoint `step` speaking the held-out voices with their own clips and with the
    next speaker's: the own-clip `evaluate` report, and the speaker measure's figures."""
    figures, reports = {}, {}
    for reference in ("same-speaker", "other-speaker"):
        out = config.out / "voices" / f"{step}-{reference}"
        report = evaluate(run, config.held_out, split="all", n=config.n, step=step, out=out,
                          reference_from=reference, vocoder=config.vocoder)  # fmt: skip
        scored = speakers.score_syntheses(config.held_out, report.to_dict(), out,
                                          vectors=vectors)  # fmt: skip
        figures[reference], reports[reference] = scored, report
    same, other = figures["same-speaker"], figures["other-speaker"]
    return reports["same-speaker"], {
        "voice_top1": same["top1"], "voice_follows": other["top1"],
        "voice_likeness": same["similarity"] / same["similarity_truth"],
        "voice_truth_top1": same["truth"]["top1"], "voice_vocoded_top1": same["vocoded_top1"],
        "voice_vocoded_likeness": (None if same["vocoded_similarity"] is None else
                                   same["vocoded_similarity"] / same["similarity_truth"]),
        "voice_chance": same["truth"]["chance"],
    }  # fmt: skip


def blurred_truth_pairing(mels: list[np.ndarray], sigmas=BLUR_SIGMAS) -> dict[str, float]:
    """Mean pairing score of each ground-truth mel blurred (Gaussian, `sigma` frames and
    `sigma` mel bins) against all the unblurred ones, per sigma: 0 for the truth itself,
    rising towards 1 as the blur erases what tells sentences apart."""
    scale = {}
    for sigma in sigmas:
        blurred = [gaussian_filter(mel, sigma) for mel in mels]
        distances = np.array([dtw_distances(b, mels) for b in blurred])
        scale[str(sigma)] = float(pairing_scores(distances).mean())
    return scale


def _training_minutes(run: Path, summary: dict) -> dict[int, float]:
    """Wall minutes from the process start to each logged step: time to first step, then
    each logged interval's mean step time x its steps."""
    seconds, last, at = summary["time_to_first_step_s"], 0, {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "step_ms" in row:
            seconds += row["step_ms"] / 1000 * (row["step"] - last)
            last = row["step"]
            at[row["step"]] = seconds / 60
    return at


def plot_curve(points: list[dict[str, Any]], path: Path,
               blurred: dict[str, float] | None = None) -> None:  # fmt: skip
    """Pairing, distance, duration ratio and alignment against steps (minutes on top);
    `blurred` (sigma -> pairing of the blurred truth) as dashed lines on the pairing."""
    figure = Figure(figsize=(10, 6))
    axes = figure.subplots(2, 2, sharex=True).ravel()
    steps = [p["step"] for p in points]
    panels = (("pairing_mean", "pairing score (1 = ignores the text)"),
              ("distance_mean", "DTW log-mel distance"),
              ("duration_ratio_median", "duration ratio (median)"),
              ("alignment_mean", "alignment score"))  # fmt: skip
    for ax, (key, title) in zip(axes, panels, strict=True):
        ax.plot(steps, [p[key] for p in points], marker="o")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
    for sigma, pairing in (blurred or {}).items():
        axes[0].axhline(pairing, color="grey", linestyle="--", linewidth=0.8)
        axes[0].annotate(f"truth blurred, σ={sigma}", (steps[0], pairing), fontsize=7,
                         color="grey", va="bottom")  # fmt: skip
    for ax in axes[2:]:
        ax.set_xlabel("training step")
    minutes = [p["minutes"] for p in points]
    top = axes[0].secondary_xaxis(
        "top", functions=(lambda s: np.interp(s, steps, minutes),
                          lambda m: np.interp(m, minutes, steps)),
    )  # fmt: skip
    top.set_xlabel("wall minutes on this machine", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def format_learning_table(result: dict) -> str:
    """One row per scored checkpoint."""
    voices = "voice_top1" in result["points"][0]
    head = (f"{'step':>6}{'minutes':>9}{'pairing':>9}{'distance':>10}{'ratio':>7}"
            f"{'align':>7}{'stop':>6}")  # fmt: skip
    if voices:
        head += f"{'voice':>7}{'follows':>9}{'likeness':>10}"
    rows = []
    for p in result["points"]:
        rows.append(
            f"{p['step']:>6}{p['minutes']:>9.1f}{p['pairing_mean']:>9.2f}"
            f"{p['distance_mean']:>10.2f}{p['duration_ratio_median']:>7.2f}"
            f"{p['alignment_mean']:>7.2f}{p['stopped_share']:>6.0%}"
        )  # fmt: skip
        if voices:
            rows[-1] += (f"{p['voice_top1']:>7.0%}{p['voice_follows']:>9.0%}"
                         f"{p['voice_likeness']:>10.2f}")  # fmt: skip
    if voices:
        p = result["points"][0]
        vocoded, alike = p["voice_vocoded_top1"], p.get("voice_vocoded_likeness")
        rows.append(f"voice: identified as the own clip's voice; follows: as the other "
                    f"speaker's clip's; likeness: similarity to the clip / two recordings' "
                    f"(recordings {p['voice_truth_top1']:.0%}, through the same vocoder "
                    f"{'-' if vocoded is None else f'{vocoded:.0%}'}, chance "
                    f"{p['voice_chance']:.0%}; a recording's likeness through the same "
                    f"vocoder {'-' if alike is None else f'{alike:.2f}'})")  # fmt: skip
    blurred = result.get("blurred_truth_pairing")
    if blurred:
        scale = ", ".join(f"σ={sigma} {pairing:.2f}" for sigma, pairing in blurred.items())
        rows.append(f"pairing of the held-out truth blurred by σ frames and mel bins: {scale}")
    if "long_form" in result:
        rows += ["", f"long text, step {result['points'][-1]['step']}:",
                 format_long_form(result["long_form"])]  # fmt: skip
    return "\n".join([head, *rows])
