"""One small feature cache for every xtts-train test of a session."""

from __future__ import annotations

import pytest
from train_helpers import OVERRIDES

from xtts_data import prepare, write_demo_corpus
from xtts_train.config import load_stack_config
from xtts_train.trainer import fit


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    write_demo_corpus(root / "corpus", n=40, min_seconds=0.4, max_seconds=1.0, seed=3)
    stack = load_stack_config(None, OVERRIDES)
    prepare(root / "corpus", root / "cache", audio=stack.audio, data=stack.data)
    return root / "cache"


@pytest.fixture(scope="session")
def run(cache, tmp_path_factory):
    """(summary, work dir) of a 30-step run on `cache`, with a profile of steps 3..5 and
    one eval at the end (no validation split: the eval sentence only)."""
    workdir = tmp_path_factory.mktemp("run") / "run"
    evals = ["train.eval_every=30", "train.eval_sentences=['Fine day.']"]
    stack = load_stack_config(None, [*OVERRIDES, *evals, "train.steps=30"])
    return fit(stack, cache, workdir, progress=False, profile_steps=(3, 5)), workdir
