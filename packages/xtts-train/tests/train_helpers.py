"""Settings shared by the xtts-train tests (on pytest's `pythonpath`)."""

from __future__ import annotations

# Small buckets, short utterances: each compiled step costs seconds, not minutes.
OVERRIDES = [
    "data.batch_size=4", "data.num_buckets=2", "data.cond_frames=16", "data.val_fraction=0.0",
    "train.warmup_steps=4", "train.learning_rate=0.002", "train.log_every=5",
    "train.checkpoint_every=10", "train.eval_every=0",
]  # fmt: skip

# One batch shape: for tests about something other than bucketing (one compile, not two).
ONE_SHAPE = [*OVERRIDES, "data.num_buckets=1"]

# A model smaller than tiny, for tests of plumbing rather than learning: a compile costs
# seconds.
MICRO = [
    "model.d_model=32", "model.heads=2", "model.text_layers=1", "model.decoder_layers=1",
    "model.cond_layers=1", "model.cond_latents=2", "model.prenet_dim=32",
    "model.postnet_layers=1", "model.postnet_channels=32", "model.text_convs=1",
    "model.cond_convs=1",
]  # fmt: skip


def as_cli(overrides: list[str]) -> list[str]:
    """`--set` arguments of the command line for `overrides`."""
    return [arg for override in overrides for arg in ("--set", override)]
