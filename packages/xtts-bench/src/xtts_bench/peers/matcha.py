"""The Matcha-TTS side of `xtts-bench peers`: matcha-tts's own model, loss, optimizer and
mel front end, driven by one short loop instead of its Lightning recipe.

Run as a process of its own where the `matcha` extra is installed (torch and matcha-tts;
it co-installs with `peers`, at numpy<2), as `xtts_bench.peers.glow` is, with the same
commands, manifest and outputs (`xtts-bench peers --peers matcha` runs it):

```
python -m xtts_bench.peers.matcha prepare    --work DIR   # mels of the training corpus
python -m xtts_bench.peers.matcha train      --work DIR   # until SIGTERM
python -m xtts_bench.peers.matcha synthesize --work DIR --steps 120,480 [--truth] [--long-form]
```

`DIR/manifest.json` holds the settings and, per utterance, its id, audio file and token
ids (xtts_data's phoneme ids without `<eos>`), which Matcha reads as its own symbols with
the recipe's blanks between them (`add_blank`: id 0, `<pad>` in xtts as `_` in Matcha).
The settings it reads: `hidden` (the text encoder's channels, its feed-forward 4x),
`encoder_layers`, `decoder_channels` (both levels of the U-Net), `batch_size`,
`learning_rate`, `every_minutes` and `seed`; everything else is the recipe's
(Matcha-TTS 0.0.7.2, configs/model/{matcha,encoder/default,decoder/default,cfm/default}.yaml).

The loop is the recipe's Lightning training step: the model's forward gives `dur_loss`,
`prior_loss` and `diff_loss` (MAS alignment, flow matching on the whole utterance:
`out_size` null), their sum is the loss, gradients are clipped at norm 5 (the trainer's
`gradient_clip_val`) and Adam (lr 1e-4, no weight decay, no schedule) steps. The recipe's
16-bit mixed precision is a GPU setting; on the CPU the loop runs in float32. Batches are
drawn at random without replacement each epoch, padded to their longest row (mels to a
multiple of 4, the U-Net's, as Matcha's collate pads). The mels are computed once by
`prepare` with Matcha's `mel_spectrogram` (22.05 kHz, 80 mels over 0-8000 Hz, n_fft 1024,
hop 256, natural log), normalised by the corpus's mean and standard deviation as
`matcha-data-stats` computes them. A checkpoint is written every `every_minutes` of the
process's wall time and on SIGTERM; `summary.json` on exit.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import librosa
import numpy as np
import torch
from matcha.models.matcha_tts import MatchaTTS
from matcha.utils.audio import mel_spectrogram
from matcha.utils.model import fix_len_compatibility
from matcha.utils.utils import intersperse
from omegaconf import OmegaConf

from xtts_bench.peers import loop

__all__ = ["main", "model_config"]

logger = logging.getLogger("xtts_bench.peers.matcha")

_GRAD_CLIP = 5.0  # configs/trainer/default.yaml: gradient_clip_val
_SAMPLE_RATE = 22050  # configs/data/ljspeech.yaml, as the mel settings below
_MEL = dict(n_fft=1024, num_mels=80, sampling_rate=_SAMPLE_RATE, hop_size=256, win_size=1024,
            fmin=0, fmax=8000, center=False)  # fmt: skip
_BLANK = 0  # `add_blank`'s symbol: Matcha's `_`, xtts's `<pad>`
# Synthesis as Matcha's own CLI and the recipe's validation synthesise.
_TIMESTEPS, _TEMPERATURE, _LENGTH_SCALE = 10, 0.667, 1.0
_GRIFFIN_LIM_ITERS = 32  # as glow.py and xtts's `evaluate`


def model_config(settings: dict, vocab_size: int, statistics: dict) -> dict:
    """The recipe's `MatchaTTS` arguments at the bench's size (`settings` from the
    manifest, `statistics` the corpus's `mel_mean` and `mel_std`)."""
    hidden = settings["hidden"]
    encoder = {
        "encoder_type": "RoPE Encoder",
        "encoder_params": {"n_feats": 80, "n_channels": hidden, "filter_channels": 4 * hidden,
                           "filter_channels_dp": 256, "n_heads": 2,
                           "n_layers": settings["encoder_layers"], "kernel_size": 3,
                           "p_dropout": 0.1, "spk_emb_dim": 64, "n_spks": 1, "prenet": True},
        "duration_predictor_params": {"filter_channels_dp": 256, "kernel_size": 3,
                                      "p_dropout": 0.1},
    }  # fmt: skip
    channels = settings["decoder_channels"]
    decoder = {"channels": [channels, channels], "dropout": 0.05, "attention_head_dim": 64,
               "n_blocks": 1, "num_mid_blocks": 2, "num_heads": 2,
               "act_fn": "snakebeta"}  # fmt: skip
    return {"n_vocab": vocab_size, "n_spks": 1, "spk_emb_dim": 64, "n_feats": 80,
            "encoder": OmegaConf.create(encoder), "decoder": OmegaConf.create(decoder),
            "cfm": OmegaConf.create({"name": "CFM", "solver": "euler", "sigma_min": 1e-4}),
            "data_statistics": statistics, "out_size": None, "prior_loss": True,
            "use_precomputed_durations": False}  # fmt: skip


def _read(work: Path) -> tuple[dict, dict]:
    manifest = json.loads((work / "manifest.json").read_text())
    features = np.load(work / "features.npz")
    stats = {k: float(features[k]) for k in ("mel_mean", "mel_std")}
    return manifest, model_config(manifest["settings"], manifest["vocab_size"], stats)


def _mel(path: str) -> np.ndarray:
    """A recording's log-mel, float32 (80, F), as Matcha's data module computes it (the
    file resampled to 22.05 kHz first: the recipe's corpus is at that rate)."""
    audio, _ = librosa.load(path, sr=_SAMPLE_RATE)
    return mel_spectrogram(torch.from_numpy(audio)[None], **_MEL)[0].numpy()


def prepare(work: Path) -> None:
    """`features.npz`: every training utterance's mel, normalised by the corpus's mean and
    standard deviation (kept beside them), and token ids, concatenated, with lengths."""
    manifest = json.loads((work / "manifest.json").read_text())
    mels = [_mel(u["audio"]).T for u in manifest["train"]]  # (F, 80) each
    frames = np.concatenate(mels)
    mean, std = float(frames.mean()), float(frames.std())  # over every frame and channel
    tokens = [np.asarray(u["tokens"], np.int64) for u in manifest["train"]]
    np.savez(work / "features.npz", mels=((frames - mean) / std).astype(np.float32),
             tokens=np.concatenate(tokens), mel_lengths=[len(m) for m in mels],
             token_lengths=[len(t) for t in tokens], mel_mean=mean, mel_std=std)  # fmt: skip
    logger.info("prepared %d utterances, %d frames", len(mels), len(frames))


def _symbols(tokens) -> np.ndarray:
    """Token ids with the recipe's blank between and around them: int64 [2 * T + 1]."""
    return np.asarray(intersperse([int(t) for t in tokens], _BLANK), np.int64)


class _Batches:
    """Random batches without replacement, each epoch anew, padded to their longest row."""

    def __init__(self, features: Path, batch_size: int, seed: int) -> None:
        data = np.load(features)
        self.mels = np.split(data["mels"], np.cumsum(data["mel_lengths"])[:-1])
        tokens = np.split(data["tokens"], np.cumsum(data["token_lengths"])[:-1])
        self.symbols = [_symbols(t) for t in tokens]
        self.batch_size, self.order = batch_size, loop.RandomOrder(len(self.mels), seed)

    def next(self) -> dict:
        rows = self.order.next(self.batch_size)
        mels = [self.mels[i] for i in rows]
        frames = fix_len_compatibility(max(len(m) for m in mels))
        return {
            "x": loop.pad([self.symbols[i] for i in rows]),  # (B, T_text) int64
            "x_lengths": torch.tensor([len(self.symbols[i]) for i in rows]),
            "y": loop.pad(mels, frames).transpose(1, 2),  # (B, 80, T_mel), T_mel % 4 == 0
            "y_lengths": torch.tensor([len(m) for m in mels]),
        }


def _update(model: MatchaTTS, optimizer: torch.optim.Optimizer, batch: dict) -> dict:
    """One step as the recipe's `training_step` and Lightning run it; the losses."""
    dur_loss, prior_loss, diff_loss, _ = model(**batch, spks=None, out_size=model.out_size)
    loss = dur_loss + prior_loss + diff_loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), _GRAD_CLIP)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return {"loss": float(loss.detach()), "dur": float(dur_loss.detach()),
            "prior": float(prior_loss.detach()), "diff": float(diff_loss.detach())}  # fmt: skip


