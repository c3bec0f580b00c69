"""`evaluate`: free-running synthesis of unseen utterances, scored; and its CLI errors."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
import yaml

from xtts_train.cli import main
from xtts_train.decoding import Decoding
from xtts_train.synthesize import load_reference, load_run


def _evaluate(workdir, cache, *args):
    return main(["evaluate", "--run", str(workdir), "--data", str(cache), "--quiet", *args])


def test_evaluate_runs_through_the_cli_with_json(run, cache, tmp_path, capsys):
    _, workdir = run
    out = tmp_path / "listen"
    assert _evaluate(workdir, cache, "--split", "all", "--n", "3", "--out", str(out),
                     "--json") == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert report["step"] == 30
    assert report["split"] == "all"
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
    assert summary["duration_ratio_median"] == pytest.approx(
        np.median([r["duration_ratio"] for r in rows])
    )


def test_the_text_report_has_a_row_per_utterance_and_a_summary(run, cache, capsys):
    _, workdir = run
    assert _evaluate(workdir, cache, "--split", "all", "--n", "2", "--step", "20") == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 + 2 + 1
    assert "step 20" in lines[-1]
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


def test_decoding_texts_of_one_bucket_is_one_program(run):
    _, workdir = run
    stack, model, _ = load_run(workdir)
    decoding = Decoding(model, cond_frames=stack.data.cond_frames, max_frames=16, batch_size=2)
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
