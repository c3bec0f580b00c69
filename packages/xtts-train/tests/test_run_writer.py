"""`RunWriter` alone: the files of a work dir, with a tiny `tf.Module`, no model compile."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tensorflow as tf
import yaml

from xtts_data import Tokenizer
from xtts_train.config import load_stack_config
from xtts_train.errors import XttsTrainError
from xtts_train.runs.run_writer import RunWriter, forget_metrics_after, latest_step


class _Weights(tf.Module):
    """Two variables standing in for a model (or an optimizer's slots)."""

    def __init__(self, value: float = 1.0) -> None:
        super().__init__()
        self.kernel = tf.Variable(tf.fill([2, 3], value))
        self.bias = tf.Variable(tf.fill([3], value))


def _opened(workdir, *, keep: int = 3, value: float = 1.0, seeds: bool = True):
    """A writer of `workdir` with checkpoints of fresh weights (all `value`)."""
    model, optimizer = _Weights(value), _Weights(value)
    nonfinite = tf.Variable(int(value), dtype=tf.int64)
    seed_states = [tf.Variable([int(value), 0], dtype=tf.int64)] if seeds else []
    writer = RunWriter(workdir)
    writer.open(model=model, optimizer=optimizer, nonfinite=nonfinite,
                seed_states=seed_states, keep=keep)  # fmt: skip
    return writer, model, nonfinite, seed_states


def _logged(writer) -> list[int]:
    return [json.loads(line)["step"] for line in writer.metrics.read_text().splitlines()]


# -- config.yaml and tokenizer.json -----------------------------------------------------------


def test_config_is_written_and_a_resume_with_another_model_is_refused(tmp_path):
    writer = RunWriter(tmp_path)
    writer.write_config(load_stack_config(None, ["model.d_model=32"]))
    assert "d_model: 32" in (tmp_path / "config.yaml").read_text()
    writer.write_config(load_stack_config(None, ["model.d_model=32", "train.steps=7"]))
    with pytest.raises(XttsTrainError, match=r"holds a run with another model config"):
        writer.write_config(load_stack_config(None, ["model.d_model=64"]))
    assert "d_model: 32" in (tmp_path / "config.yaml").read_text()  # left as it was


def test_a_run_written_before_a_model_key_existed_resumes_with_its_default(tmp_path):
    writer = RunWriter(tmp_path)
    stack = load_stack_config(None, ["model.d_model=32"])
    writer.write_config(stack)
    older = yaml.safe_load((tmp_path / "config.yaml").read_text())
    del older["model"]["attention_block"]  # added later, with a default
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(older))
    writer.write_config(stack)  # the same model: resumes
    with pytest.raises(XttsTrainError, match=r"another model config"):
        writer.write_config(
            load_stack_config(None, ["model.d_model=32", "model.attention_block=0"])
        )


def test_a_run_written_before_alignment_existed_resumes_as_the_content_model_it_was(tmp_path):
    writer = RunWriter(tmp_path)
    content = load_stack_config(None, ["model.d_model=32", "model.alignment=content"])
    writer.write_config(content)
    older = yaml.safe_load((tmp_path / "config.yaml").read_text())
    del older["model"]["alignment"]  # written before issue 67: every run was content
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(older))
    writer.write_config(content)  # the model it was trained as: resumes
    with pytest.raises(XttsTrainError, match=r"another model config"):
        writer.write_config(load_stack_config(None, ["model.d_model=32"]))  # today's default


def test_tokenizer_is_copied_and_another_symbol_table_is_refused(tmp_path):
    cache, run = tmp_path / "cache", tmp_path / "run"
    cache.mkdir(), run.mkdir()
    tokenizer = Tokenizer("abc")
    (cache / "tokenizer.json").write_text(json.dumps(tokenizer.to_dict()))
    writer = RunWriter(run)
    writer.write_tokenizer(cache, tokenizer)
    assert (run / "tokenizer.json").read_bytes() == (cache / "tokenizer.json").read_bytes()
    writer.write_tokenizer(cache, tokenizer)  # a resume with the same cache
    with pytest.raises(XttsTrainError, match=r"symbol table disagrees .*\(cache: 2 symbols 'ab'"):
        writer.write_tokenizer(cache, Tokenizer("ab"))


# -- metrics.jsonl ----------------------------------------------------------------------------


def test_a_metrics_line_is_one_write_on_an_append_only_file(tmp_path, monkeypatch):
    opened, written = [], []
    real_open, real_write = os.open, os.write
    monkeypatch.setattr(os, "open", lambda path, flags, *a: opened.append(flags) or
                        real_open(path, flags, *a))  # fmt: skip
    monkeypatch.setattr(os, "write", lambda fd, data: written.append(data) or real_write(fd, data))
    writer = RunWriter(tmp_path)
    writer.log(5, {"loss": 1.5, "lr": 0.01})
    writer.log(10, {"loss": float("nan")})
    assert all(flags & os.O_APPEND for flags in opened)
    assert written == [b'{"step": 5, "loss": 1.5, "lr": 0.01}\n', b'{"step": 10, "loss": NaN}\n']
    assert _logged(writer) == [5, 10]


