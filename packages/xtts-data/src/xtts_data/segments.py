"""`make_segment_dataset`: aligned random mel/waveform segments for a vocoder, one shape.

A vocoder trains on short aligned pieces of utterances: `segment_frames` mel frames and
the `segment_frames * hop_length` waveform samples under them, cut at a random frame of
each utterance inside `tf.data` (no Python op) and batched with the remainder dropped, so
every batch has the one static shape its `SegmentSpec` lists:
```
cache shards ─ interleave ─ decode (mel and waveform: a cache built with data.keep_audio)
  ─ SelectSplit ─ DropTooShort ─ KeepInMemory ─ Repeat ─ Shuffle ─ Distribute
  ─ CutSegments ─ BatchSegments (drop remainder) ─ Prefetch
```
`SegmentSpec` has `DatasetSpec`'s interface (`shapes`, `signature`, `signatures`,
`matches`), so a trainer builds one compiled program per shape from either.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from xtts_data import _autograph, _source
from xtts_data.config import DataConfig, is_int
from xtts_data.errors import ConfigError
from xtts_data.pipeline import Split, in_split, keeps_in_memory, matching_shape
from xtts_data.stages import (
    PREFETCH_BATCHES,
    Chain,
    Distribute,
    KeepInMemory,
    Prefetch,
    Repeat,
    SelectSplit,
    Shuffle,
    check_int,
)

__all__ = [
    "BatchSegments",
    "CutSegments",
    "DropTooShort",
    "SegmentPipeline",
    "SegmentShape",
    "SegmentSpec",
    "make_segment_dataset",
]

AUTOTUNE = tf.data.AUTOTUNE


def _check_counts(owner: object, *names: str) -> None:
    """Each named setting of `owner` is an int (not a bool) >= 1."""
    for name in names:
        check_int(name, getattr(owner, name), least=1)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SegmentShape:
    """One static segment batch shape: `batch_size` segments of `frames` mel frames and
    `samples` waveform samples. `key` is its (batch, frames, samples) tuple.

    Attributes:
        batch_size: segments per batch.
        frames: mel frames per segment.
        samples: waveform samples per segment (`frames * hop_length`).
    """

    batch_size: int
    frames: int
    samples: int

    def __post_init__(self):
        _check_counts(self, "batch_size", "frames", "samples")

    @property
    def key(self) -> tuple[int, int, int]:
        """(batch, frames, samples): the shape's key, in the order of its dimensions."""
        return self.batch_size, self.frames, self.samples


@dataclasses.dataclass(frozen=True, kw_only=True)
class SegmentSpec:
    """The static batch shape a segment dataset emits (`DatasetSpec`'s interface).

    Attributes:
        shapes: exactly one `SegmentShape`.
        n_mels: mel channels.
        hop_length: waveform samples per mel frame.
    """

    shapes: tuple[SegmentShape, ...]
    n_mels: int
    hop_length: int

    def __post_init__(self):
        _check_counts(self, "n_mels", "hop_length")
        shapes = self.shapes
        if not (isinstance(shapes, tuple) and len(shapes) == 1
                and isinstance(shapes[0], SegmentShape)):  # fmt: skip
            raise ConfigError(f"Expected shapes one SegmentShape in a tuple, received: "
                              f"shapes={shapes!r}")  # fmt: skip
        (shape,) = shapes
        if shape.samples != shape.frames * self.hop_length:
            raise ConfigError(
                f"Expected samples = frames x hop_length = {shape.frames * self.hop_length}, "
                f"received: samples={shape.samples}"
            )

    def signature(self, shape: SegmentShape) -> dict[str, tf.TensorSpec]:
        """The `tf.TensorSpec` of every batch field for `shape` (no `None` dims): `mel`
        float32 [B, frames, n_mels] and `audio` float32 [B, frames * hop_length]."""
        b, f = shape.batch_size, shape.frames
        return {
            "mel": tf.TensorSpec([b, f, self.n_mels], tf.float32),
            "audio": tf.TensorSpec([b, f * self.hop_length], tf.float32),
        }

    @property
    def signatures(self) -> list[dict[str, tf.TensorSpec]]:
        """`signature(shape)` for every shape: the trainer's input signatures."""
        return [self.signature(shape) for shape in self.shapes]

    def matches(self, batch: dict[str, tf.Tensor]) -> SegmentShape | None:
        """The shape `batch` has, or None when it matches no shape of this spec."""
        return matching_shape(self, batch)

    @staticmethod
    def key_of(batch: Mapping[str, Any]) -> tuple[int, int, int]:
        """(batch, frames, samples) of a batch: the `key` of the shape it has (or would
        have, outside the spec)."""
        b, f = batch["mel"].shape[:2]
        return int(b), int(f), int(batch["audio"].shape[1])


