"""One small feature cache for every xtts-train test of a session."""

from __future__ import annotations

import json

import pytest
from train_helpers import MICRO, OVERRIDES, VOCODER, as_cli, train_cli, vocoder_fit

from xtts_data import prepare, write_demo_corpus
from xtts_train.config import load_stack_config


def _demo_cache(root, overrides: list[str]):
    """The demo corpus of every xtts-train test, built into `root/cache` with `overrides`."""
    write_demo_corpus(root / "corpus", n=40, min_seconds=0.4, max_seconds=1.0, seed=3)
    stack = load_stack_config(None, overrides)
    prepare(root / "corpus", root / "cache", audio=stack.audio, data=stack.data)
    return root / "cache"


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    return _demo_cache(tmp_path_factory.mktemp("train"), OVERRIDES)


@pytest.fixture(scope="session")
def audio_cache(tmp_path_factory):
    """A cache of the same corpus that keeps each utterance's waveform (vocoder runs)."""
    return _demo_cache(tmp_path_factory.mktemp("audio"), VOCODER)


@pytest.fixture(scope="session")
def vocoder_run(audio_cache, tmp_path_factory):
    """(summary, work dir) of 20 deterministic micro-vocoder steps, one eval at the end."""
    workdir = tmp_path_factory.mktemp("vocoder") / "run"
    return vocoder_fit(audio_cache, workdir, 20), workdir


@pytest.fixture(scope="session")
def run(cache, tmp_path_factory):
    """(summary, work dir) of a 30-step `xtts-train fit` of the micro model on `cache`, with a profile of steps
    3..5 and one eval at the end (no validation split: the eval sentence only). In its own
    process: its compiled programs leave with it."""
    workdir = tmp_path_factory.mktemp("run") / "run"
    evals = ["train.eval_every=30", "train.eval_sentences=['Fine day.']"]
    # A compile cache in the environment, turned off by the flag: nothing lands in it (and
    # test_fit checks the summary says so).
    unused = tmp_path_factory.mktemp("unused-xla")
    done = train_cli("fit", "--data", str(cache), "--workdir", str(workdir), "--quiet",
                     "--steps", "30", "--profile-steps", "3:5", "--no-compile-cache",
                     *as_cli([*OVERRIDES, *MICRO, *evals]), compile_cache=unused)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert not any(unused.iterdir())
    return json.loads((workdir / "summary.json").read_text()), workdir


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory):
    """A persistent XLA compile cache the CLI processes of one worker share: a command
    run again with the same model and shapes loads its programs instead of compiling."""
    return tmp_path_factory.mktemp("xla")
