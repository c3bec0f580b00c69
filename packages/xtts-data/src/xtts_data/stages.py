"""The `ds -> ds` stages `make_dataset` chains after its source, each usable alone.

Every stage is a frozen object whose settings are checked when it is made, called on a
`tf.data.Dataset` and returning one; a stage that is switched off returns its input. In
`make_dataset`'s order:

```
utterances ─ SelectSplit ─ DropTooLong ─ KeepInMemory ─ Repeat ─ Shuffle ─ Distribute
  ─ JoinUtterances (`joins`) ─ BucketBatches ─ FinishBatches ─ WarpVoices ─ Prefetch ─ batches
```
An utterance is a dict of `frames`, `speaker`, `split` (the id's split bucket) int32
scalars, `tokens` int32 [T] and `mel` float32 [F, n_mels] (what `_source` reads); a batch
out of `FinishBatches` has the fields of `DatasetSpec.signature`. No stage adds a Python op.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from xtts_audio import MelConfig, mel_warp_positions, warp_mel
from xtts_data import _references, record
from xtts_data.buckets import BatchShape
from xtts_data.config import is_int, is_number
from xtts_data.errors import ConfigError

__all__ = [
    "PREFETCH_BATCHES",
    "BucketBatches",
    "Chain",
    "Distribute",
    "DropTooLong",
    "FinishBatches",
    "KeepInMemory",
    "Prefetch",
    "Repeat",
    "SelectSplit",
    "Shuffle",
    "Stage",
    "WarpVoices",
    "split_threshold",
    "warp_factors",
]

Stage = Callable[[tf.data.Dataset], tf.data.Dataset]
AUTOTUNE = tf.data.AUTOTUNE
# Batches ready ahead of the consumer. A fixed depth, not AUTOTUNE: autotuning sizes the
# buffer to the consumer's average pace, so each step still waited ~1 ms for its batch
# (measured: 93.5% -> see README for the utilization with a fixed buffer).
PREFETCH_BATCHES = 4
# The factors `WarpVoices` draws from: 0.8 .. 1.25 in 33 steps of 1.4% at voice_warp 0.25.
WARP_FACTORS = 33


def check_int(name: str, value: object, *, least: int) -> None:
    """A stage's count setting: an int (not a bool) of at least `least`."""
    if not is_int(value) or value < least:
        raise ConfigError(f"Expected {name} an int >= {least}, received: {name}={value!r}")


def split_threshold(val_fraction: float) -> int:
    """Split buckets (`record.split_bucket`) below this are held out for validation."""
    return round(val_fraction * record.SPLIT_BUCKETS)


@dataclasses.dataclass(frozen=True)
class Chain:
    """Stages applied in order; itself a stage (as optax's `chain`).

    Attributes:
        stages: the stages, first applied first.
    """

    stages: tuple[Stage, ...]

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        return functools.reduce(lambda out, stage: stage(out), self.stages, ds)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SelectSplit:
    """Keep the utterances of one split, by their stored split bucket (no string hashing).

    Attributes:
        split: `"train"` (buckets at or above the threshold), `"val"` (below) or `"all"`.
        val_fraction: the validation share, `DataConfig.val_fraction`.
    """

    split: str
    val_fraction: float

    def __post_init__(self):
        if self.split not in ("train", "val", "all"):
            raise ConfigError(
                f"Expected split 'train', 'val' or 'all', received: split={self.split!r}"
            )

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        threshold = split_threshold(self.val_fraction)
        if self.split == "val":
            return ds.filter(lambda e: e["split"] < threshold)
        if self.split == "train":
            return ds.filter(lambda e: e["split"] >= threshold)
        return ds


