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

import json
import logging
import sys
from pathlib import Path

import numpy as np
import torch
from trainer.trainer_utils import get_optimizer, get_scheduler
from TTS.tts.configs.glow_tts_config import GlowTTSConfig
from TTS.tts.models.glow_tts import GlowTTS
from TTS.utils.audio import AudioProcessor

from xtts_bench.peers import loop

__all__ = ["main", "model_config"]

logger = logging.getLogger("xtts_bench.peers.glow")

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
        self.batch_size, self.order = batch_size, loop.RandomOrder(len(self.mels), seed)

    def next(self) -> dict:
        rows = self.order.next(self.batch_size)
        return {
            "text_input": loop.pad([self.tokens[i] for i in rows]),  # (B, T_text) int64
            "text_lengths": torch.tensor([len(self.tokens[i]) for i in rows]),
            "mel_input": loop.pad([self.mels[i] for i in rows]),  # (B, T_mel, 80)
            "mel_lengths": torch.tensor([len(self.mels[i]) for i in rows]),
            "d_vectors": None,
            "speaker_ids": None,
        }


def _update(model, criterion, optimizer, scheduler, batch: dict, config,
            step: int) -> dict[str, float] | None:  # fmt: skip
    """One step as Coqui's Trainer runs it; its loss and learning rate (None for a
    data-dependent init step)."""
    model.run_data_dep_init = step < config.data_dep_init_steps
    _, losses = model.train_step(batch, criterion)
    if not losses:
        return None
    losses["loss"].backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return {"loss": float(losses["loss"].detach()), "lr": scheduler.get_last_lr()[0]}


def train(work: Path) -> None:
    """Train until SIGTERM, checkpointing every `every_minutes` of process wall time
    (`loop.train_until_stopped`)."""
    manifest, config, _ = _read(work)
    settings = manifest["settings"]
    torch.manual_seed(settings["seed"])
    batches = _Batches(work / "features.npz", config.batch_size, settings["seed"])
    model = GlowTTS(config)
    model.train()
    criterion = model.get_criterion()
    optimizer = get_optimizer(config.optimizer, config.optimizer_params, config.lr, model=model)
    scheduler = get_scheduler(config.lr_scheduler, config.lr_scheduler_params, optimizer)

    def update(step: int) -> dict[str, float] | None:
        return _update(model, criterion, optimizer, scheduler, batches.next(), config, step)

    loop.train_until_stopped(work, model, update, settings["every_minutes"], logger)


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
    sets = loop.spoken_sets(manifest, long_form)
    for step in steps:
        model = GlowTTS(config)
        model.load_state_dict(loop.weights(work, step))
        model.eval()
        model.store_inverse()
        for u, path in loop.spoken(work, sets, f"step-{step}"):
            tokens = torch.tensor([u["tokens"]])  # (1, T_text)
            lengths = torch.tensor([len(u["tokens"])])
            outputs = model.inference(tokens, aux_input={"x_lengths": lengths, "d_vectors": None,
                                                         "speaker_ids": None})  # fmt: skip
            mel = outputs["model_outputs"][0].numpy().T  # (80, F), Coqui's normalised scale
            _vocode(ap, mel, path)
    for u, path in loop.spoken(work, sets, "truth") if truth else ():
        _vocode(ap, ap.melspectrogram(ap.load_wav(u["audio"])), path)


def main(argv: list[str] | None = None) -> int:
    """`prepare`, `train` or `synthesize` in `--work`; returns the exit code."""
    return loop.main(argv, "glow", prepare, train, synthesize)


if __name__ == "__main__":
    sys.exit(main())
