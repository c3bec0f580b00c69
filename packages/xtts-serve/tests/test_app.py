"""The HTTP API on a warm engine: speech is the engine's audio, every bad input is a
JSON 4xx naming what was expected and the server goes on serving, voices by upload, the
queue bound, the API key, the health check and the metrics."""

from __future__ import annotations

import asyncio
import io
import json
import re
import time

import httpx2
import numpy as np
import pytest
import soundfile
from starlette.testclient import TestClient

from xtts_audio import pcm16, resample, stream_wav_header, wav_bytes
from xtts_serve import ServerConfig, create_app

SPEECH = "/v1/audio/speech"


@pytest.fixture(scope="module")
def client(engine):
    """A running app on the session's engine: uploads of at most 2 MiB."""
    with TestClient(create_app(engine, ServerConfig(max_upload_mb=2))) as client:
        yield client


def _good(client) -> None:
    """A normal request still succeeds."""
    response = client.post(SPEECH, json={"input": "Fine day."})
    assert response.status_code == 200, response.text
    assert response.content[:4] == b"RIFF"


@pytest.mark.parametrize(("response_format", "stream"),
                         [("wav", False), ("pcm", False), ("wav", True), ("pcm", True)])  # fmt: skip
def test_speech_is_the_engines_audio(client, engine, text, response_format, stream):
    """The body holds what the engine speaks for the text alone (itself `synthesize`'s
    audio up to rounding: test_engine)."""
    response = client.post(SPEECH, json={"model": "xtts", "input": text, "voice": "run",
                                         "response_format": response_format, "speed": 1.0,
                                         "stream": stream})  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == f"audio/{response_format}"
    assert response.headers["x-sample-rate"] == str(engine.sample_rate)
    if stream:  # a header of unknown length, then the streamed samples
        samples = np.concatenate(list(engine.stream(text)))
        header = stream_wav_header(engine.sample_rate) if response_format == "wav" else b""
        assert response.content == header + samples.astype("<i2").tobytes()
    elif response_format == "wav":
        assert response.content == wav_bytes(engine.speak(text), engine.sample_rate)
    else:
        assert response.content == pcm16(engine.speak(text)).astype("<i2").tobytes()


@pytest.mark.parametrize(("response_format", "media_type", "rate", "least_snr_db"),
                         [("flac", "audio/flac", 22050, None), ("mp3", "audio/mpeg", 22050, 10.0),
                          ("opus", "audio/ogg", 48000, 10.0)])  # fmt: skip
def test_compressed_formats_hold_the_engines_audio(client, engine, response_format, media_type,
                                                   rate, least_snr_db):  # fmt: skip
    """FLAC holds the WAV's 16-bit samples exactly; MP3 and Opus (at 48 kHz, Opus's own)
    the same audio as far as a lossy codec keeps it: same length, SNR above a floor."""
    response = client.post(SPEECH, json={"input": "Fine day.", "response_format": response_format})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == media_type
    assert response.headers["x-sample-rate"] == str(rate)
    decoded, decoded_rate = soundfile.read(io.BytesIO(response.content), dtype="float32")
    assert decoded_rate == rate
    wave = engine.speak("Fine day.")
    if least_snr_db is None:
        np.testing.assert_array_equal(pcm16(decoded), pcm16(wave))
        return
    if rate != engine.sample_rate:
        wave = resample(wave, orig_sr=engine.sample_rate, target_sr=rate).numpy()
    assert abs(len(decoded) - len(wave)) <= rate // 100
    n = min(len(decoded), len(wave))
    noise = np.sum((decoded[:n] - wave[:n]) ** 2)
    snr = 10 * np.log10(np.sum(wave[:n] ** 2) / max(noise, 1e-12))
    assert snr >= least_snr_db, snr


def test_the_run_name_is_a_model(client, run):
    response = client.post(SPEECH, json={"model": run.name, "input": "Fine day."})
    assert response.status_code == 200


