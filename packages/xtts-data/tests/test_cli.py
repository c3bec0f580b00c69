"""`xtts-data` commands, run in-process through `main` (the console script's entry)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import yaml
from data_helpers import BAD_ROWS, DATA, REPORT_KEYS

from xtts_data import load_config, make_dataset
from xtts_data.cli import main
from xtts_data.manifest import Manifest
from xtts_data.plan import PLAN_FILE, BucketCost, plan_batches, write_plan

COMMANDS = ["prepare", "verify", "doctor", "serve", "demo-corpus"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_explains_itself(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert f"xtts-data {command}" in text
    assert len(text.splitlines()) > 5


def test_top_level_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(command in out for command in COMMANDS)


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "xtts.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "audio": {"preset": "xtts"},
                "data": {"shard_size": 8, "batch_size": 4, "num_buckets": 3, "cond_frames": 24},
                "model": {"preset": "tiny"},
            }
        )
    )
    return path


def test_prepare_prints_a_summary_naming_skipped_rows(corpus, config, tmp_path, capsys):
    out = tmp_path / "cache"
    assert (
        main(["prepare", str(corpus), "--out", str(out), "--config", str(config), "--quiet"]) == 0
    )
    summary = capsys.readouterr().out
    assert f"{len(BAD_ROWS)} skipped" in summary
    assert "missing audio file" in summary
    assert len(summary.splitlines()) < 30  # one screen
    report = json.loads((out / "report.json").read_text())
    assert report["ok"] > 0
    assert len(report["skipped"]) == len(BAD_ROWS)
    assert main(["verify", str(out)]) == 0


def test_doctor_json_and_plot(cache, config, tmp_path, capsys):
    plot = tmp_path / "latency.png"
    args = [
        "doctor",
        str(cache),
        "--config",
        str(config),
        "--batches",
        "12",
        "--device-ms",
        "5",
        "--json",
        "--plot",
        str(plot),
    ]
    assert main(args) == 0
    values = json.loads(capsys.readouterr().out)
    assert set(values) >= REPORT_KEYS | {"verdict"}
    assert values["python_ops"] == []
    assert values["shapes_outside_spec"] == []
    assert 0 < values["device_utilization"] <= 1
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_doctor_plain_output_has_a_verdict(cache, config, capsys):
    assert main(["doctor", str(cache), "--config", str(config), "--batches", "6"]) == 0
    out = capsys.readouterr().out
    assert "verdict" in out
    assert "samples/s" in out
    assert "python ops         none" in out


def test_doctor_takes_the_caches_feature_settings(cache, tmp_path, capsys):
    # A config silent on them takes the cache's; one that disagrees is named, exit 2.
    agrees = tmp_path / "agrees.yaml"
    agrees.write_text("data: {batch_size: 4, num_buckets: 3, cond_frames: 24}\n")
    assert main(["doctor", str(cache), "--config", str(agrees), "--batches", "3"]) == 0
    capsys.readouterr()
    disagrees = tmp_path / "disagrees.yaml"
    disagrees.write_text("data: {batch_size: 4, cond_frames: 24, trim_top_db: 20}\n")
    assert main(["doctor", str(cache), "--config", str(disagrees)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "data.trim_top_db: the cache was built with 40.0, the config gives 20" in err


def test_doctor_prints_a_memory_plan_and_times_its_batch_sizes(cache, config, tmp_path, capsys):
    data = load_config(config, built=Manifest.read(cache).settings)[1]
    spec = make_dataset(cache, data, "train", repeat=True).spec
    costs = [BucketCost(s.frames, s.text_len, 2**20, s.frames * 2**14) for s in spec.shapes]
    plan = plan_batches(costs, 0.01, multiple=1)  # a few rows of each bucket, more of short
    write_plan(plan, tmp_path / PLAN_FILE)
    args = ["doctor", str(cache), "--config", str(config), "--batches", "8"]
    assert main([*args, "--plan", str(tmp_path)]) == 0  # a run folder holds it
    assert capsys.readouterr().out.startswith(plan.format())
    assert main([*args, "--plan", str(tmp_path), "--json"]) == 0
    values = json.loads(capsys.readouterr().out)
    assert values["memory_plan"]["batch_sizes"] == list(plan.batch_sizes)
    planned = {(b, t, f) for b, (f, t) in zip(plan.batch_sizes, plan.buckets, strict=True)}
    assert planned != {shape.key for shape in spec.shapes}  # not the frame budget's sizes
    assert {tuple(shape) for shape in values["shapes"]} <= planned
    assert {tuple(shape) for shape in values["spec_shapes"]} == planned

    other = dataclasses.replace(plan, costs=(BucketCost(999, 9, 1, 1),) * len(costs))
    write_plan(other, tmp_path / "other.json")
    assert main([*args, "--plan", str(tmp_path / "other.json")]) == 2
    assert "Expected a plan for this pipeline's buckets" in capsys.readouterr().err
    assert main([*args, "--plan", str(tmp_path / "missing.json")]) == 2
    assert "xtts-train check --save-plan" in capsys.readouterr().err


def test_demo_corpus_writes_an_ljspeech_layout(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo-corpus", str(out), "--n", "3", "--max-seconds", "1.5"]) == 0
    assert len((out / "metadata.csv").read_text().splitlines()) == 3
    assert len(list((out / "wavs").glob("*.wav"))) == 3
    assert "wrote 3 utterances" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["prepare", "/nonexistent/corpus", "--out", "x"], "not found"),
        (["verify", "/nonexistent/cache"], "missing manifest.json"),
        (["doctor", "/nonexistent/cache"], "not found"),
        (["serve", "worker"], "--dispatcher"),
    ],
)
def test_user_errors_print_one_line_and_exit_2(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(args)
    err = capsys.readouterr()
    if args[0] == "verify":  # damage is reported on stdout with exit 1
        assert code == 1
        assert message in err.out
        return
    assert code == 2
    assert message in err.err
    assert len(err.err.strip().splitlines()) == 1


def test_invalid_config_is_a_user_error(corpus, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: {batch_size: 0}\n")
    assert main(["prepare", str(corpus), "--out", str(tmp_path / "c"), "--config", str(bad)]) == 2
    assert "batch_size" in capsys.readouterr().err


def _serve(*args: str) -> tuple[subprocess.Popen, str]:
    """Start `xtts-data serve ...` and return it with its first line of output."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.Popen(
        [sys.executable, "-m", "xtts_data.cli", "serve", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    return process, process.stdout.readline()


def test_serve_runs_a_dispatcher_and_a_worker_that_feed_a_pipeline(cache):
    dispatcher, line = _serve("dispatcher")
    try:
        address = line.split()[2]
        assert line.startswith("dispatcher at grpc://")
        worker, line = _serve("worker", "--dispatcher", address)
        try:
            assert line.startswith("worker serving for")
            config = dataclasses.replace(DATA, service=address)
            pipeline = make_dataset(cache, config, "all")
            batches = list(pipeline.dataset)
            assert len(batches) == pipeline.batches_per_epoch
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    finally:
        dispatcher.terminate()
        dispatcher.wait(timeout=30)
