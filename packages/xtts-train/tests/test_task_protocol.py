"""What adding a task takes: a task defined here, outside the package (`MeanFrameTask`: the
`Task` protocol, then `register_task`, the one registry line), trains through `fit` with
one program per batch shape, never retraces, and a run stopped halfway and resumed ends
bit for bit where one uninterrupted run ends. The trainer knows it by its name only."""

from __future__ import annotations

import dataclasses
import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from train_helpers import ONE_SHAPE

import xtts_data as xd
from xtts_train.config import load_stack_config
from xtts_train.tasks.registry import TASKS, fit, register_task, task_class
from xtts_train.training.task import Task


# -- the task: every line it needs ----------------------------------------------------
class MeanFrame(keras.Model):
    """The mean of an utterance's frames from its token ids: their embeddings (with
    dropout, so a resume has seed states to restore) averaged over the text, projected."""

    def __init__(self, vocab_size: int, n_mels: int) -> None:
        super().__init__()
        self.embed = keras.layers.Embedding(vocab_size, 16)
        self.drop = keras.layers.Dropout(0.2, seed=1)
        self.out = keras.layers.Dense(n_mels)

    def call(self, tokens, token_mask, training=False):  # (B, T) -> (B, M)
        x = self.drop(self.embed(tokens), training=training) * token_mask[..., None]
        return self.out(tf.math.divide_no_nan(tf.reduce_sum(x, 1),
                                              tf.reduce_sum(token_mask, 1, keepdims=True)))  # fmt: skip


class MeanFrameTask(Task):
    name = "mean_frame"

    def __init__(self, model: MeanFrame) -> None:
        self.model = model

    @classmethod
    def pipeline(cls, cache, data, split, *, repeat):
        return xd.make_dataset(cache, data, split, repeat=repeat)

    @classmethod
    def configure(cls, stack, tokenizer):
        return dataclasses.replace(
            stack, model=dataclasses.replace(stack.model, vocab_size=tokenizer.vocab_size)
        )

    @classmethod
    def build(cls, stack):
        model = MeanFrame(stack.model.vocab_size, stack.audio.n_mels)
        model(tf.zeros([1, 2], tf.int32), tf.ones([1, 2]))  # variables before any trace
        return cls(model)

    def losses(self, batch, hyper, *, training):
        mask = batch["mel_mask"][..., None]  # (B, F, 1)
        target = tf.math.divide_no_nan(tf.reduce_sum(batch["mel"] * mask, 1),
                                       tf.reduce_sum(mask, 1))  # (B, M)  # fmt: skip
        predicted = self.model(batch["tokens"], batch["token_mask"], training=training)
        return {"loss": tf.reduce_mean(tf.abs(predicted - target))}


# -- what the trainer does with it ----------------------------------------------------
SETTINGS = [*ONE_SHAPE, "train.task=mean_frame", "data.deterministic=true",
            "train.min_lr_ratio=1.0", "train.learning_rate=0.25", "train.log_every=1"]  # fmt: skip


@pytest.fixture
def registered():
    register_task(MeanFrameTask)
    yield MeanFrameTask
    del TASKS[MeanFrameTask.name]


def _fit(cache, workdir, steps: int) -> dict:
    stack = load_stack_config(None, [*SETTINGS, f"train.steps={steps}"], cache=cache)
    return fit(stack, cache, workdir, progress=False)


def _losses(workdir) -> list[float]:
    lines = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    return [line["loss"] for line in lines if "loss" in line]


def test_a_task_defined_outside_the_package_trains_through_fit(registered, cache, tmp_path):
    assert task_class("mean_frame") is MeanFrameTask
    summary = _fit(cache, tmp_path / "run", 20)
    assert summary["task"] == "mean_frame"
    assert summary["steps"] == 20
    assert summary["traces"] == summary["compiled_shapes"] == summary["spec_shapes"] == 1
    assert summary["retraces_after_warmup"] == 0
    losses = _losses(tmp_path / "run")
    assert len(losses) == 20
    assert all(np.isfinite(losses))
    # Seeded, and far apart: the mean frame of a corpus is quickly learnt from ~-5 away.
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
    assert not (tmp_path / "run" / "reference.npy").exists()  # a text-to-mel run's only


def test_a_resumed_run_of_that_task_ends_where_an_uninterrupted_one_does(
    registered, cache, tmp_path
):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    _fit(cache, straight, 20)
    assert _fit(cache, resumed, 10)["steps"] == 10
    assert _fit(cache, resumed, 20)["steps_this_run"] == 10
    assert _losses(resumed) == _losses(straight)
    ours, theirs = (tf.train.load_checkpoint(str(w / "checkpoints" / "ckpt-20"))
                    for w in (resumed, straight))  # fmt: skip
    names = sorted(ours.get_variable_to_shape_map())
    assert names == sorted(theirs.get_variable_to_shape_map())
    names.remove("_CHECKPOINTABLE_OBJECT_GRAPH")  # names the layers as the process did
    assert any("seed" in name for name in names)  # the dropout's seed state, restored
    for name in names:
        np.testing.assert_array_equal(ours.get_tensor(name), theirs.get_tensor(name), name)


def test_a_taken_name_is_refused(registered):
    class Other(MeanFrameTask):
        pass

    with pytest.raises(ValueError, match=r"Expected a new task name, received: 'mean_frame'"):
        register_task(Other)
    register_task(MeanFrameTask)  # the same class again: nothing changes
    assert TASKS["mean_frame"] is MeanFrameTask