@pytest.mark.parametrize("checkpoint", [0, 20])
def test_metrics_keep_steps_up_to_the_checkpoint_and_drop_a_cut_line(tmp_path, checkpoint):
    writer = RunWriter(tmp_path)
    for step in (10, 20, 30):
        writer.log(step, {"loss": 1.0})
    with open(writer.metrics, "a") as file:  # a kill in the middle of a write
        file.write('{"step": 40, "lo')
    forget_metrics_after(writer.metrics, checkpoint)
    assert _logged(writer) == [step for step in (10, 20) if step <= checkpoint]
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_cut_line_is_dropped_and_the_log_goes_on_after_it(tmp_path):
    writer = RunWriter(tmp_path)
    writer.log(5, {"loss": 2.0})
    writer.metrics.write_bytes(writer.metrics.read_bytes() + b'{"step": 10, "loss": 1.')
    forget_metrics_after(writer.metrics, 10)
    writer.log(10, {"loss": 1.0})
    lines = [json.loads(line) for line in writer.metrics.read_text().splitlines()]
    assert lines == [{"step": 5, "loss": 2.0}, {"step": 10, "loss": 1.0}]


def test_the_metrics_of_a_run_killed_before_its_first_checkpoint_start_afresh(tmp_path):
    writer, *_ = _opened(tmp_path)
    writer.log(5, {"loss": 1.0})
    assert writer.resume(0) == 0
    assert writer.metrics.read_text() == ""


# -- summary.json and reference.npy -----------------------------------------------------------


def test_summary_is_written_whole_in_its_order_with_no_temp_file_left(tmp_path):
    writer = RunWriter(tmp_path)
    summary = {"steps": 20, "final_loss": None, "warm_up": {"seconds": 1.5}, "a": [1, 2]}
    writer.write_summary(summary)
    writer.write_summary({**summary, "steps": 30})
    text = (tmp_path / "summary.json").read_text()
    assert list(json.loads(text)) == list(summary)
    assert json.loads(text)["steps"] == 30
    assert text.endswith("}\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["summary.json"]


def test_the_reference_is_kept_once_and_a_damaged_one_is_removed(tmp_path, caplog):
    batch = {"cond_mel": tf.reshape(tf.range(24, dtype=tf.float32), [2, 4, 3]),
             "cond_lengths": tf.constant([3, 4])}  # fmt: skip
    writer = RunWriter(tmp_path)
    writer.keep_reference(batch)
    np.testing.assert_array_equal(np.load(tmp_path / "reference.npy"), np.arange(9).reshape(3, 3))
    writer.keep_reference({**batch, "cond_lengths": tf.constant([1, 4])})  # kept: not rewritten
    assert np.load(tmp_path / "reference.npy").shape == (3, 3)
    stack = load_stack_config(None)
    writer.recover(stack)  # a readable clip stays
    assert (tmp_path / "reference.npy").exists()
    (tmp_path / "reference.npy").write_bytes(b"\x93NUMPY cut")
    (tmp_path / ".summary.json.x1.tmp").write_text("{")
    with caplog.at_level("INFO", logger="xtts_train.runs.run_writer"):
        writer.recover(stack)
    assert not (tmp_path / "reference.npy").exists()
    assert not list(tmp_path.glob(".*.tmp"))
    assert "reference.npy is damaged" in caplog.text
    assert "removed .summary.json.x1.tmp, left by a killed run" in caplog.text


# -- checkpoints ------------------------------------------------------------------------------


def test_a_checkpoint_is_not_written_with_non_finite_weights(tmp_path, caplog):
    writer, model, *_ = _opened(tmp_path)
    writer.save(10)
    model.bias.assign([1.0, np.nan, 1.0])
    with caplog.at_level("ERROR", logger="xtts_train.runs.run_writer"):
        writer.save(20)
    assert "step 20: weights are not finite; checkpoint not written" in caplog.text
    assert latest_step(tmp_path) == 10
    assert writer.latest_checkpoint.endswith("ckpt-10")


def test_saving_the_newest_step_again_writes_nothing(tmp_path):
    writer, *_ = _opened(tmp_path)
    writer.save(10)
    writer.save(10)  # a signal right after a checkpoint, then the end's save
    assert [path.rsplit("-", 1)[1] for path in writer.checkpoints.manager.checkpoints] == ["10"]
    assert int(writer.checkpoints.step) == 10


def test_the_checkpoint_of_a_step_not_held_names_the_steps_held(tmp_path):
    writer, *_ = _opened(tmp_path, keep=2)
    for step in (10, 20, 30):
        writer.save(step)
    assert writer.checkpoints.at(20).endswith("ckpt-20")  # an older one the workers share
    message = r"step 10, .* received: steps \[20, 30\] \(it keeps train.keep_checkpoints=2\)"
    with pytest.raises(XttsTrainError, match=message):
        writer.checkpoints.at(10)


def test_a_resume_restores_the_checkpoint_and_forgets_the_metrics_after_it(tmp_path):
    writer, model, nonfinite, seeds = _opened(tmp_path)
    writer.save(10)
    for step in (10, 20):
        writer.log(step, {"loss": 1.0})
    model.kernel.assign(tf.zeros([2, 3]))  # trained on after the checkpoint, then killed
    nonfinite.assign(3)
    seeds[0].assign([1, 9])
    resumed, model, nonfinite, seeds = _opened(tmp_path, value=5.0)
    assert resumed.resume(latest_step(tmp_path)) == 10
    np.testing.assert_array_equal(model.kernel.numpy(), np.ones([2, 3]))
    assert (int(nonfinite), seeds[0].numpy().tolist()) == (1, [1, 0])
    assert _logged(resumed) == [10]


def test_a_checkpoint_without_seed_states_is_restored_with_a_warning(tmp_path, caplog):
    writer, *_ = _opened(tmp_path, seeds=False)
    writer.save(10)
    resumed, model, *_ = _opened(tmp_path, value=5.0)
    with caplog.at_level("WARNING", logger="xtts_train.runs.run_writer"):
        assert resumed.resume(10) == 10
    assert "ckpt-10 holds no dropout seed states; they start afresh" in caplog.text
    np.testing.assert_array_equal(model.bias.numpy(), np.ones([3]))
