"""The cache's record format: one utterance per TFRecord record, decoded with one copy.

A record is little-endian 4-byte words, so the whole record is read by a single
`tf.io.decode_raw` and cut into fields by slicing (no protobuf parse, no per-field copy):

```
word 0      MAGIC
word 1      frames F          word 2   tokens T        word 3   speaker index
word 4      split bucket      word 5   id length in bytes
words 6..   T token ids (int32), then F x n_mels mel values (float32, row-major),
            then the UTF-8 id, zero-padded to a whole word
```
The split bucket (`split_bucket(id)`) decides train/validation membership without
hashing strings while training.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

__all__ = [
    "HEADER_WORDS",
    "MAGIC",
    "SPLIT_BUCKETS",
    "decode",
    "encode",
    "read_header",
    "split_bucket",
]

MAGIC = 0x31545458  # b"XTT1" read as a little-endian int32
HEADER_WORDS = 6
SPLIT_BUCKETS = 1_000_000


def split_bucket(ids) -> tf.Tensor:
    """Stable hash bucket in [0, SPLIT_BUCKETS) of utterance ids (string tensor-like)."""
    return tf.cast(tf.strings.to_hash_bucket_fast(ids, SPLIT_BUCKETS), tf.int32)


def encode(uid: str, speaker: int, tokens, mel: np.ndarray, bucket: int) -> bytes:
    """The record of one utterance (see the module docstring for the layout)."""
    name = uid.encode("utf-8")
    header = [MAGIC, len(mel), len(tokens), speaker, bucket, len(name)]
    padding = b"\0" * (-len(name) % 4)
    return b"".join(
        [
            np.asarray(header, "<i4").tobytes(),
            np.asarray(tokens, "<i4").tobytes(),
            np.ascontiguousarray(mel, "<f4").tobytes(),
            name + padding,
        ]
    )


def read_header(raw: bytes, n_mels: int) -> dict[str, int | str] | str:
    """The header fields and id of one record (NumPy, no TensorFlow op), or why the record
    is not one: a wrong magic word, or a size other than its header says."""
    if len(raw) < 4 * HEADER_WORDS:
        return f"{len(raw)} bytes, shorter than a header"
    magic, frames, tokens, speaker, _bucket, id_bytes = np.frombuffer(
        raw[: 4 * HEADER_WORDS], "<i4"
    ).tolist()
    if magic != MAGIC:
        return f"magic word {magic:#x}, expected {MAGIC:#x}"
    start = 4 * (HEADER_WORDS + tokens + frames * n_mels)
    size = start + id_bytes + (-id_bytes % 4)
    if size != len(raw):
        return (f"{len(raw)} bytes, its header says {size} ({frames} frames x {n_mels} mels, "
                f"{tokens} tokens)")  # fmt: skip
    uid = raw[start : start + id_bytes].decode("utf-8", errors="replace")
    return {"id": uid, "frames": frames, "tokens": tokens, "speaker": speaker}


def decode(record: tf.Tensor, n_mels: int) -> dict[str, tf.Tensor]:
    """Fields of one record: `frames`, `speaker`, `split` (int32 scalars), `tokens` int32
    [T] and `mel` float32 [F, n_mels]. Works in graph mode and inside `tf.data`."""
    words = tf.io.decode_raw(record, tf.float32)  # the one copy
    header = tf.bitcast(words[:HEADER_WORDS], tf.int32)
    frames, count = header[1], header[2]
    tokens_end = HEADER_WORDS + count
    return {
        "frames": frames,
        "speaker": header[3],
        "split": header[4],
        "tokens": tf.bitcast(words[HEADER_WORDS:tokens_end], tf.int32),
        "mel": tf.reshape(words[tokens_end : tokens_end + frames * n_mels], [frames, n_mels]),
    }


def decode_id(record: tf.Tensor, n_mels: int) -> tf.Tensor:
    """The utterance id stored at the end of a record (string scalar)."""
    header = tf.io.decode_raw(tf.strings.substr(record, 0, 4 * HEADER_WORDS), tf.int32)
    start = 4 * (HEADER_WORDS + header[2] + header[1] * n_mels)
    return tf.strings.substr(record, start, header[5])
