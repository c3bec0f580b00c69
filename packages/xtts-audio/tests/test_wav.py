"""`decode_wav` / `load_wav`: bit-exact with soundfile, chunk walking, one message per fault.

`decode_wav` cannot run under XLA (strings cannot enter it), so instead of the `run`
fixture these tests use their own modes: eager, `tf.function` and `tf.data`.
"""

from __future__ import annotations

import pathlib
import re
import struct

import numpy as np
import pytest
import soundfile
import tensorflow as tf

from xtts_audio import wav
from xtts_audio.errors import InputError
from xtts_audio.wav import decode_wav, load_wav

MODES = ("eager", "function", "dataset")
SUBTYPES = ("PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE")
SPEECH = pathlib.Path(__file__).parent / "data" / "speech_22050.wav"


def decode_in(mode: str, contents: bytes) -> tuple[np.ndarray, int]:
    """`decode_wav(contents)` in one of MODES, as (float32 [frames, channels], rate)."""
    if mode == "eager":
        audio, rate = decode_wav(tf.constant(contents))
    elif mode == "function":
        audio, rate = tf.function(decode_wav)(tf.constant(contents))
    else:
        audio, rate = next(iter(tf.data.Dataset.from_tensors(contents).map(decode_wav)))
    return audio.numpy(), int(rate)


def signal(subtype: str, frames: int, channels: int, seed: int = 0) -> np.ndarray:
    """Test signal for soundfile.write: full-scale extremes first, then random samples.

    Integer subtypes get int32 (libsndfile keeps its top 8/16/24/32 bits, so the extremes
    land on the format's own); float subtypes get float64 in [-1, 1) plus ±1 and beyond.
    """
    rng = np.random.default_rng(seed)
    if subtype.startswith("PCM"):
        extremes = np.array([-(2**31), 2**31 - 1, 0, -1, 1, -(2**31) + 2**24], np.int64)
        body = rng.integers(-(2**31), 2**31, frames * channels)
        dtype = np.int32
    else:
        extremes = np.array([-1.0, 1.0, 0.0, -0.0, 1.5, -2.0, 1e-30, -3e-39])
        body = rng.uniform(-1, 1, frames * channels)
        dtype = np.float64
    samples = np.concatenate([extremes, body])[: frames * channels]
    return samples.astype(dtype).reshape(frames, channels)


def write(path: pathlib.Path, subtype: str, *, frames=1001, channels=1, rate=22050, fmt="WAV"):
    soundfile.write(path, signal(subtype, frames, channels), rate, subtype=subtype, format=fmt)
    return path


def reference(path: pathlib.Path) -> tuple[np.ndarray, int]:
    return soundfile.read(path, dtype="float32", always_2d=True)


# Hand-built files.


def chunk(chunk_id: bytes, body: bytes, *, size: int | None = None) -> bytes:
    """A RIFF chunk: id, declared size (default: the body's), body, pad byte if odd."""
    declared = len(body) if size is None else size
    return chunk_id + struct.pack("<I", declared) + body + b"\0" * (len(body) % 2)


def fmt_chunk(*, tag=1, channels=1, rate=16000, bits=16, align=None, extra=b"") -> bytes:
    align = channels * bits // 8 if align is None else align
    body = struct.pack("<HHIIHH", tag, channels, rate, rate * align, align, bits)
    return chunk(b"fmt ", body + extra)


def riff(*chunks: bytes) -> bytes:
    body = b"WAVE" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def pcm16(samples: np.ndarray) -> bytes:
    return np.asarray(samples, "<i2").tobytes()


RAMP = np.arange(-500, 500, 7, dtype=np.int16)  # 143 samples
RAMP_FLOAT = RAMP.astype(np.float32)[:, None] / 32768


# Bit-exact with soundfile.


@pytest.mark.parametrize("rate", [16000, 22050, 44100])
@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("subtype", SUBTYPES)
def test_matches_soundfile(tmp_path, subtype, channels, rate):
    path = write(tmp_path / "a.wav", subtype, channels=channels, rate=rate)
    expected, expected_rate = reference(path)
    audio, sample_rate = decode_wav(path.read_bytes())
    np.testing.assert_array_equal(audio.numpy(), expected)
    assert audio.dtype == tf.float32
    assert sample_rate.dtype == tf.int32
    assert int(sample_rate) == expected_rate == rate


@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("subtype", SUBTYPES)
def test_matches_soundfile_extensible(tmp_path, subtype, channels):
    path = write(tmp_path / "a.wav", subtype, channels=channels, fmt="WAVEX")
    assert path.read_bytes()[20:22] == b"\xfe\xff"  # WAVE_FORMAT_EXTENSIBLE
    expected, expected_rate = reference(path)
    audio, sample_rate = decode_wav(path.read_bytes())
    np.testing.assert_array_equal(audio.numpy(), expected)
    assert int(sample_rate) == expected_rate


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("subtype", ["PCM_16", "PCM_24", "DOUBLE"])
def test_matches_soundfile_in_every_mode(tmp_path, mode, subtype):
    path = write(tmp_path / "a.wav", subtype, channels=2)
    expected, rate = reference(path)
    audio, sample_rate = decode_in(mode, path.read_bytes())
    np.testing.assert_array_equal(audio, expected)
    assert sample_rate == rate