@dataclasses.dataclass(frozen=True, kw_only=True)
class DropTooShort:
    """Drop the utterances shorter than a segment.

    Attributes:
        min_frames: mel frames an utterance needs at least (`segment_frames`).
    """

    min_frames: int

    def __post_init__(self):
        _check_counts(self, "min_frames")

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        return ds.filter(lambda e: e["frames"] >= self.min_frames)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CutSegments:
    """Cut one aligned mel/waveform segment out of each utterance, at a random frame.

    In: utterances with `frames` int32 F, `mel` float32 [F, n_mels] and `audio` float32
    [S] (mel frame i centred on sample i * hop_length), F >= `frames`. Out: `mel` float32
    [frames, n_mels], rows s .. s + frames - 1, and `audio` float32 [frames * hop_length],
    samples from s * hop_length on, zero past the waveform's end (the last frames' centres
    may lie past its last sample). s is uniform in [0, F - frames], drawn by a stateless
    op from (seed, element index): the same seed and element order give the same segments.

    Attributes:
        frames: mel frames per segment.
        hop_length: waveform samples per frame.
        n_mels: mel channels.
        seed: the start frames' seed.
        deterministic: keep the order of elements under parallel mapping.
    """

    frames: int
    hop_length: int
    n_mels: int
    seed: int
    deterministic: bool = False

    def __post_init__(self):
        _check_counts(self, "frames", "hop_length", "n_mels")
        if not is_int(self.seed):
            raise ConfigError(f"Expected seed an int, received: seed={self.seed!r}")

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        return ds.enumerate().map(  # the element index seeds its start: reproducible
            lambda index, e: self.cut(e, tf.stack([tf.constant(self.seed, tf.int64), index])),
            num_parallel_calls=AUTOTUNE,
            deterministic=self.deterministic,
        )

    def cut(self, utterance: dict[str, tf.Tensor], seed: tf.Tensor) -> dict[str, tf.Tensor]:
        """The segment of one utterance; `seed` int64 [2] draws its start frame."""
        room = utterance["frames"] - self.frames  # >= 0: shorter ones were dropped
        start = tf.random.stateless_uniform(
            [], seed, minval=0, maxval=room + 1, dtype=tf.int32
        )  # uniform in [0, room]
        samples = self.frames * self.hop_length
        mel = utterance["mel"][start : start + self.frames]  # (frames, M)
        audio = utterance["audio"][start * self.hop_length :][:samples]  # (<= samples,)
        audio = tf.pad(audio, [[0, samples - tf.shape(audio)[0]]])  # (samples,)
        return {
            "mel": tf.reshape(mel, [self.frames, self.n_mels]),  # static shapes from here
            "audio": tf.reshape(audio, [samples]),
        }


@dataclasses.dataclass(frozen=True, kw_only=True)
class BatchSegments:
    """Stack segments into batches of one static shape, the remainder dropped.

    Attributes:
        batch_size: segments per batch.
        deterministic: keep the order of batches under parallel batching.
    """

    batch_size: int
    deterministic: bool = False

    def __post_init__(self):
        _check_counts(self, "batch_size")

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        return ds.batch(
            self.batch_size,
            drop_remainder=True,
            num_parallel_calls=AUTOTUNE,
            deterministic=self.deterministic,
        )


@dataclasses.dataclass(frozen=True)
class SegmentPipeline:
    """A segment dataset and what is known about it before it runs.

    Attributes:
        dataset: batches of `mel` and `audio` (see `SegmentSpec.signature`).
        spec: the one static batch shape.
        split: `"train"`, `"val"` or `"all"`.
        num_samples: utterances of the split long enough for a segment.
        filtered: utterances of the split shorter than `segment_frames` (dropped).
        batches_per_epoch: `num_samples // batch_size`: an epoch cuts one segment of
            each utterance (with `repeat`, epochs run on into each other's batches).
        source: the cache path.
        in_memory: whether decoded utterances (waveforms too) stay in RAM after the
            first epoch.
    """

    dataset: tf.data.Dataset
    spec: SegmentSpec
    split: str
    num_samples: int
    filtered: int
    batches_per_epoch: int
    source: Path
    in_memory: bool = False


