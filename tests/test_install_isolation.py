"""Installs without hatch: into an empty venv, `pip install xtts-audio[cpu]` (or `[cuda]`, as
`hatch run cuda:test` installs it) brings TF + NumPy and nothing else of ours; the root
README's pip command for all four packages gives working console scripts.

Both install into one venv, to install TensorFlow once: xtts-audio alone first, checked
before anything else lands there, then the README's command on top. That command names
`xtts-audio[<extra>]` itself (`readme_install_command`), so the venv then holds only part
of what the command installs, pip resolves the command's whole set again, and the venv
ends as an empty one would (the same `pip list`, measured when this was written). pip's
byte-compiling of every installed module is skipped (`--no-compile`, half of each
install): Python compiles what it imports.
"""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN = {"librosa", "soundfile", "scipy", "xtts-data", "xtts-train", "xtts-bench"}
# Where each module is imported from, and the site-packages of the interpreter running it.
WHERE = (
    "import sys, sysconfig, importlib\n"
    "for name in sys.argv[1:]: print(importlib.import_module(name).__file__)\n"
    "print(sysconfig.get_paths()['purelib'])\n"
)


def installed_tensorflow() -> tuple[str, str, str]:
    """(xtts-audio's extra, distribution, version) of the TensorFlow installed here:
    `cpu` with tensorflow-cpu (the default environment), `cuda` with tensorflow (the
    `cuda` environment's tensorflow[and-cuda])."""
    try:
        return "cpu", "tensorflow-cpu", importlib.metadata.version("tensorflow-cpu")
    except importlib.metadata.PackageNotFoundError:
        return "cuda", "tensorflow", importlib.metadata.distribution("tensorflow").version


def readme_install_command(extra: str) -> list[str]:
    """The root README's `pip install ...` line whose xtts-audio extra is `extra`, as
    arguments to pip (relative to the repository root).

    Coupled to README.md, "Train on your own corpus": its CPU line (and, in the `cuda`
    environment, its GPU line) is run here as written, so the README cannot name an
    extra or a package that does not install. The line is found by its
    `./packages/xtts-audio[<extra>]` requirement; there must be exactly one.
    """
    wanted = f"./packages/xtts-audio[{extra}]"
    lines = [
        line.strip() for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
        if line.strip().startswith("pip install ") and wanted in line
    ]  # fmt: skip
    assert len(lines) == 1, (
        f"Expected one README.md line `pip install ...{wanted}...`, received: {lines}"
    )
    return shlex.split(lines[0])[2:]


def new_venv(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, str]:
    """An empty venv under `tmp_path` and a pip constraints file that pins TensorFlow to
    the version already here, so pip takes it from the local cache instead of a download:
    (the venv's python, the constraints file, the pinned distribution)."""
    venv.create(tmp_path / "venv", with_pip=True)
    _, tensorflow, version = installed_tensorflow()
    pin = tmp_path / "constraints.txt"
    pin.write_text(f"{tensorflow}=={version}\n")
    return tmp_path / "venv" / "bin" / "python", pin, tensorflow


def pip_install(python: pathlib.Path, *args: object, cwd: pathlib.Path | None = None) -> None:
    """`python -m pip install -q --no-compile ARGS`; a failure shows pip's own error, not the
    warnings about index locations this machine lacks that come before it (a CI report cuts
    a long output in the middle: once that hid a full disk)."""
    done = subprocess.run([python, "-m", "pip", "install", "-q", "--no-compile", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)  # fmt: skip
    lines = [line for line in done.stderr.splitlines() if "is ignored" not in line]
    assert done.returncode == 0, f"pip install {args} failed:\n" + "\n".join(lines[-20:])


def clean_env() -> dict[str, str]:
    """This process's environment without the variables that could leak the source tree
    or this environment's packages into the new venv's interpreter."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}


def assert_imported_from_venv(imported: str, site_packages: str, venv_dir: pathlib.Path) -> None:
    """Imported from the wheel pip installed in the new venv: not from this environment's
    prefix, nor from the source tree (an editable install or a leaked path)."""
    imported_path, venv_dir = pathlib.Path(imported).resolve(), venv_dir.resolve()
    assert pathlib.Path(site_packages).resolve().is_relative_to(venv_dir), site_packages
    assert imported_path.is_relative_to(pathlib.Path(site_packages).resolve()), imported
    assert not imported_path.is_relative_to(pathlib.Path(sys.prefix).resolve()), imported
    assert not imported_path.is_relative_to(ROOT / "packages"), imported


# The mel of a second of silence, through the installed xtts-audio; where it was imported.
AUDIO = (
    "import sysconfig, numpy as np, xtts_audio\n"
    "c = xtts_audio.MelConfig.from_preset('xtts')\n"
    "print(tuple(xtts_audio.mel_features(np.zeros(22050, np.float32), c).shape))\n"
    "print(xtts_audio.__file__)\n"
    "print(sysconfig.get_paths()['purelib'])\n"
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory, request) -> Iterator[pathlib.Path]:
    """The folder of this module's venv, removed after its tests unless one failed (the
    venv holds about 2 GB; pytest.ini keeps only a failed test's files)."""
    folder, failed = tmp_path_factory.mktemp("install"), request.session.testsfailed
    yield folder
    if request.session.testsfailed == failed:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def audio_alone(folder) -> tuple[str, str, str]:
    """xtts-audio[<extra>] installed alone into an empty venv under `folder`, and what it
    shows before anything else is installed there: (the pinned TensorFlow distribution,
    `pip list --format=freeze`, what the venv's interpreter prints of `AUDIO`)."""
    python, pin, tensorflow = new_venv(folder)
    extra, _, _ = installed_tensorflow()
    pip_install(python, "-c", pin, f"{ROOT / 'packages/xtts-audio'}[{extra}]")
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True
    ).stdout
    out = subprocess.run([python, "-c", AUDIO], capture_output=True, text=True, check=True,
                         cwd=folder, env=clean_env())  # fmt: skip
    return tensorflow, listed, out.stdout


