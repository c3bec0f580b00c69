"""How closely a killed and resumed run follows an uninterrupted one, with the default
(non-deterministic) input pipeline, next to how closely two uninterrupted runs follow
each other: the float and ordering noise a resume must stay within.

Reproduce (from the repo root):

    hatch run python benchmarks/resume_noise.py [--steps 60] [--kill-at 20] [--model micro]

Three runs of `xtts-train fit` on the same demo-corpus cache, one after another, each a
new process: A and B uninterrupted to `--steps`; C killed with SIGKILL the moment its
checkpoint `--kill-at` is written (tests/fault_helpers), then the same command again.
Losses are logged every 5 steps; the figures are the largest and the mean relative
difference |a - b| / a over the logged steps after the kill.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

FAULTS = Path(__file__).resolve().parents[1] / "packages/xtts-data/tests/fault_helpers.py"
SETTINGS = ["data.batch_size=4", "data.num_buckets=1", "data.cond_frames=16",
            "data.val_fraction=0.0", "train.warmup_steps=4", "train.learning_rate=0.002",
            "train.log_every=5", "train.checkpoint_every=10", "train.eval_every=0"]  # fmt: skip
MICRO = ["model.d_model=32", "model.heads=2", "model.text_layers=1", "model.decoder_layers=1",
         "model.alignment=content",
         "model.cond_layers=1", "model.cond_latents=2", "model.prenet_dim=32",
         "model.postnet_layers=1", "model.postnet_channels=32", "model.text_convs=1",
         "model.cond_convs=1"]  # fmt: skip


def _fit(cache: Path, workdir: Path, steps: int, settings: list[str], fault: str | None):
    prefix = [str(FAULTS), fault, "--"] if fault else ["-m"]
    sets = [arg for s in settings for arg in ("--set", s)]
    command = [sys.executable, *prefix, "xtts_train.cli", "fit", "--data", str(cache),
               "--workdir", str(workdir), "--quiet", "--steps", str(steps), *sets]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True)


def _losses(workdir: Path) -> dict[int, float]:
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return {entry["step"]: entry["loss"] for entry in map(json.loads, lines)}


def _differences(a: dict[int, float], b: dict[int, float], after: int) -> tuple[float, float]:
    rel = [abs(a[s] - b[s]) / abs(a[s]) for s in sorted(a) if s > after]
    return max(rel), sum(rel) / len(rel)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--kill-at", type=int, default=20, help="a multiple of 10")
    parser.add_argument("--model", choices=("micro", "tiny"), default="micro")
    args = parser.parse_args()
    settings = SETTINGS + (MICRO if args.model == "micro" else [])
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for command in (
            ["xtts-data", "demo-corpus", str(work / "corpus"), "--n", "40", "--min-seconds",
             "0.4", "--max-seconds", "1.0", "--seed", "3"],
            ["xtts-data", "prepare", str(work / "corpus"), "--out", str(work / "cache"),
             "--quiet"],
        ):  # fmt: skip
            subprocess.run(command, check=True, capture_output=True)
        runs = {}
        for name in ("A", "B"):
            done = _fit(work / "cache", work / name, args.steps, settings, None)
            assert done.returncode == 0, done.stderr
            runs[name] = _losses(work / name)
        event = f"after:checkpoint:{args.kill_at // 10}"
        killed = _fit(work / "cache", work / "C", args.steps, settings, event)
        assert killed.returncode == -9, killed.stderr
        done = _fit(work / "cache", work / "C", args.steps, settings, None)
        assert done.returncode == 0, done.stderr
        runs["C"] = _losses(work / "C")
    print(f"{args.model} model, {args.steps} steps, killed at checkpoint {args.kill_at}, "
          "data.deterministic: false")  # fmt: skip
    for label, (x, y) in {"A vs B (two uninterrupted runs)": ("A", "B"),
                          "A vs C (killed and resumed)": ("A", "C")}.items():  # fmt: skip
        worst, mean = _differences(runs[x], runs[y], args.kill_at)
        print(f"{label:34s} max |rel diff| {worst:.2e}, mean {mean:.2e}")
    print("losses after the kill:")
    for step in (s for s in sorted(runs["A"]) if s > args.kill_at):
        print(f"  step {step:4d}  " + "  ".join(f"{n} {runs[n][step]:.6f}" for n in "ABC"))


if __name__ == "__main__":
    main()