def test_float64_rounds_like_a_c_cast_including_subnormals(tmp_path):
    """TF flushes float32 subnormals to zero; the result must still equal soundfile's bits."""
    tiny = np.array([1e-40, -1e-40, 1.1754942e-38, 1.5e-45, 7e-46, 2.1e-45, -0.0, np.nan, np.inf])
    path = tmp_path / "a.wav"
    soundfile.write(path, tiny[:, None], 16000, subtype="DOUBLE")
    audio, _ = decode_wav(path.read_bytes())
    np.testing.assert_array_equal(audio.numpy().view(np.int32), reference(path)[0].view(np.int32))


def test_real_speech(speech):
    audio, rate = load_wav(SPEECH)
    np.testing.assert_array_equal(audio.numpy()[:, 0], speech[0])
    assert int(rate) == speech[1]


# Chunk walking.


def test_skips_list_fact_and_odd_sized_chunks():
    info = chunk(b"LIST", b"INFOISFT" + struct.pack("<I", 5) + b"test\0")  # odd size, padded
    contents = riff(
        chunk(b"junk", b"12345"),  # odd-sized: declared 5, one pad byte follows
        fmt_chunk(),
        info,
        chunk(b"fact", struct.pack("<I", len(RAMP))),
        chunk(b"data", pcm16(RAMP)),
        chunk(b"LIST", b"INFOabc"),  # after 'data', odd-sized
    )
    assert len(chunk(b"junk", b"12345")) == 8 + 5 + 1
    audio, rate = decode_wav(contents)
    np.testing.assert_array_equal(audio.numpy(), RAMP_FLOAT)
    assert int(rate) == 16000


def test_fmt_after_data():
    audio, _ = decode_wav(riff(chunk(b"data", pcm16(RAMP)), fmt_chunk()))
    np.testing.assert_array_equal(audio.numpy(), RAMP_FLOAT)


def test_odd_sized_data_chunk_8_bit(tmp_path):
    path = write(tmp_path / "a.wav", "PCM_U8", frames=1001)
    assert struct.unpack("<I", path.read_bytes()[40:44])[0] == 1001  # odd, padded
    expected, _ = reference(path)
    audio, _ = decode_wav(path.read_bytes())
    np.testing.assert_array_equal(audio.numpy(), expected)


def test_trailing_partial_frame_is_dropped_like_libsndfile(tmp_path):
    path = tmp_path / "a.wav"
    path.write_bytes(riff(fmt_chunk(channels=2), chunk(b"data", pcm16(RAMP[:-1]))))  # 71.5 frames
    expected, _ = reference(path)
    audio, _ = decode_wav(path.read_bytes())
    assert audio.shape == (71, 2)
    np.testing.assert_array_equal(audio.numpy(), expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("tag", "bits", "channels"), [(1, 16, 1), (3, 32, 2), (1, 24, 3)])
def test_empty_data_chunk(mode, tag, bits, channels):
    contents = riff(fmt_chunk(tag=tag, bits=bits, channels=channels), chunk(b"data", b""))
    audio, rate = decode_in(mode, contents)
    assert audio.shape == (0, channels)
    assert audio.dtype == np.float32
    assert rate == 16000


