"""`xtts-serve`: `--help` names every limit and loads no TensorFlow; bad flags are one
line and exit 2; a real server warms up behind a 503 health check, serves, and on SIGTERM
finishes the stream in flight before it exits (uvicorn in a thread on the session's
engine; the command's own process in the slow tier)."""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import httpx2
import numpy as np
import pytest

from xtts_serve import create_app
from xtts_serve.cli import SHUTDOWN_SECONDS, main

PROBE = """
import contextlib, io, json, sys
from xtts_serve.cli import main
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = main(sys.argv[1:])
    except SystemExit as stop:
        code = stop.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras", "uvicorn"))
print(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(), "heavy": heavy}))
"""


def _probe(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_help_explains_every_limit_without_loading_tensorflow():
    probe = _probe("--help")
    assert probe["code"] == 0
    assert probe["heavy"] == []
    for flag in ("--run", "--vocoder", "--host", "--port", "--max-queue", "--max-chars",
                 "--voices", "--max-voices", "--max-clip-seconds", "--max-upload-mb",
                 "--api-key", "--set", "--verbose", "--voice-alias", "--model-alias",
                 "--runtime", "--threads"):  # fmt: skip
        assert flag in probe["out"], flag
    for limit in ("503 with Retry-After", "413", "refused (400)", "127.0.0.1",
                  "XTTS_SERVE_API_KEY", "forgotten", "restart", "voices.yaml", "alloy, ash",
                  "tts-1, tts-1-hd"):  # fmt: skip
        assert limit in " ".join(probe["out"].split()), limit


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-queue", "0"], "Expected max_queue an int >= 1, received: max_queue=0"),
        (["--max-chars", "-5"], "Expected max_chars an int >= 1, received: max_chars=-5"),
        (
            ["--max-upload-mb", "0"],
            "Expected max_upload_mb a number > 0, received: max_upload_mb=0.0",
        ),
        (
            ["--api-key", ""],
            "Expected api_key a non-empty string or None, received: an empty key; leave it out to serve without one",
        ),
        (
            ["--voice-alias", "alloy"],
            "Expected a voice alias NAME=VOICE (--voice-alias), each side 1 to 64 printable characters, no space at either end, received: 'alloy'",
        ),
        (
            ["--voice-alias", "alloy=run", "--voice-alias", "alloy=amy"],
            "Expected each voice alias (--voice-alias) named once, received: ['alloy'] more than once",
        ),
        (
            ["--runtime", "onnx", "--vocoder", "voc", "--set", "decode.split_symbols=20"],
            "Expected --runtime onnx without --vocoder, --set, received: them; an exported voice decodes and vocodes as it was exported (xtts-train export --format onnx --set decode.KEY=VALUE)",
        ),
        (
            ["--threads", "2"],
            "Expected --threads with --runtime onnx, received: --threads 2 with --runtime tf, whose programs run on TensorFlow's own thread pools",
        ),
        (
            ["--runtime", "onnx", "--threads", "0"],
            "Expected threads an int >= 1, received: threads=0",
        ),
        (
            ["--model-alias", ""],
            "Expected a model alias (--model-alias) of 1 to 64 printable characters, no space at either end, received: ''",
        ),
    ],
)
def test_a_bad_limit_is_one_line_before_tensorflow_loads(argv, message):
    probe = _probe("--run", "somewhere", *argv)
    assert probe["code"] == 2
    assert probe["heavy"] == []
    assert probe["err"] == f"xtts-serve serve: error: {message}\n"


def test_a_malformed_voices_yaml_is_one_line_before_tensorflow_loads(tmp_path):
    (tmp_path / "voices.yaml").write_text("alloy: run\n  narrator: : tone\n")
    probe = _probe("--run", "somewhere", "--voices", str(tmp_path))
    assert probe["code"] == 2
    assert probe["heavy"] == []
    assert probe["err"] == (f"xtts-serve serve: error: Expected {tmp_path / 'voices.yaml'} a "
                            f"YAML mapping of voice names to voice ids (alloy: amy), received: "
                            f"malformed YAML (mapping values are not allowed here at line 2, "
                            f"column 11)\n")  # fmt: skip


