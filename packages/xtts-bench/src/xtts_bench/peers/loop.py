"""What the peers' processes (`glow`, `matcha`) share: their command line, random batches,
padding, and the training loop's clock, checkpoints and summary. It imports torch, not
TensorFlow: a training process must not load TensorFlow beside torch (see `glow._vocode`).

```
python -m xtts_bench.peers.<peer> prepare    --work DIR   # its features of the training corpus
python -m xtts_bench.peers.<peer> train      --work DIR   # until SIGTERM
python -m xtts_bench.peers.<peer> synthesize --work DIR --steps 120,480 [--truth] [--long-form]
```
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import psutil
import torch

__all__ = ["RandomOrder", "main", "pad", "spoken", "spoken_sets", "train_until_stopped", "weights"]

_LOG_EVERY = 50  # steps


class RandomOrder:
    """Rows drawn at random without replacement, each epoch anew (a seeded permutation)."""

    def __init__(self, rows: int, seed: int) -> None:
        self.rows, self.rng = rows, np.random.default_rng(seed)
        self.order: list[int] = []

    def next(self, batch_size: int) -> list[int]:
        """The next `batch_size` rows; a new permutation once fewer are left."""
        if len(self.order) < batch_size:
            self.order = list(self.rng.permutation(self.rows))
        rows, self.order = self.order[:batch_size], self.order[batch_size:]
        return rows


def pad(rows: list[np.ndarray], length: int | None = None) -> torch.Tensor:
    """Rows of different lengths (axis 0) as one zero-padded tensor, to `length` (None:
    the longest row's)."""
    length = length or max(len(r) for r in rows)
    out = np.zeros((len(rows), length, *rows[0].shape[1:]), rows[0].dtype)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return torch.from_numpy(out)


class _Stop:
    """Set by SIGTERM or SIGINT: the loop saves a checkpoint and returns."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._set)
        signal.signal(signal.SIGINT, self._set)

    def _set(self, signum, frame) -> None:
        self.requested = True


def _save(model: torch.nn.Module, work: Path, step: int) -> None:
    folder = work / "checkpoints"
    folder.mkdir(exist_ok=True)
    partial = folder / f".step-{step}.pt.partial"
    torch.save({"model": model.state_dict(), "step": step}, partial)
    os.replace(partial, folder / f"step-{step}.pt")  # whole or absent: the bench polls


def train_until_stopped(work: Path, model: torch.nn.Module,
                        update: Callable[[int], dict[str, float] | None], every_minutes: float,
                        logger: logging.Logger) -> None:  # fmt: skip
    """Run `update(step)` (one training step; its losses, `loss` among them, or None for a
    step that updates nothing) until SIGTERM or SIGINT, checkpointing `model` every
    `every_minutes` of the process's wall time and on the signal (`checkpoints/step-N.pt`,
    written whole or not at all); `summary.json` on exit: steps, time to first step,
    median step time, last loss, parameters, threads."""
    started = psutil.Process().create_time()  # wall clock of the process start
    stop, step, walls, loss, first = _Stop(), 0, [], math.nan, None
    every = every_minutes * 60
    next_save = every
    while not stop.requested:
        begin = time.perf_counter()
        losses = update(step)
        loss = loss if losses is None else losses["loss"]
        step += 1
        walls.append(time.perf_counter() - begin)
        first = first if first is not None else time.time() - started
        if losses is not None and (step == 1 or step % _LOG_EVERY == 0):
            logger.info("step %d %s", step, " ".join(f"{k} {v:.3g}" for k, v in losses.items()))
        if time.time() - started >= next_save:
            _save(model, work, step)
            next_save += every
    _save(model, work, step)
    summary = {"steps": step, "time_to_first_step_s": first,
               "step_ms_median": 1000 * statistics.median(walls[1:] or walls),
               "final_loss": loss, "parameters": sum(p.numel() for p in model.parameters()),
               "threads": torch.get_num_threads()}  # fmt: skip
    (work / "summary.json").write_text(json.dumps(summary, indent=1))


def spoken_sets(manifest: dict, long_form: bool) -> dict[str, list[dict]]:
    """What `synthesize` speaks, by its folder under `wavs/`: the held-out sentences
    (`""`), or with `long_form` the items of each long-form corpus (`long-<k>`)."""
    if long_form:
        return {f"long-{k}": items for k, items in enumerate(manifest["long_form"])}
    return {"": manifest["held_out"]}


def spoken(work: Path, sets: dict[str, list[dict]], leaf: str) -> Iterator[tuple[dict, Path]]:
    """Each item of `sets` (`spoken_sets`) and the WAV it is written to,
    `wavs/<set>/<leaf>/<id>.wav` (`leaf`: `step-<step>` or `truth`), folders made."""
    for name, items in sets.items():
        out = work / "wavs" / name / leaf
        out.mkdir(parents=True, exist_ok=True)
        for item in items:
            yield item, out / f"{item['id']}.wav"


def weights(work: Path, step: int) -> dict:
    """The model's state dict saved at `step` (`checkpoints/step-<step>.pt`)."""
    return torch.load(work / "checkpoints" / f"step-{step}.pt")["model"]


def main(argv: list[str] | None, peer: str, prepare: Callable[[Path], None],
         train: Callable[[Path], None],
         synthesize: Callable[[Path, list[int], bool, bool], None]) -> int:  # fmt: skip
    """`prepare`, `train` or `synthesize` in `--work` for the peer module `peer` (its
    name in `xtts_bench.peers`); returns the exit code."""
    parser = argparse.ArgumentParser(prog=f"python -m xtts_bench.peers.{peer}")
    parser.add_argument("command", choices=("prepare", "train", "synthesize"))
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--steps", default="", help="synthesize: comma-separated steps")
    parser.add_argument("--truth", action="store_true", help="synthesize: the recordings too")
    parser.add_argument("--long-form", action="store_true",
                        help="synthesize: the manifest's long-form items, not the held-out "
                        "sentences")  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {peer} %(message)s")
    if args.command == "prepare":
        prepare(args.work)
    elif args.command == "train":
        torch.set_num_threads(1)
        torch.set_num_interop_threads(1)
        train(args.work)
    else:
        synthesize(args.work, [int(s) for s in args.steps.split(",") if s], args.truth,
                   args.long_form)  # fmt: skip
    return 0
