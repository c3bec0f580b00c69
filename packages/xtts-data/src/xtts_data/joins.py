"""Training items longer than the clips: utterances of one speaker joined on the fly.

An attention model trained only on clips of a few seconds loses its place past their
length: asked for a paragraph it stops after about half, or runs on. `JoinUtterances`
(`DataConfig.join`) hands it longer items: the shuffled utterances of each speaker are
taken `join` at a time, and each such window becomes one item of its first 1 to `join`
utterances (the count drawn evenly), a pause of silence between them, then the window's
others one by one. An item is joined only as far as one of the planned batch shapes holds
it, so nothing is dropped; `joined_lengths` predicts an epoch's item lengths the same way,
so `make_dataset` plans the static shapes before anything runs. No Python op: the stage is
`group_by_window` and tensor slicing.

A joined item's tokens are its utterances' in order, each one's `<eos>` (and, for all but
the first, its language token) replaced by one space; its mel is theirs with
`pause_frames(join_pause)` frames of `silence_feature` between; its stop target is its end.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from xtts_audio import MelConfig, normalize
from xtts_data.buckets import BatchShape
from xtts_data.pieces import pause_frames  # its owner, without TensorFlow
from xtts_data.stages import check_int
from xtts_data.text import Tokenizer

__all__ = [
    "JoinUtterances",
    "TokenJoin",
    "joined_lengths",
    "pause_frames",
    "silence_feature",
]

_FIELDS = ("frames", "speaker", "split", "tokens", "mel")  # an utterance (`stages`)


def silence_feature(audio: MelConfig) -> float:
    """The recipe's feature value of zero energy: what a pause is made of."""
    return float(normalize(tf.zeros([1, 1]), audio)[0, 0])


@dataclasses.dataclass(frozen=True, kw_only=True)
class TokenJoin:
    """How two utterances' token ids meet in one item.

    Attributes:
        lead: ids that open every utterance (its language token): 0 or 1.
        space: the id put between two utterances (a space), or None where the vocabulary
            has no space (then nothing is put between).
    """

    lead: int
    space: int | None

    @classmethod
    def of(cls, tokenizer: Tokenizer) -> TokenJoin:
        """The join of the vocabulary the ids come from."""
        return cls(lead=1 if tokenizer.language_tokens else 0,
                   space=tokenizer.token_ids().get(" "))  # fmt: skip

    @property
    def change(self) -> int:
        """Ids an item gains per utterance joined after the first (the `<eos>` and the
        lead dropped, a space added): 0 or -1 or -2."""
        return (self.space is not None) - 1 - self.lead