@pytest.fixture(scope="module")
def readme_venv(folder, audio_alone) -> pathlib.Path:
    """The venv of `audio_alone` after the README's command (module docstring): its python."""
    extra, _, _ = installed_tensorflow()
    requirements = readme_install_command(extra)
    python, pin = folder / "venv" / "bin" / "python", folder / "constraints.txt"
    # Run from the repository root, as the README's `cd xtts` leaves a reader of it.
    pip_install(python, "-c", pin, *requirements, cwd=ROOT)
    return python


@pytest.mark.slow
def test_xtts_audio_installs_alone(audio_alone, folder):
    tensorflow, listed, printed = audio_alone
    other = {"tensorflow-cpu": "tensorflow", "tensorflow": "tensorflow-cpu"}[tensorflow]
    installed = {line.split("==")[0].lower().replace("_", "-") for line in listed.splitlines()}
    assert {"xtts-audio", tensorflow, "numpy"} <= installed
    assert other not in installed  # one TensorFlow: the extra's
    assert not installed & FORBIDDEN, installed & FORBIDDEN
    shape, imported, site_packages = printed.strip().splitlines()[-3:]
    assert shape == "(87, 80)"
    assert_imported_from_venv(imported, site_packages, folder / "venv")


@pytest.mark.slow
def test_readme_install_command_gives_working_console_scripts(readme_venv, folder):
    python = readme_venv
    bin_dir = python.parent
    for script in ("xtts-data", "xtts-train", "xtts-bench"):
        done = subprocess.run([bin_dir / script, "--help"], capture_output=True, text=True,
                              cwd=folder, env=clean_env())  # fmt: skip
        assert done.returncode == 0, (script, done.returncode, done.stderr[-2000:])
        assert done.stdout.startswith(f"usage: {script}"), (script, done.stdout[:200])
        # The script runs the venv's interpreter, not this environment's (pip writes its
        # path on the first line, or on the third behind `#!/bin/sh` when it is long).
        head = (bin_dir / script).read_text().splitlines()[:3]
        assert any(str(bin_dir / "python") in line for line in head), (script, head)
    assert (bin_dir / "tensorboard").exists()  # the README's third command
    modules = ["xtts_audio", "xtts_data", "xtts_train", "xtts_bench"]
    out = subprocess.run([python, "-c", WHERE, *modules], capture_output=True, text=True,
                         check=True, cwd=folder, env=clean_env())  # fmt: skip
    *imported, site_packages = out.stdout.strip().splitlines()[-len(modules) - 1 :]
    for name, path in zip(modules, imported, strict=True):
        assert pathlib.Path(path).parent.name == name, (name, path)
        assert_imported_from_venv(path, site_packages, folder / "venv")
    # Phonemes with no system espeak-ng: the phonemes extra's wheel ships the library.
    corpus, cache = folder / "phoneme-corpus", folder / "phoneme-cache"
    env = {**clean_env(), "XTTS_ESPEAK": "wheel"}
    for args in (["demo-corpus", str(corpus), "--n", "4"],
                 ["prepare", str(corpus), "--out", str(cache), "--set", "data.text.phonemes=true",
                  "--quiet"]):  # fmt: skip
        done = subprocess.run([bin_dir / "xtts-data", *args], capture_output=True, text=True,
                              cwd=folder, env=env)  # fmt: skip
        assert done.returncode == 0, (args[0], done.stderr[-2000:])
    symbols = (cache / "tokenizer.json").read_text(encoding="utf-8")
    assert "ˈ" in symbols  # IPA stress marks: the texts were phonemized
