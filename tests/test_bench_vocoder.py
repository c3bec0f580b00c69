"""`xtts-bench vocoder`: PESQ and STOI of a re-synthesis against its recording (skipped
without the quality extra), and the command's errors."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from xtts_bench.cli import main
from xtts_bench.copy_synthesis import quality_scores
from xtts_bench.errors import MissingExtraError

RATE = 22050


def _speechlike(seconds: float, seed: int) -> np.ndarray:
    """A voiced, amplitude-modulated harmonic tone: something PESQ's VAD accepts."""
    t = np.arange(int(seconds * RATE)) / RATE
    rng = np.random.default_rng(seed)
    f0 = 120 + 20 * np.sin(2 * np.pi * 0.5 * t)
    phase = 2 * np.pi * np.cumsum(f0) / RATE
    voiced = sum(np.sin(k * phase) / k for k in range(1, 20))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 3 * t) ** 2
    return (0.2 * voiced * envelope + 0.002 * rng.standard_normal(len(t))).astype(np.float32)


def test_a_copy_scores_high_and_noise_scores_low():
    pytest.importorskip("pesq")
    pytest.importorskip("pystoi")
    recording = _speechlike(3.0, 0)
    same = quality_scores(recording, recording, sample_rate=RATE)
    noisy = recording + 0.2 * np.random.default_rng(1).standard_normal(len(recording))
    bad = quality_scores(recording, noisy.astype(np.float32), sample_rate=RATE)
    assert same["pesq"] > 4.0
    assert same["stoi"] > 0.99
    assert bad["pesq"] < 2.0
    assert bad["stoi"] < same["stoi"] - 0.1
    longer = np.concatenate([recording, np.zeros(500, np.float32)])  # cut to the shorter
    assert quality_scores(recording, longer, sample_rate=RATE) == pytest.approx(same)


def test_a_missing_quality_extra_names_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "pesq", None)  # `import pesq` raises ImportError
    with pytest.raises(MissingExtraError, match=r"xtts-bench\[quality\]"):
        quality_scores(np.zeros(100, np.float32), np.zeros(100, np.float32), sample_rate=RATE)


def test_a_cache_as_held_out_is_a_one_line_error(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text("{}")
    assert main(["vocoder", str(tmp_path / "run"), "--held-out", str(tmp_path)]) == 2
    assert "expected --held-out to be a corpus" in capsys.readouterr().err
    # Without the recogniser a cache is read (here: not a complete one, so vocode refuses)
    code = main(["vocoder", str(tmp_path / "run"), "--held-out", str(tmp_path), "--no-wer"])
    assert code == 2
    assert "expected --held-out to be a corpus" not in capsys.readouterr().err


def test_a_non_positive_count_is_a_one_line_error(tmp_path, capsys):
    assert main(["vocoder", str(tmp_path), "--held-out", str(tmp_path), "--n", "0"]) == 2
    assert "--n: expected an int >= 1, received: 0" in capsys.readouterr().err
