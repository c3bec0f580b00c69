"""WAV decoding in pure TensorFlow: a RIFF chunk walker built on `decode_raw` and `substr`.

`decode_wav` reads what `soundfile.read(path, dtype="float32", always_2d=True)` reads
from a WAV file, bit for bit: PCM 8 (unsigned), 16, 24 and 32-bit, IEEE float 32 and 64,
plain or WAVE_FORMAT_EXTENSIBLE, with any other chunks (LIST, fact, PEAK, odd-sized ones)
before or after 'data'. It runs eagerly, in `tf.function` and inside `tf.data.Dataset.map`,
but not under `jit_compile=True`: string tensors cannot enter XLA.

Malformed files are found while the graph runs, so they raise
`tf.errors.InvalidArgumentError`, one message per fault; no sample is decoded before every
check has passed.

Speed: for a file of a second or two, the graph's per-op overhead (about 0.5 µs an op on
CPU) costs as much as the samples, so the common case runs few ops. Plain 16-bit PCM (the
canonical 44-byte header, or one more chunk before 'data' as ffmpeg writes) is recognised
and checked by a few vector ops and decoded directly: the fast path. Every other file goes
to the general path (`_decode_general`: the chunk walk in a `tf.while_loop`, every check,
a `tf.switch_case` on the codec), a non-inlined function, so that skipping it costs one
graph node. The fast path takes only files the general path accepts, and decodes them with
the same decoder.
"""

from __future__ import annotations

import os
import string
import struct

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


def _u32_words(raw: tf.Tensor, nbytes: int) -> tf.Tensor:
    """The first `nbytes` of `raw` (zero-padded) as unsigned little-endian 32-bit words.

    Args:
        raw: string scalar.
        nbytes: multiple of 4.

    Returns:
        int64 [nbytes // 4].
    """
    words = tf.io.decode_raw(raw, tf.int32, fixed_length=nbytes)
    return tf.bitwise.bitwise_and(tf.cast(words, tf.int64), _U32)


def _walk(contents: tf.Tensor, length: tf.Tensor, riff: tf.Tensor) -> tf.Tensor:
    """Steps chunk by chunk from byte 12 until 'fmt ' and 'data' are found or the file ends.

    Args:
        contents: string scalar, the file.
        length: int64 scalar, its size in bytes.
        riff: bool scalar, whether the file starts as RIFF/WAVE (if not, nothing is walked).

    Returns:
        int64 [5] walk state: offset of the next chunk, then body offset and size of 'fmt '
        and of 'data' (offset -1 if not found). A chunk header cut off by the end of the
        file leaves its offset (< length) in the first entry.
    """

    def searching(state):
        offset, fmt_pos, _, data_pos, _ = tf.unstack(state)
        return (offset + 8 <= length) & (tf.minimum(fmt_pos, data_pos) < 0)

    def step(state):
        offset, fmt_pos, fmt_size, data_pos, data_size = tf.unstack(state)
        header = tf.strings.substr(contents, offset, tf.constant(8, tf.int64))
        chunk, size = tf.unstack(_u32_words(header, 8))
        body = offset + 8
        end = body + size + tf.bitwise.bitwise_and(size, 1)  # RIFF pads chunks to even size
        is_fmt = (chunk == _FMT) & (fmt_pos < 0)
        is_data = (chunk == _DATA) & (data_pos < 0)
        fmt = [tf.where(is_fmt, body, fmt_pos), tf.where(is_fmt, size, fmt_size)]
        data = [tf.where(is_data, body, data_pos), tf.where(is_data, size, data_size)]
        return [tf.stack([end, *fmt, *data])]

    start = tf.stack([tf.where(riff, tf.constant(12, tf.int64), length), -1, 0, -1, 0])
    return tf.while_loop(searching, step, [start])[0]


def _read_fmt(contents: tf.Tensor, fmt_pos: tf.Tensor) -> list[tf.Tensor]:
    """The 'fmt ' fields (garbage, but safe to read, when the chunk is missing).

    Args:
        contents: string scalar, the file.
        fmt_pos: int64 scalar, offset of the 'fmt ' body (-1 if not found).

    Returns:
        int64 scalars: format tag, the tag after resolving WAVE_FORMAT_EXTENSIBLE's
        sub-format, channels, sample rate, block align, bits per sample.
    """
    raw = tf.strings.substr(contents, tf.maximum(fmt_pos, 0), tf.constant(_FMT_READ, tf.int64))
    words = tf.cast(tf.io.decode_raw(raw, tf.uint16, fixed_length=_FMT_READ), tf.int64)
    tag, channels, rate_low, rate_high, _, _, align, bits, *_, sub_tag = tf.unstack(words)
    resolved = tf.where(tag == _EXTENSIBLE, sub_tag, tag)
    return [tag, resolved, channels, rate_low + rate_high * 65536, align, bits]


