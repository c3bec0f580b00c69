"""Speaker-conditioning references: another utterance of the same speaker, for every row.

A row takes a random crop of another utterance of its speaker in the same batch when
there is one (free, and different every epoch). Otherwise — many speakers, small batches —
it takes one of a few reference crops per speaker held in a small bank, loaded once when
the pipeline is built (from the cache shards that hold them, the earliest shards first).
Only a speaker with a single utterance conditions on itself.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

__all__ = ["Bank", "choose_references", "make_bank"]

BANK_BYTES = 64 << 20  # references shrink below `refs_per_speaker` to stay under this


def identity_keys(split: np.ndarray | tf.Tensor, frames: np.ndarray | tf.Tensor):
    """A per-utterance key (split hash bucket and length) to tell an utterance from others."""
    if isinstance(split, tf.Tensor):
        return tf.cast(split, tf.int64) * (1 << 24) + tf.cast(frames, tf.int64)
    return np.asarray(split, np.int64) * (1 << 24) + np.asarray(frames, np.int64)


@dataclasses.dataclass(frozen=True)
class Bank:
    """Reference crops sorted by speaker: `mel[start[s] : start[s] + count[s]]` are speaker s's."""

    mel: np.ndarray  # float32 [N, C, M]
    lengths: np.ndarray  # int32 [N]
    keys: np.ndarray  # int64 [N] identity keys
    start: np.ndarray  # int32 [S]
    count: np.ndarray  # int32 [S]


def choose_references(speakers: np.ndarray, order: np.ndarray, per_speaker: int) -> np.ndarray:
    """Indices of up to `per_speaker` utterances per speaker, earliest in `order` first.

    Args:
        speakers: int [n] speaker index of each candidate utterance.
        order: int [n] preference (e.g. shard index: fewer shards to read).
        per_speaker: references wanted per speaker.
    """
    chosen = []
    ranked = np.lexsort((np.arange(len(speakers)), order, speakers))  # by speaker, then order
    for speaker in np.unique(speakers):
        mine = ranked[speakers[ranked] == speaker]
        if len(mine) >= 2:  # a lone utterance has no "other" to offer
            chosen.extend(mine[:per_speaker].tolist())
    return np.asarray(chosen, np.int64)


def make_bank(
    mels: list[np.ndarray],
    speakers: np.ndarray,
    keys: np.ndarray,
    num_speakers: int,
    cond_frames: int,
    n_mels: int,
) -> Bank:
    """Centre crops of `mels` (chosen references, sorted by speaker) as a `Bank`."""
    crops = np.zeros((max(len(mels), 1), cond_frames, n_mels), np.float32)
    lengths = np.zeros(max(len(mels), 1), np.int32)
    for i, mel in enumerate(mels):
        start = max((len(mel) - cond_frames) // 2, 0)
        crop = mel[start : start + cond_frames]
        crops[i, : len(crop)] = crop
        lengths[i] = len(crop)
    count = np.bincount(speakers, minlength=num_speakers).astype(np.int32)
    start = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int32)
    padded_keys = np.full(max(len(mels), 1), -1, np.int64)
    padded_keys[: len(keys)] = keys
    return Bank(crops, lengths, padded_keys, start, count)


def per_speaker_limit(wanted: int, num_speakers: int, cond_frames: int, n_mels: int) -> int:
    """`wanted`, reduced so the bank stays under `BANK_BYTES` (at least one per speaker)."""
    each = max(num_speakers, 1) * cond_frames * n_mels * 4
    return max(1, min(wanted, BANK_BYTES // each))


def from_bank(bank: Bank, speaker: tf.Tensor, keys: tf.Tensor, u: tf.Tensor):
    """For each row, a bank reference of its speaker that is not the row itself.

    Args:
        bank: the references.
        speaker: int32 [B]; keys: int64 [B] identity keys of the rows; u: float32 [B] in [0, 1).

    Returns:
        (mel float32 [B, C, M], lengths int32 [B], found bool [B]).
    """
    start = tf.gather(tf.constant(bank.start), speaker)
    count = tf.gather(tf.constant(bank.count), speaker)
    pick = tf.minimum(tf.cast(u * tf.cast(count, tf.float32), tf.int32), tf.maximum(count - 1, 0))
    last = len(bank.lengths) - 1  # a speaker without references may point past the end
    index = tf.minimum(start + pick, last)
    is_self = tf.equal(tf.gather(tf.constant(bank.keys), index), keys) & (count > 0)
    index = tf.where(is_self, start + (pick + 1) % tf.maximum(count, 1), index)  # the next one
    index = tf.minimum(index, last)
    found = (count >= 2) | ((count == 1) & ~is_self)
    mel = tf.gather(tf.constant(bank.mel), index)
    return mel, tf.gather(tf.constant(bank.lengths), index), found
