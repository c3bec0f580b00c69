"""`fit --init-from RUN`: a new run starts from another run's weights (fine-tuning)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import yaml
from train_helpers import MICRO, OVERRIDES, as_cli

import xtts_data as xd
from xtts_train.cli import main
from xtts_train.config import load_stack_config
from xtts_train.errors import ConfigError, XttsTrainError
from xtts_train.runs.loading import restore_weights
from xtts_train.tasks.registry import fit, task_class
from xtts_train.tasks.text_to_mel import TextToMelTask
from xtts_train.training.init_from import StartFrom, init_source


def _stack_of(workdir, data=None, **train):
    stack = load_stack_config(workdir / "config.yaml")
    stack = dataclasses.replace(stack, train=dataclasses.replace(stack.train, **train))
    return dataclasses.replace(stack, data=dataclasses.replace(stack.data, **(data or {})))


def _weights(model) -> list[np.ndarray]:
    return [w.numpy() for w in model.weights]


def test_a_new_run_starts_from_the_source_weights_with_a_fresh_optimizer(run, cache, tmp_path):
    _, source = run
    # One step at a vanishing rate: the weights are the source's (AdamW's first update is
    # about the learning rate, whatever the gradient).
    # One bucket (the source trained on two): the fit traces one program, and the data's
    # batching is no part of the weights.
    stack = _stack_of(source, steps=1, init_from=str(source), learning_rate=1e-12,
                      warmup_steps=0, eval_every=0, weight_decay=0.0,
                      data=dict(num_buckets=1))  # fmt: skip
    summary = fit(stack, cache, tmp_path / "tuned", progress=False)
    assert summary["steps"] == 1  # the schedule starts again (the source ran 30 steps)
    task = task_class(stack.train.task).build(stack)
    restore_weights(tmp_path / "tuned", task.model)
    theirs = task_class(stack.train.task).build(stack)
    restore_weights(source, theirs.model)
    for ours, their in zip(_weights(task.model), _weights(theirs.model), strict=True):
        np.testing.assert_allclose(ours, their, atol=1e-6)
    config = yaml.safe_load((tmp_path / "tuned" / "config.yaml").read_text())
    assert config["train"]["init_from"] == str(source)


def test_a_grown_vocabulary_keeps_each_old_tokens_embedding(run):
    _, source = run
    old = xd.Tokenizer.from_dict(json.loads((source / "tokenizer.json").read_text()))
    grown = xd.Tokenizer(old.symbols[:3] + "ʃð" + old.symbols[3:])  # two new, ids shifted
    stack = _stack_of(source, init_from=str(source))
    stack = dataclasses.replace(
        stack, model=dataclasses.replace(stack.model, vocab_size=grown.vocab_size)
    )
    start = StartFrom(TextToMelTask, stack, init_source(source, stack))
    task = task_class(stack.train.task).build(stack)
    fresh = task.token_tables()[0].numpy()
    start.copy_into(task, grown)
    table, theirs = task.token_tables()[0].numpy(), start.source_task.token_tables()[0].numpy()
    new_ids, old_ids = grown.token_ids(), old.token_ids()
    for token, i in new_ids.items():
        expected = theirs[old_ids[token]] if token in old_ids else fresh[i]
        np.testing.assert_array_equal(table[i], expected, err_msg=token)
    assert {t for t in new_ids if t not in old_ids} == {"ʃ", "ð"}
    # Every other weight is the source's.
    others = [w for w in task.model.weights if w is not task.token_tables()[0]]
    theirs_others = [w for w in start.source_task.model.weights
                     if w is not start.source_task.token_tables()[0]]  # fmt: skip
    for ours, their in zip(others, theirs_others, strict=True):
        np.testing.assert_array_equal(ours.numpy(), their.numpy())


def test_another_model_size_names_the_weight_and_both_shapes(run, cache, tmp_path, capsys):
    _, source = run
    workdir = tmp_path / "tuned"
    code = main(["fit", "--data", str(cache), "--workdir", str(workdir), "--quiet",
                 "--init-from", str(source), "--steps", "2",
                 *as_cli([*OVERRIDES, *MICRO, "model.d_model=48"])])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "train.init_from: weight text_encoder/embedding/embeddings is (" in err
    assert ", 32) in " in err
    assert ", 48) in this run" in err
    assert not (workdir / "config.yaml").exists()  # refused before the run wrote anything


@pytest.mark.parametrize(
    ("what", "match"),
    [("no run", "is not a training run"), ("no checkpoint", "has no checkpoint yet"),
     ("another task", "Expected a vocoder run")],
)  # fmt: skip
def test_a_source_that_cannot_start_a_run_is_refused(what, match, run, tmp_path):
    _, source = run
    stack = _stack_of(source)
    if what == "no run":
        path = tmp_path / "nothing"
    elif what == "no checkpoint":
        path = tmp_path / "fresh"
        path.mkdir()
        (path / "config.yaml").write_text((source / "config.yaml").read_text())
    else:
        path = source
        stack = dataclasses.replace(stack, train=dataclasses.replace(stack.train, task="vocoder"))
    with pytest.raises(XttsTrainError, match=match):
        init_source(path, stack)


def test_init_from_must_name_a_folder():
    with pytest.raises(ConfigError, match="init_from"):
        load_stack_config(None, ["train.init_from=''"])
