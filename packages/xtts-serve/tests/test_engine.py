"""`Engine`: the audio of `xtts-train synthesize`, every program compiled by the warm-up,
and the text limits."""

from __future__ import annotations

import numpy as np
import pytest

from xtts_audio import WAV_HEADER_BYTES, pcm16, wav_bytes
from xtts_serve import ConfigError, EngineConfig, RequestError
from xtts_serve.engine import GRIFFIN_LIM_STREAM
from xtts_train.synthesize import synthesize


def test_speak_is_the_wav_synthesize_writes(engine, synthesized, text):
    wave = engine.speak(text)
    assert len(engine.prepare(text).pieces) == 3  # a batch of 4 rows
    assert wav_bytes(wave, engine.sample_rate) == synthesized(text)


def test_stream_is_the_pcm_synthesize_streams(engine, synthesized, text):
    chunks = list(engine.stream(text))
    assert len(chunks) > 1
    assert all(c.dtype == np.int16 for c in chunks)
    streamed = synthesized(text, stream=True)
    assert np.concatenate(chunks).astype("<i2").tobytes() == streamed[WAV_HEADER_BYTES:]


def test_stream_joins_into_the_whole_audios_vocoding(engine, text):
    """Chunks vocoded alone with their context frames: the whole text's audio up to float
    rounding (the streamed decoder and the 32-frame vocoder windows)."""
    whole = pcm16(engine.speak(text)).astype(np.int32)
    joined = np.concatenate(list(engine.stream(text))).astype(np.int32)
    assert joined.shape == whole.shape
    assert np.abs(joined - whole).max() <= 64  # of 32768: rounding, not another audio
    assert np.abs(whole).max() > 1000


def test_griffin_lim_engine_speaks_what_synthesize_writes_and_refuses_to_stream(
    griffin_lim_engine, run, tmp_path
):
    text = "Fine day."
    out = tmp_path / "gl.wav"
    synthesize(run, text, out, max_frames=griffin_lim_engine.max_frames,
               overrides=["decode.split_symbols=0"])  # fmt: skip
    assert (
        wav_bytes(griffin_lim_engine.speak(text), griffin_lim_engine.sample_rate)
        == out.read_bytes()
    )
    assert griffin_lim_engine.stream_refusal == GRIFFIN_LIM_STREAM
    with pytest.raises(RequestError, match="Expected stream=false from a server without a vocoder"):
        griffin_lim_engine.stream(text)


def test_warm_up_compiles_every_program_and_requests_compile_none(engine, text):
    """One text bucket: a decoding per piece batch (1, 2, 4), the stream's three programs;
    texts of every piece count leave the count as it was."""
    assert engine.ready
    assert engine.programs == 3 + 3
    for each in ["Fine.", "Fine day. It was.", text, " ".join([text] * 4)]:
        engine.speak(each)
    list(engine.stream("Fine day. It was."))
    assert engine.programs == 6


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Expected input: a text to speak, received: ''"),
        ("   ", "Expected input: a text to speak"),
        ("x" * 201, r"Expected input of at most 200 characters \(--max-chars\), received: 201"),
        ("...", "has nothing to say"),
    ],
)
def test_prepare_refuses_bad_text(engine, text, message):
    with pytest.raises(RequestError, match=message) as caught:
        engine.prepare(text)
    assert caught.value.status == 400


def test_without_splitting_a_text_that_grows_past_the_buffer_is_refused(griffin_lim_engine):
    """Splitting off (`decode.split_symbols=0`): the pieces are bounded by --max-chars,
    and a text whose spelled-out numbers outgrow it is refused, naming the limit."""
    assert griffin_lim_engine.max_symbols == 20
    with pytest.raises(RequestError, match="Expected input of at most 20 symbols once numbers"):
        griffin_lim_engine.prepare("1234567 8910111213")


def test_unknown_voice_names_the_known_ones(engine):
    with pytest.raises(RequestError, match=r"Expected voice one of \['run'\]") as caught:
        engine.prepare("Fine day.", voice="alloy")
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_chars": 0}, "Expected max_chars an int >= 1, received: max_chars=0"),
        ({"max_voices": True}, "Expected max_voices an int >= 1, received: max_voices=True"),
        ({"max_clip_seconds": float("nan")}, "Expected max_clip_seconds a number > 0"),
    ],
)
def test_engine_config_refuses_bad_limits(settings, message):
    with pytest.raises(ConfigError, match=message):
        EngineConfig(run="run", **settings)


def test_engine_config_keeps_the_decode_overrides(engine):
    overrides = engine.config.overrides
    assert EngineConfig(run="r", overrides=list(overrides)).overrides == overrides
