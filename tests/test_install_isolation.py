"""`pip install xtts-audio[cpu]` into an empty venv brings TF + NumPy and nothing else of ours."""

from __future__ import annotations

import importlib.metadata
import pathlib
import subprocess
import sys
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN = {"librosa", "soundfile", "scipy", "xtts-data", "xtts-train", "xtts-bench"}


@pytest.mark.slow
def test_xtts_audio_installs_alone(tmp_path):
    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv" / "bin" / "python"
    # Pin TensorFlow to the version already here so the test does not download a new one.
    pin = tmp_path / "constraints.txt"
    pin.write_text(f"tensorflow-cpu=={importlib.metadata.version('tensorflow-cpu')}\n")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "-c", pin, f"{ROOT / 'packages/xtts-audio'}[cpu]"],
        check=True,
    )
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout
    installed = {line.split("==")[0].lower().replace("_", "-") for line in listed.splitlines()}
    assert {"xtts-audio", "tensorflow-cpu", "numpy"} <= installed
    assert not installed & FORBIDDEN, installed & FORBIDDEN
    code = (
        "import numpy as np, xtts_audio\n"
        "c = xtts_audio.MelConfig.from_preset('xtts')\n"
        "print(tuple(xtts_audio.mel_features(np.zeros(22050, np.float32), c).shape))\n"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "(87, 80)"
    assert sys.prefix not in out.stdout
