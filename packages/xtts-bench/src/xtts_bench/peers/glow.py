"""The Glow-TTS side of `xtts-bench peers`: coqui-tts's own model, loss, optimizer and
audio front end, driven by one short loop instead of Coqui's Trainer.

Run as a process of its own in the `peers` environment (it imports torch and coqui-tts;
`xtts_bench.peers.bench` starts it pinned to one core):

```
python -m xtts_bench.peers.glow prepare    --work DIR   # mels of the training corpus
python -m xtts_bench.peers.glow train      --work DIR   # until SIGTERM
python -m xtts_bench.peers.glow synthesize --work DIR --steps 120,480 [--truth] [--long-form]
```

`DIR/manifest.json` (written by the bench) holds the settings and, per utterance, its id,
audio file and token ids: xtts_data's phoneme front end's ids (without `<eos>`), so both
systems read the same phoneme strings, Glow-TTS as characters of its own embedding.

The loop is the Trainer's for this model (`GlowTTSConfig`'s recipe values): the model's
`train_step` with its criterion, data-dependent init of the act-norm layers for the first
`data_dep_init_steps` steps (no update), then backward, gradient clipping at `grad_clip`,
RAdam and the Noam schedule stepped every update. Batches are drawn at random without
replacement each epoch, padded to their longest row; the mels are computed once before
training by `prepare` (Coqui's `AudioProcessor`: 22.05 kHz, 80 mels, trimmed at 45 dB),
as xtts's feature cache is. A checkpoint is written every `every_minutes` of the
process's wall time and on SIGTERM; `summary.json` on exit.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import torch
from trainer.trainer_utils import get_optimizer, get_scheduler
from TTS.tts.configs.glow_tts_config import GlowTTSConfig
from TTS.tts.models.glow_tts import GlowTTS
from TTS.utils.audio import AudioProcessor

__all__ = ["main", "model_config"]

logger = logging.getLogger("xtts_bench.peers.glow")

_LOG_EVERY = 50  # steps
# Coqui's `BaseAudioConfig` defaults, which the recipe keeps, are xtts-audio's `coqui`
# preset (xtts-audio's tests compare the two mels).
_GRIFFIN_LIM_ITERS = 32


def model_config(settings: dict, vocab_size: int) -> GlowTTSConfig:
    """The recipe's `GlowTTSConfig` at the bench's size (`settings` from the manifest)."""
    hidden = settings["hidden"]
    config = GlowTTSConfig(
        num_chars=vocab_size, hidden_channels_enc=hidden, hidden_channels_dec=hidden,
        hidden_channels_dp=hidden, num_flow_blocks_dec=settings["flows"],
        encoder_params={"kernel_size": 3, "dropout_p": 0.1, "num_layers":
                        settings["encoder_layers"], "num_heads": 2,
                        "hidden_channels_ffn": 4 * hidden, "input_length": None},
        batch_size=settings["batch_size"], lr=settings["learning_rate"],
        lr_scheduler_params={"warmup_steps": settings["warmup_steps"]},
    )  # fmt: skip
    config.audio.resample = True  # the recipe's 22.05 kHz from a corpus at any rate
    return config


def _read(work: Path) -> tuple[dict, GlowTTSConfig, AudioProcessor]:
    manifest = json.loads((work / "manifest.json").read_text())
    config = model_config(manifest["settings"], manifest["vocab_size"])
    return manifest, config, AudioProcessor(config.audio)


def prepare(work: Path) -> None:
    """`features.npz`: every training utterance's mel (Coqui's normalised log-mel) and
    token ids, concatenated, with their lengths."""
    manifest, _, ap = _read(work)
    mels = [ap.melspectrogram(ap.load_wav(u["audio"])).T.astype(np.float32)
            for u in manifest["train"]]  # fmt: skip
    tokens = [np.asarray(u["tokens"], np.int64) for u in manifest["train"]]
    np.savez(work / "features.npz", mels=np.concatenate(mels), tokens=np.concatenate(tokens),
             mel_lengths=[len(m) for m in mels],
             token_lengths=[len(t) for t in tokens])  # fmt: skip
    logger.info("prepared %d utterances, %d frames", len(mels), sum(len(m) for m in mels))


class _Batches:
    """Random batches without replacement, each epoch anew, padded to their longest row."""

    def __init__(self, features: Path, batch_size: int, seed: int) -> None:
        data = np.load(features)
        self.mels = np.split(data["mels"], np.cumsum(data["mel_lengths"])[:-1])
        self.tokens = np.split(data["tokens"], np.cumsum(data["token_lengths"])[:-1])
        self.batch_size, self.rng = batch_size, np.random.default_rng(seed)
        self.order: list[int] = []

    def next(self) -> dict:
        if len(self.order) < self.batch_size:
            self.order = list(self.rng.permutation(len(self.mels)))
        rows, self.order = self.order[: self.batch_size], self.order[self.batch_size :]
        return {
            "text_input": _pad([self.tokens[i] for i in rows]),  # (B, T_text) int64
            "text_lengths": torch.tensor([len(self.tokens[i]) for i in rows]),
            "mel_input": _pad([self.mels[i] for i in rows]),  # (B, T_mel, 80)
            "mel_lengths": torch.tensor([len(self.mels[i]) for i in rows]),
            "d_vectors": None,
            "speaker_ids": None,
        }


def _pad(rows: list[np.ndarray]) -> torch.Tensor:
    out = np.zeros((len(rows), max(len(r) for r in rows), *rows[0].shape[1:]), rows[0].dtype)
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


def _save(model: GlowTTS, work: Path, step: int) -> None:
    folder = work / "checkpoints"
    folder.mkdir(exist_ok=True)
    partial = folder / f".step-{step}.pt.partial"
    torch.save({"model": model.state_dict(), "step": step}, partial)
    os.replace(partial, folder / f"step-{step}.pt")  # whole or absent: the bench polls


def _update(model, criterion, optimizer, scheduler, batch: dict, config, step: int):
    """One step as Coqui's Trainer runs it; the loss (None for a data-dependent init step)."""
    model.run_data_dep_init = step < config.data_dep_init_steps
    _, losses = model.train_step(batch, criterion)
    if not losses:
        return None
    losses["loss"].backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return float(losses["loss"].detach())


