"""`xtts-bench soak`: xtts-serve under minutes of mixed traffic, every response checked.

One `xtts-serve` process on localhost (the run, the vocoder, `slots` slots). First, alone,
one request at a time: a clip uploaded as a voice, and every request kind the soak will
send (each sentence of `SENTENCES` in both voices, streamed as WAV and as PCM, whole as
WAV and as FLAC, MP3 or Opus) to give each its solo body. Then `clients` threads for
`minutes`, each picking at random (seeded) among:

- a request of a known kind: its body must equal its solo body byte for byte (a body
  that differs is *mixed*; one that breaks off or never comes is *lost*); an Opus body,
  its decoded samples (each Ogg stream gets a random serial number);
- an upload of the same clip, a request in that new voice (equal to the first voice's
  solo body), and its deletion;
- a bad request (each kind of bad input the server refuses): its status and message;
- a stream the client leaves after its first bytes (a disconnect).

The server's resident memory is read every second (`/proc/PID/status`). At the end the
server must still be up, with no request waiting and no slot busy (`/metrics`).

Standard library, NumPy and soundfile only (no TensorFlow in the client's process).
"""

from __future__ import annotations

import dataclasses
import http.client
import io
import json
import os
import pathlib
import random
import tempfile
import threading
import time
import wave

import numpy as np
import soundfile
import tqdm

from xtts_bench.errors import SettingsError
from xtts_bench.serve import SENTENCES, ServeProcess, check_counts, check_runs

__all__ = ["BAD_REQUESTS", "SoakConfig", "format_soak_table", "run_soak"]

SPEECH = "/v1/audio/speech"
# (what it is, path, body or upload clip kind, expected status, a part of the message)
BAD_REQUESTS = (
    ("empty text", SPEECH, {"input": ""}, 400, "Expected input: a text to speak"),
    ("text over the limit", SPEECH, {"input": "x" * 401}, 400, "at most 400 characters"),
    ("unknown voice", SPEECH, {"input": "Hi.", "voice": "alloy"}, 400, "Expected voice one of"),
    ("unsupported format", SPEECH, {"input": "Hi.", "response_format": "aac"}, 400,
     "Expected response_format one of"),
    ("unknown field", SPEECH, {"input": "Hi.", "instructions": "calm"}, 400, "unknown field"),
    ("malformed JSON", SPEECH, b'{"input": ', 400, "malformed JSON"),
    ("body over the limit", SPEECH, b"{" + b" " * 200_000 + b"}", 413,
     "Expected a body of at most"),
    ("not audio", "/v1/voices", "not audio", 400, "does not decode as audio"),
    ("silent clip", "/v1/voices", "silent", 400, "is silent"),
    ("too short a clip", "/v1/voices", "short", 400, "give a clip of at least"),
    ("too long a clip", "/v1/voices", "long", 400, "Expected a clip of at most"),
)  # fmt: skip
# request kinds: (stream, response_format); a whole request's compressed format by sentence
_MODES = ((True, "pcm"), (True, "wav"), (False, "wav"), (False, "compressed"))
_COMPRESSED = ("flac", "mp3", "opus")
_MAX_CLIP_SECONDS = 5.0  # the soak server's --max-clip-seconds


@dataclasses.dataclass(frozen=True, kw_only=True)
class SoakConfig:
    """Settings of `xtts-bench soak`.

    Attributes:
        run: a text-to-mel run (`xtts-train fit`).
        vocoder: a vocoder run trained on the run's audio settings.
        minutes: how long the mixed traffic runs.
        clients: concurrent client threads.
        slots: the server's `--slots`.
        seed: the clients' choices.
        port: the first port tried on 127.0.0.1 (the next free one is used).
    """

    run: pathlib.Path
    vocoder: pathlib.Path
    minutes: float = 10.0
    clients: int = 8
    slots: int = 8
    seed: int = 0
    port: int = 8790

    def __post_init__(self) -> None:
        check_runs(self, ("run", "vocoder"))
        check_counts(self, ("clients", "slots", "port"))
        if not self.minutes > 0:
            raise SettingsError(f"SoakConfig.minutes: expected a number > 0, received: "
                                f"minutes={self.minutes!r}")  # fmt: skip


def run_soak(soak: SoakConfig, *, progress: bool = True) -> dict:
    """The solo bodies, then the mixed traffic; the tallies and the server's memory.

    Raises:
        SettingsError: no `xtts-serve` script, or a server that exits before it is ready.
    """
    with tempfile.TemporaryDirectory(prefix="xtts-bench-soak-") as tmp:
        server = ServeProcess(soak.run, soak.vocoder, slots=soak.slots, port=soak.port,
                              max_queue=4 * soak.clients, cache=pathlib.Path(tmp) / "xla",
                              extra=("--max-clip-seconds", str(_MAX_CLIP_SECONDS)))  # fmt: skip
        with server:
            clips = {kind: _clip(kind) for kind in ("voice", "silent", "short", "long")}
            voice = _upload(server.port, clips["voice"])["id"]
            kinds = [(t, v, s, f) for t in range(len(SENTENCES)) for v in ("run", voice)
                     for s, f in _MODES]  # fmt: skip
            solo = {k: _speak(server.port, *_body(k))[1] for k in
                    tqdm.tqdm(kinds, desc="solo bodies", disable=not progress)}  # fmt: skip
            traffic = _Traffic(server, soak, solo=solo, voice=voice, clips=clips)
            results = traffic.run(progress=progress)
            results["end"] = _end_state(server.port)
            results["server_alive"] = server.alive
    results |= {"cores": len(os.sched_getaffinity(0)), "clients": soak.clients,
                "slots": soak.slots, "minutes": soak.minutes, "kinds": len(kinds)}  # fmt: skip
    return results


