"""WAV decoding in pure TensorFlow: a RIFF chunk walker built on `decode_raw` and `substr`.

`decode_wav` reads what `soundfile.read(path, dtype="float32", always_2d=True)` reads
from a WAV file, bit for bit: PCM 8 (unsigned), 16, 24 and 32-bit, IEEE float 32 and 64,
plain or WAVE_FORMAT_EXTENSIBLE, with any other chunks (LIST, fact, PEAK, odd-sized ones)
before or after 'data'. It runs eagerly, in `tf.function` and inside `tf.data.Dataset.map`,
but not under `jit_compile=True`: string tensors cannot enter XLA.

Malformed files are found while the graph runs, so they raise
`tf.errors.InvalidArgumentError` with one message per fault; every check passes before
any sample is decoded.

The graph is kept small because per-op overhead, not the sample conversion, is what a
one-second file costs: scalars travel packed in int64 vectors and are unpacked with one
`tf.unstack`, the chunk walk is one `tf.while_loop` that a canonical 44-byte header skips,
and error messages are formatted only on the failing branch.
"""

from __future__ import annotations

import os

import tensorflow as tf

from xtts_audio.errors import InputError

__all__ = ["decode_wav", "load_wav"]


def _fourcc(code: bytes) -> int:
    return int.from_bytes(code, "little")


_RIFF, _WAVE, _FMT, _DATA = (_fourcc(c) for c in (b"RIFF", b"WAVE", b"fmt ", b"data"))
_PCM, _FLOAT, _EXTENSIBLE = 1, 3, 0xFFFE
_HEADER = 44  # bytes of the canonical header: RIFF, 'fmt ' of 16 bytes, 'data'
_FMT_READ = 26  # 'fmt ' bytes read: the 16 common ones, cbSize, …, the sub-format tag
_U8, _S16, _S24, _S32, _F32, _F64 = range(6)  # codec ids: the branches of `_decoders`
_U32 = 0xFFFFFFFF


def _u32_words(contents: tf.Tensor, pos, nbytes: int) -> tf.Tensor:
    """`nbytes` bytes from `pos` (zero-padded past the end) as unsigned 32-bit words.

    Args:
        contents: string scalar.
        pos: int scalar, at most the length of `contents`.
        nbytes: multiple of 4.

    Returns:
        int64 [nbytes // 4].
    """
    raw = tf.strings.substr(contents, pos, tf.constant(nbytes, tf.int64))
    words = tf.io.decode_raw(raw, tf.int32, fixed_length=nbytes)
    return tf.bitwise.bitwise_and(tf.cast(words, tf.int64), _U32)


def _start(head: tf.Tensor, length: tf.Tensor) -> tf.Tensor:
    """Walk state before the first step; a canonical 44-byte header needs no step at all.

    Args:
        head: int64 [11], the first 44 bytes as unsigned 32-bit words.
        length: int64 scalar, file size in bytes.

    Returns:
        int64 [5] walk state: next chunk offset, then body offset and size of 'fmt ' and
        of 'data' (offset -1 while not found). Not RIFF/WAVE: the walk starts at the end.
    """
    riff, _, wave, chunk, size, *_, data, data_size = tf.unstack(head)
    canonical = (chunk == _FMT) & (size == 16) & (data == _DATA)
    pad = tf.bitwise.bitwise_and(data_size, 1)
    known = tf.stack([_HEADER + data_size + pad, 20, 16, _HEADER, data_size])
    first = tf.where((riff == _RIFF) & (wave == _WAVE), tf.constant(12, tf.int64), length)
    return tf.where(canonical, known, tf.stack([first, -1, 0, -1, 0]))


def _walk(contents: tf.Tensor, length: tf.Tensor, start: tf.Tensor) -> tf.Tensor:
    """Steps chunk by chunk until both 'fmt ' and 'data' are found or the file ends.

    Args:
        contents: string scalar, the file.
        length: int64 scalar, its size in bytes.
        start: int64 [5] walk state from `_start`.

    Returns:
        int64 [5] final walk state; a chunk header cut off by the end of the file leaves
        its offset (< length) in the first entry.
    """

    def searching(state):
        offset, fmt_pos, _, data_pos, _ = tf.unstack(state)
        return (offset + 8 <= length) & (tf.minimum(fmt_pos, data_pos) < 0)

    def step(state):
        offset, fmt_pos, fmt_size, data_pos, data_size = tf.unstack(state)
        chunk, size = tf.unstack(_u32_words(contents, offset, 8))
        body = offset + 8
        is_fmt = (chunk == _FMT) & (fmt_pos < 0)
        is_data = (chunk == _DATA) & (data_pos < 0)
        return [
            tf.stack(
                [
                    body + size + tf.bitwise.bitwise_and(size, 1),  # RIFF pads chunks to even size
                    tf.where(is_fmt, body, fmt_pos),
                    tf.where(is_fmt, size, fmt_size),
                    tf.where(is_data, body, data_pos),
                    tf.where(is_data, size, data_size),
                ]
            )
        ]

    return tf.while_loop(searching, step, [start])[0]


