"""`make_dataset`: batches of at most K static shapes, with no Python in the graph.

```
cache shards ─ interleave ─ decode ─ split ─ filter over-long ─ [keep in RAM] ─ shuffle
  ─ [tf.data service]
  ─ group by bucket, pad straight into batches (drop remainder)
  ─ masks, stop targets, conditioning crops of other utterances of each speaker (same
    batch, else a small per-speaker reference bank) ─ prefetch
```
Every batch matches one entry of the `DatasetSpec` returned alongside the dataset; the
trainer compiles exactly those shapes.
"""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path
from typing import Literal

import numpy as np
import tensorflow as tf

from xtts_data import _references, _source, record
from xtts_data.buckets import BatchShape, assign, plan_shapes
from xtts_data.config import DataConfig
from xtts_data.corpus import Skipped
from xtts_data.errors import ConfigError

__all__ = ["DataPipeline", "DatasetSpec", "make_dataset"]

Split = Literal["train", "val", "all"]
AUTOTUNE = tf.data.AUTOTUNE
# Batches ready ahead of the consumer. A fixed depth, not AUTOTUNE: autotuning sizes the
# buffer to the consumer's average pace, so each step still waited ~1 ms for its batch
# (measured: 93.5% -> see README for the utilization with a fixed buffer).
PREFETCH_BATCHES = 4


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """The complete list of static batch shapes a dataset emits.

    Attributes:
        shapes: one `BatchShape` per bucket, shortest first.
        n_mels: mel channels.
        cond_frames: frames of the speaker-conditioning mel.
    """

    shapes: tuple[BatchShape, ...]
    n_mels: int
    cond_frames: int

    def signature(self, shape: BatchShape) -> dict[str, tf.TensorSpec]:
        """The `tf.TensorSpec` of every batch field for one shape (no `None` dims)."""
        b, t, f, m, c = (
            shape.batch_size,
            shape.text_len,
            shape.frames,
            self.n_mels,
            self.cond_frames,
        )
        return {
            "tokens": tf.TensorSpec([b, t], tf.int32),
            "token_lengths": tf.TensorSpec([b], tf.int32),
            "token_mask": tf.TensorSpec([b, t], tf.float32),
            "mel": tf.TensorSpec([b, f, m], tf.float32),
            "mel_lengths": tf.TensorSpec([b], tf.int32),
            "mel_mask": tf.TensorSpec([b, f], tf.float32),
            "stop_targets": tf.TensorSpec([b, f], tf.float32),
            "speaker": tf.TensorSpec([b], tf.int32),
            "cond_mel": tf.TensorSpec([b, c, m], tf.float32),
            "cond_lengths": tf.TensorSpec([b], tf.int32),
        }

    @property
    def signatures(self) -> list[dict[str, tf.TensorSpec]]:
        """`signature(shape)` for every shape: the trainer's input signatures."""
        return [self.signature(shape) for shape in self.shapes]

    def matches(self, batch: dict[str, tf.Tensor]) -> BatchShape | None:
        """The shape `batch` has, or None when it matches no shape of this spec."""
        for shape in self.shapes:
            spec = self.signature(shape)
            if set(batch) == set(spec) and all(
                tuple(batch[k].shape) == tuple(spec[k].shape)
                and tf.as_dtype(batch[k].dtype) == spec[k].dtype
                for k in spec
            ):
                return shape
        return None


@dataclasses.dataclass(frozen=True)
class DataPipeline:
    """A dataset and what is known about it before it runs.

    Attributes:
        dataset: one epoch of batches (dicts of tensors, see `DatasetSpec.signature`).
        spec: the static batch shapes.
        split: `"train"`, `"val"` or `"all"`.
        num_samples: utterances of the split that fit the maxima.
        filtered: utterances of the split longer than `max_frames` / `max_text_len`.
        batches_per_epoch: batches one epoch yields (each bucket drops its remainder).
        padding_efficiency: real / padded mel frames over the batches of an epoch.
        source: the cache or corpus path.
        skipped: on the fly, corpus rows that cannot be used (a cache reports them in
            its report.json instead).
        in_memory: whether decoded utterances are kept in RAM after the first epoch.
    """

    dataset: tf.data.Dataset
    spec: DatasetSpec
    split: str
    num_samples: int
    filtered: int
    batches_per_epoch: int
    padding_efficiency: float
    source: Path
    skipped: tuple[Skipped, ...] = ()
    in_memory: bool = False


