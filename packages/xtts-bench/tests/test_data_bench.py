"""`xtts-bench compare`'s segment pipelines: xtts-data's and the Python cutter, built on a
tiny corpus, one static shape each (nothing timed here; `tests/test_bench_cli.py` runs the
whole comparison)."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

import xtts_audio as xa
import xtts_data as xd
from xtts_bench import baselines, data
from xtts_bench.settings import DataBenchConfig

AUDIO = xa.MelConfig.from_preset("xtts")
BENCH = DataBenchConfig(batch_size=2, rounds=1, workers=1)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> data._Inputs:
    """What compare reads after its cache build: the baseline's `.npy` mels of the last
    round, and the cache with waveforms `_inputs` builds."""
    work = tmp_path_factory.mktemp("compare")
    xd.write_demo_corpus(work / "corpus", n=5, min_seconds=0.5, max_seconds=1.0)
    corpus = xd.read_corpus(work / "corpus")
    utterances = data.baseline_utterances(corpus, xd.DataConfig())
    baselines.librosa_cache_build(utterances, AUDIO, work / "theirs-0", workers=1)
    return data._inputs(corpus, AUDIO, work, BENCH)


def test_the_segment_cache_keeps_waveforms(inputs):
    assert xd.FeatureCache.open(inputs.segment_cache).has_audio


def test_compare_runs_both_segment_pipelines_at_one_static_shape(inputs):
    pipelines, shape = data._segment_pipelines(inputs, BENCH)
    assert list(pipelines) == [data.XTTS_SEGMENTS, data.SEGMENT_CUTTER]
    frames = xd.DataConfig().segment_frames
    assert shape.key == (BENCH.batch_size, frames, frames * AUDIO.hop_length)
    spec = xd.SegmentSpec(shapes=(shape,), n_mels=AUDIO.n_mels, hop_length=AUDIO.hop_length)
    for name, (dataset, shapes, slow) in pipelines.items():
        assert (shapes, slow) == (1, False), name
        assert dataset.element_spec == spec.signature(shape), name
        assert spec.matches(next(iter(dataset))) == shape, name
    ours, cutter = (pipelines[name][0] for name in pipelines)
    assert xd.python_ops(ours) == []
    assert xd.python_ops(cutter)  # the usual cutter: Python per element


def test_the_table_has_a_row_per_segment_pipeline():
    figures = {"first_epoch_samples_per_s": 100.0, "samples_per_s": 200.0, "batch_ms_mean": 1.5,
               "batch_ms_cv": 0.2, "device_utilization": 0.995, "cpu_ms_per_sample": 0.3}  # fmt: skip
    segments = {
        "shape": [32, 32, 8192],
        "pipelines": {
            data.XTTS_SEGMENTS: {**figures, "ratio_vs_cutter": 4.0},
            data.SEGMENT_CUTTER: {**figures, "ratio_vs_cutter": 1.0},
        },
    }
    lines = data._segment_lines(segments)
    assert lines[0] == "vocoder segments: batch 32 x 32 frames x 8192 samples (one static shape)"
    assert "vs cutter" in lines[1]
    assert lines[2].startswith(data.XTTS_SEGMENTS)
    assert "4.00x" in lines[2]
    assert "99.5%" in lines[2]
    assert lines[3].startswith(data.SEGMENT_CUTTER)