def _codec_table() -> list[list[int]]:
    """Codec id by [format tag (4 = any above 3), bits (64 = any above)].

    Ids are `_U8` … `_F64`; -1 marks an unsupported bit depth of PCM or float, -2 a format
    tag other than PCM (1) or IEEE float (3).
    """
    depths = {_PCM: {8: _U8, 16: _S16, 24: _S24, 32: _S32}, _FLOAT: {32: _F32, 64: _F64}}
    return [
        [depths[tag].get(bits, -1) if tag in depths else -2 for bits in range(65)]
        for tag in range(5)
    ]


_CODECS = _codec_table()


def _codec(tag: tf.Tensor, bits: tf.Tensor) -> tf.Tensor:
    """int64 scalar codec id (`_U8` … `_F64`); -1 for an unsupported bit depth, -2 codec."""
    index = tf.stack([tf.minimum(tag, 4), tf.minimum(bits, 64)])
    return tf.gather_nd(tf.constant(_CODECS, tf.int64), index)


# Header checks in the order their faults are reported: (name, threshold, message). A check
# passes when its value (see `_validate`) is at least the threshold; messages quote facts.
# No quote marks: the Assert op would print them escaped.
_CHECKS = (
    ("length", 12, "truncated header: file has {length} bytes, fewer than the 12 of a RIFF header"),
    ("riff", 1, "not a RIFF/WAVE file: expected RIFF at byte 0 and WAVE at byte 8"),
    ("walk", 0, "truncated header: chunk header at byte {offset} cut off by the end of the file"),
    ("fmt", 0, "no fmt chunk in the RIFF/WAVE file"),
    ("fmt size", 16, "truncated header: fmt chunk has {fmt_bytes} bytes, expected 16 or more"),
    ("data", 0, "no data chunk in the RIFF/WAVE file"),
    (
        "extensible",
        40,
        "truncated header: WAVE_FORMAT_EXTENSIBLE fmt chunk has {fmt_bytes} bytes, expected 40",
    ),
    ("codec", -1, "unsupported codec: format tag {tag} (supported: 1 = PCM, 3 = IEEE float)"),
    ("channels", 1, "zero channels in the fmt chunk"),
    ("pcm bits", 0, "unsupported bits per sample {bits} for PCM (supported: 8, 16, 24, 32)"),
    ("float bits", 0, "unsupported bits per sample {bits} for IEEE float (supported: 32, 64)"),
    (
        "block align",
        1,
        "block align inconsistent with channels × bits: block_align={align} for "
        "channels={channels}, bits={bits}",
    ),
    ("data size", 0, "data chunk declares {data_size} bytes but only {present} are present"),
)
_FACTS = (
    "length",
    "offset",
    "fmt_bytes",
    "tag",
    "channels",
    "bits",
    "align",
    "data_size",
    "present",
)


def _message_table() -> tuple[list[str], list[list[int]]]:
    """Messages as index rows into `literals + as_string(facts)`, so one gather builds any.

    Returns:
        `(literals, rows)`: the literal pieces (the first is ''), and int [checks, pieces]
        rows of indices (`len(literals) + i` stands for fact i), padded with 0.
    """
    literals, rows = [""], []
    for _, _, message in _CHECKS:
        row = []
        for text, field, _, _ in string.Formatter().parse(message):
            literals.append(text)
            row.append(len(literals) - 1)
            if field is not None:
                row.append(~_FACTS.index(field))  # negative until the literals are all known
        rows.append(row)
    rows = [[i if i >= 0 else len(literals) + ~i for i in row] for row in rows]
    width = max(map(len, rows))
    return literals, [row + [0] * (width - len(row)) for row in rows]


_LITERALS, _MESSAGE_ROWS = _message_table()