def train(work: Path) -> None:
    """Train until SIGTERM, checkpointing every `every_minutes` of process wall time."""
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    manifest, config, _ = _read(work)
    settings = manifest["settings"]
    torch.manual_seed(settings["seed"])
    started = psutil.Process().create_time()  # wall clock of the process start
    batches = _Batches(work / "features.npz", config.batch_size, settings["seed"])
    model = GlowTTS(config)
    model.train()
    criterion = model.get_criterion()
    optimizer = get_optimizer(config.optimizer, config.optimizer_params, config.lr, model=model)
    scheduler = get_scheduler(config.lr_scheduler, config.lr_scheduler_params, optimizer)
    stop, step, walls, loss, first = _Stop(), 0, [], math.nan, None
    every = settings["every_minutes"] * 60
    next_save = every
    while not stop.requested:
        begin = time.perf_counter()
        value = _update(model, criterion, optimizer, scheduler, batches.next(), config, step)
        loss = loss if value is None else value
        step += 1
        walls.append(time.perf_counter() - begin)
        first = first if first is not None else time.time() - started
        if step % _LOG_EVERY == 0:
            logger.info("step %d loss %.3f lr %.2e", step, loss, scheduler.get_last_lr()[0])
        if time.time() - started >= next_save:
            _save(model, work, step)
            next_save += every
    _save(model, work, step)
    summary = {"steps": step, "time_to_first_step_s": first,
               "step_ms_median": 1000 * statistics.median(walls[1:] or walls),
               "final_loss": loss, "parameters": sum(p.numel() for p in model.parameters()),
               "threads": torch.get_num_threads()}  # fmt: skip
    (work / "summary.json").write_text(json.dumps(summary, indent=1))


def _vocode(ap: AudioProcessor, mel: np.ndarray, path: Path) -> None:
    """`mel` (80, F), Coqui's normalised features, to audio through xtts-audio's
    Griffin-Lim for the `coqui` preset (the same algorithm and iterations as xtts's side:
    `evaluate`'s 32). Coqui's own `inv_melspectrogram` loses far more: the recordings
    themselves, through it, paired at 0.69 against 0.21 through this one (8 sentences)."""
    # Imported here, in `synthesize` only: TensorFlow loaded beside torch in the training
    # process crashed it (SIGSEGV at its first step, 2026-11-25).
    from xtts_audio import MelConfig, denormalize, griffin_lim

    coqui = MelConfig.from_preset("coqui")
    linear = denormalize(mel.T.astype(np.float32), coqui)  # (F, 80) linear mel
    ap.save_wav(griffin_lim(linear, coqui, n_iter=_GRIFFIN_LIM_ITERS).numpy(), path)


def synthesize(work: Path, steps: list[int], truth: bool, long_form: bool = False) -> None:
    """`wavs/step-<step>/<id>.wav` for each held-out sentence (Coqui's inference, then
    `_vocode`); with `truth`, `wavs/truth/<id>.wav`: each recording's mel through the same
    Griffin-Lim. With `long_form`, the items of the manifest's k-th long-form corpus
    instead, into `wavs/long-<k>/step-<step>/` and `wavs/long-<k>/truth/`."""
    manifest, config, ap = _read(work)
    sets = ({f"long-{k}": items for k, items in enumerate(manifest["long_form"])}
            if long_form else {"": manifest["held_out"]})  # fmt: skip
    for step in steps:
        model = GlowTTS(config)
        model.load_state_dict(torch.load(work / "checkpoints" / f"step-{step}.pt")["model"])
        model.eval()
        model.store_inverse()
        for name, items in sets.items():
            out = work / "wavs" / name / f"step-{step}"
            out.mkdir(parents=True, exist_ok=True)
            for u in items:
                tokens = torch.tensor([u["tokens"]])  # (1, T_text)
                lengths = torch.tensor([len(u["tokens"])])
                outputs = model.inference(tokens, aux_input={"x_lengths": lengths,
                                                             "d_vectors": None,
                                                             "speaker_ids": None})  # fmt: skip
                mel = outputs["model_outputs"][0].numpy().T  # (80, F), Coqui's normalised scale
                _vocode(ap, mel, out / f"{u['id']}.wav")
    for name, items in sets.items() if truth else ():
        out = work / "wavs" / name / "truth"
        out.mkdir(parents=True, exist_ok=True)
        for u in items:
            mel = ap.melspectrogram(ap.load_wav(u["audio"]))
            _vocode(ap, mel, out / f"{u['id']}.wav")


def main(argv: list[str] | None = None) -> int:
    """`prepare`, `train` or `synthesize` in `--work`; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m xtts_bench.peers.glow")
    parser.add_argument("command", choices=("prepare", "train", "synthesize"))
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--steps", default="", help="synthesize: comma-separated steps")
    parser.add_argument("--truth", action="store_true", help="synthesize: the recordings too")
    parser.add_argument("--long-form", action="store_true",
                        help="synthesize: the manifest's long-form items, not the held-out "
                        "sentences")  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s glow-tts %(message)s")
    if args.command == "prepare":
        prepare(args.work)
    elif args.command == "train":
        train(args.work)
    else:
        synthesize(args.work, [int(s) for s in args.steps.split(",") if s], args.truth,
                   args.long_form)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
