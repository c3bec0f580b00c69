"""`xtts-bench soak`'s settings, its clips and bodies, and its table (the soak itself needs
a trained run and vocoder: the README's figures)."""

from __future__ import annotations

import io
import wave

import numpy as np
import pytest
import soundfile

from xtts_bench.errors import SettingsError
from xtts_bench.soak import (
    BAD_REQUESTS,
    SoakConfig,
    _clip,
    _multipart,
    _same_audio,
    format_soak_table,
)


@pytest.mark.parametrize(("settings", "message"), [
    ({"clients": 0}, "SoakConfig.clients: expected an int >= 1, received: clients=0"),
    ({"slots": True}, r"SoakConfig.slots: expected an int >= 1"),
    ({"minutes": 0}, "SoakConfig.minutes: expected a number > 0"),
])  # fmt: skip
def test_bad_settings_are_refused(runs, settings, message):
    with pytest.raises(SettingsError, match=message):
        SoakConfig(run=runs[0], vocoder=runs[1], **settings)


def test_a_folder_that_is_not_a_run_is_refused(runs, tmp_path):
    with pytest.raises(SettingsError, match=r"SoakConfig\.run: expected a run folder"):
        SoakConfig(run=tmp_path, vocoder=runs[1])


@pytest.mark.parametrize(("kind", "seconds", "silent"),
                         [("voice", 1.5, False), ("silent", 1.5, True), ("short", 0.05, False),
                          ("long", 6.0, False)])  # fmt: skip
def test_clips_are_16_bit_wavs_of_their_length(kind, seconds, silent):
    with wave.open(io.BytesIO(_clip(kind)), "rb") as w:
        assert (w.getsampwidth(), w.getnchannels(), w.getframerate()) == (2, 1, 22050)
        frames = w.readframes(w.getnframes())
    assert len(frames) == 2 * int(seconds * 22050)
    assert (set(frames) == {0}) == silent


def test_the_upload_body_is_multipart_with_the_clip_as_file():
    body, content_type = _multipart(b"RIFFdata")
    boundary = content_type.split("boundary=")[1]
    assert content_type.startswith("multipart/form-data; ")
    assert body.startswith(f"--{boundary}\r\n".encode())
    assert body.endswith(f"--{boundary}--\r\n".encode())
    assert b'name="file"; filename="clip.wav"' in body
    assert b"\r\n\r\nRIFFdata\r\n" in body


def test_every_bad_request_expects_a_4xx_and_a_message():
    assert all(400 <= status < 500 and message for *_, status, message in BAD_REQUESTS)
    assert len({name for name, *_ in BAD_REQUESTS}) == len(BAD_REQUESTS)


def test_the_table_has_a_row_per_action_and_the_memory_growth():
    tally = {"sent": 10, "ok": 9, "mixed": 0, "lost": 0, "other": 1}
    table = format_soak_table({
        "minutes": 10.0, "clients": 8, "slots": 8, "cores": 2, "kinds": 96,
        "actions": {"stream pcm": tally, "bad input": tally}, "server_alive": True,
        "end": {"queue_depth": 0.0, "slots_busy": 0.0},
        "rss_mb": {"first_minute": 800.0, "end": 808.0, "peak": 812.0}, "rss_growth_pct": 1.0,
    })  # fmt: skip
    lines = table.splitlines()
    assert lines[0].startswith("xtts-serve soak: 10 min, 8 clients, 8 slots, 2 cores; 96")
    assert [line.split()[:2] for line in lines[2:4]] == [["stream", "pcm"], ["bad", "input"]]
    assert "800 MB after the first minute, 808 MB at the end (+1.0%), peak 812 MB" in lines[-1]


def test_opus_bodies_are_compared_by_their_samples_and_others_by_their_bytes():
    def opus(samples):
        out = io.BytesIO()
        soundfile.write(out, samples, 48000, format="OGG", subtype="OPUS")
        return out.getvalue()

    tone = (0.3 * np.sin(np.arange(9600) * 2 * np.pi * 220 / 48000)).astype(np.float32)
    first, second = opus(tone), opus(tone)
    assert first != second  # a random serial number in each Ogg stream
    assert _same_audio(first, second, "opus")
    assert not _same_audio(first, opus(0.5 * tone), "opus")
    assert not _same_audio(b"RIFF1", b"RIFF2", "wav")
    assert _same_audio(b"RIFF1", b"RIFF1", "flac")