LAYOUTS = {  # header layouts of the same 16-bit samples: (fast path?, chunks between)
    "canonical": (True, []),
    "one chunk before data (ffmpeg's LIST)": (True, [chunk(b"LIST", b"INFOISFT\0\0\0\0")]),
    "two chunks before data": (False, [chunk(b"LIST", b"INFO"), chunk(b"junk", b"123")]),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_fast_and_general_paths_decode_alike(tmp_path, mode, layout):
    """Plain 16-bit headers take the fast path, others the chunk walk: same samples."""
    path = write(tmp_path / "a.wav", "PCM_16", channels=2)
    canonical = path.read_bytes()
    path.write_bytes(riff(canonical[12:36], *LAYOUTS[layout][1], canonical[36:]))
    expected, rate = reference(path)
    audio, sample_rate = decode_in(mode, path.read_bytes())
    np.testing.assert_array_equal(audio, expected)
    assert sample_rate == rate


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_fast_path_is_taken_for_plain_16_bit_headers(tmp_path, layout):
    """A speed property (the fast path is what beats tf.audio.decode_wav 2×), so a test."""
    path = write(tmp_path / "a.wav", "PCM_16")
    canonical = path.read_bytes()
    contents = riff(canonical[12:36], *LAYOUTS[layout][1], canonical[36:])
    fast = wav._fast_plan(tf.constant(contents), tf.constant(len(contents), tf.int64))[0]
    assert bool(fast) == LAYOUTS[layout][0]


# Execution contexts.


def test_dataset_of_several_files(tmp_path):
    cases = [("PCM_16", 1, 800), ("FLOAT", 2, 1500), ("PCM_24", 1, 3), ("PCM_16", 2, 0)]
    paths = [
        write(tmp_path / f"{i}.wav", subtype, channels=channels, frames=frames)
        for i, (subtype, channels, frames) in enumerate(cases)
    ]
    contents = [path.read_bytes() for path in paths]
    dataset = tf.data.Dataset.from_tensor_slices(contents).map(decode_wav)
    assert dataset.element_spec[0].shape.as_list() == [None, None]
    for path, (audio, rate) in zip(paths, dataset, strict=True):
        expected, expected_rate = reference(path)
        np.testing.assert_array_equal(audio.numpy(), expected)
        assert int(rate) == expected_rate


def test_static_shapes_in_a_function():
    spec = tf.TensorSpec([], tf.string)
    audio, rate = tf.function(decode_wav).get_concrete_function(spec).structured_outputs
    assert audio.shape.as_list() == [None, None]
    assert audio.dtype == tf.float32
    assert rate.shape.as_list() == []
    assert rate.dtype == tf.int32


@pytest.mark.parametrize("as_type", [str, pathlib.Path, tf.constant])
def test_load_wav(tmp_path, as_type):
    path = write(tmp_path / "a.wav", "PCM_24", channels=2)
    audio, rate = load_wav(as_type(str(path)))
    expected, expected_rate = reference(path)
    np.testing.assert_array_equal(audio.numpy(), expected)
    assert int(rate) == expected_rate


def test_load_wav_missing_file(tmp_path):
    with pytest.raises(tf.errors.NotFoundError):
        load_wav(tmp_path / "missing.wav")


@pytest.mark.parametrize("contents", [np.array([b"a", b"b"]), tf.constant(3)])
def test_rejects_non_scalar_string_input(contents):
    with pytest.raises(InputError, match=r"Expected a scalar tf\.string tensor"):
        decode_wav(contents)


# Broken files: each fault has its own message (a literal part of it here), in every mode.

PCM = fmt_chunk()
DATA = chunk(b"data", pcm16(RAMP))
BROKEN = {
    "not riff": (b"RIFX" + riff(PCM, DATA)[4:], "not a RIFF/WAVE file"),
    "not wave": (riff(PCM, DATA)[:8] + b"AVI " + riff(PCM, DATA)[12:], "not a RIFF/WAVE file"),
    "too short": (b"RIFF\x04\x00", "truncated header: file has 6 bytes"),
    "cut chunk header": (riff(PCM) + b"dat", "truncated header: chunk header at byte 36 cut"),
    "short fmt": (riff(chunk(b"fmt ", b"\x01\x00" * 7), DATA), "fmt chunk has 14 bytes"),
    "short extensible": (
        riff(fmt_chunk(tag=0xFFFE, extra=b"\0\0"), DATA),
        "WAVE_FORMAT_EXTENSIBLE fmt chunk has 18 bytes, expected 40",
    ),
    "no fmt": (riff(DATA), "no fmt chunk"),
    "no data": (riff(PCM, chunk(b"LIST", b"INFO")), "no data chunk"),
    "a-law": (riff(fmt_chunk(tag=6, bits=8), DATA), "unsupported codec: format tag 6"),
    "mu-law": (riff(fmt_chunk(tag=7, bits=8), DATA), "unsupported codec: format tag 7"),
    "adpcm": (riff(fmt_chunk(tag=2, bits=4, align=256), DATA), "unsupported codec: format tag 2"),
    "12-bit pcm": (
        riff(fmt_chunk(bits=12, align=2), DATA),
        "unsupported bits per sample 12 for PCM",
    ),
    "16-bit float": (
        riff(fmt_chunk(tag=3, bits=16), DATA),
        "unsupported bits per sample 16 for IEEE float",
    ),
    "zero channels": (riff(fmt_chunk(channels=0, align=2), DATA), "zero channels"),
    "block align": (
        riff(fmt_chunk(channels=2, align=2), DATA),
        "block align inconsistent with channels × bits: block_align=2 for channels=2, bits=16",
    ),
    "truncated data": (
        riff(PCM, chunk(b"data", pcm16(RAMP), size=1000)),
        "data chunk declares 1000 bytes but only 286 are present",
    ),
    "truncated data after list": (
        riff(PCM, chunk(b"LIST", b"INFO"), chunk(b"data", pcm16(RAMP), size=1001)),
        "data chunk declares 1001 bytes but only 286 are present",
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_file_message(mode, case):
    contents, message = BROKEN[case]
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(message)):
        decode_in(mode, contents)


def test_broken_files_have_distinct_messages():
    """Only the two not-RIFF/WAVE cases share a message (the two truncations differ)."""
    messages = set()
    for contents, _ in BROKEN.values():
        with pytest.raises(tf.errors.InvalidArgumentError) as raised:
            decode_wav(contents)
        messages.add(raised.value.message.split("assertion failed: ")[-1].split("\n")[0])
    assert len(messages) == len(BROKEN) - 1
