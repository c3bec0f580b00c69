"""`fit` over a bucketed cache: one trace per shape, its outputs, config errors, synthesis,
`export` (alone and with a vocoder run, served without xtts), and `evaluate` of the same run
(free-running synthesis of unseen utterances, scored)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
import yaml
from train_helpers import MICRO, ONE_SHAPE, OVERRIDES, as_cli, cli_env, with_compiler

import xtts_audio as xa
import xtts_train.export as export_module
from xtts_data import Tokenizer, text_to_ids
from xtts_train import XttsTrainError
from xtts_train.cli import main
from xtts_train.config import TrainConfig, load_stack_config
from xtts_train.errors import ConfigError
from xtts_train.evaluation.held_out import voice_sources
from xtts_train.export import export
from xtts_train.inference.vocoding import Vocoding
from xtts_train.models.text_to_mel.decoding import Decoding, text_buffer_frames
from xtts_train.models.text_to_mel.postfilters import decode_frames
from xtts_train.runs.loading import load_reference, load_run, load_run_config, load_vocoder
from xtts_train.runs.media import (
    _griffin_lim_program,
    decoded_frames,
    silence_feature,
    to_waveform,
)
from xtts_train.synthesize import synthesize
from xtts_train.training import trainer
from xtts_train.training._loop_parts import FitBar


def test_every_shape_is_compiled_once_and_never_again(run):
    summary, _ = run
    assert summary["traces"] == summary["compiled_shapes"] == summary["spec_shapes"] == 2
    assert summary["retraces_after_warmup"] == 0
    assert summary["steps"] == 30
    assert summary["nonfinite_skipped"] == 0
    # `train.compile_workers` 0: a compile thread per core, at most one per program (two
    # at once on this suite's 2-core machines; test_cli's check runs two in the slow tier).
    warm = summary["warm_up"]
    assert warm["workers"] == min(len(os.sched_getaffinity(0)), len(warm["programs"]))


def test_outputs_of_a_run(run):
    summary, workdir = run
    lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    lines = [line for line in lines if "loss" in line]  # not the eval's line
    assert [line["step"] for line in lines] == [5, 10, 15, 20, 25, 30]
    for line in lines:
        assert {"step", "loss", "step_ms", "data_wait_ms"} <= set(line)
    losses = [line["loss"] for line in lines]
    # The micro model learns: its loss falls by a quarter (to 0.69 of the first, measured).
    assert losses[-1] < 0.75 * losses[0], losses
    for key in ("step_ms_median", "step_ms_cv", "input_bound_fraction", "final_loss",
                "host_overhead_ms"):  # fmt: skip
        assert summary[key] is not None
    assert 0 <= summary["input_bound_fraction"] < 1
    assert 0 <= summary["host_overhead_ms"] < summary["step_ms_median"]
    by_shape = summary["step_ms_by_shape"]
    assert len(by_shape) == 2
    assert sum(entry["steps"] for entry in by_shape.values()) == 30
    assert summary["replicas"] == 1
    assert_device_utilization(summary)
    assert sorted(p.name for p in (workdir / "checkpoints").glob("*.index")) == [
        "ckpt-10.index", "ckpt-20.index", "ckpt-30.index",
    ]  # fmt: skip
    assert list((workdir / "tensorboard").glob("events.out.tfevents.*"))
    assert "model" in (workdir / "config.yaml").read_text()


def assert_device_utilization(summary: dict) -> None:
    """The summary's device utilization: none without a GPU (the default environment,
    tensorflow-cpu), NVML's figure with one (`hatch run cuda:test`), or why not."""
    utilization, note = summary["device_utilization"], summary["device_utilization_note"]
    if not tf.config.list_physical_devices("GPU"):
        assert utilization is None
        assert "no GPU" in note
    elif importlib.util.find_spec("pynvml") is None:  # no gpu extra (nvidia-ml-py)
        assert utilization is None
        assert "NVML failed" in note
        assert "nvidia-ml-py" in note
    else:
        assert note is None
        assert utilization is None or 0 <= utilization <= 1  # None: no sample in the run


def test_start_up_figures(run):
    summary, _ = run
    parts = summary["startup_s"]
    assert {"data", "model", "trace", "compile", "first_step"} <= set(parts)
    assert all(seconds >= 0 for seconds in parts.values())
    assert parts["trace"] > 0
    assert parts["compile"] > 0
    assert sum(parts.values()) == pytest.approx(summary["time_to_first_step_s"], rel=0.05)
    warm = summary["warm_up"]
    assert sorted(warm["programs"]) == sorted(f"train {key}" for key in summary["step_ms_by_shape"])
    assert all(p["trace_s"] > 0 and p["compile_s"] > 0 for p in warm["programs"].values())
    # --no-compile-cache wins over XTTS_COMPILE_CACHE=DIR: no cache in this process.
    assert warm["compiled"] is None
    assert summary["compile_cache"] is None
    assert summary["compile_seconds"] == warm["seconds"]
    assert 100 < summary["peak_rss_mb"] < 24 * 1024


def test_the_profiled_steps_are_written_for_tensorboard(run):
    _, workdir = run
    profiles = list((workdir / "tensorboard" / "plugins" / "profile").glob("*/*.xplane.pb"))
    assert len(profiles) == 1
    assert profiles[0].stat().st_size > 0