def test_an_alias_to_no_voice_is_one_line_once_the_voices_load(run, capsys):
    assert main(["--run", str(run), "--voice-alias", "alloy=nobody"]) == 2
    err = capsys.readouterr().err
    assert err == ("xtts-serve serve: error: Expected voice aliases to voices the server starts "
                   "with ['run'], received: {'alloy': 'nobody'}; an alias names the run's voice "
                   "('run') or a --voices clip's stem\n")  # fmt: skip


def test_a_folder_that_is_not_a_run_is_one_line(tmp_path, capsys):
    assert main(["--run", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "is not a training run" in err


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _health(base: str) -> str | None:
    try:
        return httpx2.get(f"{base}/healthz", timeout=5).json()["status"]
    except httpx2.TransportError:
        return None  # not listening yet


def _stream_then_stop(base: str, text: str, stop) -> bytes:
    """The body of a PCM stream of `text`, `stop()` called once its first bytes came."""
    with httpx2.stream("POST", f"{base}/v1/audio/speech", timeout=60,
                       json={"input": text, "stream": True, "response_format": "pcm"}) as response:  # fmt: skip
        assert response.status_code == 200
        chunks = response.iter_bytes()
        body = next(chunks)  # the stream is in flight
        stop()
        return body + b"".join(chunks)


def test_uvicorn_finishes_the_stream_in_flight_on_sigterm(engine, text):
    """The server `xtts-serve` runs (uvicorn, the command's graceful shutdown) in a thread
    on the session's engine: SIGTERM's handler (`handle_exit`, which uvicorn installs in
    the main thread) stops it, and the stream in flight ends whole. The command's own
    process, signalled: the slow tier (below)."""
    import uvicorn

    port = _free_port()
    config = uvicorn.Config(create_app(engine), host="127.0.0.1", port=port, log_level="warning",
                            timeout_graceful_shutdown=SHUTDOWN_SECONDS)  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started
        stop = functools.partial(server.handle_exit, signal.SIGTERM, None)
        body = _stream_then_stop(f"http://127.0.0.1:{port}", text, stop)
        thread.join(60)
        assert not thread.is_alive()  # it stopped, once the stream was done
    finally:
        server.should_exit = True
        thread.join(60)
    expected = np.concatenate(list(engine.stream(text))).astype("<i2").tobytes()
    assert body == expected  # whole: the SIGTERM cut nothing


# A new process that loads TensorFlow and warms up its own engine (~15 s of CPU): the slow
# tier. The default tier keeps the shutdown on SIGTERM in-process (above), the 503 while
# warming up (test_app's test_healthz_is_503_until_the_warm_up_is_done) and the command's
# start-up in-process up to its voices (test_an_alias_to_no_voice_...).
@pytest.mark.slow
def test_the_server_warms_up_serves_and_finishes_its_stream_on_sigterm(run, vocoder_run,
                                                                       engine, text):  # fmt: skip
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-c", "import sys; from xtts_serve.cli import main; "
               "sys.exit(main())", "--run", str(run), "--vocoder", str(vocoder_run),
               "--port", str(port), "--max-chars", "200", "--no-compile-cache",
               "--vocoder-batching", engine.config.vocoder_batching,  # as the engine rounds
               *[a for o in engine.config.overrides for a in ("--set", o)]]  # fmt: skip
    env = dict(os.environ, XTTS_COMPILE_CACHE="off", TF_CPP_MIN_LOG_LEVEL="2")
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen, deadline = [], time.monotonic() + 120
        while (status := _health(base)) != "ready" and time.monotonic() < deadline:
            assert server.poll() is None, server.communicate()[1].decode()[-2000:]
            seen.append(status)
            time.sleep(0.1)
        assert status == "ready"
        assert "warming up" in seen
        body = _stream_then_stop(base, text, lambda: server.send_signal(signal.SIGTERM))
        # uvicorn finishes what is in flight, then ends by the signal it caught
        assert server.wait(timeout=60) == -signal.SIGTERM
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert b"Traceback" not in server.stderr.read()
    expected = np.concatenate(list(engine.stream(text))).astype("<i2").tobytes()
    assert body == expected  # whole: the SIGTERM cut nothing