def train(work: Path) -> None:
    """Train until SIGTERM, checkpointing every `every_minutes` of process wall time
    (`loop.train_until_stopped`)."""
    manifest, config = _read(work)
    settings = manifest["settings"]
    torch.manual_seed(settings["seed"])
    batches = _Batches(work / "features.npz", settings["batch_size"], settings["seed"])
    model = MatchaTTS(**config)
    model.train()
    # configs/model/optimizer/adam.yaml; the learning rate is the bench's (recipe 1e-4).
    optimizer = torch.optim.Adam(model.parameters(), lr=settings["learning_rate"],
                                 weight_decay=0.0)  # fmt: skip
    loop.train_until_stopped(work, model, lambda step: _update(model, optimizer, batches.next()),
                             settings["every_minutes"], logger)  # fmt: skip


def _vocode(mel: np.ndarray, path: Path) -> None:
    """`mel` (80, F), Matcha's log-mel (denormalised), to audio through xtts-audio's
    Griffin-Lim for Matcha's recipe (the `xtts` preset's STFT, mel range and floor, on
    the magnitude and Slaney's mel scale, as Matcha's `mel_spectrogram` computes it), the
    same algorithm and iterations as glow.py and xtts's `evaluate`. Matcha frames its
    STFT without centring (384 samples of reflection each side instead of 512): the
    frames here are read as centred, a 128-sample shift of the whole waveform. Written
    at Matcha's level, not peak-normalised (Matcha's CLI writes its waveforms so)."""
    # Imported here, in `synthesize` only, as glow.py does: TensorFlow loaded beside torch
    # in a training process crashed it (SIGSEGV at its first step, 2026-11-25), and loaded
    # before torch's triton (which Matcha's imports load) it segfaults at that import.
    from xtts_audio import MelConfig, denormalize, griffin_lim, write_wav

    recipe = MelConfig.from_preset("xtts", power=1.0, htk=False)
    linear = denormalize(mel.T.astype(np.float32), recipe)  # (F, 80) linear mel
    audio = griffin_lim(linear, recipe, n_iter=_GRIFFIN_LIM_ITERS).numpy()
    write_wav(path, audio, _SAMPLE_RATE)


