"""Requests decoded together in the engine's slots, on each runtime (TensorFlow's
programs, an exported voice in onnxruntime): each hears exactly what it hears alone,
whatever its neighbours, its slot or when it joined; over HTTP the same, with more
requests than slots (the rest wait in the queue)."""

from __future__ import annotations

import asyncio

import httpx2
import numpy as np
import pytest

from xtts_serve import ServerConfig, create_app

TEXTS = [
    "Fine day. It was a quiet one, and we read.",  # three pieces
    "Fine day.",
    "We read the news at noon, then slept.",
    "It was quiet.",
    "A long walk home; the rain had stopped.",
    "Noon.",
]


@pytest.fixture
def tone(any_engine, tone_clip):
    """A second voice, from a clip of a 180 Hz tone and its overtones."""
    voice = any_engine.add_voice(tone_clip(1.5, hz=180), name="tone")
    yield voice.id
    any_engine.voices.remove(voice.id)


def _together(engine, asked: list[tuple[object, bool]]) -> tuple[list[np.ndarray], int]:
    """Each (utterance, stream)'s audio, decoded side by side: one more joins at each step
    while a slot is free. Returns the audios (a stream's chunks joined) and the most
    requests decoded at once."""
    scheduler = engine.scheduler
    speeches = [engine.speech(u, stream=stream) for u, stream in asked]
    heard = {id(s): [] for s in speeches}
    waiting, most = list(speeches), 0
    while waiting or scheduler.busy:
        if waiting and scheduler.room:
            scheduler.admit(waiting.pop(0))
        most = max(most, scheduler.busy)
        for speech, audio in scheduler.step():
            assert not isinstance(audio, Exception), audio
            heard[id(speech)] += audio
    return [np.concatenate(heard[id(s)]) for s in speeches], most


def test_requests_decoded_together_each_hear_what_they_hear_alone(any_engine, tone):
    engine = any_engine
    voices = ["run", tone]
    asked = [(engine.prepare(text, voice=voices[i % 2]), i % 3 != 0)
             for i, text in enumerate(TEXTS)]  # fmt: skip
    together, most = _together(engine, asked)
    assert most == engine.slots == 4  # every slot busy at once; two requests waited
    for (utterance, stream), audio in zip(asked, together, strict=True):
        alone = (np.concatenate(list(engine.stream_prepared(utterance))) if stream
                 else engine.speak_prepared(utterance))  # fmt: skip
        assert audio.dtype == (np.int16 if stream else np.float32)
        np.testing.assert_array_equal(audio, alone)  # bit for bit
    assert len({audio.tobytes() for audio in together}) == len(TEXTS)  # each its own
    assert engine.scheduler.busy == 0


def test_a_request_that_leaves_frees_its_slot_for_the_next(any_engine):
    engine = any_engine
    scheduler = engine.scheduler
    first = engine.speech(engine.prepare(TEXTS[0]), stream=True)
    scheduler.admit(first)
    while not scheduler.step():  # until its first chunk
        assert scheduler.busy == 1
    assert not first.finished  # three pieces: it has more to say
    scheduler.cancel(first)
    assert (scheduler.busy, first.finished) == (0, True)
    after = engine.speech(engine.prepare(TEXTS[1]), stream=False)
    audio, _ = _together(engine, [(after.utterance, False)])
    np.testing.assert_array_equal(audio[0], engine.speak_prepared(after.utterance))


@pytest.mark.anyio
async def test_concurrent_http_requests_get_the_audio_they_get_alone(any_engine, tone):
    """Six requests at once to a server of four slots, streamed and whole, in two voices:
    each body is byte for byte the body of the same request sent alone."""
    engine = any_engine
    bodies = [{"input": text, "voice": ["run", tone][i % 2], "stream": i % 3 != 0,
               "response_format": ["wav", "pcm"][i % 2]} for i, text in enumerate(TEXTS)]  # fmt: skip
    app = create_app(engine, ServerConfig(max_queue=8))
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://serve") as client:
            together = await asyncio.gather(*[client.post("/v1/audio/speech", json=b)
                                              for b in bodies])  # fmt: skip
            alone = [await client.post("/v1/audio/speech", json=b) for b in bodies]
    for mine, solo in zip(together, alone, strict=True):
        assert (mine.status_code, solo.status_code) == (200, 200)
        assert mine.content == solo.content
    assert len({r.content for r in together}) == len(TEXTS)


def test_a_failed_vocoder_batch_fails_its_streams_alone(engine, monkeypatch):
    """The streams' windows of a step run as one vocoder batch: when it fails, each stream
    in it gets the failure once and leaves; a whole request beside them is unharmed."""
    scheduler = engine.scheduler
    monkeypatch.setattr(scheduler, "_vocode", lambda windows: 1 / 0)
    streams = [engine.speech(engine.prepare(t), stream=True) for t in TEXTS[:2]]
    whole = engine.speech(engine.prepare(TEXTS[2]), stream=False)
    for speech in [*streams, whole]:
        scheduler.admit(speech)
    heard = {id(s): [] for s in [*streams, whole]}
    while scheduler.busy:
        for speech, audio in scheduler.step():
            heard[id(speech)].append(audio)
    for stream in streams:  # no audio, then the failure, once
        *before, failure = heard[id(stream)]
        assert before == [[]] * len(before)
        assert isinstance(failure, ZeroDivisionError)
        assert stream.finished
    monkeypatch.undo()
    (audio,) = [a for h in heard[id(whole)] for a in h]
    np.testing.assert_array_equal(audio, engine.speak_prepared(whole.utterance))
