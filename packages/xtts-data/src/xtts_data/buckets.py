"""Static batch shapes: pick the K bucket boundaries that waste the least padding.

`plan_shapes` sees every utterance's lengths before training (from the cache manifest or
the WAV headers), so the shapes it returns are exactly the shapes the pipeline emits and
the trainer compiles: no surprise shape can appear later.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from xtts_data.config import DataConfig
from xtts_data.errors import ConfigError

__all__ = ["BatchShape", "assign", "plan_shapes"]


@dataclasses.dataclass(frozen=True, order=True, kw_only=True)
class BatchShape:
    """One static batch shape: `batch_size` utterances padded to `text_len` x `frames`.

    Shapes sort by frames first (buckets shortest first); `key` is the (batch, text,
    frames) tuple of a batch's tensor shapes, the one key of a shape everywhere else.
    """

    frames: int
    text_len: int
    batch_size: int

    @property
    def key(self) -> tuple[int, int, int]:
        """(batch, text, frames): the shape's key, in the order of the batch's dimensions."""
        return self.batch_size, self.text_len, self.frames


def plan_shapes(frames: np.ndarray, tokens: np.ndarray, config: DataConfig) -> list[BatchShape]:
    """The batch shapes for utterances of these lengths, shortest bucket first.

    `fixed`: one shape, `max_frames` x `max_text_len` (default: the longest, rounded up).
    `buckets`: at most `num_buckets` frame boundaries minimising total padded frames
    (dynamic programming over lengths rounded up to `pad_multiple`); each bucket's text
    length is its longest token sequence, rounded up; its batch size is
    `frame_budget // frames`, rounded down to `batch_multiple`, or `batch_sizes`' entry.

    Args:
        frames: int [n] mel frames per utterance (already filtered to the maxima).
        tokens: int [n] token ids per utterance.
        config: the batching settings.
    """
    if len(frames) == 0:
        raise ConfigError("Expected at least one utterance to plan batch shapes, received none")
    rounded = np.asarray([config.round_up(f) for f in frames])
    max_frames = config.max_frames or int(rounded.max())
    rounded = np.minimum(rounded, max_frames)  # a configured maximum is kept exactly
    max_text = config.max_text_len or config.round_up(int(np.max(tokens)))
    if config.policy == "fixed":
        return [BatchShape(frames=max_frames, text_len=max_text, batch_size=config.batch_size)]
    budget = config.frame_budget or config.batch_size * max_frames
    bounds = _boundaries(rounded, config.num_buckets)
    if config.batch_sizes is not None and len(config.batch_sizes) != len(bounds):
        raise ConfigError(
            f"Expected data.batch_sizes with one size per bucket ({len(bounds)}: frames "
            f"{bounds}), received: batch_sizes={list(config.batch_sizes)}"
        )
    shapes = []
    for bound in bounds:
        in_bucket = assign(
            frames, [*shapes, BatchShape(frames=bound, text_len=0, batch_size=0)]
        ) == len(shapes)
        text_len = min(config.round_up(int(tokens[in_bucket].max())), max_text)
        size = budget // bound // config.batch_multiple * config.batch_multiple
        if config.batch_sizes is not None:
            size = config.batch_sizes[len(shapes)]
        if size < 1:
            raise ConfigError(
                f"DataConfig.frame_budget: expected at least {bound * config.batch_multiple} "
                f"frames (one batch of the {bound}-frame bucket), received: frame_budget={budget}"
            )
        shapes.append(BatchShape(frames=bound, text_len=text_len, batch_size=size))
    return shapes


def assign(
    frames: np.ndarray, shapes: list[BatchShape], tokens: np.ndarray | None = None
) -> np.ndarray:
    """Index of the bucket each utterance falls in: the first whose frames hold it (and
    its text length its `tokens`, when given: joined items, `stages.BucketBatches`)."""
    bounds = np.asarray([s.frames for s in shapes])
    if tokens is None:
        return np.searchsorted(bounds, np.asarray(frames), side="left")
    text_lens = np.asarray([s.text_len for s in shapes])
    held = (np.asarray(frames)[:, None] <= bounds) & (np.asarray(tokens)[:, None] <= text_lens)
    return np.argmax(held, axis=1)


def _boundaries(rounded: np.ndarray, k: int) -> list[int]:
    """At most `k` upper bounds (ascending) minimising sum of each length's bucket bound."""
    values, counts = np.unique(rounded, return_counts=True)
    n = len(values)
    k = min(k, n)
    below = np.concatenate([[0], np.cumsum(counts)])  # utterances with value index < i
    # cost[j, i]: best padded total for the first i values using j buckets, last ends at i-1
    cost = np.full((k + 1, n + 1), np.inf)
    back = np.zeros((k + 1, n + 1), np.int64)
    cost[0, 0] = 0.0
    for j in range(1, k + 1):
        for i in range(1, n + 1):
            # the bucket holds values start..i-1, padded to values[i-1]
            options = cost[j - 1, :i] + (below[i] - below[:i]) * values[i - 1]
            back[j, i] = int(np.argmin(options))
            cost[j, i] = options[back[j, i]]
    j = int(np.argmin(cost[1:, n])) + 1
    bounds, i = [], n
    while j > 0:
        bounds.append(int(values[i - 1]))
        i, j = back[j, i], j - 1
    return sorted(bounds)