def synthesize(work: Path, steps: list[int], truth: bool, long_form: bool = False) -> None:
    """`wavs/step-<step>/<id>.wav` for each held-out sentence (Matcha's `synthesise`, 10
    Euler steps at temperature 0.667, then `_vocode`); with `truth`, `wavs/truth/<id>.wav`:
    each recording's mel through the same Griffin-Lim. With `long_form`, the items of the
    manifest's k-th long-form corpus instead, into `wavs/long-<k>/step-<step>/` and
    `wavs/long-<k>/truth/`. Each sentence's noise is drawn from the manifest's seed."""
    manifest, config = _read(work)
    sets = loop.spoken_sets(manifest, long_form)
    for step in steps:
        model = MatchaTTS(**config)
        model.load_state_dict(loop.weights(work, step))
        model.eval()
        for u, path in loop.spoken(work, sets, f"step-{step}"):
            torch.manual_seed(manifest["settings"]["seed"])  # the same noise in any set
            symbols = torch.from_numpy(_symbols(u["tokens"]))[None]  # (1, T_text)
            outputs = model.synthesise(symbols, torch.tensor([symbols.shape[1]]),
                                       n_timesteps=_TIMESTEPS, temperature=_TEMPERATURE,
                                       spks=None, length_scale=_LENGTH_SCALE)  # fmt: skip
            _vocode(outputs["mel"][0].numpy(), path)  # (80, F)
    for u, path in loop.spoken(work, sets, "truth") if truth else ():
        _vocode(_mel(u["audio"]), path)


def main(argv: list[str] | None = None) -> int:
    """`prepare`, `train` or `synthesize` in `--work`; returns the exit code."""
    return loop.main(argv, "matcha", prepare, train, synthesize)


if __name__ == "__main__":
    sys.exit(main())