def format_soak_table(results: dict) -> str:
    """The tallies and the memory figures as text."""
    rss = results["rss_mb"]
    lines = [f"xtts-serve soak: {results['minutes']:g} min, {results['clients']} clients, "
             f"{results['slots']} slots, {results['cores']} cores; {results['kinds']} request "
             f"kinds checked against their solo bodies",
             f"{'action':<22}{'sent':>7}{'as expected':>13}{'mixed':>7}{'lost':>6}"
             f"{'other':>7}"]  # fmt: skip
    for action, t in results["actions"].items():
        lines.append(f"{action:<22}{t['sent']:>7}{t['ok']:>13}{t['mixed']:>7}{t['lost']:>6}"
                     f"{t['other']:>7}")  # fmt: skip
    end = results["end"]
    lines.append(f"server up at the end: {results['server_alive']}; waiting "
                 f"{end.get('queue_depth')}, slots busy {end.get('slots_busy')}")  # fmt: skip
    lines.append(f"resident memory: {rss['first_minute']:.0f} MB after the first minute, "
                 f"{rss['end']:.0f} MB at the end ({results['rss_growth_pct']:+.1f}%), peak "
                 f"{rss['peak']:.0f} MB")  # fmt: skip
    return "\n".join(lines)


class _Traffic:
    """The clients' threads and what they tally."""

    def __init__(self, server: ServeProcess, soak: SoakConfig, *, solo: dict, voice: str,
                 clips: dict[str, bytes]) -> None:  # fmt: skip
        self.server, self.soak, self.solo = server, soak, solo
        self.voice, self.clips = voice, clips
        self.lock = threading.Lock()
        self.tally: dict[str, dict[str, int]] = {}
        self.failures: list[str] = []  # the first few unexpected answers, for the report

    def run(self, *, progress: bool) -> dict:
        seconds = 60 * self.soak.minutes
        deadline = time.perf_counter() + seconds
        samples: list[tuple[float, float]] = []  # (seconds since start, RSS MB)
        threads = [threading.Thread(target=self._client, args=(i, deadline))
                   for i in range(self.soak.clients)]  # fmt: skip
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        with tqdm.tqdm(total=round(seconds), desc="soak", unit="s", disable=not progress) as bar:
            while any(t.is_alive() for t in threads):
                samples.append((time.perf_counter() - started, self.server.rss_mb()))
                time.sleep(1.0)
                bar.n = min(round(seconds), round(time.perf_counter() - started))
                bar.refresh()
        after = [mb for at, mb in samples if at >= 60.0] or [samples[-1][1]]
        rss = {"first_minute": after[0], "end": after[-1], "peak": max(mb for _, mb in samples)}
        return {"actions": self.tally, "failures": self.failures[:20], "rss_mb": rss,
                "rss_growth_pct": 100 * (rss["end"] / rss["first_minute"] - 1),
                "rss_samples": samples}  # fmt: skip

    def _client(self, index: int, deadline: float) -> None:
        rng = random.Random(self.soak.seed * 1000 + index)
        actions = (self._known, self._upload_cycle, self._bad, self._disconnect)
        while time.perf_counter() < deadline:
            action = rng.choices(actions, weights=(6, 1, 2, 1))[0]
            action(rng)

    def _count(self, action: str, outcome: str, detail: str = "") -> None:
        with self.lock:
            t = self.tally.setdefault(action, dict.fromkeys(("sent", "ok", "mixed", "lost",
                                                              "other"), 0))  # fmt: skip
            t["sent"] += 1
            t[outcome] += 1
            if outcome != "ok" and len(self.failures) < 100:
                self.failures.append(f"{action}: {outcome}: {detail}"[:300])

    def _check(self, action: str, kind: tuple, status: int | None, body: bytes | None) -> None:
        if status is None:
            self._count(action, "lost", f"{kind}: {body!r}"[:200])
        elif status != 200:
            self._count(action, "other", f"{kind}: {status} {body[:200]!r}")
        else:
            same = _same_audio(body, self.solo[kind], _format(kind))
            self._count(action, "ok" if same else "mixed", str(kind))

    def _known(self, rng: random.Random) -> None:
        kind = rng.choice(list(self.solo))
        action = f"{'stream' if kind[2] else 'whole'} {_format(kind)}"
        self._check(action, kind, *_speak(self.server.port, *_body(kind)))

    def _upload_cycle(self, rng: random.Random) -> None:
        added = _upload(self.server.port, self.clips["voice"])
        if "id" not in added:
            self._count("upload, speak, delete", "other", str(added))
            return
        kind = rng.choice([k for k in self.solo if k[1] == self.voice])
        path, body = _body(kind)
        body["voice"] = added["id"]  # the same clip: the first voice's solo body
        status, content = _speak(self.server.port, path, body)
        deleted = _request(self.server.port, "DELETE", f"/v1/voices/{added['id']}")[0]
        if deleted != 200:
            self._count("upload, speak, delete", "other", f"DELETE {deleted}")
            return
        self._check("upload, speak, delete", kind, status, content)

    def _bad(self, rng: random.Random) -> None:
        name, path, body, status, message = rng.choice(BAD_REQUESTS)
        if path == SPEECH:
            got, content = _speak(self.server.port, path, body)
        else:
            got, content = _request(self.server.port, "POST", path, *_multipart(
                self.clips.get(body, b"RIFF, but no audio after it")))  # fmt: skip
        expected = got == status and message in (content or b"").decode(errors="replace")
        self._count("bad input", "ok" if expected else ("lost" if got is None else "other"),
                    f"{name}: {got} {(content or b'')[:200]!r}")  # fmt: skip

    def _disconnect(self, rng: random.Random) -> None:
        kind = rng.choice([k for k in self.solo if k[2]])  # a stream
        path, body = _body(kind)
        connection = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=120)
        try:
            connection.request("POST", path, json.dumps(body).encode(),
                               {"Content-Type": "application/json"})  # fmt: skip
            response = connection.getresponse()
            first = response.read1(1024)
            ok = response.status == 200 and len(first) > 0
            self._count("disconnect mid-stream", "ok" if ok else "other", str(response.status))
        except OSError as error:
            self._count("disconnect mid-stream", "lost", repr(error))
        finally:
            connection.close()  # before the stream's end: the server frees its slot