def _validate(length, riff, state, fmt, codec) -> tf.Operation:
    """One assertion over every header check, raising the first failing check's message.

    Args:
        length: int64 scalar, file size in bytes.
        riff: bool scalar, True when the file starts as RIFF/WAVE.
        state: int64 [5] final walk state from `_walk`.
        fmt: int64 scalars from `_read_fmt`.
        codec: int64 scalar from `_codec`.

    Returns:
        The assert op, to hang the decoding on.

    Raises:
        tf.errors.InvalidArgumentError: when run, if a check fails.
    """
    offset, fmt_pos, fmt_size, data_pos, data_size = tf.unstack(state)
    tag, resolved, channels, _, align, bits = fmt
    fmt_bytes = tf.minimum(fmt_size, length - fmt_pos)
    present = length - data_pos
    values = {
        "length": length,
        "riff": tf.cast(riff, tf.int64),
        "walk": tf.maximum(tf.minimum(fmt_pos, data_pos), offset - length),
        "fmt": fmt_pos,
        "fmt size": fmt_bytes,
        "data": data_pos,
        "extensible": tf.where(tag == _EXTENSIBLE, fmt_bytes, 40),
        "codec": codec,
        "channels": channels,
        "pcm bits": tf.where(resolved == _PCM, codec, 0),
        "float bits": tf.where(resolved == _FLOAT, codec, 0),
        "block align": tf.cast(align * 8 == channels * bits, tf.int64),
        "data size": present - data_size,
    }
    values = tf.stack([values[name] for name, _, _ in _CHECKS])
    oks = values >= tf.constant([threshold for _, threshold, _ in _CHECKS], tf.int64)
    facts = [length, offset, fmt_bytes, resolved, channels, bits, align, data_size, present]
    pieces = tf.concat([_LITERALS, tf.strings.as_string(tf.stack(facts))], 0)
    row = tf.gather(_MESSAGE_ROWS, tf.argmin(tf.cast(oks, tf.int32)))
    return tf.debugging.Assert(tf.reduce_all(oks), [tf.strings.reduce_join(tf.gather(pieces, row))])


def _float64_to_float32(x: tf.Tensor) -> tf.Tensor:
    """float64 → float32 rounded to nearest even, as a C cast does, subnormals included.

    TensorFlow flushes float32 subnormals to zero on CPU, so results below 2^-126 in
    magnitude are assembled from their bits (sign, count of 2^-149 steps) instead.

    Args:
        x: float64 [n].

    Returns:
        float32 [n].
    """
    magnitude = tf.minimum(tf.abs(x), 2.0**-126)
    steps = tf.cast(tf.round(magnitude * 2.0**149), tf.int32)  # exact; tf.round is half-even
    sign = tf.where(tf.bitcast(x, tf.int64) < 0, tf.constant(-(2**31), tf.int32), 0)  # -0.0 too
    subnormal = tf.bitcast(tf.bitwise.bitwise_or(steps, sign), tf.float32)
    return tf.where(magnitude < 2.0**-126, subnormal, tf.cast(x, tf.float32))


def _decoders(payload: tf.Tensor, channels: tf.Tensor, rate: tf.Tensor) -> list:
    """Branches decoding `payload`, one per codec id (`_U8` … `_F64`), as soundfile scales.

    Args:
        payload: string scalar, whole frames of the 'data' chunk.
        channels: int64 scalar.
        rate: int64 scalar, sample rate.

    Returns:
        Functions returning `(audio, sample_rate)`: float32 [frames, channels], int32 scalar.
    """

    def branch(decode):
        return lambda: (tf.reshape(decode(), tf.stack([-1, channels])), tf.cast(rate, tf.int32))

    def pcm(dtype, scale):
        return lambda: tf.cast(tf.io.decode_raw(payload, dtype), tf.float32) * scale

    def u8():
        return (tf.cast(tf.io.decode_raw(payload, tf.uint8), tf.float32) - 128.0) * (1.0 / 128)

    def s24():
        low, mid, high = tf.unstack(
            tf.reshape(tf.io.decode_raw(payload, tf.uint8), [-1, 3]), axis=1
        )
        high = tf.cast(tf.bitcast(high, tf.int8), tf.int32)  # sign-extends
        value = tf.cast(low, tf.int32) + tf.cast(mid, tf.int32) * 256 + high * 65536
        return tf.cast(value, tf.float32) * 2.0**-23

    def f32():
        return tf.io.decode_raw(payload, tf.float32)

    def f64():
        return _float64_to_float32(tf.io.decode_raw(payload, tf.float64))

    decoders = [u8, pcm(tf.int16, 2.0**-15), s24, pcm(tf.int32, 2.0**-31), f32, f64]
    return [branch(decode) for decode in decoders]


