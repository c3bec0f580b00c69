"""The cache's record format: one utterance per TFRecord record, decoded with one copy.

A record is little-endian 4-byte words, so the whole record is read by a single
`tf.io.decode_raw` and cut into fields by slicing (no protobuf parse, no per-field copy):

```
word 0      MAGIC
word 1      frames F          word 2   tokens T        word 3   speaker index
word 4      split bucket      word 5   id length in bytes
word 6      waveform samples S (0 in a cache built without `data.keep_audio`)
words 7..   T token ids (int32), then F x n_mels mel values (float32, row-major),
            then S int16 PCM samples (two per word, the last word zero-padded),
            then the UTF-8 id, zero-padded to a whole word
```
The waveform is the one the mel was computed from (resampled and trimmed): with the
recipe's `center=True`, mel frame i is centred on sample i * hop_length, and
`xtts_audio.num_frames(S) == F`. It is stored as int16 (float x 32767, rounded and
clipped) and read back as int16 / 32768, as libsndfile does.

The split bucket (`split_bucket(id)`) decides train/validation membership without
hashing strings while training.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import tensorflow as tf

__all__ = [
    "HEADER_WORDS",
    "MAGIC",
    "SPLIT_BUCKETS",
    "decode",
    "decode_id",
    "encode",
    "read_header",
    "split_bucket",
    "with_mel",
    "write_shard",
]

MAGIC = 0x32545458  # b"XTT2" read as a little-endian int32 (b"XTT1": no waveform word)
HEADER_WORDS = 7
SPLIT_BUCKETS = 1_000_000
PCM_SCALE = 32767.0  # float -> int16 on write; int16 / 32768 on read


def split_bucket(ids) -> tf.Tensor:
    """Stable hash bucket in [0, SPLIT_BUCKETS) of utterance ids (string tensor-like)."""
    return tf.cast(tf.strings.to_hash_bucket_fast(ids, SPLIT_BUCKETS), tf.int32)


def encode(
    uid: str, speaker: int, tokens, mel: np.ndarray, bucket: int, audio: np.ndarray | None = None
) -> bytes:
    """The record of one utterance (see the module docstring for the layout).

    Args:
        uid: the utterance id.
        speaker: its speaker index.
        tokens: int [T] token ids.
        mel: float32 [F, n_mels].
        bucket: its split bucket (`split_bucket(uid)`).
        audio: float32 [S] waveform the mel was computed from, in [-1, 1] (clipped
            outside), or None to store none.
    """
    name = uid.encode("utf-8")
    pcm = np.zeros(0, "<i2") if audio is None else _pcm(audio)
    header = [MAGIC, len(mel), len(tokens), speaker, bucket, len(name), len(pcm)]
    return b"".join(
        [
            np.asarray(header, "<i4").tobytes(),
            np.asarray(tokens, "<i4").tobytes(),
            np.ascontiguousarray(mel, "<f4").tobytes(),
            pcm.tobytes() + b"\0" * (2 * (len(pcm) % 2)),
            name + b"\0" * (-len(name) % 4),
        ]
    )


def with_mel(raw: bytes, mel: np.ndarray, n_mels: int) -> bytes:
    """The record `raw` with its mel replaced by `mel` (float32 [F, n_mels], its frames'
    count): every other byte, the waveform's included, is kept."""
    header = np.frombuffer(raw[: 4 * HEADER_WORDS], "<i4")
    frames, tokens = int(header[1]), int(header[2])
    mel = np.ascontiguousarray(mel, "<f4")
    if mel.shape != (frames, n_mels):
        raise ValueError(f"Expected a mel of shape {(frames, n_mels)} (the record's), "
                         f"received: shape={mel.shape}")  # fmt: skip
    start = 4 * (HEADER_WORDS + tokens)
    return raw[:start] + mel.tobytes() + raw[start + mel.nbytes :]


def write_shard(path: Path, records: Iterable[bytes]) -> None:
    """`records` as the TFRecord file `path`, atomically: a temp file beside it, synced,
    renamed (a killed or failed writer leaves no partial shard under the name)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tf.io.TFRecordWriter(str(tmp)) as writer:
            for raw in records:
                writer.write(raw)
        with open(tmp, "rb+") as file:  # the rename below must never expose unsynced bytes
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk must not stay full of a partial shard
        raise


def _pcm(audio: np.ndarray) -> np.ndarray:
    """int16 [S] little-endian PCM of float [S] samples."""
    scaled = np.round(np.asarray(audio, np.float64) * PCM_SCALE)
    return np.clip(scaled, -32768, 32767).astype("<i2")


def _audio_words(samples: int) -> int:
    """Words holding `samples` int16 samples (two per word)."""
    return (samples + 1) // 2


def read_header(raw: bytes, n_mels: int) -> dict[str, int | str] | str:
    """The header fields and id of one record (NumPy, no TensorFlow op), or why the record
    is not one: a wrong magic word, or a size other than its header says."""
    if len(raw) < 4 * HEADER_WORDS:
        return f"{len(raw)} bytes, shorter than a header"
    magic, frames, tokens, speaker, _bucket, id_bytes, samples = np.frombuffer(
        raw[: 4 * HEADER_WORDS], "<i4"
    ).tolist()
    if magic != MAGIC:
        return f"magic word {magic:#x}, expected {MAGIC:#x}"
    start = 4 * (HEADER_WORDS + tokens + frames * n_mels + _audio_words(samples))
    size = start + id_bytes + (-id_bytes % 4)
    if size != len(raw):
        return (f"{len(raw)} bytes, its header says {size} ({frames} frames x {n_mels} mels, "
                f"{tokens} tokens, {samples} samples)")  # fmt: skip
    uid = raw[start : start + id_bytes].decode("utf-8", errors="replace")
    return {"id": uid, "frames": frames, "tokens": tokens, "speaker": speaker, "samples": samples}


def decode(record: tf.Tensor, n_mels: int) -> dict[str, tf.Tensor]:
    """Fields of one record. Works in graph mode and inside `tf.data`.

    Returns:
        `frames`, `speaker`, `split` int32 scalars, `tokens` int32 [T], `mel` float32
        [F, n_mels] and `audio` float32 [S] (int16 / 32768; [0] in a cache built
        without `data.keep_audio`).
    """
    words = tf.io.decode_raw(record, tf.float32)  # the one copy
    header = tf.bitcast(words[:HEADER_WORDS], tf.int32)
    frames, count, samples = header[1], header[2], header[6]
    tokens_end = HEADER_WORDS + count
    mel_end = tokens_end + frames * n_mels
    pcm = tf.bitcast(words[mel_end : mel_end + _audio_words(samples)], tf.int16)  # (S/2, 2)
    return {
        "frames": frames,
        "speaker": header[3],
        "split": header[4],
        "tokens": tf.bitcast(words[HEADER_WORDS:tokens_end], tf.int32),
        "mel": tf.reshape(words[tokens_end:mel_end], [frames, n_mels]),
        "audio": tf.cast(tf.reshape(pcm, [-1])[:samples], tf.float32) / 32768.0,
    }


def decode_id(record: tf.Tensor, n_mels: int) -> tf.Tensor:
    """The utterance id stored at the end of a record (string scalar)."""
    header = tf.io.decode_raw(tf.strings.substr(record, 0, 4 * HEADER_WORDS), tf.int32)
    words = header[2] + header[1] * n_mels + _audio_words(header[6])
    return tf.strings.substr(record, 4 * (HEADER_WORDS + words), header[5])
