"""`xtts-train demo` and `xtts-train check` end to end."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
import yaml
from train_helpers import MICRO, OVERRIDES, as_cli, train_cli

import xtts_data as xd
from xtts_train import demo
from xtts_train.cli import main
from xtts_train.compile.compiler import resolve
from xtts_train.config import load_stack_config


def _espeak_or_skip() -> None:
    from xtts_data._demo_espeak import find_espeak
    from xtts_data.errors import XttsDataError

    try:  # the espeak-ng program, or its library (the phonemes extra's wheel)
        find_espeak("en")
    except XttsDataError as error:
        pytest.skip(f"no espeak-ng: {error}")


@pytest.mark.slow  # the whole stack in a process of its own: `hatch run test-slow`
@pytest.mark.parametrize("engine", ["synth", "espeak"])
def test_demo_runs_the_whole_stack(tmp_path, engine):
    # The micro model and one batch shape (`--set`): the plumbing, not the learning, and a
    # compile of seconds; the README's Quickstart runs the demo as shipped.
    if engine == "espeak":
        _espeak_or_skip()
    done = train_cli("demo", "--workdir", str(tmp_path / "demo"), "--engine", engine,
                     "--steps", "4", "--utterances", "24", "--held-out", "8",
                     *as_cli([*MICRO, "data.num_buckets=1"]))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "0 retraces" in out
    assert "built 1/1: train" in out
    built = {"graph": "graph executor, first run", "xla": "XLA, compiled in"}
    assert built[resolve("auto", "train")] in out  # auto: the graph executor on a CPU, XLA on a GPU
    run = tmp_path / "demo" / "run"
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["model"]["d_model"] == 32
    assert config["data"]["text"]["phonemes"] == (engine == "espeak")
    assert config["train"]["minutes"] is None  # --steps alone: no time budget
    assert (run / "demo.wav").stat().st_size > 1000
    assert (run / "demo.png").read_bytes()[:4] == b"\x89PNG"
    held_out = 8  # --held-out (the engines' defaults: 24 with espeak, 8 with synth)
    assert f"held-out {held_out} sentences it never saw" in out
    assert "identified as their own sentence" in out
    assert "audio by Griffin-Lim" in out
    assert "pairing" in out
    assert len(xd.read_corpus(tmp_path / "demo" / "corpus").rows) == 24  # --utterances
    assert len(list((run / "held-out").glob("*.truth.wav"))) == held_out
    assert len(list((run / "held-out").glob("*.wav"))) == 2 * held_out
    words = [line for line in out.splitlines() if line.startswith("words")]
    if engine == "synth":
        assert not words  # a made-up language: no recogniser
    else:
        pytest.importorskip("pocketsphinx")
        (line,) = words
        rates = [float(x) for x in re.findall(r"\d+\.\d+", line)]
        assert len(rates) == 3, line  # synthesis, recordings, their mels through GL
        # after 4 steps the syntheses are noise; the recordings are words (0.57, measured)
        assert rates[1] < min(0.8, rates[0]), line


def test_the_espeak_demo_trains_for_its_minutes_unless_steps_are_given(tmp_path, monkeypatch):
    def fit(stack, *args, **kwargs):
        raise FittedError(stack.train.steps, stack.train.minutes)

    monkeypatch.setattr(demo, "fit", fit)
    monkeypatch.setattr(demo, "_check_reused_size", lambda *args, **kwargs: None)
    monkeypatch.setattr(demo.xd, "write_demo_corpus", lambda *args, **kwargs: None)
    monkeypatch.setattr(demo.xd.FeatureCache, "is_cache", staticmethod(lambda path: True))
    for given, expected in (([], (20000, 5.0)), (["--minutes", "20"], (20000, 20.0)),
                            (["--steps", "300"], (300, None)),
                            (["--engine", "synth"], (600, None)),
                            (["--engine", "synth", "--minutes", "2"], (600, 2.0))):  # fmt: skip
        with pytest.raises(FittedError) as caught:
            main(["demo", "--workdir", str(tmp_path / "demo"), *given])
        assert caught.value.args == expected, given


def test_demo_refuses_a_budget_given_as_a_setting(tmp_path, capsys):
    for key, flag in (("train.minutes", "--minutes"), ("train.steps", "--steps")):
        assert main(["demo", "--workdir", str(tmp_path / "demo"), "--set", f"{key}=5"]) == 2
        assert f"the demo's {key} is {flag}" in capsys.readouterr().err
    assert main(["demo", "--workdir", str(tmp_path / "demo"), "--minutes", "0"]) == 2
    assert "minutes" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()


# `check` of the micro model at two shapes. Two compile threads: the warm-up compiles the
# two shapes at once. The stored traces' test runs it in processes of its own, as a user
# does: a second process finds what the first stored. Its subject is two processes, so it
# runs in the slow tier; the default tier keeps check's report (below, and test_tasks.py),
# the session run's warm-up on two threads (test_fit.py) and a second process registering
# the first's stored traces (test_resume.py's graph case).
CHECK = [*OVERRIDES, *MICRO, "train.compile_workers=2"]


@pytest.mark.slow
def test_check_reports_one_trace_per_shape_then_none(cache, tmp_path):
    def check() -> tuple[str, list[str]]:
        done = train_cli("check", "--data", str(cache), *as_cli(CHECK), "--repeats", "2",
                         compile_cache=tmp_path / "xla")  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout, [line for line in done.stdout.splitlines() if line[:1].isdigit()]

    out, rows = check()
    assert "built 2 shape(s)" in out
    assert "on 2 thread(s)" in out
    assert "ok: one trace per shape, no retrace" in out
    assert len(rows) == 2
    assert all(line.split()[5] == "1" for line in rows)  # traces column
    # A second process on the same cache registers both programs from their stored traces.
    out, rows = check()
    assert "ok: one trace per shape (2 registered from stored traces instead), no retrace" in out
    assert all(line.split()[5] == "0" for line in rows)


def _spec_missing_a_shape(make_dataset):
    """`make_dataset` whose pipeline emits a shape its spec does not list."""

    def made(*args, **kwargs):
        pipeline = make_dataset(*args, **kwargs)
        spec = dataclasses.replace(pipeline.spec, shapes=pipeline.spec.shapes[:1])
        return dataclasses.replace(pipeline, spec=spec)

    return made


def test_check_reports_a_shape_outside_the_spec_as_a_retrace_and_exits_1(cache, monkeypatch,
                                                                         capsys):  # fmt: skip
    # In this process (what `check` reports, not its process, is the subject): on a CPU
    # the graph executor runs the micro model's steps, so nothing compiled stays here.
    monkeypatch.setattr(xd, "make_dataset", _spec_missing_a_shape(xd.make_dataset))
    assert main(["check", "--data", str(cache), *as_cli(CHECK), "--repeats", "1"]) == 1
    out = capsys.readouterr().out
    assert "RETRACED: 1 shape(s) outside the spec were traced after the warm-up" in out
    rows = [line for line in out.splitlines() if line[:1].isdigit()]
    assert len(rows) == 2
    assert sum(line.endswith("not in the spec") for line in rows) == 1


def test_demo_refuses_a_vocoder_of_other_audio_settings_before_building(tmp_path, capsys):
    vocoder = tmp_path / "vocoder"
    vocoder.mkdir()
    stack = load_stack_config(None, ["train.task=vocoder", "audio.hop_length=200"])
    (vocoder / "config.yaml").write_text(yaml.safe_dump(stack.to_dict()))
    workdir = tmp_path / "demo"
    assert main(["demo", "--workdir", str(workdir), "--vocoder", str(vocoder)]) == 2
    assert "audio.hop_length: vocoder 200, text-to-mel 256" in capsys.readouterr().err
    assert not (workdir / "corpus").exists()


def _demo_corpus(workdir, reused):
    """A demo corpus of 10 utterances in `workdir`, or (`reused="cache"`) only the feature
    cache the demo builds from it."""
    corpus = workdir / ("corpus" if reused == "corpus" else "gone")
    xd.write_demo_corpus(corpus, n=10, min_seconds=0.4, max_seconds=1.6)
    if reused == "cache":
        stack = load_stack_config(None, list(demo.DEMO_SETTINGS))
        xd.prepare(corpus, workdir / "cache", audio=stack.audio, data=stack.data)


@pytest.mark.parametrize("reused", ["corpus", "cache"])
def test_demo_refuses_utterances_other_than_the_corpus_it_reuses(tmp_path, capsys, reused):
    workdir = tmp_path / "demo"
    _demo_corpus(workdir, reused)
    assert main(["demo", "--workdir", str(workdir), "--engine", "synth", "--utterances",
                 "20"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"in {workdir / reused} (10 utterances, reused), received: --utterances 20" in err
    assert not (workdir / "run").exists()
    assert (workdir / "corpus").exists() == (reused == "corpus")  # nothing written


@pytest.mark.parametrize(("held_out", "said"), [
    ("1", "Expected --held-out >= 2 (pairing compares sentences), received: --held-out 1"),
    ("20", "(10 utterances, reused), received: --held-out 20"),
])  # fmt: skip
def test_demo_refuses_a_held_out_size_before_building_anything(tmp_path, capsys, held_out,
                                                               said):  # fmt: skip
    workdir = tmp_path / "demo"
    xd.write_demo_corpus(workdir / "held-out", n=10, min_seconds=0.4, max_seconds=1.6)
    assert main(["demo", "--workdir", str(workdir), "--engine", "synth", "--held-out",
                 held_out]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert said in err
    assert not (workdir / "corpus").exists()  # nothing written


class FittedError(Exception):
    """Raised by a stand-in `fit`: reached: the corpus and cache the demo trains on are in place."""


@pytest.mark.parametrize("given", [[], ["--utterances", "10"]])
def test_demo_reuses_a_corpus_of_the_size_asked_for(tmp_path, monkeypatch, given):
    workdir = tmp_path / "demo"
    _demo_corpus(workdir, "corpus")

    def fit(*args, **kwargs):
        raise FittedError

    monkeypatch.setattr(demo, "fit", fit)
    with pytest.raises(FittedError):
        main(["demo", "--workdir", str(workdir), "--engine", "synth", *given])
    counts = xd.FeatureCache.open(workdir / "cache").manifest.counts
    assert counts.ok + counts.skipped == 10


def test_fit_refuses_a_feature_setting_the_cache_was_not_built_with(cache, tmp_path, capsys):
    workdir = tmp_path / "run"
    args = ["fit", "--data", str(cache), "--workdir", str(workdir)]
    assert main([*args, "--set", "data.trim_top_db=25"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "data.trim_top_db: the cache was built with 40.0, the config gives 25" in err
    assert not workdir.exists()


def test_fit_and_check_take_the_feature_settings_from_the_cache(cache):
    stack = load_stack_config(None, ["data.batch_size=2"], cache=cache)
    built = json.loads((cache / "manifest.json").read_text())["settings"]
    assert stack.audio.to_dict() == built["audio"]
    assert stack.data.cache_settings() == built["data"]
    assert stack.data.batch_size == 2
    assert stack.model.n_mels == stack.vocoder.n_mels == stack.audio.n_mels