def _decode_general(contents: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The general path: walk the chunks, check everything, decode; see `decode_wav`.

    Args:
        contents: string scalar, the file.

    Returns:
        `(audio, sample_rate)`: float32 [frames, channels], int32 scalar.
    """
    length = tf.cast(tf.strings.length(contents), tf.int64)
    words = _u32_words(tf.strings.substr(contents, 0, 12), 12)
    riff = (words[0] == _RIFF) & (words[2] == _WAVE)
    state = _walk(contents, length, riff)
    tag, resolved, channels, rate, align, bits = _read_fmt(contents, state[1])
    codec = _codec(resolved, bits)
    fmt = [tag, resolved, channels, rate, align, bits]
    with tf.control_dependencies([_validate(length, riff, state, fmt, codec)]):
        _, data_pos, data_size = tf.unstack(state)[2:]
        block = tf.maximum(align, 1)
        payload = tf.strings.substr(contents, data_pos, data_size // block * block)
    return tf.switch_case(tf.cast(codec, tf.int32), _decoders(payload, channels, rate))


# Not inlined: as one call node it costs next to nothing when the fast path is taken, where
# inlined it would leave ~150 dead nodes of the untaken branch for the executor to visit.
_decode_general_call = tf.function(
    _decode_general,
    input_signature=[tf.TensorSpec([], tf.string)],
    autograph=False,
    experimental_attributes={"_noinline": True},
)


def _canonical_halves() -> dict[int, int]:
    """What the fast path requires of the first 36 bytes, as {16-bit word index: value}.

    'RIFF' at byte 0, 'WAVE' then 'fmt ' at 8, a 16-byte 'fmt ' chunk whose format tag is
    1 (PCM, byte 20) and bits per sample 16 (byte 34).
    """
    fixed = {0: b"RIFF", 8: b"WAVEfmt ", 16: struct.pack("<IH", 16, _PCM), 34: b"\x10\x00"}
    return {
        (at + i) // 2: int.from_bytes(raw[i : i + 2], "little")
        for at, raw in fixed.items()
        for i in range(0, len(raw), 2)
    }


_CANONICAL = _canonical_halves()


def _fast_plan(contents: tf.Tensor, length: tf.Tensor) -> list[tf.Tensor]:
    """Whether the file is plain 16-bit PCM that passes every check, in a few vector ops.

    Plain: the canonical header ('fmt ' of 16 bytes at byte 12, 'data' at 36), or one more
    chunk between them (as ffmpeg writes a LIST chunk).

    Args:
        contents: string scalar, the file.
        length: int64 scalar, its size in bytes.

    Returns:
        `[fast, data_pos, nbytes, channels, rate]`: bool scalar, then int64 scalars: where
        the 'data' body starts and its whole-frame bytes, channels, sample rate.
    """
    head = tf.strings.substr(contents, 0, _HEADER)
    halves = tf.cast(tf.io.decode_raw(head, tf.uint16, fixed_length=_HEADER), tf.int64)  # (22,)
    prefix = tf.reduce_all(tf.gather(halves, list(_CANONICAL)) == list(_CANONICAL.values()))
    words = tf.unstack(_u32_words(head, _HEADER))
    rate, chunk, size = words[6], words[9], words[10]  # the chunk at byte 36: 'data'?
    after = _HEADER + size + tf.bitwise.bitwise_and(size, 1)
    following = tf.strings.substr(contents, tf.minimum(after, length), tf.constant(8, tf.int64))
    next_chunk, next_size = tf.unstack(_u32_words(following, 8))
    here = chunk == _DATA
    data_pos = tf.where(here, tf.constant(_HEADER, tf.int64), after + 8)
    data_size = tf.where(here, size, next_size)
    halves = tf.unstack(halves)
    channels, align = halves[11], halves[16]  # bytes 22 and 32
    fast = prefix & (here | (next_chunk == _DATA)) & (data_pos + data_size <= length)
    fast &= (channels > 0) & (align == 2 * channels)
    block = tf.maximum(align, 1)
    return [fast, data_pos, data_size // block * block, channels, rate]


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
            bit depth, zero channels, inconsistent block align, truncated data), with a
            message naming the fault and the numbers involved.
    """
    contents = _as_contents(contents)
    length = tf.cast(tf.strings.length(contents), tf.int64)
    fast, data_pos, nbytes, channels, rate = _fast_plan(contents, length)

    def decode_fast():
        payload = tf.strings.substr(contents, data_pos, nbytes)
        return _decoders(payload, channels, rate)[_S16]()

    return tf.cond(fast, decode_fast, lambda: _decode_general_call(contents))


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
