"""`Engine`: the audio of `xtts-train synthesize` up to float rounding (decoder slots), or
the same bytes without slots; every program compiled by the warm-up, and the text limits."""

from __future__ import annotations

import numpy as np
import pytest

from xtts_audio import WAV_HEADER_BYTES, pcm16, wav_bytes
from xtts_serve import ConfigError, Engine, EngineConfig, RequestError
from xtts_serve.engine import GRIFFIN_LIM_STREAM, _batches, vocoder_batches
from xtts_train.runs.loading import load_run
from xtts_train.synthesize import synthesize
from xtts_train.vocode import log_mel_distance

# Of 32768: the slots' rounding (their mel within 1e-5 of synthesize's), not another audio.
ROUNDING = 32
# Griffin-Lim's 32 iterations grow that rounding in the samples (114 of 32768 in some full
# suites; a probe: a clip's mel plus noise of 1e-5, 93-161), not in their log-mel features
# (that probe: 7-9e-4 apart; noise of 1e-4: 4e-3), where these are compared.
GRIFFIN_LIM_LOG_MEL = 0.005


def _samples(wav: bytes) -> np.ndarray:
    return np.frombuffer(wav[WAV_HEADER_BYTES:], "<i2").astype(np.int32)


def _close(ours: np.ndarray, theirs: np.ndarray, rounding: int = ROUNDING) -> None:
    """int16 samples equal up to the slots' rounding, and not silence."""
    assert ours.shape == theirs.shape
    assert np.abs(ours.astype(np.int32) - theirs).max() <= rounding
    assert np.abs(theirs).max() > 1000


def test_speak_is_the_wav_synthesize_writes_up_to_rounding(engine, synthesized, text):
    wave = engine.speak(text)
    assert len(engine.prepare(text).pieces) == 3  # in one slot, in turn
    _close(pcm16(wave), _samples(synthesized(text)))


def test_stream_is_the_pcm_synthesize_streams_up_to_rounding(engine, synthesized, text):
    chunks = list(engine.stream(text))
    assert len(chunks) > 1
    assert all(c.dtype == np.int16 for c in chunks)
    _close(np.concatenate(chunks), _samples(synthesized(text, stream=True)))


def test_stream_joins_into_the_whole_audios_vocoding(engine, text):
    """Chunks vocoded alone with their context frames: the whole text's audio up to float
    rounding (the 32-frame vocoder windows)."""
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
    ours, theirs = pcm16(griffin_lim_engine.speak(text)), _samples(out.read_bytes())
    assert ours.shape == theirs.shape
    assert np.abs(theirs).max() > 1000
    config = load_run(run)[0].audio
    assert log_mel_distance(ours / 32768, theirs / 32768, config) < GRIFFIN_LIM_LOG_MEL
    assert griffin_lim_engine.stream_refusal == GRIFFIN_LIM_STREAM
    with pytest.raises(RequestError, match="Expected stream=false from a server without a vocoder"):
        griffin_lim_engine.stream(text)


def test_a_decoding_that_cannot_stream_is_served_whole_one_at_a_time(run, vocoder_run, engine,
                                                                     tmp_path, text):  # fmt: skip
    """A postfilter that needs the whole utterance: no slots (more than one is refused,
    naming --slots 1), and with one the bytes `synthesize` writes."""
    overrides = (*engine.config.overrides, "decode.global_variance=true")
    config = EngineConfig(run=run, vocoder=vocoder_run, max_chars=200, overrides=overrides)
    with pytest.raises(ConfigError, match=r"Expected --slots 1 for a decoding that cannot "
                       r"stream, received: --slots 4 .*decode.global_variance=false"):  # fmt: skip
        Engine(config)
    engine = Engine(EngineConfig(run=run, vocoder=vocoder_run, max_chars=200,
                                 overrides=overrides, slots=1))  # fmt: skip
    assert engine.slots == 1
    assert "decode.global_variance=false to stream" in engine.stream_refusal
    engine.warm_up()  # a decoding per piece batch and the whole audio's vocoder, no windows
    assert not any("(stream)" in name for name in engine._trace_counts())
    assert any("(whole)" in name for name in engine._trace_counts())
    out = tmp_path / "whole.wav"
    synthesize(run, text, out, vocoder=vocoder_run, max_frames=engine.max_frames,
               overrides=list(overrides))  # fmt: skip
    assert wav_bytes(engine.speak(text), engine.sample_rate) == out.read_bytes()


def test_warm_up_compiles_every_program_and_requests_compile_none(engine, text):
    """The slots' four programs (join, admit, advance, mel) and the vocoder's windows
    (whole audio: 1 row; streams: 1, 2 and 4 rows), whatever the text."""
    assert engine.ready
    assert engine.programs == 8
    for each in ["Fine.", "Fine day. It was.", text, " ".join([text] * 4)]:
        engine.speak(each)
    list(engine.stream("Fine day. It was."))
    assert engine.programs == 8


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


def test_unknown_voice_names_the_known_ones_and_the_aliases(engine):
    with pytest.raises(RequestError, match=r"Expected voice one of \['run'\], an alias "
                       r"\(\['alloy', 'ash', 'ballad'") as caught:  # fmt: skip
        engine.prepare("Fine day.", voice="nobody")
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max_chars": 0}, "Expected max_chars an int >= 1, received: max_chars=0"),
        ({"max_voices": True}, "Expected max_voices an int >= 1, received: max_voices=True"),
        ({"max_clip_seconds": float("nan")}, "Expected max_clip_seconds a number > 0"),
        ({"slots": 0}, "Expected slots an int >= 1, received: slots=0"),
        ({"vocoder_batching": "yes"}, r"Expected vocoder_batching one of \['auto', 'on', 'off'\]"),
    ],
)
def test_engine_config_refuses_bad_limits(settings, message):
    with pytest.raises(ConfigError, match=message):
        EngineConfig(run="run", **settings)


def test_engine_config_keeps_the_decode_overrides(engine):
    overrides = engine.config.overrides
    assert EngineConfig(run="r", overrides=list(overrides)).overrides == overrides


def test_streams_are_vocoded_in_batches_up_to_the_slots_when_on_and_alone_on_a_cpu():
    assert [vocoder_batches(n) for n in (1, 2, 3, 4, 5, 8, 9)] == [
        (1,), (2,), (2, 4), (2, 4), (2, 4, 8), (2, 4, 8), (2, 4, 8, 16)]  # fmt: skip
    assert _batches(EngineConfig(run="r", slots=8)) == (1,)  # auto, on this CPU
    assert _batches(EngineConfig(run="r", slots=8, vocoder_batching="on")) == (2, 4, 8)
    assert _batches(EngineConfig(run="r", slots=8, vocoder_batching="off")) == (1,)