BAD_SPEECH = [
    (b"{", 400, "Expected a JSON object body, received: malformed JSON"),
    (b"[1]", 400, "Expected a JSON object body, received: a JSON list"),
    ({"input": ""}, 400, "Expected input: a text to speak, received: ''"),
    ({"model": "xtts"}, 400, "Expected the field input: the text to speak, received: none"),
    ({"input": 5}, 400, "Expected input a string, received: 5"),
    ({"input": "x" * 201}, 400, "Expected input of at most 200 characters (--max-chars)"),
    ({"input": "hi", "voice": "nobody"}, 400, "Expected voice one of ['run'], an alias (['alloy', 'ash',"),
    ({"input": "hi", "instructions": "x"}, 400, "received: unknown field(s) ['instructions']"),
    ({"input": "hi", "response_format": "aac"}, 400, "Expected response_format one of ['wav', 'pcm', 'flac', 'mp3', 'opus'], received: 'aac'"),
    ({"input": "hi", "response_format": "mp3", "stream": True}, 400, "Expected response_format one of ['wav', 'pcm'] with stream=true, received: 'mp3'"),
    ({"input": "hi", "speed": 1.25}, 400, "Expected speed 1.0, received: 1.25"),
    ({"input": "hi", "speed": True}, 400, "Expected speed a number, received: true"),
    ({"input": "hi", "model": "gpt-5"}, 400, "Expected model one of ['run', 'xtts', 'tts-1',"),
    ({"input": "hi", "stream": "yes"}, 400, 'Expected stream true or false, received: "yes"'),
    ({"input": "hi", "language": "xx"}, 400, "Expected a row language"),
    ({"input": "....."}, 400, "has nothing to say"),
    (b"{" + b" " * 20_000 + b"}", 413, "Expected a body of at most 17584 bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "status", "message"), BAD_SPEECH,
                         ids=[m[:40] for _, _, m in BAD_SPEECH])  # fmt: skip
def test_bad_speech_requests_are_json_errors_and_the_server_goes_on(client, body, status,
                                                                     message):  # fmt: skip
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = client.post(SPEECH, content=content,
                           headers={"content-type": "application/json"})  # fmt: skip
    assert response.status_code == status
    error = response.json()["error"]
    assert message in error["message"]
    assert error["type"] == "invalid_request_error"
    _good(client)


def test_a_stream_without_a_vocoder_is_refused(griffin_lim_engine):
    with TestClient(create_app(griffin_lim_engine)) as client:
        response = client.post(SPEECH, json={"input": "Fine day.", "stream": True})
        assert response.status_code == 400
        assert "Griffin-Lim" in response.json()["error"]["message"]
        _good(client)


def test_an_uploaded_voice_is_listed_spoken_and_deleted(client, tone_clip):
    upload = client.post("/v1/voices", files={"file": ("me.wav", tone_clip(1.5))},
                         data={"name": "tone"})  # fmt: skip
    assert upload.status_code == 201, upload.text
    voice = upload.json()
    assert voice["name"] == "tone"
    assert voice["source"] == "upload"
    assert re.fullmatch(r"voice-[\w-]{16}", voice["id"])  # opaque, no name or path in it
    listed = client.get("/v1/audio/voices").json()
    assert voice in listed["voices"]
    assert listed["default"] == "run"
    spoken = client.post(SPEECH, json={"input": "Fine day.", "voice": voice["id"]})
    own = client.post(SPEECH, json={"input": "Fine day."})
    assert spoken.status_code == 200
    assert spoken.content != own.content
    assert client.delete(f"/v1/voices/{voice['id']}").json() == {"id": voice["id"], "deleted": True}
    assert voice not in client.get("/v1/audio/voices").json()["voices"]
    gone = client.post(SPEECH, json={"input": "Fine day.", "voice": voice["id"]})
    assert gone.status_code == 400
    assert "Expected voice one of" in gone.text
    again = client.delete(f"/v1/voices/{voice['id']}")
    assert again.status_code == 404
    assert "which names none" in again.json()["error"]["message"]
    own_voice = client.delete("/v1/voices/run")
    assert own_voice.status_code == 400
    assert "one the server started with" in own_voice.text


def _upload(engine, tone_clip, kind: str) -> dict:
    silent = wav_bytes(np.zeros(engine.sample_rate, np.float32), engine.sample_rate)
    uploads = {
        "not audio": {"files": {"file": ("a.wav", b"RIFF is not a header")}},
        "text": {"files": {"file": ("notes.txt", b"hello, world")}},
        "empty": {"files": {"file": ("a.wav", b"")}},
        "silent": {"files": {"file": ("a.wav", silent)}},
        "short": {"files": {"file": ("a.wav", tone_clip(0.1))}},
        "long": {"files": {"file": ("a.wav", tone_clip(31.0))}},
        "no file": {"data": {"name": "x"}},
        "two files": {"files": [("file", ("a.wav", silent)), ("file", ("b.wav", silent))]},
        "extra field": {"files": {"file": ("a.wav", silent)}, "data": {"note": "x"}},
        "bad name": {"files": {"file": ("a.wav", silent)}, "data": {"name": "x" * 65}},
        "too large": {"files": {"file": ("a.wav", b"\0" * (2 * 2**20 + 1))}},
    }
    return uploads[kind]


BAD_UPLOADS = [
    ("not audio", 400, "does not decode as audio (unreadable WAV"),
    ("text", 400, "Expected an audio clip (WAV, FLAC or OGG), received: the uploaded clip, which does not decode as audio"),
    ("empty", 400, "received: 0 bytes"),
    ("silent", 400, "the uploaded clip is silent (peak all zeros)"),
    ("short", 400, "give a clip of at least"),
    ("long", 400, "Expected a clip of at most 30 s, received: the uploaded clip of 31.0 s"),
    ("no file", 400, "Expected a multipart/form-data body with the clip as the file field `file`"),
    ("two files", 400, "Too many files"),
    ("extra field", 400, "Expected the multipart fields ['file', 'name']"),
    ("bad name", 400, "Expected name 1 to 64 printable characters"),
    ("too large", 413, f"Expected a body of at most {2 * 2**20} bytes"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "status", "message"), BAD_UPLOADS,
                         ids=[k for k, _, _ in BAD_UPLOADS])  # fmt: skip
def test_bad_uploads_are_json_errors_and_name_no_server_path(client, engine, tone_clip, kind,
                                                              status, message):  # fmt: skip
    response = client.post("/v1/voices", **_upload(engine, tone_clip, kind))
    assert response.status_code == status
    text = response.json()["error"]["message"]
    assert message in text
    assert "/tmp" not in text
    assert "xtts-serve-" not in text
    _good(client)


def test_routes_and_methods_not_served_are_json_errors(client):
    missing = client.get("/v1/models")
    assert missing.status_code == 404
    assert "Not Found: GET /v1/models" in missing.text
    wrong = client.get(SPEECH)
    assert wrong.status_code == 405
    assert wrong.json()["error"]["type"] == "invalid_request_error"


def test_a_failed_decoding_is_a_500_for_that_request_alone(client, engine, monkeypatch):
    speech = engine.speech

    def failing(utterance, *, stream):
        made = speech(utterance, stream=stream)
        if utterance.text == "Boom.":
            made.take = lambda chunk: 1 / 0  # its audio fails at its first chunk
        return made

    monkeypatch.setattr(engine, "speech", failing)
    response = client.post(SPEECH, json={"input": "Boom."})
    assert response.status_code == 500
    assert response.json()["error"] == {
        "message": "Expected the decoding to succeed, received: ZeroDivisionError: division "
        "by zero",
        "type": "server_error",
    }
    assert engine.scheduler.busy == 0  # its slot is free
    _good(client)


def test_metrics_count_requests_queue_and_audio(client):
    _good(client)
    client.post(SPEECH, json={"input": ""})
    client.post(SPEECH, json={"input": "Fine day.", "stream": True})
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
               for line in response.text.splitlines() if line and not line.startswith("#")}  # fmt: skip
    assert samples['xtts_serve_requests_total{route="/v1/audio/speech",status="200"}'] >= 2
    assert samples['xtts_serve_requests_total{route="/v1/audio/speech",status="400"}'] >= 1
    assert samples["xtts_serve_queue_depth"] == 0
    assert samples["xtts_serve_ready"] == 1
    assert samples["xtts_serve_time_to_first_audio_seconds_count"] >= 2
    assert samples["xtts_serve_real_time_factor_count"] >= 2
    assert samples["xtts_serve_audio_seconds_total"] > 0


