"""`pip install xtts-audio[cpu]` (or `[cuda]`, as `hatch run cuda:test` installs it) into an
empty venv brings TF + NumPy and nothing else of ours."""

from __future__ import annotations

import importlib.metadata
import pathlib
import subprocess
import sys
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN = {"librosa", "soundfile", "scipy", "xtts-data", "xtts-train", "xtts-bench"}


def installed_tensorflow() -> tuple[str, str, str]:
    """(xtts-audio's extra, distribution, version) of the TensorFlow installed here:
    `cpu` with tensorflow-cpu (the default environment), `cuda` with tensorflow (the
    `cuda` environment's tensorflow[and-cuda])."""
    try:
        return "cpu", "tensorflow-cpu", importlib.metadata.version("tensorflow-cpu")
    except importlib.metadata.PackageNotFoundError:
        return "cuda", "tensorflow", importlib.metadata.distribution("tensorflow").version


@pytest.mark.slow
def test_xtts_audio_installs_alone(tmp_path):
    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv" / "bin" / "python"
    extra, tensorflow, version = installed_tensorflow()
    other = {"tensorflow-cpu": "tensorflow", "tensorflow": "tensorflow-cpu"}[tensorflow]
    # Pin TensorFlow to the version already here so the test does not download a new one.
    pin = tmp_path / "constraints.txt"
    pin.write_text(f"{tensorflow}=={version}\n")
    package = f"{ROOT / 'packages/xtts-audio'}[{extra}]"
    subprocess.run([python, "-m", "pip", "install", "-q", "-c", pin, package], check=True)
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout
    installed = {line.split("==")[0].lower().replace("_", "-") for line in listed.splitlines()}
    assert {"xtts-audio", tensorflow, "numpy"} <= installed
    assert other not in installed  # one TensorFlow: the extra's
    assert not installed & FORBIDDEN, installed & FORBIDDEN
    code = (
        "import sysconfig, numpy as np, xtts_audio\n"
        "c = xtts_audio.MelConfig.from_preset('xtts')\n"
        "print(tuple(xtts_audio.mel_features(np.zeros(22050, np.float32), c).shape))\n"
        "print(xtts_audio.__file__)\n"
        "print(sysconfig.get_paths()['purelib'])\n"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True,
                         cwd=tmp_path)  # fmt: skip
    shape, imported, site_packages = out.stdout.strip().splitlines()[-3:]
    assert shape == "(87, 80)"
    # Imported from the wheel pip installed in the new venv: not from this environment's
    # prefix, nor from the source tree (an editable install or a leaked path).
    imported, venv_dir = pathlib.Path(imported).resolve(), (tmp_path / "venv").resolve()
    assert pathlib.Path(site_packages).resolve().is_relative_to(venv_dir), site_packages
    assert imported.is_relative_to(pathlib.Path(site_packages).resolve()), imported
    assert not imported.is_relative_to(pathlib.Path(sys.prefix).resolve()), imported
    assert not imported.is_relative_to(ROOT / "packages"), imported
