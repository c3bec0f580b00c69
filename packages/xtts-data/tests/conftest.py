"""Shared corpora and caches: built once per session, read by many tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from data_helpers import AUDIO, DATA, write_test_corpus

from xtts_data import prepare


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    return write_test_corpus(tmp_path_factory.mktemp("corpus") / "corpus")


@pytest.fixture(scope="session")
def built(tmp_path_factory, corpus):
    """(result, cache path) of the shared cache; tests must not modify it (copy first)."""
    out = tmp_path_factory.mktemp("cache") / "cache"
    return prepare(corpus, out, audio=AUDIO, data=DATA, workers=2), out


@pytest.fixture(scope="session")
def cache(built) -> Path:
    return built[1]


@pytest.fixture
def cache_copy(cache, tmp_path) -> Path:
    """A private copy of the shared cache, for tests that damage it."""
    return Path(shutil.copytree(cache, tmp_path / "cache"))
