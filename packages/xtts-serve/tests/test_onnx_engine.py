"""`OnnxEngine` (`xtts-serve --runtime onnx`): an exported voice served by onnxruntime
speaks what `xtts-runtime` speaks, streams chunks as it decodes, reads uploads
with the folder's own clip programs, and refuses a folder without the slots it is asked
for.
(That requests in its slots hear what they hear alone: test_slots.py, on both runtimes.)"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import time
import venv
from pathlib import Path

import httpx2
import numpy as np
import pytest
import soundfile
from starlette.testclient import TestClient

import xtts_audio as xa
from xtts_audio import pcm16, wav_bytes
from xtts_data.pieces import text_pieces
from xtts_runtime import Slots
from xtts_runtime import Voice as VoiceFolder
from xtts_serve import ConfigError, EngineConfig, OnnxEngine, RequestError, create_app
from xtts_serve.cli import NO_TF

TEXT = "Fine day. It was a quiet one, and we read."  # three pieces of at most 20 symbols


def test_it_speaks_what_the_runtime_speaks_and_streams_it_in_chunks(onnx_engine,
                                                                    voice_folder):  # fmt: skip
    whole = onnx_engine.speak(TEXT)
    folder = VoiceFolder(voice_folder)
    said = folder.speak(TEXT)
    assert len(said.pieces) == 3
    np.testing.assert_allclose(whole, said.audio, atol=1e-5)  # one row of 4, or alone
    chunks = list(onnx_engine.stream(TEXT))
    hop = folder.audio.hop_length
    assert len(chunks[0]) == 32 * hop  # the first of 32 frames: the first audio soon
    assert len(chunks) > 2 * len(said.pieces)
    assert all(c.dtype == np.int16 for c in chunks)
    joined = np.concatenate(chunks).astype(np.int32)
    assert joined.shape == whole.shape
    assert np.abs(joined - pcm16(whole)).max() <= 32  # float rounding (test_engine's bound)
    runtime = np.concatenate(list(folder.chunks(TEXT)))  # the runtime's own stream
    np.testing.assert_allclose(runtime, said.audio, atol=1e-3)


def _decoded(slots: Slots, rows: list) -> None:
    """Step `slots` until every row in `rows` ended."""
    while any(row.index is not None for row in rows):
        slots.step()


def test_busy_rows_move_down_as_others_leave_and_decode_what_they_decode_alone(voice_folder):
    """The slots keep their busy rows first (a leaving row takes the last one's place) and
    step on the smallest program that holds them: a piece's frames are its frames alone."""
    folder = VoiceFolder(voice_folder)
    slots = Slots(folder, rows=4)
    assert slots.sizes[-1] == 4
    assert set(slots.sizes) <= {1, 4}  # the exported sizes whose rows round alike
    ids = [p.ids for p in text_pieces(TEXT, folder.text_config, folder.tokenizer, name="t",
                                      max_symbols=folder.manifest["split_symbols"])]  # fmt: skip
    first, second, third = (slots.join(folder.voice, i) for i in ids)
    slots.step()
    slots.leave(first)
    assert (first.index, third.index, second.index, slots.busy) == (None, 0, 1, 2)
    _decoded(slots, [second, third])
    for row, piece in ((second, ids[1]), (third, ids[2])):
        alone = Slots(folder, rows=4)
        solo = alone.join(folder.voice, piece)
        _decoded(alone, [solo])
        np.testing.assert_array_equal(row.frames, solo.frames)
        assert row.t == solo.t


def test_an_upload_is_read_by_the_folders_programs_and_a_bad_one_refused(onnx_engine,
                                                                         tone_clip):  # fmt: skip
    voice = onnx_engine.add_voice(tone_clip(1.5, hz=180), name="tone")
    try:
        assert voice.reference.shape[1] == onnx_engine.folder.manifest["n_mels"]
        tone = onnx_engine.speak("Fine day.", voice=voice.id)
        assert not np.array_equal(tone, onnx_engine.speak("Fine day."))
    finally:
        onnx_engine.voices.remove(voice.id)
    silent = wav_bytes(np.zeros(onnx_engine.sample_rate, np.float32), onnx_engine.sample_rate)
    with pytest.raises(RequestError, match="the uploaded clip") as refused:
        onnx_engine.add_voice(silent)
    assert "xtts-serve-" not in str(refused.value)  # no path on the server
    with pytest.raises(RequestError, match=re.escape("Expected a clip of at most 30 s")):
        onnx_engine.add_voice(tone_clip(31))


def test_a_folder_without_the_slots_asked_for_is_refused(voice_folder):
    config = EngineConfig(run=voice_folder, runtime="onnx", slots=8)
    with pytest.raises(ConfigError, match=re.escape(
            "exported for [1, 4] slots; export it again with --slots 8")):  # fmt: skip
        OnnxEngine(config)


def test_serving_an_exported_voice_loads_no_tensorflow(voice_folder):
    """The engine and the app on it, in a fresh process: TensorFlow is never imported."""
    probe = (f"import sys\nfrom xtts_serve import EngineConfig, OnnxEngine, create_app\n"
             f"engine = OnnxEngine(EngineConfig(run={str(voice_folder)!r}, runtime='onnx'))\n"
             f"create_app(engine)\nengine.speak('Fine day.')\n"
             f"print(sorted(m for m in sys.modules if m.split('.')[0] in "
             f"('tensorflow', 'keras', 'xtts_train')))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_opus_is_resampled_by_the_folders_program_as_tensorflow_resamples(onnx_engine):
    """The voice's 22.05 kHz audio to Opus's 48 kHz by `resample-48000` (exported), as
    xtts_audio.resample does it, and over HTTP an Opus body at 48 kHz."""
    wave = onnx_engine.speak("Fine day.")
    mine = onnx_engine.resample(wave, 48000)
    np.testing.assert_allclose(mine, xa.resample(wave, orig_sr=onnx_engine.sample_rate,
                                                 target_sr=48000).numpy(), atol=1e-5)  # fmt: skip
    with pytest.raises(RequestError, match=re.escape("one of [48000] Hz, received: 16000 Hz")):
        onnx_engine.resample(wave, 16000)
    with TestClient(create_app(onnx_engine)) as client:
        response = client.post("/v1/audio/speech", json={"input": "Fine day.",
                                                         "response_format": "opus"})  # fmt: skip
    assert response.status_code == 200, response.text
    assert response.headers["x-sample-rate"] == "48000"
    decoded, rate = soundfile.read(io.BytesIO(response.content), dtype="float32")
    assert rate == 48000
    assert abs(len(decoded) - len(mine)) <= 480


@pytest.mark.slow
def test_xtts_serve_installs_without_tensorflow_and_serves_an_exported_voice(voice_folder,
                                                                           tmp_path):  # fmt: skip
    """An empty venv, xtts-serve without its tf extra: no TensorFlow and no xtts-train
    there; `--runtime tf` is one line and exit 2, and `--runtime onnx` serves the voice."""
    root = Path(__file__).resolve().parents[3]
    venv.create(tmp_path / "venv", with_pip=True)
    bin_ = tmp_path / "venv" / "bin"
    done = subprocess.run([bin_ / "python", "-m", "pip", "install", "-q", "--no-compile",
                           "./packages/xtts-audio", "./packages/xtts-data",
                           "./packages/xtts-runtime[phonemes]", "./packages/xtts-serve"],
                          cwd=root, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    listed = subprocess.run([bin_ / "python", "-m", "pip", "list", "--format=freeze"],
                            capture_output=True, text=True, check=True).stdout.lower()  # fmt: skip
    assert "tensorflow" not in listed and "xtts-train" not in listed, listed  # noqa: PT018
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
    refused = subprocess.run([bin_ / "xtts-serve", "--run", str(voice_folder)],
                             capture_output=True, text=True, env=env, cwd=tmp_path)  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [f"xtts-serve serve: error: {NO_TF}"]
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    server = subprocess.Popen([bin_ / "xtts-serve", "--run", str(voice_folder), "--runtime",
                               "onnx", "--port", str(port)], env=env, cwd=tmp_path,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read()
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.1)
        response = httpx2.post(f"http://127.0.0.1:{port}/v1/audio/speech", timeout=60,
                               json={"model": "tts-1", "input": "Fine day.", "voice": "alloy"})  # fmt: skip
    finally:
        server.terminate()
        server.wait(30)
    assert response.status_code == 200, response.text
    wave, rate = soundfile.read(io.BytesIO(response.content))
    assert rate == json.loads((voice_folder / "voice.json").read_text())["audio"]["sample_rate"]
    assert np.abs(wave).max() > 0