def make_dataset(
    source, config: DataConfig, split: Split = "train", *, audio=None, repeat: bool = False
) -> DataPipeline:
    """The input pipeline over a feature cache (or, on the fly, over a WAV corpus).

    Args:
        source: a cache folder (`xtts-data prepare` output), an opened `FeatureCache`, or
            a corpus folder / filelist of WAV files (features computed inside tf.data).
        config: batching and pipeline settings.
        split: `"train"`, `"val"` (the `val_fraction` of ids held out) or `"all"`.
        audio: the mel recipe; checked against the cache's, an opened `FeatureCache`'s
            too (a mismatch is a `CacheError`); required to read a corpus on the fly.
        repeat: repeat the utterances endlessly *before* bucketing, so a bucket's partial
            batch carries over into the next epoch instead of being dropped (what a
            training loop wants); otherwise the dataset is one epoch.

    Raises:
        CacheError: damaged cache or other feature settings than `config`/`audio`.
        CorpusError: on the fly, a corpus with no usable WAV rows or non-WAV audio.
        ConfigError: invalid split, or nothing left to batch.
    """
    if split not in ("train", "val", "all"):
        raise ConfigError(f"Expected split 'train', 'val' or 'all', received: split={split!r}")
    src = _source.open_source(source, config, audio)
    keep = _in_split(src.ids, split, config.val_fraction)
    fits = _fits(src.frames, src.tokens, config)
    chosen = keep & fits
    if not chosen.any():
        raise ConfigError(
            f"{src.path}: no utterances left in split {split!r} ({int(keep.sum())} in the "
            f"split, {int((keep & ~fits).sum())} longer than max_frames/max_text_len)"
        )
    shapes = plan_shapes(src.frames[chosen], src.tokens[chosen], config)
    counts = np.bincount(assign(src.frames[chosen], shapes), minlength=len(shapes))
    batches = [c // s.batch_size for c, s in zip(counts, shapes, strict=True)]
    if not any(batches) and not repeat:
        raise ConfigError(
            f"{src.path}: split {split!r} has {int(chosen.sum())} utterances, too few for one "
            f"complete batch of any bucket {[(s.frames, s.batch_size) for s in shapes]} "
            f"(frames, batch size); lower batch_size, frame_budget or num_buckets, or repeat"
        )
    spec = DatasetSpec(tuple(shapes), src.n_mels, config.cond_frames)
    in_memory = config.keep_in_memory
    if in_memory is None:  # decoded features of the split under a quarter of RAM
        in_memory = int(src.frames[chosen].sum()) * src.n_mels * 4 < _physical_memory() // 4
    bank = _bank(src, np.flatnonzero(chosen), config)
    dataset = _batches(src.elements(), spec, config, split, in_memory, repeat, bank)
    padded = sum(c * s.frames for c, s in zip(counts, shapes, strict=True))
    return DataPipeline(
        dataset=dataset,
        spec=spec,
        split=split,
        num_samples=int(chosen.sum()),
        filtered=int((keep & ~fits).sum()),
        batches_per_epoch=int(sum(batches)),
        padding_efficiency=float(src.frames[chosen].sum() / padded),
        source=src.path,
        skipped=src.skipped,
        in_memory=in_memory,
    )


def _bank(src, candidates: np.ndarray, config: DataConfig) -> _references.Bank:
    """Reference crops of the split's own utterances (validation never conditions train)."""
    limit = _references.per_speaker_limit(
        config.refs_per_speaker, src.num_speakers, config.cond_frames, src.n_mels
    )
    picked = candidates[
        _references.choose_references(src.speakers[candidates], src.order[candidates], limit)
    ]
    keys = _references.identity_keys(
        record.split_bucket(src.ids[picked].astype(str)).numpy(), src.frames[picked]
    )
    return _references.make_bank(
        [u["mel"] for u in src.load(picked)], src.speakers[picked], keys, src.num_speakers,
        config.cond_frames, src.n_mels,
    )  # fmt: skip


def _physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _in_split(ids: np.ndarray, split: str, fraction: float) -> np.ndarray:
    if split == "all":
        return np.ones(len(ids), bool)
    held_out = is_validation(ids.astype(str), fraction).numpy()
    return held_out if split == "val" else ~held_out


def _split_threshold(fraction: float) -> int:
    return round(fraction * record.SPLIT_BUCKETS)


def is_validation(ids, fraction: float) -> tf.Tensor:
    """True for ids in the held-out split: a stable hash of the id, not its position.

    Args:
        ids: string tensor-like of utterance ids, any shape.
        fraction: the validation share, `DataConfig.val_fraction`.
    """
    return record.split_bucket(ids) < _split_threshold(fraction)


def _fits(frames: np.ndarray, tokens: np.ndarray, config: DataConfig) -> np.ndarray:
    fits = np.ones(len(frames), bool)
    if config.max_frames:
        fits &= frames <= config.max_frames
    if config.max_text_len:
        fits &= tokens <= config.max_text_len
    return fits


def _batches(
    elements: tf.data.Dataset,
    spec: DatasetSpec,
    config: DataConfig,
    split: str,
    in_memory: bool,
    repeat: bool,
    bank: _references.Bank,
):
    """Split, filter, shuffle, bucket and batch the parsed elements."""
    opts = dict(num_parallel_calls=AUTOTUNE, deterministic=config.deterministic)
    bounds = tf.constant([s.frames for s in spec.shapes], tf.int32)
    text_lens = tf.constant([s.text_len for s in spec.shapes], tf.int64)
    sizes = tf.constant([s.batch_size for s in spec.shapes], tf.int64)
    threshold, max_text = (
        _split_threshold(config.val_fraction),
        max(s.text_len for s in spec.shapes),
    )
    ds = elements
    if split == "val":
        ds = ds.filter(lambda e: e["split"] < threshold)
    elif split == "train":
        ds = ds.filter(lambda e: e["split"] >= threshold)
    ds = ds.filter(lambda e: (e["frames"] <= bounds[-1]) & (tf.size(e["tokens"]) <= max_text))
    if in_memory:  # later epochs hand out the same tensors: no reading, no copies
        ds = ds.cache()
    if repeat:
        ds = ds.repeat()
    if config.shuffle_buffer and split == "train":
        ds = ds.shuffle(config.shuffle_buffer, seed=config.seed)
    if config.service:
        # Workers read, decode and shuffle; each utterance of an epoch goes to one of them.
        # Bucketing stays here: with dynamic sharding, TF 2.21 runs a group_by_window
        # pipeline whole on every worker (each epoch would arrive once per worker).
        ds = ds.apply(
            tf.data.experimental.service.distribute(
                processing_mode=tf.data.experimental.service.ShardingPolicy.DYNAMIC,
                service=config.service,
            )
        )

    def bucket_of(e):
        return tf.cast(tf.searchsorted(bounds, e["frames"][None], side="left")[0], tf.int64)

    def batch_bucket(key, window):  # one padded copy per element, straight into the batch
        frames = tf.cast(bounds[key], tf.int64)
        shapes = {
            "frames": [],
            "speaker": [],
            "split": [],
            "tokens": text_lens[key][None],
            "mel": tf.stack([frames, spec.n_mels]),
        }
        return window.padded_batch(sizes[key], padded_shapes=shapes, drop_remainder=True)

    if len(spec.shapes) == 1:  # one shape: a plain padded batch (no windows: ~1.5x faster)
        (shape,) = spec.shapes
        ds = ds.padded_batch(
            shape.batch_size, drop_remainder=True, padded_shapes={
                "frames": [], "speaker": [], "split": [], "tokens": [shape.text_len],
                "mel": [shape.frames, spec.n_mels],
            },
        )  # fmt: skip
    else:
        ds = ds.group_by_window(bucket_of, batch_bucket, window_size_func=lambda k: sizes[k])
    seed = config.seed if config.seed is not None else random.SystemRandom().randrange(1 << 31)
    ds = ds.enumerate().map(  # the batch index seeds its crops: reproducible with a seed
        lambda index, batch: _finish_batch(
            batch, bank, config.cond_frames, tf.stack([seed, index])
        ),
        **opts,
    )
    if config.prefetch_to_device:
        return ds.apply(tf.data.experimental.prefetch_to_device(config.prefetch_to_device))
    return ds.prefetch(PREFETCH_BATCHES)


def _finish_batch(
    batch, bank: _references.Bank, cond_frames: int, seed: tf.Tensor
) -> dict[str, tf.Tensor]:
    """The trainer's fields: lengths, masks and stop targets against the static padded
    sizes, and each row's conditioning crop."""
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