def test_healthz_is_503_until_the_warm_up_is_done(engine):
    app = create_app(engine)
    before = TestClient(app).get("/healthz")  # the app not started: no decoding thread yet
    assert before.status_code == 503
    assert before.json() == {"status": "warming up"}
    with TestClient(app) as client:
        deadline = time.monotonic() + 10  # the engine is warm: the warm-up returns at once
        while (after := client.get("/healthz")).status_code == 503 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert after.status_code == 200
    assert after.json() == {"status": "ready", "programs": 8, "max_frames": engine.max_frames,
                            "max_symbols": 20, "slots": 4, "streams": True}  # fmt: skip


def test_the_api_key_is_asked_of_every_request_but_healthz(engine):
    with TestClient(create_app(engine, ServerConfig(api_key="s3cret"))) as client:
        none = client.get("/v1/audio/voices")
        wrong = client.get("/v1/audio/voices", headers={"Authorization": "Bearer s3cre"})
        right = client.get("/v1/audio/voices", headers={"Authorization": "Bearer s3cret"})
        metrics = client.get("/metrics")
        health = client.get("/healthz")
    for refused in (none, wrong, metrics):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert refused.json()["error"]["type"] == "authentication_error"
    assert "received: none" in none.text
    assert "received: a wrong key" in wrong.text
    assert right.status_code == 200
    assert health.status_code != 401  # no key asked
    assert "status" in health.json()


@pytest.mark.anyio
async def test_past_max_queue_requests_get_503_with_retry_after(engine, text):
    """One request decodes, one waits (`max_queue=1`): of four sent at once, at least two
    are refused, each with Retry-After; the others get their audio, and so does the next."""
    app = create_app(engine, ServerConfig(max_queue=1))
    long_text = " ".join([text] * 4)[:200]  # ~10 pieces: three decoding batches
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://serve") as client:
            responses = await asyncio.gather(*[client.post(SPEECH, json={"input": long_text})
                                               for _ in range(4)])  # fmt: skip
            busy = [r for r in responses if r.status_code == 503]
            served = [r for r in responses if r.status_code == 200]
            assert len(busy) >= 2
            assert len(busy) + len(served) == 4
            for response in busy:
                assert int(response.headers["retry-after"]) >= 1
                assert (
                    "Expected at most 1 requests waiting for the decoder (--max-queue)"
                    in (response.json()["error"]["message"])
                )
            assert all(r.content[:4] == b"RIFF" for r in served)
            after = await client.post(SPEECH, json={"input": "Fine day."})
            assert after.status_code == 200
