"""Console scripts start fast and quiet: `--help` and argument errors import no TensorFlow,
and a normal run keeps TensorFlow's start-up notices off stderr (`--verbose` shows them)."""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

BIN = pathlib.Path(sys.executable).parent
CLI_MODULES = ["xtts_audio.cli", "xtts_data.cli", "xtts_bench.cli", "xtts_train.cli"]
PACKAGES = ["xtts_audio", "xtts_data", "xtts_train", "xtts_bench"]
HEAVY = ("tensorflow", "keras", "librosa", "asv")

# Runs in a fresh interpreter: the subcommands are read from argparse's own error message.
PROBE = """
    import contextlib, io, json, re, sys
    from {module} import main

    def run(argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(argv)
            except SystemExit as stop:
                return stop.code, out.getvalue(), err.getvalue()
        raise AssertionError(f"{{argv}} did not stop at parsing")

    code, _, err = run(["no-such-command"])
    assert code == 2, (code, err)
    commands = re.findall(r"'([\\w-]+)'", err.split("choose from", 1)[1])
    helps = {{}}
    for argv in [["--help"], *([command, "--help"] for command in commands)]:
        code, out, err = run(argv)
        assert code == 0, (argv, code, err)
        helps[" ".join(argv)] = out
    errors = {{}}
    for command in commands:
        code, _, err = run([command, "--no-such-flag"])
        assert code == 2, (command, code, err)
        errors[command] = err
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in {heavy!r})
    print(json.dumps({{"commands": commands, "helps": helps, "errors": errors, "heavy": heavy}}))
"""


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip


@pytest.mark.parametrize("module", CLI_MODULES)
def test_help_and_argument_errors_import_no_tensorflow(module):
    done = _python(PROBE.format(module=module, heavy=HEAVY))
    assert done.returncode == 0, done.stderr
    probe = json.loads(done.stdout)
    assert probe["heavy"] == []
    assert probe["commands"], "no subcommand found"
    for command in probe["commands"]:
        assert "--verbose" in probe["helps"][f"{command} --help"], command
        assert "error:" in probe["errors"][command]


def test_packages_and_their_config_modules_import_no_tensorflow():
    modules = [*PACKAGES, "xtts_audio.errors", "xtts_audio.config", "xtts_audio.startup",
               "xtts_data.errors", "xtts_data.config", "xtts_data.text", "xtts_train.errors",
               "xtts_bench.settings"]  # fmt: skip
    done = _python(f"""
        import sys
        for name in {modules!r}:
            __import__(name)
        print(sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r}))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_resolves_and_dir_lists_it(package):
    module = importlib.import_module(package)
    assert set(module.__all__) <= set(dir(module))
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def _console(*argv: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    # The user's own setting would be kept as it is: test the default.
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)  # fmt: skip


@pytest.mark.slow  # a console script's own stderr is the subject: `hatch run test-slow`
def test_console_script_keeps_tensorflow_noise_off_stderr_unless_verbose(tmp_path):
    corpus = _console("xtts-data", "demo-corpus", "corpus", "--n", "3", "--min-seconds", "0.5",
                      "--max-seconds", "1", cwd=tmp_path)  # fmt: skip
    assert corpus.returncode == 0, corpus.stderr

    quiet = _console("xtts-data", "prepare", "corpus", "--out", "cache", cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert "utterances 3 ok" in quiet.stdout
    assert "100%" in quiet.stderr  # the progress bar still gets through
    assert "oneDNN custom operations" not in quiet.stderr
    assert "absl::InitializeLog" not in quiet.stderr

    # A user error after TensorFlow has loaded: the one-line message still shows.
    verbose = _console("xtts-data", "doctor", "nowhere", "--verbose", cwd=tmp_path)
    assert verbose.returncode == 2
    assert "absl::InitializeLog" in verbose.stderr  # oneDNN's notice only where it is on
    assert "xtts-data doctor: error: Expected a corpus folder or filelist" in verbose.stderr
