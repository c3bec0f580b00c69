"""`xtts-train demo`: the whole stack on a CPU in a couple of minutes.

demo corpus (xtts-data) → feature cache → tiny model trained with one compiled step per
batch shape → a synthesized sentence; then a closing summary of what happened.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import xtts_data as xd
from xtts_train.config import load_stack_config
from xtts_train.process import StartupClock, format_startup
from xtts_train.synthesize import synthesize
from xtts_train.trainer import fit
from xtts_train.warmup import cache_use

__all__ = ["DEMO_SETTINGS", "DEMO_TEXT", "run_demo"]

DEMO_TEXT = "Dr. Smith paid $5.50 for a small loaf of bread."

# Short utterances and two buckets: the compiles and steps fit a CPU.
DEMO_SETTINGS = (
    "data.batch_size=8", "data.num_buckets=2", "data.cond_frames=32", "data.val_fraction=0.0",
    "train.warmup_steps=10", "train.learning_rate=0.002", "train.log_every=10",
    "train.checkpoint_every=50",
)  # fmt: skip


def run_demo(workdir: str | Path, *, steps: int = 150, utterances: int = 96) -> str:
    """Run the demo in `workdir` (reusing a corpus or cache already there); returns the
    closing summary."""
    workdir = Path(workdir)
    started, clock = time.perf_counter(), StartupClock()
    stack = load_stack_config(None, [*DEMO_SETTINGS, f"train.steps={steps}"])
    corpus, cache, run = workdir / "corpus", workdir / "cache", workdir / "run"
    print(f"xtts-train demo: working in {workdir.resolve()}", flush=True)
    with clock.part("data"):  # the corpus and cache count as the run's data start-up
        if not (corpus / "metadata.csv").exists():
            xd.write_demo_corpus(corpus, n=utterances, min_seconds=0.4, max_seconds=1.6,
                                 progress=True)  # fmt: skip
        if not (cache / "manifest.json").exists():
            result = xd.prepare(corpus, cache, audio=stack.audio, data=stack.data, progress=True)
            print(xd.format_summary(result), flush=True)
    summary = fit(stack, cache, run, clock=clock)
    speech = synthesize(run, DEMO_TEXT, run / "demo.wav")
    losses = [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines()
              if "loss" in json.loads(line)]  # fmt: skip
    return "\n".join([
        "",
        f"corpus   {corpus}",
        f"cache    {cache}",
        f"run      {run} (metrics.jsonl, summary.json, tensorboard/, checkpoints/)",
        f"training {summary['steps']} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
        f"{summary['retraces_after_warmup']} retraces; step {summary['step_ms_median']:.0f} ms "
        f"median; input-bound {summary['input_bound_fraction']:.1%} of the time",
        f"start-up time to first step {format_startup(summary)}; {cache_use(summary['warm_up'])}",
        f"speech   {speech.wav} ({speech.seconds:.2f} s, "
        f"{'ended by its stop token' if speech.stopped else 'no stop token'}, alignment score "
        f"{speech.alignment:.2f}) and {speech.png} (mel and attention); a few hundred CPU "
        f"steps do not make words yet: --steps more",
        f"total    {time.perf_counter() - started:.0f} s, peak RSS {summary['peak_rss_mb']:.0f} MB",
    ])  # fmt: skip