def _same_audio(body: bytes, solo: bytes, response_format: str) -> bool:
    """`body` holds `solo`'s audio: the same bytes, or for Opus the same decoded samples
    (libsndfile gives each Ogg stream a random serial number, so the bytes differ)."""
    if response_format != "opus" or body == solo:
        return body == solo
    decoded = [soundfile.read(io.BytesIO(b), dtype="int16")[0] for b in (body, solo)]
    return np.array_equal(*decoded)


def _format(kind: tuple) -> str:
    return _COMPRESSED[kind[0] % len(_COMPRESSED)] if kind[3] == "compressed" else kind[3]


def _body(kind: tuple) -> tuple[str, dict]:
    """A request kind (sentence, voice, stream, format) → its path and JSON body."""
    sentence, voice, stream, _ = kind
    return SPEECH, {"input": SENTENCES[sentence], "voice": voice, "stream": stream,
                    "response_format": _format(kind)}  # fmt: skip


def _speak(port: int, path: str, body: dict | bytes) -> tuple[int | None, bytes | None]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return _request(port, "POST", path, content, "application/json")


def _request(port: int, method: str, path: str, body: bytes | None = None,
             content_type: str | None = None) -> tuple[int | None, bytes | None]:  # fmt: skip
    """(status, whole body), or (None, the error's text) for a request that broke off."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        headers = {} if content_type is None else {"Content-Type": content_type}
        connection.request(method, path, body, headers)
        response = connection.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException) as error:
        return None, repr(error).encode()
    finally:
        connection.close()


def _upload(port: int, clip: bytes) -> dict:
    status, content = _request(port, "POST", "/v1/voices", *_multipart(clip))
    if status is None:
        return {"error": content.decode()}
    return json.loads(content)


def _multipart(clip: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body with `clip` as the file field `file`."""
    boundary = "xtts-soak-boundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"clip.wav\"\r\nContent-Type: audio/wav\r\n\r\n").encode()  # fmt: skip
    body += clip + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def _clip(kind: str, rate: int = 22050) -> bytes:
    """A 16-bit WAV (the server resamples it to the run's rate): a voice (1.5 s of a 180 Hz
    tone and its overtones), a silent one, one
    too short to condition on, one past the soak server's `--max-clip-seconds`."""
    seconds = {"voice": 1.5, "silent": 1.5, "short": 0.05, "long": _MAX_CLIP_SECONDS + 1}[kind]
    t = np.arange(int(seconds * rate)) / rate
    tone = sum(0.3 / k * np.sin(2 * np.pi * 180 * k * t) for k in range(1, 6))
    samples = np.zeros_like(t) if kind == "silent" else tone
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return out.getvalue()


def _end_state(port: int) -> dict:
    """The server's queue depth and busy slots (`/metrics`), once the clients stopped."""
    _, text = _request(port, "GET", "/metrics")
    values = {}
    for line in (text or b"").decode().splitlines():
        for name in ("queue_depth", "slots_busy"):
            if line.startswith(f"xtts_serve_{name} "):
                values[name] = float(line.split()[1])
    return values
