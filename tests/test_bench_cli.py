"""`xtts-bench audio` produces every figure (a run on tiny inputs; no timing is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

TINY = [
    "--clips",
    "2",
    "--batch-size",
    "2",
    "--rounds",
    "1",
    "--min-seconds",
    "0.5",
    "--max-seconds",
    "1",
]


def _bench(*args: str) -> subprocess.CompletedProcess:
    # A fresh process: the benchmark sets TensorFlow's thread pools before TF starts.
    command = [sys.executable, "-m", "xtts_bench.cli", "audio", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_audio_benchmark_json_has_every_figure():
    done = _bench(*TINY, "--json")
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    for name in ("mel", "end_to_end", "decode"):
        figures = results[name]
        assert figures["audio_seconds"] > 0
        assert figures["ours_audio_s_per_s"] > 0
        assert figures["baseline_audio_s_per_s"] > 0
        assert figures["ratio"] > 0
    assert results["mel"]["librosa_pool_audio_s_per_s"] > 0


def test_table_names_each_comparison():
    done = _bench(*TINY)
    assert done.returncode == 0, done.stderr
    for label in ("mel", "end_to_end", "decode", "tf.audio.decode_wav", "librosa"):
        assert label in done.stdout


def test_bad_settings_exit_2():
    done = _bench("--clips", "1", "--batch-size", "4")
    assert done.returncode == 2
    assert "expected clips >= batch_size" in done.stderr
