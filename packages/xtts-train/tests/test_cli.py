"""`xtts-train demo` and `xtts-train check` end to end."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from train_helpers import MICRO, ONE_SHAPE, OVERRIDES, as_cli

import xtts_data as xd
from xtts_train.cli import main


def test_demo_runs_the_whole_stack(tmp_path):
    # Its own process, as a user runs it: the XLA programs of its training, evaluation and
    # synthesis (TensorFlow never frees a compiled program) leave with it.
    done = subprocess.run(
        [sys.executable, "-m", "xtts_train.cli", "demo", "--workdir", str(tmp_path / "demo"),
         "--steps", "4", "--utterances", "24"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "0 retraces" in out
    run = tmp_path / "demo" / "run"
    assert (run / "demo.wav").stat().st_size > 1000
    assert (run / "demo.png").read_bytes()[:4] == b"\x89PNG"
    assert "held-out 8 sentences it never saw" in out
    assert "pairing" in out
    assert len(list((run / "held-out").glob("*.truth.wav"))) == 8
    assert len(list((run / "held-out").glob("*.wav"))) == 16


def test_check_reports_one_trace_per_shape(cache, capsys):
    assert (
        main(["check", "--data", str(cache), *as_cli([*ONE_SHAPE, *MICRO]), "--repeats", "2"]) == 0
    )
    out = capsys.readouterr().out
    assert "compiled 1 shape(s)" in out
    assert "ok: one trace per shape, no retrace" in out
    rows = [line for line in out.splitlines() if line[:1].isdigit()]
    assert len(rows) == 1
    assert all(line.split()[5] == "1" for line in rows)  # traces column


def test_check_reports_a_shape_outside_the_spec_as_a_retrace_and_exits_1(
    cache, capsys, monkeypatch
):
    make_dataset = xd.make_dataset

    def spec_missing_a_shape(*args, **kwargs):  # the pipeline emits a shape it did not list
        pipeline = make_dataset(*args, **kwargs)
        spec = dataclasses.replace(pipeline.spec, shapes=pipeline.spec.shapes[:1])
        return dataclasses.replace(pipeline, spec=spec)

    monkeypatch.setattr(xd, "make_dataset", spec_missing_a_shape)
    assert (
        main(["check", "--data", str(cache), *as_cli([*OVERRIDES, *MICRO]), "--repeats", "1"]) == 1
    )
    out = capsys.readouterr().out
    assert "RETRACED: 1 shape(s) outside the spec were traced after the warm-up" in out
    rows = [line for line in out.splitlines() if line[:1].isdigit()]
    assert len(rows) == 2
    assert sum(line.endswith("not in the spec") for line in rows) == 1
