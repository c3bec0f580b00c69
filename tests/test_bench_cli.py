"""`xtts-bench audio` and `compare` produce every figure (runs on tiny inputs; no timing
is asserted)."""

from __future__ import annotations

import pytest
from bench_helpers import POOLS, bench_in_process

from xtts_bench import cli
from xtts_bench.audio import format_table
from xtts_bench.data import format_data_table
from xtts_data import write_demo_corpus

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


@pytest.fixture(scope="module")
def audio_run() -> tuple[dict, list]:
    """`xtts-bench audio --json` on tiny inputs, once, in this process
    (`bench_in_process`): its figures and thread-pool settings."""
    return bench_in_process("audio", *TINY)


@pytest.fixture(scope="module")
def audio_results(audio_run) -> dict:
    return audio_run[0]


def test_audio_benchmark_sets_one_op_per_core_first(audio_run):
    results, pools = audio_run
    assert pools == [(POOLS[0], 1), (POOLS[1], results["settings"]["threads"])]


def test_audio_benchmark_json_has_every_figure(audio_results):
    for name in ("mel", "end_to_end", "decode"):
        figures = audio_results[name]
        assert figures["audio_seconds"] > 0
        assert figures["ours_audio_s_per_s"] > 0
        assert figures["baseline_audio_s_per_s"] > 0
        assert figures["ratio"] > 0
    assert audio_results["mel"]["librosa_pool_audio_s_per_s"] > 0


def test_table_names_each_comparison(audio_results):
    table = format_table(audio_results)  # what the command prints without --json
    for label in ("mel", "end_to_end", "decode", "tf.audio.decode_wav", "librosa"):
        assert label in table


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["audio", "--clips", "1", "--batch-size", "4"], "expected clips >= batch_size"),
        (["startup", "--utterances", "0"], "StartupBenchConfig.utterances: expected an int"),
        (["compare", "--device-ms", "0"], "DataBenchConfig.device_ms: expected > 0"),
    ],
)
def test_bad_settings_are_one_line_and_exit_2_in_process(args, message, capsys):
    assert cli.main(args) == 2  # settings fail before any benchmark runs
    err = capsys.readouterr().err
    assert err.startswith(f"xtts-bench {args[0]}: error: ")
    assert message in err
    assert err.count("\n") == 1, err


def test_a_bug_raising_value_error_keeps_its_traceback(monkeypatch, capsys):
    def buggy(args):
        raise ValueError("a bug, not a bad setting")

    monkeypatch.setitem(cli._COMMANDS, "audio", buggy)
    with pytest.raises(ValueError, match="a bug, not a bad setting"):
        cli.main(["audio"])
    assert capsys.readouterr().err == ""


# `xtts-bench compare`: every pipeline and figure, on a tiny corpus given as CORPUS.
COMPARE = ["--batch-size", "4", "--batches", "4", "--rounds", "1", "--device-ms", "5"]
PIPELINES = ("xtts buckets", "xtts fixed", "xtts on the fly", "npy + numpy_function",
             "librosa + numpy_function")  # fmt: skip
SEGMENT_PIPELINES = ("xtts segments", "segments + numpy_function")


def _compare(capsys, *args: str) -> tuple[int, str, str]:
    """`xtts-bench compare ARGS` in this process (it sets no thread pools): (exit code,
    stdout, stderr)."""
    capsys.readouterr()
    code = cli.main(["compare", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("compare") / "corpus"
    write_demo_corpus(folder, n=12, min_seconds=0.5, max_seconds=1.5)
    return bench_in_process("compare", str(folder), *COMPARE)[0]


def test_compare_reports_every_pipeline_against_both_baselines(compared):
    results = compared
    assert results["corpus"]["utterances"] == 12
    assert results["cache_build"]["ratio"] > 0
    assert set(results["pipelines"]) == set(PIPELINES)
    for figures in results["pipelines"].values():
        assert figures["samples_per_s"] > 0
        assert figures["batch_ms_mean"] >= 0
        assert figures["batch_ms_cv"] >= 0
        assert 0 < figures["device_utilization"] <= 1
        assert figures["cpu_ms_per_sample"] > 0
        assert figures["ratio_vs_npy"] > 0
        assert figures["ratio_vs_librosa"] > 0
    assert results["pipelines"]["npy + numpy_function"]["ratio_vs_npy"] == 1.0
    assert results["pipelines"]["librosa + numpy_function"]["ratio_vs_librosa"] == 1.0


def test_compare_reports_both_segment_pipelines_at_one_shape(compared):
    segments = compared["segments"]
    assert segments["shape"] == [4, 32, 32 * 256]  # batch, DataConfig's segment_frames, x hop
    assert set(segments["pipelines"]) == set(SEGMENT_PIPELINES)
    for figures in segments["pipelines"].values():
        assert figures["samples_per_s"] > 0
        assert figures["batch_ms_cv"] >= 0
        assert 0 < figures["device_utilization"] <= 1
        assert figures["padding_efficiency"] == 1.0
        assert figures["shapes"] == 1
        assert figures["ratio_vs_cutter"] > 0
    assert segments["pipelines"]["segments + numpy_function"]["ratio_vs_cutter"] == 1.0


def test_compare_table_names_each_pipeline_and_figure(compared):
    table = format_data_table(compared)
    for label in (*PIPELINES, *SEGMENT_PIPELINES, "samples/s", "vs npy", "vs librosa",
                  "vs cutter", "CPU ms/sample", "device busy", "cache build"):  # fmt: skip
        assert label in table


def test_compare_on_a_missing_corpus_exits_2(tmp_path, capsys):
    code, _, err = _compare(capsys, str(tmp_path / "nowhere"), *COMPARE)
    assert code == 2
    assert "nowhere (not found)" in err


def test_compare_on_a_corpus_smaller_than_a_batch_says_why(tmp_path, capsys):
    write_demo_corpus(tmp_path / "corpus", n=3, min_seconds=0.5, max_seconds=1.5)
    code, _, err = _compare(capsys, str(tmp_path / "corpus"), *COMPARE)  # batch 4 > 3 clips
    assert code == 2
    assert err.count("\n") == 1, err  # one line, no traceback
    assert "fewer utterances than its batch size" in err