@dataclasses.dataclass(frozen=True, kw_only=True)
class DropTooLong:
    """Drop the utterances longer than the largest batch shape, in frames or tokens.

    Attributes:
        max_frames: mel frames kept at most (the last bucket's `frames`).
        max_text_len: tokens kept at most (the largest `text_len` of the shapes).
    """

    max_frames: int
    max_text_len: int

    def __post_init__(self):
        check_int("max_frames", self.max_frames, least=1)
        check_int("max_text_len", self.max_text_len, least=1)

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        return ds.filter(
            lambda e: (e["frames"] <= self.max_frames) & (tf.size(e["tokens"]) <= self.max_text_len)
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class KeepInMemory:
    """Keep what passes in RAM after the first epoch: later epochs hand out the same
    tensors, with no reading and no copies.

    Attributes:
        enabled: off, the stage returns its input.
    """

    enabled: bool

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        return ds.cache() if self.enabled else ds


@dataclasses.dataclass(frozen=True, kw_only=True)
class Repeat:
    """Repeat endlessly. Before bucketing, a bucket's partial batch carries over into the
    next epoch instead of being dropped.

    Attributes:
        enabled: off, the stage returns its input (one epoch).
    """

    enabled: bool

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        return ds.repeat() if self.enabled else ds


@dataclasses.dataclass(frozen=True, kw_only=True)
class Shuffle:
    """Shuffle through a buffer of `buffer` elements.

    Attributes:
        buffer: elements in the buffer; 0 leaves the order as it is.
        seed: the shuffle's seed (None: a new order every run).
    """

    buffer: int
    seed: int | None = None

    def __post_init__(self):
        check_int("buffer", self.buffer, least=0)

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        return ds.shuffle(self.buffer, seed=self.seed) if self.buffer else ds


@dataclasses.dataclass(frozen=True, kw_only=True)
class Distribute:
    """Hand what comes before to the workers of a tf.data service, each element of an epoch
    to one of them (dynamic sharding).

    Bucketing must come after this stage: with dynamic sharding, TF 2.21 runs a
    `group_by_window` pipeline whole on every worker (each epoch would arrive once per
    worker).

    Attributes:
        service: the dispatcher's address (`grpc://host:port`); None returns the input.
    """

    service: str | None

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        if not self.service:
            return ds
        return ds.apply(
            tf.data.experimental.service.distribute(
                processing_mode=tf.data.experimental.service.ShardingPolicy.DYNAMIC,
                service=self.service,
            )
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class BucketBatches:
    """Group utterances by bucket and pad them straight into batches of the bucket's shape.

    An utterance goes to the first shape whose `frames` and `text_len` hold it (for one
    utterance alone, the first whose `frames` do); each bucket drops its
    partial batch. Out: `frames`, `speaker`, `split` int32 [B], `tokens` int32 [B, T], `mel`
    float32 [B, F, n_mels], with (B, T, F) one shape's `key`, all static.

    Attributes:
        shapes: the batch shapes, shortest `frames` first (`plan_shapes`).
        n_mels: mel channels.
    """

    shapes: tuple[BatchShape, ...]
    n_mels: int

    def __post_init__(self):
        frames = [s.frames for s in self.shapes]
        if not frames or frames != sorted(set(frames)):
            raise ConfigError(
                f"Expected at least one shape, with increasing frames, received: frames={frames}"
            )

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        if len(self.shapes) == 1:  # one shape: a plain padded batch (no windows: ~1.5x faster)
            (shape,) = self.shapes
            padded = _padded_shapes([shape.text_len], [shape.frames, self.n_mels])
            return ds.padded_batch(shape.batch_size, padded_shapes=padded, drop_remainder=True)
        bounds = tf.constant([s.frames for s in self.shapes], tf.int32)
        text_lens = tf.constant([s.text_len for s in self.shapes], tf.int64)
        sizes = tf.constant([s.batch_size for s in self.shapes], tf.int64)

        def bucket_of(e):  # the first shape that holds it (`buckets.assign` with tokens)
            held = (e["frames"] <= bounds) & (tf.cast(tf.size(e["tokens"]), tf.int64) <= text_lens)
            return tf.argmax(tf.cast(held, tf.int32), output_type=tf.int64)

        def batch_bucket(key, window):  # one padded copy per element, straight into the batch
            frames = tf.cast(bounds[key], tf.int64)
            padded = _padded_shapes(text_lens[key][None], tf.stack([frames, self.n_mels]))
            return window.padded_batch(sizes[key], padded_shapes=padded, drop_remainder=True)

        return ds.group_by_window(bucket_of, batch_bucket, window_size_func=lambda k: sizes[k])


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class FinishBatches:
    """The trainer's fields of each padded batch: lengths, masks and stop targets against
    the static padded sizes, and each row's speaker-conditioning crop.

    In: a batch out of `BucketBatches`. Out: the fields of `DatasetSpec.signature`, among
    them `cond_mel` float32 [B, cond_frames, n_mels] and `cond_lengths` int32 [B]. Batch i
    draws its crops from the seed (seed, i): reproducible for a given seed.

    Attributes:
        bank: reference crops for rows with no other utterance of their speaker in the
            batch (`cond_frames` long).
        cond_frames: frames of the conditioning mel.
        seed: the crops' seed.
        deterministic: keep the order of batches under parallel mapping.
    """

    bank: _references.Bank
    cond_frames: int
    seed: int
    deterministic: bool = False

    def __post_init__(self):
        if self.bank.mel.shape[1] != self.cond_frames:
            raise ConfigError(
                f"Expected bank crops of cond_frames={self.cond_frames} frames, received: "
                f"bank.mel.shape={self.bank.mel.shape}"
            )

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        return ds.enumerate().map(  # the batch index seeds its crops: reproducible with a seed
            lambda index, batch: _finish_batch(
                batch, self.bank, self.cond_frames, tf.stack([self.seed, index])
            ),
            num_parallel_calls=AUTOTUNE,
            deterministic=self.deterministic,
        )


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class WarpVoices:
    """Speaker augmentation: each row's `mel` and its `cond_mel` (a clip of the same voice)
    get their frequency axis scaled by one factor, so the batch speaks in voices the corpus
    never had (vocal tract length perturbation: `xtts_audio.warp_mel`).

    In and out: batches of `FinishBatches`. Each row draws one of `WARP_FACTORS` factors
    evenly spaced in log from `1 / (1 + warp)` to `1 + warp`; batch i draws from the seed
    (seed, i) folded apart from the crops': reproducible for a given seed. A warp of 0 is
    off.

    Attributes:
        audio: the mel recipe the features were made with (their mel scale).
        warp: `DataConfig.voice_warp`, >= 0.
        seed: the draws' seed.
        deterministic: keep the order of batches under parallel mapping.
    """

    audio: MelConfig
    warp: float
    seed: int
    deterministic: bool = False

    def __post_init__(self):
        if not (is_number(self.warp) and 0.0 <= self.warp < 1.0):
            raise ConfigError(f"Expected warp a number in [0, 1), received: warp={self.warp!r}")

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        if not self.warp:
            return ds
        table = tf.constant(mel_warp_positions(self.audio, warp_factors(self.warp)))  # (K, M)

        def warp(index, batch):
            seed = tf.random.experimental.stateless_fold_in(tf.stack([self.seed, index]), 1)
            pick = tf.random.stateless_uniform(tf.shape(batch["mel"])[:1], seed,
                                               maxval=WARP_FACTORS, dtype=tf.int32)  # fmt: skip
            positions = tf.gather(table, pick)  # (B, M)
            return {**batch, "mel": warp_mel(batch["mel"], positions),
                    "cond_mel": warp_mel(batch["cond_mel"], positions)}  # fmt: skip

        return ds.enumerate().map(warp, num_parallel_calls=AUTOTUNE,
                                  deterministic=self.deterministic)  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class Prefetch:
    """Prepare batches ahead of the consumer: `batches` of them, or onto a device.

    Attributes:
        batches: prefetch depth (with no `device`).
        device: prefetch onto this device (`tf.data.experimental.prefetch_to_device`)
            instead, e.g. `"/gpu:0"`; None: in host memory.
    """

    batches: int = PREFETCH_BATCHES
    device: str | None = None

    def __post_init__(self):
        check_int("batches", self.batches, least=1)

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        if self.device:
            return ds.apply(tf.data.experimental.prefetch_to_device(self.device))
        return ds.prefetch(self.batches)


def warp_factors(warp: float) -> np.ndarray:
    """float64 [WARP_FACTORS]: the factors `WarpVoices` draws from, evenly spaced in log
    from `1 / (1 + warp)` to `1 + warp`."""
    return np.exp(np.linspace(-math.log1p(warp), math.log1p(warp), WARP_FACTORS))


def _padded_shapes(tokens, mel) -> dict:
    """`padded_shapes` of an utterance: scalars as they are, `tokens` [T] and `mel` [F, M]
    padded to the given sizes (lists or int64 tensors)."""
    return {"frames": [], "speaker": [], "split": [], "tokens": tokens, "mel": mel}


def _finish_batch(
    batch, bank: _references.Bank, cond_frames: int, seed: tf.Tensor
) -> dict[str, tf.Tensor]:
    """`FinishBatches` on one batch; `seed` int64 [2] seeds its crops."""
    mel, lengths = batch["mel"], batch["frames"]  # (B, F, M), (B,)
    steps = tf.range(tf.shape(mel)[1])[None, :]
    tokens = batch["tokens"]  # (B, T)
    token_lengths = tf.reduce_sum(tf.cast(tokens != 0, tf.int32), axis=1)  # PAD is 0
    keys = _references.identity_keys(batch["split"], lengths)
    cond_mel, cond_lengths = _conditioning(
        mel, lengths, batch["speaker"], keys, bank, cond_frames, seed
    )
    return {
        "tokens": tokens,
        "token_lengths": token_lengths,
        "token_mask": tf.sequence_mask(token_lengths, tf.shape(tokens)[1], tf.float32),
        "mel": mel,
        "mel_lengths": lengths,
        "mel_mask": tf.cast(steps < lengths[:, None], tf.float32),
        "stop_targets": tf.cast(steps >= lengths[:, None] - 1, tf.float32),
        "speaker": batch["speaker"],
        "cond_mel": cond_mel,
        "cond_lengths": cond_lengths,
    }


def _conditioning(mel, lengths, speaker, keys, bank: _references.Bank, cond_frames: int, seed):
    """A random `cond_frames` crop of another utterance of the same speaker in the batch;
    without one in the batch, a reference of that speaker from the bank; only a speaker
    with a single utterance conditions on itself.

    Args:
        mel: float32 [B, F, M]; lengths, speaker: int32 [B]; keys: int64 [B] identity keys.

    Returns:
        float32 [B, C, M] crops, zero past their length; int32 [B] lengths.
    """
    n = tf.shape(speaker)[0]
    others = tf.equal(speaker[:, None], speaker[None, :]) & ~tf.eye(n, dtype=tf.bool)  # (B, B)
    pick_seed, crop_seed, bank_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    scores = tf.where(others, tf.random.stateless_uniform([n, n], pick_seed), -1.0)
    in_batch = tf.reduce_any(others, axis=1)
    partner = tf.where(in_batch, tf.argmax(scores, axis=1, output_type=tf.int32), tf.range(n))
    ref_lengths = tf.gather(lengths, partner)
    room = tf.maximum(ref_lengths - cond_frames, 0)
    draw = tf.random.stateless_uniform(tf.shape(room), crop_seed) * tf.cast(room + 1, tf.float32)
    offset = tf.minimum(tf.cast(draw, tf.int32), room)
    frame = offset[:, None] + tf.range(cond_frames)[None, :]  # (B, C)
    valid = frame < (offset + ref_lengths)[:, None]
    frame = tf.minimum(frame, tf.shape(mel)[1] - 1)
    index = tf.stack([tf.broadcast_to(partner[:, None], tf.shape(frame)), frame], axis=-1)
    crop = tf.gather_nd(mel, index)  # (B, C, M): only the crops are copied
    crop = crop * tf.cast(valid, crop.dtype)[..., None]
    crop_lengths = tf.minimum(ref_lengths, cond_frames)
    u = tf.random.stateless_uniform([n], bank_seed)
    bank_mel, bank_lengths, found = _references.from_bank(bank, speaker, keys, u)
    use_bank = ~in_batch & found
    return (
        tf.where(use_bank[:, None, None], bank_mel, crop),
        tf.where(use_bank, bank_lengths, crop_lengths),
    )
