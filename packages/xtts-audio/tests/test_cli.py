"""`xtts-audio demo` runs the whole chain and writes audio; user errors exit 2."""

from __future__ import annotations

import numpy as np
import soundfile

from xtts_audio.cli import main
from xtts_audio.demo import synthetic_utterance


def test_synthetic_utterance_is_finite_at_every_rate():
    for rate in (16000, 22050, 44100):
        audio = synthetic_utterance(sample_rate=rate)
        assert np.isfinite(audio).all()
        assert 0.05 < np.abs(audio).max() <= 1.0


def test_demo_writes_input_and_reconstruction(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--iterations", "2"]) == 0
    out = capsys.readouterr().out
    for stage in ("decoded", "prepared", "features", "rebuilt"):
        assert stage in out
    rebuilt, rate = soundfile.read(tmp_path / "griffin_lim.wav")
    assert rate == 22050
    assert np.sqrt(np.mean(rebuilt**2)) > 0.005  # audible, not silence
    source, source_rate = soundfile.read(tmp_path / "input.wav")
    assert (source_rate, source.shape[1]) == (44100, 2)


def test_demo_on_a_user_file_with_another_preset(tmp_path):
    wav = tmp_path / "mine.wav"
    soundfile.write(wav, synthetic_utterance(sample_rate=16000), 16000, subtype="PCM_24")
    assert (
        main(
            [
                "demo",
                "--input",
                str(wav),
                "--out",
                str(tmp_path / "o"),
                "--preset",
                "coqui",
                "--iterations",
                "1",
            ]
        )
        == 0
    )
    assert (tmp_path / "o" / "griffin_lim.wav").stat().st_size > 1000


def test_missing_and_unreadable_inputs_exit_2(tmp_path, capsys):
    assert main(["demo", "--input", str(tmp_path / "nope.wav"), "--out", str(tmp_path)]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
    assert main(["demo", "--input", str(bad), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("xtts-audio demo: error: cannot read")
    assert err.rstrip().endswith(
        "truncated header: chunk header at byte 12 cut off by the end of the file"
    )
    assert len(err.strip().splitlines()) == 1
