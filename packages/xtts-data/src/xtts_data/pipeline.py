"""`make_dataset`: batches of at most K static shapes, with no Python in the graph.

The shapes are planned from every utterance's lengths before anything runs; the dataset
is then the source's utterances through a chain of `ds -> ds` stages (`xtts_data.stages`):
```
source: cache shards ─ interleave ─ decode  (or WAV files decoded on the fly)
  ─ SelectSplit ─ DropTooLong ─ KeepInMemory ─ Repeat ─ Shuffle ─ Distribute (tf.data service)
  ─ JoinUtterances (train split, with `data.join`: items of several utterances, from
    epoch `data.join_from_epoch`)
  ─ BucketBatches (pad straight into batches, drop remainder)
  ─ FinishBatches (masks, stop targets, conditioning crops of other utterances of each
    speaker: same batch, else a small per-speaker reference bank) ─ Prefetch
```
Every batch matches one entry of the `DatasetSpec` returned alongside the dataset; the
trainer compiles exactly those shapes.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
import tensorflow as tf

from xtts_data import _autograph, _references, _source, record
from xtts_data.buckets import BatchShape, assign, plan_shapes
from xtts_data.config import DataConfig
from xtts_data.corpus import Skipped
from xtts_data.errors import ConfigError, EmptySplitError
from xtts_data.host import physical_memory
from xtts_data.joins import JoinUtterances, TokenJoin, joined_lengths, pause_frames, silence_feature
from xtts_data.stages import (
    PREFETCH_BATCHES,
    BucketBatches,
    Chain,
    Distribute,
    DropTooLong,
    FinishBatches,
    KeepInMemory,
    Prefetch,
    Repeat,
    SelectSplit,
    Shuffle,
    WarpVoices,
    split_threshold,
)

__all__ = ["DataPipeline", "DatasetSpec", "make_dataset", "matching_shape"]

Split = Literal["train", "val", "all"]


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
        return matching_shape(self, batch)

    @staticmethod
    def key_of(batch: Mapping[str, Any]) -> tuple[int, int, int]:
        """(batch, text, frames) of a batch: the `key` of the shape it has (or would have:
        a batch outside the spec gets the key its program would be compiled for)."""
        b, t = batch["tokens"].shape
        return int(b), int(t), int(batch["mel"].shape[1])


def matching_shape(spec, batch: dict[str, tf.Tensor]):
    """The first of `spec.shapes` whose `spec.signature(shape)` `batch` has exactly (the
    same fields, static shapes and dtypes), or None: every spec's `matches`.

    Args:
        spec: a `DatasetSpec`, `SegmentSpec` or any object with `shapes` and `signature`.
        batch: a batch of tensors (or arrays) by field name.
    """
    for shape in spec.shapes:
        signature = spec.signature(shape)
        if set(batch) == set(signature) and all(
            tuple(batch[k].shape) == tuple(signature[k].shape)
            and tf.as_dtype(batch[k].dtype) == signature[k].dtype
            for k in signature
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
        batches_per_epoch: batches one epoch yields (each bucket drops its remainder);
            with `data.join`, those of the simulated epoch the shapes were planned from.
        padding_efficiency: real / padded mel frames over the batches of an epoch (with
            `data.join`, of the simulated one).
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
    select = SelectSplit(split=split, val_fraction=config.val_fraction)  # checks `split`
    src = _source.open_source(source, config, audio)
    plan = _plan(src, config, split, repeat=repeat)
    spec = plan.spec
    seed = config.seed if config.seed is not None else random.SystemRandom().randrange(1 << 31)
    stages = (
        select,
        DropTooLong(
            max_frames=spec.shapes[-1].frames, max_text_len=max(s.text_len for s in spec.shapes)
        ),
        KeepInMemory(enabled=plan.in_memory),
        Repeat(enabled=repeat),
        Shuffle(buffer=config.shuffle_buffer if split == "train" else 0, seed=config.seed),
        Distribute(service=config.service),  # workers read and shuffle; bucketing stays here
        JoinUtterances(
            most=plan.join,
            pause=pause_frames(config.join_pause, src.audio),
            silence=silence_feature(src.audio),
            join=TokenJoin.of(src.tokenizer),
            shapes=spec.shapes,
            seed=seed,
            start=config.join_from_epoch * len(plan.chosen),
        ),
        BucketBatches(shapes=spec.shapes, n_mels=spec.n_mels),
        FinishBatches(
            bank=_bank(src, plan.chosen, config),
            cond_frames=config.cond_frames,
            seed=seed,
            deterministic=config.deterministic,
        ),
        WarpVoices(
            audio=src.audio,
            warp=config.voice_warp if split == "train" else 0.0,
            seed=seed,
            deterministic=config.deterministic,
        ),
        Prefetch(batches=PREFETCH_BATCHES, device=config.prefetch_to_device),
    )
    with _autograph.off():  # tf.data's functions traced as written
        dataset = Chain(stages)(src.elements())
    return DataPipeline(
        dataset=dataset,
        spec=spec,
        split=split,
        num_samples=len(plan.chosen),
        filtered=plan.filtered,
        batches_per_epoch=plan.batches_per_epoch,
        padding_efficiency=plan.padding_efficiency,
        source=src.path,
        skipped=src.skipped,
        in_memory=plan.in_memory,
    )


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What is known of a split before its dataset runs."""

    chosen: np.ndarray  # int [n]: indices of the utterances of the split that fit
    filtered: int
    spec: DatasetSpec
    batches_per_epoch: int
    padding_efficiency: float
    in_memory: bool
    join: int  # utterances an item joins at most (1: none)


