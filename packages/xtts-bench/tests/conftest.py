"""Fixtures shared by xtts-bench's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def runs(tmp_path):
    """Two folders that look like runs (a config.yaml each): (text-to-mel, vocoder)."""
    for name in ("run", "voc"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.yaml").write_text("{}")
    return tmp_path / "run", tmp_path / "voc"