def _read_fmt(contents: tf.Tensor, fmt_pos: tf.Tensor) -> tf.Tensor:
    """The 'fmt ' fields (garbage, but safe to read, when the chunk is missing).

    Args:
        contents: string scalar, the file.
        fmt_pos: int64 scalar, offset of the 'fmt ' body (-1 if not found).

    Returns:
        int64 [6]: format tag, tag after resolving WAVE_FORMAT_EXTENSIBLE's sub-format,
        channels, sample rate, block align, bits per sample.
    """
    raw = tf.strings.substr(contents, tf.maximum(fmt_pos, 0), tf.constant(_FMT_READ, tf.int64))
    words = tf.cast(tf.io.decode_raw(raw, tf.uint16, fixed_length=_FMT_READ), tf.int64)
    tag, channels, rate_low, rate_high, _, _, align, bits, *_, sub_tag = tf.unstack(words)
    resolved = tf.where(tag == _EXTENSIBLE, sub_tag, tag)
    return tf.stack([tag, resolved, channels, rate_low + rate_high * 65536, align, bits])


def _codec(tag: tf.Tensor, bits: tf.Tensor) -> tf.Tensor:
    """int64 scalar codec id (`_U8` … `_F64`), or -1 when tag or bit depth is unsupported."""
    pcm = (tag == _PCM) & (tf.bitwise.bitwise_and(bits, 7) == 0) & (bits >= 8) & (bits <= 32)
    flt = (tag == _FLOAT) & ((bits == 32) | (bits == 64))
    return tf.where(pcm, bits // 8 - 1, tf.where(flt, _F32 + bits // 64, -1))


def _validate(length: tf.Tensor, head: tf.Tensor, state: tf.Tensor, fmt: tf.Tensor):
    """Runtime checks of the header, in the order their faults are reported.

    Args:
        length: int64 scalar, file size in bytes.
        head: int64 [11], the first 44 bytes as unsigned 32-bit words.
        state: int64 [5] final walk state.
        fmt: int64 [6] from `_read_fmt`.

    Returns:
        `(oks, facts)`: bool [12], True where a check passes (order of `_MESSAGES`), and
        int64 [9], the numbers the messages quote.
    """
    offset, fmt_pos, fmt_size, data_pos, data_size = tf.unstack(state)
    tag, resolved, channels, _, align, bits = tf.unstack(fmt)
    riff = (head[0] == _RIFF) & (head[2] == _WAVE)
    fmt_bytes = tf.minimum(fmt_size, length - fmt_pos)
    present = length - data_pos
    oks = tf.stack(
        [
            length >= 12,
            riff,
            (tf.minimum(fmt_pos, data_pos) >= 0) | (offset >= length),
            fmt_pos >= 0,
            fmt_bytes >= 16,
            data_pos >= 0,
            (tag != _EXTENSIBLE) | (fmt_bytes >= 40),
            (resolved == _PCM) | (resolved == _FLOAT),
            channels > 0,
            _codec(resolved, bits) >= 0,
            align * 8 == channels * bits,
            data_size <= present,
        ]
    )
    facts = [length, offset, fmt_bytes, resolved, channels, bits, align, data_size, present]
    return oks, tf.stack(facts)
    return oks, facts


def _messages(facts: tf.Tensor) -> tf.Tensor:
    """string [12]: the message of each check of `_validate`, quoting `facts` (int64 [9])."""
    length, offset, fmt_bytes, tag, channels, bits, align, data_size, present = tf.unstack(facts)
    kind = tf.where(tag == _PCM, "PCM (8, 16, 24 or 32 supported)", "float (32 or 64 supported)")
    f = tf.strings.format
    return tf.stack(
        [
            f("truncated header: file has {} bytes, fewer than the 12 of a RIFF header", length),
            tf.constant("not a RIFF/WAVE file: expected 'RIFF' at byte 0 and 'WAVE' at byte 8"),
            f("truncated header: chunk header at byte {} cut off by the end of the file", offset),
            tf.constant("no 'fmt ' chunk in the RIFF/WAVE file"),
            f("truncated header: 'fmt ' chunk has {} bytes, expected at least 16", fmt_bytes),
            tf.constant("no 'data' chunk in the RIFF/WAVE file"),
            f(
                "truncated header: WAVE_FORMAT_EXTENSIBLE 'fmt ' chunk has {} bytes, expected 40",
                fmt_bytes,
            ),  # noqa: E501
            f("unsupported codec: format tag {} (supported: 1 = PCM, 3 = IEEE float)", tag),
            tf.constant("zero channels in the 'fmt ' chunk"),
            f("unsupported bits per sample {} for {}", (bits, kind)),
            f(
                "block align inconsistent with channels × bits: block_align={}, channels={}, bits={}",
                (align, channels, bits),
            ),
            f("data chunk declares {} bytes but only {} are present", (data_size, present)),
        ]
    )


def _assert_valid(oks: tf.Tensor, facts: tf.Tensor) -> tf.Tensor:
    """Raises the first failing check's message; formats messages only if one fails.

    Args:
        oks: bool [12] from `_validate`.
        facts: int64 [9] from `_validate`.

    Returns:
        bool scalar (True) to hang the decoding on with a control dependency.

    Raises:
        tf.errors.InvalidArgumentError: some check fails.
    """

    def fail():
        first = tf.argmin(tf.cast(oks, tf.int32))
        with tf.control_dependencies([tf.debugging.Assert(False, [_messages(facts)[first]])]):
            return tf.constant(False)

    return tf.cond(tf.reduce_all(oks), lambda: tf.constant(True), fail)


def _decoders(payload: tf.Tensor) -> list:
    """Branches of the codec switch: payload bytes → float32 [samples], soundfile's scaling."""

    def pcm(dtype, scale):
        return lambda: tf.cast(tf.io.decode_raw(payload, dtype), tf.float32) * scale

    def u8():
        return (tf.cast(tf.io.decode_raw(payload, tf.uint8), tf.float32) - 128.0) * (1.0 / 128)

    def s24():
        triples = tf.reshape(tf.io.decode_raw(payload, tf.uint8), [-1, 3])  # (samples, 3)
        low = tf.cast(triples[:, 0], tf.int32) + tf.cast(triples[:, 1], tf.int32) * 256
        high = tf.cast(tf.bitcast(triples[:, 2], tf.int8), tf.int32)  # sign-extends
        return tf.cast(low + high * 65536, tf.float32) * 2.0**-23

    def f32():
        return tf.io.decode_raw(payload, tf.float32)

    def f64():
        return tf.cast(tf.io.decode_raw(payload, tf.float64), tf.float32)

    return [u8, pcm(tf.int16, 2.0**-15), s24, pcm(tf.int32, 2.0**-31), f32, f64]


def _as_contents(contents) -> tf.Tensor:
    contents = tf.convert_to_tensor(contents)
    if contents.dtype != tf.string or contents.shape.rank not in (0, None):
        raise InputError(
            "Expected a scalar tf.string tensor of WAV file bytes, received: "
            f"contents.dtype={contents.dtype.name}, contents.shape={contents.shape}"
        )
    return contents


def decode_wav(contents) -> tuple[tf.Tensor, tf.Tensor]:
    """Decodes WAV file bytes to float32 samples, bit-exact with `soundfile.read`.

    Reads PCM 8-bit (unsigned), 16, 24 and 32-bit, IEEE float 32 and 64, plain or
    WAVE_FORMAT_EXTENSIBLE; other chunks (LIST, fact, …) and odd-sized chunks are skipped.
    Integers scale as libsndfile does (int16 / 2^15, int24 / 2^23, float32(int32) * 2^-31,
    (uint8 - 128) / 128); float64 is rounded to float32. A trailing partial frame is dropped.
    Runs eagerly, in `tf.function` and in `tf.data`; not under XLA (`jit_compile=True`),
    which cannot take string tensors.

    Args:
        contents: string scalar, the bytes of a WAV file.

    Returns:
        `(audio, sample_rate)`: audio float32 [samples, channels] (static shape
        [None, None]), sample_rate int32 scalar.

    Raises:
        InputError: `contents` is not a scalar string tensor.
        tf.errors.InvalidArgumentError: when run on a malformed or unsupported file (not
            RIFF/WAVE, truncated header, no 'fmt ' or 'data' chunk, unsupported codec or
            bit depth, zero channels, inconsistent block align, truncated data).
    """
    contents = _as_contents(contents)
    length = tf.cast(tf.strings.length(contents), tf.int64)
    head = _u32_words(contents, tf.constant(0, tf.int64), _HEADER)  # (11,)
    state = _walk(contents, length, _start(head, length))
    fmt = _read_fmt(contents, state[1])
    _, resolved, channels, rate, align, bits = tf.unstack(fmt)
    with tf.control_dependencies([_assert_valid(*_validate(length, head, state, fmt))]):
        block = tf.maximum(align, 1)
        payload = tf.strings.substr(contents, state[3], state[4] // block * block)
    codec = tf.cast(_codec(resolved, bits), tf.int32)
    samples = tf.switch_case(codec, _decoders(payload))  # (frames * channels,)
    audio = tf.reshape(samples, tf.stack([-1, tf.cast(channels, tf.int32)]))
    return audio, tf.cast(rate, tf.int32)


def load_wav(path) -> tuple[tf.Tensor, tf.Tensor]:
    """Reads and decodes a WAV file: `decode_wav(tf.io.read_file(path))`.

    Args:
        path: str, `os.PathLike` or string scalar tensor.

    Returns:
        `(audio, sample_rate)`: audio float32 [samples, channels], sample_rate int32 scalar.

    Raises:
        tf.errors.NotFoundError: the file does not exist.
        tf.errors.InvalidArgumentError: the file is not a WAV file `decode_wav` can read.
    """
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    return decode_wav(tf.io.read_file(path))