def joined_lengths(
    frames: np.ndarray,
    tokens: np.ndarray,
    speakers: np.ndarray,
    *,
    most: int,
    pause: int,
    join: TokenJoin,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The frames and tokens of one epoch's items, as `JoinUtterances` would make them
    from a shuffle of these utterances (the shapes are not known yet: nothing is held
    back for them).

    Args:
        frames, tokens, speakers: int [n] per utterance.
        most: `DataConfig.join`.
        pause: frames between two joined utterances.
        join: how their ids meet.
        seed: the shuffle's and the draws' seed.

    Returns:
        `(frames, tokens)`, int64 [items] each.
    """
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(frames))
    out_frames, out_tokens = [], []
    for speaker in np.unique(speakers):
        mine = order[speakers[order] == speaker]
        for start in range(0, len(mine), most):
            window = mine[start : start + most]
            count = min(int(rng.integers(1, most + 1)), len(window))
            out_frames.append(frames[window[:count]].sum() + (count - 1) * pause)
            out_tokens.append(tokens[window[:count]].sum() + (count - 1) * join.change)
            out_frames.extend(frames[window[count:]])
            out_tokens.extend(tokens[window[count:]])
    return np.asarray(out_frames, np.int64), np.asarray(out_tokens, np.int64)


@dataclasses.dataclass(frozen=True, kw_only=True)
class JoinUtterances:
    """Join up to `most` utterances of one speaker into one item (see the module).

    In and out: utterances (`frames`, `speaker`, `split` int32 scalars, `tokens` int32
    [T], `mel` float32 [F, n_mels]); a joined item keeps its first utterance's `split`.
    Window i draws its count from the seed (seed, i): reproducible for a given seed. A
    window whose first utterance comes before stream position `start` is not joined.

    Attributes:
        most: utterances joined at most; 1 returns the input.
        pause: frames of silence between two joined utterances.
        silence: the feature value of those frames.
        join: how their token ids meet.
        shapes: the batch shapes; an item is joined only as far as one holds it.
        seed: the draws' seed.
        start: utterances of the stream read before joining begins (a curriculum:
            `DataConfig.join_from_epoch` epochs); 0: from the first.
    """

    most: int
    pause: int
    silence: float
    join: TokenJoin
    shapes: tuple[BatchShape, ...]
    seed: int
    start: int = 0

    def __post_init__(self):
        check_int("most", self.most, least=1)
        check_int("pause", self.pause, least=0)
        check_int("start", self.start, least=0)

    def __call__(self, ds: tf.data.Dataset) -> tf.data.Dataset:
        if self.most == 1:
            return ds
        numbered = ds.enumerate().map(lambda i, e: ({k: e[k] for k in _FIELDS}, i))
        return numbered.group_by_window(
            key_func=lambda e, i: tf.cast(e["speaker"], tf.int64),
            reduce_func=lambda key, window: window.padded_batch(self.most).flat_map(self._items),
            window_size=self.most,
        )

    def _items(self, rows: dict[str, tf.Tensor], index: tf.Tensor) -> tf.data.Dataset:
        """A window's items: its first `count` rows joined, then the others alone.

        Args:
            rows: up to `most` utterances padded together: `tokens` (n, T), `mel` (n, F, M).
            index: int64 (n,): their places in the stream (the first seeds the draw).
        """
        lengths = tf.reduce_sum(tf.cast(rows["tokens"] != 0, tf.int32), axis=1)  # PAD is 0
        count = self._count(rows["frames"], lengths, tf.stack([self.seed, index[0]]))
        count = tf.where(index[0] < self.start, 1, count)  # the curriculum's single items
        first = self._joined(rows, lengths, count)
        rest = {k: v[count:] for k, v in rows.items()}
        rest["lengths"] = lengths[count:]
        others = tf.data.Dataset.from_tensor_slices(rest).map(_unpadded)
        return tf.data.Dataset.from_tensors(first).concatenate(others)

    def _count(self, frames: tf.Tensor, lengths: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        """How many leading rows to join: the drawn count, or fewer where no shape holds
        them; at least 1 (one utterance always fits a shape)."""
        want = tf.random.stateless_uniform([], seed, minval=1, maxval=self.most + 1,
                                           dtype=tf.int32)  # fmt: skip
        step = tf.range(tf.shape(frames)[0])
        total_frames = tf.cumsum(frames) + step * self.pause  # (n,)
        total_tokens = tf.cumsum(lengths) + step * self.join.change
        bounds = tf.constant([s.frames for s in self.shapes], tf.int32)
        text_lens = tf.constant([s.text_len for s in self.shapes], tf.int32)
        held = (total_frames[:, None] <= bounds) & (total_tokens[:, None] <= text_lens)
        fits = tf.reduce_any(held, axis=1) & (step < want)
        leading = tf.reduce_sum(tf.math.cumprod(tf.cast(fits, tf.int32)))
        return tf.maximum(leading, 1)

    def _joined(self, rows, lengths, count) -> dict[str, tf.Tensor]:
        """The first `count` rows as one utterance (a static loop over `most` rows)."""
        missing = self.most - tf.shape(rows["frames"])[0]
        tokens = tf.pad(rows["tokens"], [[0, missing], [0, 0]])
        mel = tf.pad(rows["mel"], [[0, missing], [0, 0], [0, 0]])
        frames = tf.pad(rows["frames"], [[0, missing]])
        lengths = tf.pad(lengths, [[0, missing]])
        n_mels = tf.shape(mel)[2]
        mels, ids = [], []
        for j in range(self.most):
            taken = j < count
            if j:
                gap = tf.where(taken, self.pause, 0)
                mels.append(tf.fill(tf.stack([gap, n_mels]), self.silence))
                if self.join.space is not None:
                    ids.append(tf.fill(tf.where(taken, 1, 0)[None], self.join.space))
            mels.append(mel[j, : tf.where(taken, frames[j], 0)])
            start = self.join.lead if j else 0  # the language token opens the item only
            ids.append(tokens[j, start : tf.where(taken, lengths[j] - 1, start)])  # no <eos>
        ids.append(tf.constant([Tokenizer.EOS], tf.int32))
        used = tf.range(self.most) < count
        return {
            "frames": tf.reduce_sum(tf.where(used, frames, 0)) + (count - 1) * self.pause,
            "speaker": rows["speaker"][0],
            "split": rows["split"][0],
            "tokens": tf.concat(ids, axis=0),
            "mel": tf.concat(mels, axis=0),
        }


def _unpadded(row: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """One row of a padded window back to its own lengths."""
    return {
        "frames": row["frames"],
        "speaker": row["speaker"],
        "split": row["split"],
        "tokens": row["tokens"][: row["lengths"]],
        "mel": row["mel"][: row["frames"]],
    }