def _plan(src: _source.Source, config: DataConfig, split: str, *, repeat: bool) -> _Plan:
    """The split's utterances and batch shapes, from the lengths the source knows up front.

    Raises:
        EmptySplitError: no utterance left in the split.
        ConfigError: (without `repeat`) too few for one complete batch of any shape.
    """
    keep = in_split(src.ids, split, config.val_fraction)
    fits = _fits(src.frames, src.tokens, config)
    chosen = keep & fits
    if not chosen.any():
        raise EmptySplitError(
            f"{src.path}: no utterances left in split {split!r} ({int(keep.sum())} in the "
            f"split, {int((keep & ~fits).sum())} longer than max_frames/max_text_len)"
        )
    frames, tokens = src.frames[chosen], src.tokens[chosen]
    join = config.join if split == "train" else 1
    if join > 1:  # shapes for every utterance alone and for an epoch's joined items
        frames, tokens = _joined(src, chosen, config)
        shapes = plan_shapes(np.concatenate([src.frames[chosen], frames]),
                             np.concatenate([src.tokens[chosen], tokens]), config)  # fmt: skip
    else:
        shapes = plan_shapes(frames, tokens, config)
    counts = np.bincount(assign(frames, shapes, tokens), minlength=len(shapes))
    batches = [c // s.batch_size for c, s in zip(counts, shapes, strict=True)]
    if not any(batches) and not repeat:
        raise ConfigError(
            f"{src.path}: split {split!r} has {int(chosen.sum())} utterances, too few for one "
            f"complete batch of any bucket {[(s.frames, s.batch_size) for s in shapes]} "
            f"(frames, batch size); lower batch_size, frame_budget or num_buckets, or repeat"
        )
    in_memory = keeps_in_memory(config, int(src.frames[chosen].sum()) * src.n_mels * 4)
    padded = sum(c * s.frames for c, s in zip(counts, shapes, strict=True))
    return _Plan(
        chosen=np.flatnonzero(chosen),
        filtered=int((keep & ~fits).sum()),
        spec=DatasetSpec(tuple(shapes), src.n_mels, config.cond_frames),
        batches_per_epoch=int(sum(batches)),
        padding_efficiency=float(frames.sum() / padded),
        in_memory=in_memory,
        join=join,
    )


def _joined(src: _source.Source, chosen: np.ndarray, config: DataConfig):
    """An epoch's item lengths with `config.join`, from a fixed seed: the shapes depend
    on the corpus alone, so a resumed run and the compile cache see the same ones."""
    return joined_lengths(
        src.frames[chosen], src.tokens[chosen], src.speakers[chosen], most=config.join,
        pause=pause_frames(config.join_pause, src.audio), join=TokenJoin.of(src.tokenizer),
        seed=0,
    )  # fmt: skip


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


def keeps_in_memory(config: DataConfig, decoded_bytes: int) -> bool:
    """`config.keep_in_memory`, or when it is None (automatic): whether the split's decoded
    elements (`decoded_bytes`) take under a quarter of physical memory."""
    if config.keep_in_memory is not None:
        return config.keep_in_memory
    return decoded_bytes < physical_memory() // 4


def in_split(ids: np.ndarray, split: str, fraction: float) -> np.ndarray:
    if split == "all":
        return np.ones(len(ids), bool)
    held_out = is_validation(ids.astype(str), fraction).numpy()
    return held_out if split == "val" else ~held_out


def is_validation(ids, fraction: float) -> tf.Tensor:
    """True for ids in the held-out split: a stable hash of the id, not its position.

    Args:
        ids: string tensor-like of utterance ids, any shape.
        fraction: the validation share, `DataConfig.val_fraction`.
    """
    return record.split_bucket(ids) < split_threshold(fraction)


def _fits(frames: np.ndarray, tokens: np.ndarray, config: DataConfig) -> np.ndarray:
    fits = np.ones(len(frames), bool)
    if config.max_frames:
        fits &= frames <= config.max_frames
    if config.max_text_len:
        fits &= tokens <= config.max_text_len
    return fits
