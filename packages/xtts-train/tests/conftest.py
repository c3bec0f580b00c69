"""One small feature cache for every xtts-train test of a session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from train_helpers import MICRO, OVERRIDES, VOCODER, as_cli, once, train_cli, vocoder_fit

from xtts_data import prepare, write_demo_corpus
from xtts_train.config import load_stack_config


def _demo_cache(root: Path, overrides: list[str]) -> None:
    """The demo corpus of every xtts-train test, built into `root/cache` with `overrides`."""
    write_demo_corpus(root / "corpus", n=40, min_seconds=0.4, max_seconds=1.0, seed=3)
    stack = load_stack_config(None, overrides)
    prepare(root / "corpus", root / "cache", audio=stack.audio, data=stack.data)


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    return once(tmp_path_factory, "train", lambda root: _demo_cache(root, OVERRIDES)) / "cache"


@pytest.fixture(scope="session")
def audio_cache(tmp_path_factory):
    """A cache of the same corpus that keeps each utterance's waveform (vocoder runs)."""
    return once(tmp_path_factory, "audio", lambda root: _demo_cache(root, VOCODER)) / "cache"


@pytest.fixture(scope="session")
def vocoder_run(audio_cache, tmp_path_factory):
    """(summary, work dir) of 20 deterministic micro-vocoder steps, one eval at the end."""
    workdir = once(tmp_path_factory, "vocoder", lambda root: _fit_vocoder(audio_cache, root))
    return json.loads((workdir / "run" / "summary.json").read_text()), workdir / "run"


def _fit_vocoder(audio_cache: Path, root: Path) -> None:
    vocoder_fit(audio_cache, root / "run", 20)  # in this process


def _fit_run(cache: Path, root: Path) -> None:
    """A 30-step `xtts-train fit` of the micro model on `cache` into `root/run` (`run`)."""
    evals = ["train.eval_every=30", "text_to_mel.eval_sentences=['Fine day.']"]
    # A compile cache in the environment, turned off by the flag: nothing lands in it (and
    # test_fit checks the summary says so).
    unused = root / "unused-xla"
    unused.mkdir()
    done = train_cli("fit", "--data", str(cache), "--workdir", str(root / "run"), "--quiet",
                     "--steps", "30", "--profile-steps", "3:5", "--no-compile-cache",
                     *as_cli([*OVERRIDES, *MICRO, *evals]), compile_cache=unused)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert not any(unused.iterdir())


@pytest.fixture(scope="session")
def run(cache, tmp_path_factory):
    """(summary, work dir) of a 30-step `xtts-train fit` of the micro model on `cache`, with
    a profile of steps 3..5 and one eval at the end (no validation split: the eval sentence
    only). In its own process: its compiled programs leave with it."""
    workdir = once(tmp_path_factory, "run", lambda root: _fit_run(cache, root)) / "run"
    return json.loads((workdir / "summary.json").read_text()), workdir


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory):
    """A persistent XLA compile cache the CLI processes of one worker share: a command
    run again with the same model and shapes loads its programs instead of compiling."""
    return tmp_path_factory.mktemp("xla")