def make_segment_dataset(
    source, config: DataConfig, split: Split = "train", *, audio=None, repeat: bool = False
) -> SegmentPipeline:
    """Batches of aligned random mel/waveform segments from a feature cache, one shape.

    Each epoch cuts one segment of `config.segment_frames` frames (and the waveform under
    them) at a random frame of every utterance of the split; utterances shorter than a
    segment are dropped and counted (`filtered`). Batches hold `config.batch_size`
    segments. Shuffling, `keep_in_memory`, `seed`, `deterministic`, `service` and
    `prefetch_to_device` work as in `make_dataset`; with a `seed` and `deterministic`,
    the segments are the same every run.

    Args:
        source: a cache folder or an opened `FeatureCache`, built with
            `data.keep_audio` (whatever `config.keep_audio` says: it is a build setting).
        config: batching and pipeline settings.
        split: `"train"`, `"val"` (the `val_fraction` of ids held out) or `"all"`.
        audio: the mel recipe; checked against the cache's when given.
        repeat: repeat the utterances endlessly (what a training loop wants); otherwise
            the dataset is one epoch.

    Raises:
        CacheError: damaged cache, other feature settings than `config`/`audio`, or no
            waveforms in it (naming the command that rebuilds it with them).
        ConfigError: invalid split, a source that is not a cache, or too few utterances
            long enough for one batch.
    """
    select = SelectSplit(split=split, val_fraction=config.val_fraction)  # checks `split`
    src = _source.open_source(source, config, audio, with_audio=True)
    chosen, filtered = _choose(src, config, split, repeat=repeat)
    hop = src.audio.hop_length
    shape = SegmentShape(batch_size=config.batch_size, frames=config.segment_frames,
                         samples=config.segment_frames * hop)  # fmt: skip
    # Decoded float32 mels and waveforms: n_mels + hop values a frame.
    in_memory = keeps_in_memory(config, int(src.frames[chosen].sum()) * (src.n_mels + hop) * 4)
    seed = config.seed if config.seed is not None else random.SystemRandom().randrange(1 << 31)
    stages = (
        select,
        DropTooShort(min_frames=config.segment_frames),
        KeepInMemory(enabled=in_memory),
        Repeat(enabled=repeat),
        Shuffle(buffer=config.shuffle_buffer if split == "train" else 0, seed=config.seed),
        Distribute(service=config.service),
        CutSegments(
            frames=shape.frames,
            hop_length=hop,
            n_mels=src.n_mels,
            seed=seed,
            deterministic=config.deterministic,
        ),
        BatchSegments(batch_size=shape.batch_size, deterministic=config.deterministic),
        Prefetch(batches=PREFETCH_BATCHES, device=config.prefetch_to_device),
    )
    with _autograph.off():  # tf.data's functions traced as written
        dataset = Chain(stages)(src.elements())
    return SegmentPipeline(
        dataset=dataset,
        spec=SegmentSpec(shapes=(shape,), n_mels=src.n_mels, hop_length=hop),
        split=split,
        num_samples=int(chosen.sum()),
        filtered=filtered,
        batches_per_epoch=int(chosen.sum()) // shape.batch_size,
        source=src.path,
        in_memory=in_memory,
    )


def _choose(
    src: _source.Source, config: DataConfig, split: str, *, repeat: bool
) -> tuple[np.ndarray, int]:
    """The split's utterances long enough for a segment (bool [n]), and how many of the
    split are too short.

    Raises:
        ConfigError: none left, or (without `repeat`) too few for one batch.
    """
    keep = in_split(src.ids, split, config.val_fraction)
    long_enough = src.frames >= config.segment_frames
    chosen, short = keep & long_enough, int((keep & ~long_enough).sum())
    count = int(chosen.sum())
    if count == 0 or (count < config.batch_size and not repeat):
        raise ConfigError(
            f"{src.path}: split {split!r} has {count} utterance(s) of at least "
            f"segment_frames={config.segment_frames} frames ({short} shorter), too few for "
            f"one batch of batch_size={config.batch_size}; lower segment_frames"
            + (" or batch_size, or repeat" if count else "")
        )
    return chosen, short