@pytest.mark.parametrize("steps", ["0:3", "4:2", "x:y", "7"])
def test_malformed_profile_steps_are_argument_errors(cache, tmp_path, capsys, steps):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--data", str(cache), "--workdir", str(tmp_path / "run"),
              "--profile-steps", steps])  # fmt: skip
    assert exit_info.value.code == 2
    assert "expected FIRST:LAST" in capsys.readouterr().err


def test_profile_steps_past_the_run_are_refused(cache, tmp_path, capsys):
    code = main(["fit", "--data", str(cache), "--workdir", str(tmp_path / "run"), "--quiet",
                 "--steps", "30", "--profile-steps", "5:100", *as_cli(OVERRIDES)])  # fmt: skip
    assert code == 2
    assert "LAST <= train.steps (30), received: 5:100" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_a_workdir_of_another_model_is_refused(run, cache, capsys):
    _, workdir = run
    code = main(["fit", "--data", str(cache), "--workdir", str(workdir), "--quiet",
                 "--set", "model.d_model=64", *as_cli(OVERRIDES)])  # fmt: skip
    assert code == 2
    assert "another model config" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("override", "key"),
    [("train.steps=0", "steps"), ("train.bogus=1", "bogus"), ("data.policy=round", "policy"),
     ("nosuch.key=1", "section"), ("model.heads=3", "heads"),
     ("train.strategy=tpu", "strategy"), ("text_to_mel.eval_sentences=[]", "eval_sentences"),
     ("model.reduction_factor=0", "reduction_factor")],
)  # fmt: skip
def test_bad_config_exits_2_naming_the_key(override, key, tmp_path, capsys):
    code = main(
        ["fit", "--data", str(tmp_path), "--workdir", str(tmp_path / "r"), "--set", override]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert key in err
    assert len(err.strip().splitlines()) == 1


def test_an_eval_sentence_with_no_known_symbols_is_refused_before_compiling(cache, tmp_path,
                                                                            capsys):  # fmt: skip
    settings = [*OVERRIDES, "data.val_fraction=0.25", "train.eval_every=5",
                "text_to_mel.eval_sentences=['Fine.', 'سلام']"]  # fmt: skip
    assert main(["fit", "--data", str(cache), "--workdir", str(tmp_path / "run"), "--quiet",
                 "--steps", "10", *as_cli(settings)]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "text_to_mel.eval_sentences[1]" in err
    assert "has no symbols" in err
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_run_that_evaluates_on_an_empty_validation_split_names_both_fixes(cache, tmp_path,
                                                                            capsys):  # fmt: skip
    # 40 utterances, a share so small that the hash split holds none out: a run that will
    # evaluate is refused before compiling, naming data.val_fraction and train.eval_every.
    settings = [*OVERRIDES, *MICRO, "data.val_fraction=0.0001", "train.eval_every=5"]
    assert main(["fit", "--data", str(cache), "--workdir", str(tmp_path / "run"), "--quiet",
                 "--steps", "10", *as_cli(settings)]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "no utterances left in split 'val' (0 in the split" in err
    assert "this run evaluates every 5 steps (train.eval_every)" in err
    assert "raise data.val_fraction" in err
    assert "set train.eval_every=0" in err
    assert not (tmp_path / "run" / "checkpoints").exists()


# A whole run of its own, in the slow tier (`hatch run test-slow`): the default tier's run
# out of minutes (below) is also one that never evaluates on an empty validation split.
@pytest.mark.slow
def test_a_run_that_never_evaluates_needs_no_validation_split(cache, tmp_path, fit_bars):
    # `fit --steps 2` with evaluation every 500 steps (the default) never evaluates. One
    # batch shape: bucketing is not the subject (one trace, not two).
    settings = [*ONE_SHAPE, *MICRO, "data.val_fraction=0.0001", "train.eval_every=500"]
    assert main(["fit", "--data", str(cache), "--workdir", str(tmp_path / "run"),
                 "--steps", "2", *as_cli(settings)]) == 0  # fmt: skip
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 2
    (bar,) = fit_bars  # no time budget: the bar counts the steps
    assert (bar.bar.total, bar.bar.n, bar.bar.unit) == (2, 2, "step")


def test_a_run_out_of_minutes_ends_after_its_step_with_a_checkpoint(cache, tmp_path, fit_bars):
    # 6 ms from the first step: the first step (its one host sync) takes longer. One batch
    # shape: bucketing is not the subject. A run that never evaluates (every 500 steps, of
    # 50) with a share so small that no utterance is held out: it needs no validation split
    # (test_a_run_that_never_evaluates_needs_no_validation_split, in the slow tier).
    settings = [*ONE_SHAPE, *MICRO, "data.val_fraction=0.0001", "train.eval_every=500",
                "train.minutes=0.0001"]  # fmt: skip
    assert main(["fit", "--data", str(cache), "--workdir", str(tmp_path / "run"),
                 "--steps", "50", *as_cli(settings)]) == 0  # fmt: skip
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["steps"] == 1
    assert summary["out_of_minutes"] is True
    assert summary["stopped_by_signal"] is False
    assert "ckpt-1.index" in {p.name for p in (tmp_path / "run" / "checkpoints").iterdir()}
    (bar,) = fit_bars  # the budget's seconds (under one: one), spent; the step beside
    assert (bar.bar.total, bar.bar.n, bar.bar.unit) == (1, 1, "s")
    assert bar.bar.postfix == "step=1/50"
    with pytest.raises(ConfigError, match="minutes"):
        load_stack_config(None, ["train.minutes=0"])


@pytest.fixture
def fit_bars(monkeypatch) -> list[FitBar]:
    """The progress bars of the `fit` loops run in the test."""
    made = []

    class Recorded(FitBar):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(trainer, "FitBar", Recorded)
    return made


def test_a_minutes_bar_counts_the_budget_s_seconds_from_the_first_step(capsys):
    # The demo's budget: 20,000 steps or 5 minutes, whichever ends first.
    with FitBar(TrainConfig(steps=20000, minutes=5), step=0, progress=True) as fit_bar:
        bar = fit_bar.bar
        assert (bar.total, bar.unit, bar.n) == (300, "s", 0)
        began = time.perf_counter() - 10  # the first step began 10 s ago
        fit_bar.start(began)
        assert bar.format_dict["elapsed"] >= 10  # tqdm's clock too: a true rate and ETA
        fit_bar.after_step(1, began + 12.7)
        assert (bar.n, bar.postfix) == (12, "step=1/20000")
        fit_bar.after_step(2, began + 12.9)  # within the same second: the bar stays
        assert bar.n == 12
        fit_bar.after_step(3, began + 301.5)  # the step that ends past the budget
        assert (bar.n, bar.postfix) == (300, "step=3/20000")
    assert "300/300" in capsys.readouterr().err


def test_a_minutes_bar_closes_short_when_the_steps_end_first():
    with FitBar(TrainConfig(steps=3, minutes=5), step=0, progress=True) as fit_bar:
        fit_bar.start(time.perf_counter() - 10)
        fit_bar.after_step(3, time.perf_counter())
    assert 10 <= fit_bar.bar.n < 300
    assert fit_bar.bar.postfix == "step=3/3"


def test_a_bar_without_minutes_counts_the_steps_from_a_resumed_step():
    with FitBar(TrainConfig(steps=50), step=20, progress=True) as fit_bar:
        fit_bar.start(time.perf_counter())  # the clock of a budget it does not have
        fit_bar.after_step(21, time.perf_counter() + 100)
    assert (fit_bar.bar.total, fit_bar.bar.unit, fit_bar.bar.n) == (50, "step", 21)


def test_evals_without_a_validation_split_speak_the_eval_sentences(run):
    _, workdir = run  # train.eval_every=30, data.val_fraction=0, one eval sentence
    lines = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    evals = [line for line in lines if "sentences_alignment" in line]
    assert [line["step"] for line in evals] == [30]
    assert 0 <= evals[0]["sentences_alignment"] <= 1
    assert not any("val_loss" in line for line in lines)  # no validation split
    tags = {
        value.tag
        for path in (workdir / "tensorboard").glob("events.out.tfevents.*")
        for event in tf.compat.v1.train.summary_iterator(str(path))
        for value in event.summary.value
    }
    assert {"sentence_0/mel", "sentence_0/attention", "sentence_0/audio"} <= tags
    assert "sentence_1/mel" not in tags
    assert "val/attention" not in tags


@pytest.fixture(scope="module")
def graph_run(run, tmp_path_factory):
    """The session run with `train.compiler: graph` in its config.yaml, for the tests of
    synthesize, evaluate and export, whose subject is not XLA: they decode on the graph
    executor, nothing compiled (an XLA decoding program costs 10-20 s per call on a
    loaded 2-core CPU, 2-3x a whole graph-executor synthesis). XLA decoding stays tested:
    the run's own eval decodes under XLA (`auto` on a CPU:
    test_evals_without_a_validation_split_speak_the_eval_sentences), as do synthesize and
    export in test_languages, synthesize in test_tasks, evaluate in test_tasks
    (`evaluate --vocoder`), streaming in test_streaming, and the vocoder's export here in
    the slow tier."""
    return with_compiler(run[1], tmp_path_factory.mktemp("graph") / "run", "graph")


# Griffin-Lim runs eagerly: its 32 iterations (the default) cost about a second a clip on
# a loaded 2-core CPU, while the tests of synthesize and evaluate read the WAV's length,
# level or sameness, not how far the phase was refined. They ask for `_GL_ITERS`: the
# Python API's `griffin_lim_iters`, the commands' `--griffin-lim-iters`.
_GL_ITERS = 2
_GL_FLAG = ["--griffin-lim-iters", str(_GL_ITERS)]


@pytest.mark.parametrize(("command", "flags", "match"), [
    ("synthesize", ["--griffin-lim-iters", "0"], "--griffin-lim-iters: expected an int >= 1"),
    ("synthesize", ["--griffin-lim-iters", "4", "--vocoder", "v"], "pass one of them"),
    ("evaluate", ["--griffin-lim-iters", "4"], "sets the audio of --out: pass --out DIR"),
    ("evaluate", ["--griffin-lim-iters", "4", "--out", "o", "--vocoder", "v"],
     "pass one of them"),
])  # fmt: skip
def test_griffin_lim_iters_are_refused_where_they_would_not_set_the_audio(
    tmp_path, capsys, command, flags, match
):
    # Refused before the run is read: the run folder need not exist.
    given = {"synthesize": ["--text", "Hi.", "--out", str(tmp_path / "a.wav")],
             "evaluate": ["--data", str(tmp_path / "cache")]}[command]  # fmt: skip
    assert main([command, "--run", str(tmp_path / "run"), *given, *flags]) == 2
    assert match in capsys.readouterr().err


def test_to_waveform_is_one_program_for_every_length_and_is_griffin_lim():
    audio = xa.MelConfig.from_preset("xtts")
    rng = np.random.default_rng(0)
    for frames in (40, 57):
        features = rng.normal(-5, 2, [frames, audio.n_mels]).astype(np.float32)
        wave = xa.griffin_lim(xa.denormalize(features, audio), audio, n_iter=2).numpy()
        expected = np.clip(wave / max(np.abs(wave).max(), 1e-6) * 0.9, -1.0, 1.0)
        np.testing.assert_allclose(to_waveform(features, audio, n_iter=2), expected, atol=1e-6)
    assert _griffin_lim_program(audio, 2).experimental_get_tracing_count() == 1


def test_synthesize_writes_a_non_silent_wav_and_a_picture(graph_run, tmp_path):
    workdir = graph_run
    out = tmp_path / "speech.wav"
    result = synthesize(workdir, "Dr. Smith paid $5.", out, max_frames=48,
                        griffin_lim_iters=_GL_ITERS)  # fmt: skip
    audio, rate = tf.audio.decode_wav(tf.io.read_file(str(out)))
    assert int(rate) == 22050
    assert audio.shape[0] > 1000
    assert float(tf.math.reduce_std(audio)) > 0.01  # not silence
    assert result.png.read_bytes()[:4] == b"\x89PNG"
    assert 1 <= result.frames <= result.max_frames == 48  # a given buffer is kept
    assert 0.0 <= result.alignment <= 1.0


def test_synthesize_save_mel_writes_the_frames_turned_into_audio(graph_run, tmp_path, capsys):
    workdir = graph_run
    out = tmp_path / "speech.wav"
    assert main(["synthesize", "--run", str(workdir), "--text", "Fine day.", "--out", str(out),
                 "--max-frames", "48", "--save-mel", *_GL_FLAG]) == 0  # fmt: skip
    line = capsys.readouterr().out
    frames = int(re.search(r"(\d+) frames of a 48-frame buffer", line)[1])
    mel = np.load(out.with_suffix(".npy"))
    assert str(out.with_suffix(".npy")) in line
    stack = load_run_config(workdir, "text_to_mel")
    assert mel.dtype == np.float32
    assert mel.shape == (frames, stack.audio.n_mels)
    # The WAV is Griffin-Lim (seeded) of exactly these frames, up to 16-bit rounding.
    wave = tf.audio.decode_wav(tf.io.read_file(str(out)))[0][:, 0].numpy()
    expected = to_waveform(mel, stack.audio, n_iter=_GL_ITERS).numpy()
    np.testing.assert_allclose(wave, expected, atol=1e-3)


def test_synthesize_changes_the_run_s_decoding_settings_alone(run, tmp_path, capsys):
    _, workdir = run
    out = tmp_path / "speech.wav"
    args = ["synthesize", "--run", str(workdir), "--text", "Fine day.", "--out", str(out)]
    assert main([*args, "--set", "train.steps=5"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "a decoding setting of the trained run, received: 'train.steps=5'" in line
    assert not out.exists()


def test_synthesize_sizes_its_buffer_from_the_text_unless_given(graph_run, tmp_path):
    workdir = graph_run
    short = synthesize(workdir, "Hi.", tmp_path / "short.wav", griffin_lim_iters=_GL_ITERS)
    longer = synthesize(workdir, "Fine day.", tmp_path / "long.wav",
                        griffin_lim_iters=_GL_ITERS)  # fmt: skip
    assert short.max_frames < longer.max_frames
    assert short.npy is None
    assert not (tmp_path / "short.npy").exists()
    stack = load_run_config(workdir, "text_to_mel")
    for result in (short, longer):
        assert result.frames <= result.max_frames
        assert result.max_frames % stack.data.pad_multiple == 0


@pytest.mark.parametrize("overrides", [[], ["data.pad_multiple=3", "model.reduction_factor=2"]])
def test_a_text_sized_buffer_holds_the_measured_rate_within_the_longest_utterance(overrides):
    stack = load_stack_config(None, overrides)
    rate = stack.audio.sample_rate / stack.audio.hop_length  # frames per second
    sizes = [text_buffer_frames(n, stack) for n in range(1, 400)]
    assert sizes == sorted(sizes)
    multiple = 6 if overrides else stack.data.pad_multiple
    assert all(size % multiple == 0 for size in sizes)
    longest = stack.data.max_seconds * rate
    for n, size in enumerate(sizes, 1):  # the slowest measured past 1 s: 0.120 s per symbol
        assert size >= min(0.120 * n * rate, longest)
    assert longest <= sizes[-1] < longest + multiple + 1  # capped at data.max_seconds
    capped = dataclasses.replace(stack, data=dataclasses.replace(stack.data, max_frames=120))
    assert text_buffer_frames(300, capped) == -(-120 // multiple) * multiple


def test_synthesize_needs_a_trained_run(tmp_path):
    with pytest.raises(XttsTrainError, match="not a training run"):
        synthesize(tmp_path, "hello", tmp_path / "x.wav")


def test_export_writes_a_saved_model_that_decodes_like_the_run(graph_run, tmp_path,
                                                               monkeypatch):  # fmt: skip
    workdir = graph_run
    out = tmp_path / "saved"
    traced = []  # the decoding's Python runs once a trace

    def counted(*args, **kwargs):
        traced.append(1)
        return decode_frames(*args, **kwargs)

    monkeypatch.setattr(export_module, "decode_frames", counted)
    assert main(["export", "--run", str(workdir), "--out", str(out), "--max-text", "32",
                 "--max-frames", "24"]) == 0  # fmt: skip
    assert len(traced) == 1  # traced once: saving the module traces nothing again
    assert {p.name for p in (out / "assets").iterdir()} == {
        "tokenizer.json", "config.yaml", "reference.npy",
    }  # fmt: skip
    loaded = tf.saved_model.load(str(out))
    stack, model, tokenizer = load_run(workdir)
    ids = text_to_ids("a short test.", stack.data.text, tokenizer)[0]
    reference = np.load(workdir / "reference.npy")
    result = loaded.signatures["serving_default"](
        tokens=tf.constant(ids, tf.int32), reference_mel=tf.constant(reference)
    )
    # Shapes and values, not equality with `model.infer` (the SavedModel decodes under the
    # decode compiler, whose numbers may differ in the last bits).
    assert result["mel"].shape == (24, stack.model.n_mels)
    assert np.isfinite(result["mel"].numpy()).all()
    assert 1 <= int(result["length"]) <= 24
    assert result["waveform"].shape[0] > 0
    assert np.isfinite(result["waveform"].numpy()).all()
    # The trained weights, every one of them, are what the run and the SavedModel hold.
    _, again, _ = load_run(workdir)
    for mine, other in zip(model.get_weights(), again.get_weights(), strict=True):
        np.testing.assert_array_equal(mine, other)
    trained = [np.sum(w) for w in model.get_weights()]
    saved = [np.sum(v.numpy()) for v in loaded.variables_read if v.dtype == tf.float32]
    assert len(saved) > 50
    assert all(np.isclose(trained, value, rtol=1e-5).any() for value in saved)
    assert main(["export", "--run", str(workdir), "--out", str(out)]) == 2  # exists: no --force


def test_load_run_rejects_a_config_the_checkpoint_does_not_fit(run, tmp_path):
    _, workdir = run
    other = tmp_path / "other"
    shutil.copytree(workdir, other)
    config = yaml.safe_load((other / "config.yaml").read_text())
    config["model"]["decoder_layers"] += 1  # a block the checkpoint has no weights for
    (other / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(XttsTrainError, match="does not hold every weight of the model"):
        load_run(other)


def test_export_needs_a_checkpoint(tmp_path, capsys):
    assert main(["export", "--run", str(tmp_path), "--out", str(tmp_path / "saved")]) == 2
    assert "not a training run" in capsys.readouterr().err


# A SavedModel served as if no xtts package were installed: importing one fails, as it
# would without them (argv: the SavedModel, an .npz of its inputs, the .npz to write).
_SERVE_WITHOUT_XTTS = """
import sys

class NoXtts:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0].startswith("xtts"):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)")

sys.meta_path.insert(0, NoXtts())
import numpy as np
import tensorflow as tf

saved, inputs, out = sys.argv[1:]
given = dict(np.load(inputs))
serving = tf.saved_model.load(saved).signatures["serving_default"]
result = serving(**{name: tf.constant(value) for name, value in given.items()})
np.savez(out, **{name: value.numpy() for name, value in result.items()})
assert not [m for m in sys.modules if m.startswith("xtts")], "xtts was imported"
"""


def _serve_without_xtts(saved, inputs: dict[str, np.ndarray], tmp_path) -> dict[str, np.ndarray]:
    """The SavedModel's `serving_default` outputs for `inputs`, in a process without xtts."""
    np.savez(tmp_path / "inputs.npz", **inputs)
    done = subprocess.run([sys.executable, "-c", _SERVE_WITHOUT_XTTS, str(saved),
                           str(tmp_path / "inputs.npz"), str(tmp_path / "outputs.npz")],
                          cwd=tmp_path, env=cli_env(), capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(np.load(tmp_path / "outputs.npz"))


def _stopping_at_once(workdir, folder, compiler: str):
    """A copy of the run in `folder` whose stop head fires at the first frame (its bias
    raised): its decoding ends long before the buffer does (the 30-step run's never stops).
    Its `train.compiler` is `compiler`."""
    with_compiler(workdir, folder, compiler, skip=("checkpoints", "tensorboard"))
    _, model, _ = load_run(workdir)
    model.stop_head.bias.assign(tf.fill(model.stop_head.bias.shape, 20.0))
    tf.train.Checkpoint(model=model).save(str(folder / "checkpoints" / "ckpt"))
    return folder


# The decoding and the vocoder in the SavedModel on the graph executor, and under XLA (the
# CPU's `auto` for both) in the slow tier (`hatch run test-slow`): the XLA programs are
# compiled again in the serving process, 25-30 s on 2 cores. XLA's export stays in the
# default tier with test_languages' (decoded in-process).
@pytest.mark.parametrize("compiler", ["graph", pytest.param("xla", marks=pytest.mark.slow)])
def test_export_with_a_vocoder_speaks_through_it_without_xtts(run, vocoder_run, tmp_path,
                                                              compiler):  # fmt: skip
    workdir = _stopping_at_once(run[1], tmp_path / "run", compiler)
    _, vocoder = vocoder_run
    out, max_frames = tmp_path / "saved", 48
    assert main(["export", "--run", str(workdir), "--out", str(out), "--max-text", "16",
                 "--max-frames", str(max_frames), "--vocoder", str(vocoder)]) == 0  # fmt: skip
    assert {p.name for p in (out / "assets").iterdir()} == {
        "tokenizer.json", "config.yaml", "reference.npy", "vocoder_config.yaml",
    }  # fmt: skip
    copied = (out / "assets" / "vocoder_config.yaml").read_text()
    assert copied == (vocoder / "config.yaml").read_text()
    stack = load_run_config(workdir, "text_to_mel")  # the settings, not the model
    tokenizer = Tokenizer.from_dict(json.loads((workdir / "tokenizer.json").read_text()))
    ids = text_to_ids("Hi.", stack.data.text, tokenizer)[0]
    result = _serve_without_xtts(out, {"tokens": np.asarray(ids, np.int32),
                                       "reference_mel": np.load(workdir / "reference.npy")},
                                 tmp_path)  # fmt: skip
    frames = int(decoded_frames(int(result["length"]), len(ids), max_frames, stack.audio))
    assert int(result["length"]) == 1
    assert frames < max_frames  # the rest of the buffer is not speech: the vocoder hears silence
    wave = result["waveform"]
    assert wave.shape == (frames * stack.audio.hop_length,)  # the vocoder's F * hop samples
    assert np.isfinite(wave).all()
    assert 0 < np.abs(wave).max() <= 1
    # The decoded frames through `Vocoding` in one window as wide as the buffer: padded
    # with silence, as the export replaces the frames after the decoded ones.
    _, network = load_vocoder(vocoder)
    vocoding = Vocoding(network, chunk_frames=max_frames - 2 * network.receptive_frames,
                        compiler=stack.train.compiler)  # fmt: skip
    assert vocoding.width == max_frames
    expected = vocoding(result["mel"][:frames], silence=silence_feature(stack.audio))
    expected = np.clip(expected, -1.0, 1.0)
    np.testing.assert_allclose(wave, expected, atol=1e-4 * np.sqrt(np.mean(expected**2)))


def test_export_refuses_a_vocoder_of_other_audio_settings(run, vocoder_run, tmp_path, capsys):
    _, workdir = run
    _, vocoder = vocoder_run
    other = tmp_path / "vocoder"
    other.mkdir()
    config = yaml.safe_load((vocoder / "config.yaml").read_text())
    config["audio"]["n_mels"] = 64
    (other / "config.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "exports" / "saved"
    for given, message in ((other, "audio.n_mels: vocoder 64, text-to-mel 80"),
                           (workdir, "Expected a vocoder run, received: ")):  # fmt: skip
        assert main(["export", "--run", str(workdir), "--out", str(out),
                     "--vocoder", str(given)]) == 2  # fmt: skip
        err = capsys.readouterr().err
        assert message in err
        assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "exports").exists()  # nothing written, not even a staging folder


def test_export_takes_griffin_lim_iters_only_without_a_vocoder(tmp_path):
    with pytest.raises(XttsTrainError, match="griffin_lim_iters only without a vocoder"):
        export(tmp_path, tmp_path / "saved", vocoder=tmp_path, griffin_lim_iters=8)


# -- evaluate: free-running synthesis of unseen utterances, scored (the same session run:
# one fit per test session, not one per file; its graph-executor copy where it decodes) -----


def _evaluate(workdir, cache, *args):
    return main(["evaluate", "--run", str(workdir), "--data", str(cache), "--quiet", *args])


@pytest.fixture(scope="module")
def evaluated(graph_run, cache, tmp_path_factory):
    """(exit code, printed JSON report, --out folder) of one `evaluate --split all --n 3
    --out DIR --json --reference-from same-speaker` of the graph run, which the test of
    the JSON and the WAVs and the test of the voices both read: one decoding and scoring
    of the three utterances, not two. The text report's test evaluates in the run's own
    voice (`--reference-from run`, the default)."""
    out = tmp_path_factory.mktemp("evaluate") / "listen"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = _evaluate(graph_run, cache, "--split", "all", "--n", "3", "--out", str(out),
                         "--json", "--reference-from", "same-speaker", *_GL_FLAG)  # fmt: skip
    return code, printed.getvalue(), out


def test_evaluate_runs_through_the_cli_with_json(evaluated):
    code, printed, out = evaluated
    assert code == 0
    report = json.loads(printed)
    assert report["step"] == 30
    assert report["split"] == "all"
    assert report["settings"] == []  # the run's own decoding settings
    rows = report["utterances"]
    assert len(rows) == 3
    assert len({row["id"] for row in rows}) == 3
    for row in rows:
        assert row["duration_ratio"] == pytest.approx(row["frames"] / row["true_frames"])
        assert 1 <= row["frames"] <= report["max_frames"]
        assert 0.0 <= row["alignment"] <= 1.0
        assert row["distance"] > 0
        assert row["pairing"] > 0
        assert (out / f"{row['id']}.wav").stat().st_size > 1000
        assert (out / f"{row['id']}.truth.wav").stat().st_size > 1000
    summary = report["summary"]
    assert summary["pairing_mean"] == pytest.approx(np.mean([r["pairing"] for r in rows]))
    assert summary["top1"] == pytest.approx(np.mean([r["identified"] for r in rows]))
    assert {type(r["identified"]) for r in rows} == {bool}
    assert summary["duration_ratio_median"] == pytest.approx(
        np.median([r["duration_ratio"] for r in rows])
    )


def test_the_text_report_has_a_row_per_utterance_and_a_summary(graph_run, cache, capsys):
    workdir = graph_run
    assert _evaluate(workdir, cache, "--split", "all", "--n", "2", "--step", "20",
                     "--set", "decode.global_variance=true",
                     "--set", "decode.reference_frames=24") == 0  # fmt: skip
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 + 2 + 1
    assert ("step 20, --set decode.global_variance=true, --set "
            "decode.reference_frames=24:") in lines[-1]  # fmt: skip
    assert "pairing" in lines[-1]


def _without_checkpoints(workdir, tmp_path):
    copy = shutil.copytree(workdir, tmp_path / "fresh")
    shutil.rmtree(copy / "checkpoints")
    return copy


def _other_audio(workdir, tmp_path):
    copy = shutil.copytree(workdir, tmp_path / "other")
    config = yaml.safe_load((copy / "config.yaml").read_text())
    config["audio"]["fmax"] = 7000.0
    (copy / "config.yaml").write_text(yaml.safe_dump(config))
    return copy


@pytest.mark.parametrize(
    ("make_run", "args", "message"),
    [
        (_without_checkpoints, ["--split", "all"], "has no checkpoint yet"),
        (_other_audio, ["--split", "all"], "fmax"),
        (None, ["--split", "all", "--n", "999"], "999 utterances asked for"),
        (None, [], r"held no utterances out of training \(data.val_fraction=0\)"),
        (None, ["--split", "all", "--step", "7"], "no checkpoint of step 7"),
        (None, ["--split", "all", "--n", "1"], "at least 2"),
        (None, ["--split", "all", "--set", "model.heads=4"],
         r"Expected --set decode\.KEY=VALUE, .* received: 'model\.heads=4'"),
        (None, ["--split", "all", "--set", "decode.global_variance=maybe"],
         r"DecodeConfig\.global_variance: expected true or false"),
        (None, ["--split", "all", "--set", "decode.reference_frames=8"],
         r"decode.reference_frames 0 \(data.cond_frames\) or at least data.cond_frames=16, "
         r"received: 8"),
    ],
)  # fmt: skip
def test_bad_input_is_a_one_line_error_with_exit_2(run, cache, tmp_path, capsys, make_run,
                                                    args, message):  # fmt: skip
    _, workdir = run
    target = make_run(workdir, tmp_path) if make_run else workdir
    assert _evaluate(target, cache, *args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("xtts-train evaluate: error:")
    assert re.search(message, err), err


@pytest.fixture(scope="module")
def loaded(run):
    """(config, model, tokenizer) of the session run, loaded once for the decoding tests:
    each builds its own `Decoding`, and one that decodes the whole buffer sets the stop
    head's bias first. They run on the graph executor (`compiler="graph"`): what they
    check is the same traced program either way, and XLA's decoding is tested where it is
    the run's (graph_run's docstring says where)."""
    return load_run(run[1])


@pytest.fixture(scope="module")
def decoding(loaded):
    """The run's decoding of 2 rows into a 16-frame buffer, on the graph executor, shared by
    the decoding tests: each of their texts is of one bucket, so one traced program serves
    them all (a trace costs seconds). The tests that compare buffers set the stop head's
    bias first; the model's variables are read when the program runs."""
    stack, model, _ = loaded
    return Decoding(model, decode=stack.decode, cond_frames=stack.data.cond_frames,
                    max_frames=16, batch_size=2, compiler="graph")  # fmt: skip


def test_decoding_texts_of_one_bucket_is_one_program(run, loaded, decoding):
    _, workdir = run
    stack, _, _ = loaded
    reference = load_reference(workdir, stack)
    for rows in ([[5, 6, 1]], [[7, 8, 9, 10, 1], [4, 1]], [[3] * 20 + [1]]):
        decoded = decoding(rows, reference)
        assert len(decoded) == len(rows)
        for ids, row in zip(rows, decoded, strict=True):
            assert row.mel.shape == (row.length, stack.model.n_mels)
            assert row.attention.shape == (row.length, len(ids))
            assert row.buffer.shape == (16, stack.model.n_mels)
    assert len(decoding([[5, 6, 1]] * 5, reference)) == 5  # more rows than a batch: chunks
    assert decoding.programs == 1


def test_each_row_may_have_its_own_reference(loaded, decoding):
    stack, model, _ = loaded
    model.stop_head.bias.assign([-20.0])  # the whole buffer: rows comparable frame by frame
    rng = np.random.default_rng(0)
    voices = [rng.normal(-5, 2, [stack.data.cond_frames, stack.model.n_mels]).astype(np.float32)
              for _ in range(3)]  # fmt: skip
    rows = [[5, 6, 1], [7, 8, 1], [5, 6, 1]]
    together = decoding(rows, voices)  # two batches: rows 0-1, then 2 with a pad row
    for ids, voice, row in zip(rows, voices, together, strict=True):
        (alone,) = decoding([ids], voice)
        np.testing.assert_allclose(row.buffer, alone.buffer, atol=1e-5)
    assert not np.allclose(together[0].buffer, together[2].buffer)  # same text, other voice
    with pytest.raises(XttsTrainError, match=r"one reference per row \(3\), received: 2"):
        decoding(rows, voices[:2])


def test_evaluate_speaks_each_utterance_in_another_utterance_s_voice(evaluated, graph_run,
                                                                     cache, capsys):  # fmt: skip
    workdir = graph_run
    code, printed, _ = evaluated  # --reference-from same-speaker
    assert code == 0
    rows = json.loads(printed)["utterances"]
    ids = [row["id"] for row in rows]
    assert [row["reference"] for row in rows] == [ids[1], ids[2], ids[0]]  # the next, cyclic
    assert all(row["reference_speaker"] == row["speaker"] for row in rows)
    # one speaker: no other voice to swap in
    assert _evaluate(workdir, cache, "--split", "all", "--n", "3",
                     "--reference-from", "other-speaker") == 2  # fmt: skip
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--reference-from other-speaker: the selection holds one speaker" in line


def test_voice_sources_pair_speakers_as_asked():
    from xtts_data.utterances import Utterance

    utterances = [Utterance(f"u{i}", s, np.ones(2, np.int32), np.zeros([4, 2]), "t")
                  for i, s in enumerate([0, 1, 0, 1, 2])]  # fmt: skip
    assert voice_sources(utterances, "run") == [None] * 5
    with pytest.raises(XttsTrainError, match=r"the speakers of \['u4'\] have no other"):
        voice_sources(utterances, "same-speaker")
    assert voice_sources(utterances[:4], "same-speaker") == [2, 3, 0, 1]
    swapped = voice_sources(utterances, "other-speaker")
    assert swapped == [1, 4, 3, 4, 0]  # speaker 0 -> 1, 1 -> 2, 2 -> 0
    assert all(utterances[j].speaker != u.speaker for u, j in zip(utterances, swapped, strict=True))


def test_a_decoding_buffer_too_large_for_memory_is_refused_before_it_runs(loaded):
    # The CLI refuses a buffer past a minute of speech first (test_long_form); the
    # decoding itself refuses one past this machine's memory.
    stack, model, _ = loaded
    with pytest.raises(ConfigError, match=r"Expected max_frames <= \d+ on this machine, .*GiB"):
        Decoding(model, decode=stack.decode, cond_frames=stack.reference_frames,
                 max_frames=10**10)  # fmt: skip


def _clip(path, seconds: float, rate: int, amplitude: float = 0.5):
    import soundfile

    t = np.arange(int(seconds * rate)) / rate
    soundfile.write(path, (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate)
    return path


def test_a_reference_of_another_rate_is_resampled_not_misread(run, tmp_path):
    _, workdir = run
    stack = load_run_config(workdir, "text_to_mel")
    native = load_reference(workdir, stack, _clip(tmp_path / "a.wav", 1.0, 22050))
    other = load_reference(workdir, stack, _clip(tmp_path / "b.wav", 1.0, 16000))
    assert native.shape == other.shape == (stack.data.cond_frames, stack.audio.n_mels)
    # The same tone either way (misread at 22050 Hz, a 16 kHz clip's tone would be 303 Hz).
    assert np.mean(np.abs(native - other)) < 0.1


def test_decoding_reads_more_of_the_reference_only_when_asked(run, loaded, decoding,
                                                             tmp_path):  # fmt: skip
    _, workdir = run
    clip = _clip(tmp_path / "long.wav", 1.0, 22050)  # 87 frames
    crop = load_run_config(workdir, "text_to_mel")
    assert crop.reference_frames == crop.data.cond_frames == 16
    assert load_reference(workdir, crop, clip).shape == (16, crop.audio.n_mels)
    stack = load_run_config(workdir, "text_to_mel", ["decode.reference_frames=48"])
    _, model, _ = loaded  # a decoding setting: the same model reads more
    assert stack.reference_frames == 48
    assert load_reference(workdir, stack, clip).shape == (48, stack.audio.n_mels)
    model.stop_head.bias.assign([-20.0])  # the whole buffer: frame by frame comparable
    rng = np.random.default_rng(1)
    voice = rng.normal(-5, 2, [48, stack.model.n_mels]).astype(np.float32)
    later = voice.copy()
    later[16:] = rng.normal(-5, 2, [32, stack.model.n_mels])  # the crop's 16 frames kept
    # The crop's 16 frames: the shared decoding (`decode.reference_frames` shapes no
    # program, `cond_frames` does); 48 frames: a decoding of its own.
    wider = Decoding(model, decode=stack.decode, cond_frames=48, max_frames=12,
                     compiler="graph")  # fmt: skip
    for decoder, differs in ((decoding, False), (wider, True)):
        (a,) = decoder([[5, 6, 1]], voice)
        (b,) = decoder([[5, 6, 1]], later)
        changed = not np.allclose(a.buffer, b.buffer, atol=1e-5)
        assert changed == differs, f"reading {decoder.cond_frames} frames"


@pytest.mark.parametrize(
    ("seconds", "amplitude", "message"),
    [(1.0, 0.0, r"is silent \(peak all zeros\)"), (1.0, 1e-4, r"is silent \(peak -7\d dBFS\)"),
     (0.1, 0.5, r"data\.cond_frames=16: give a clip of at least 0\.17 s")],
)  # fmt: skip
def test_a_silent_or_short_reference_is_refused(run, tmp_path, seconds, amplitude, message):
    _, workdir = run
    stack = load_run_config(workdir, "text_to_mel")
    clip = _clip(tmp_path / "r.wav", seconds, 22050, amplitude)
    with pytest.raises(XttsTrainError, match=message):
        load_reference(workdir, stack, clip)
