"""What adding a task takes: a task defined here, outside the package (`MeanFrameTask`: the
`Task` protocol, then `register_task`, the one registry line), trains through `fit` with
one program per batch shape, never retraces, and a run stopped halfway and resumed ends
bit for bit where one uninterrupted run ends. The trainer knows it by its name only.

`CriticTask` adds a second network with an objective and an optimizer of its own (as a
vocoder's discriminators): both update in the one program, are checkpointed and resume bit
for bit, and one gate skips both."""

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
from xtts_train.tasks.registry import TASKS, build_steps, fit, register_task, task_class
from xtts_train.training.steps import RetraceError
from xtts_train.training.task import Objective, Task


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


class CriticTask(MeanFrameTask):
    """`MeanFrameTask` and a critic trained beside it: a dense layer reading the predicted
    frame's mean level, which learns the target's (its own loss, optimizer and checkpoint
    entry); the model's loss reads the critic's output too, so its gradient flows through
    the critic, whose weights only their own objective updates."""

    name = "mean_frame_critic"

    def __init__(self, model: MeanFrame, critic: keras.layers.Dense) -> None:
        self.model, self.critic = model, critic

    @classmethod
    def build(cls, stack):
        critic = keras.Sequential([keras.layers.Dense(1)])
        critic(tf.zeros([1, 1]))
        return cls(MeanFrameTask.build(stack).model, critic)

    def losses(self, batch, hyper, *, training):
        losses = super().losses(batch, hyper, training=training)
        mask = batch["mel_mask"][..., None]  # (B, F, 1)
        level = tf.math.divide_no_nan(tf.reduce_sum(batch["mel"] * mask, [1, 2]),
                                      tf.reduce_sum(mask, [1, 2]) * batch["mel"].shape[-1])  # fmt: skip
        predicted = self.model(batch["tokens"], batch["token_mask"])  # (B, M)
        judged = self.critic(tf.reduce_mean(predicted, -1, keepdims=True))[:, 0]  # (B,)
        critic_loss = tf.reduce_mean(tf.square(judged - level))
        return {"loss": losses["loss"] + 1e-3 * tf.reduce_mean(judged), "critic_loss": critic_loss}

    def objectives(self):
        return (*super().objectives(),
                Objective("critic", "critic_loss", tuple(self.critic.trainable_variables)))  # fmt: skip

    def networks(self):
        return {"critic": self.critic}


# -- what the trainer does with it ----------------------------------------------------
SETTINGS = [*ONE_SHAPE, "train.task=mean_frame", "data.deterministic=true",
            "train.min_lr_ratio=1.0", "train.learning_rate=0.25", "train.log_every=1"]  # fmt: skip


@pytest.fixture
def registered():
    register_task(MeanFrameTask)
    register_task(CriticTask)
    yield MeanFrameTask
    del TASKS[MeanFrameTask.name], TASKS[CriticTask.name]


def _fit(cache, workdir, steps: int, task: str = "mean_frame") -> dict:
    stack = _stack(cache, steps, task)
    return fit(stack, cache, workdir, progress=False)


def _stack(cache, steps: int, task: str):
    return load_stack_config(None, [*SETTINGS, f"train.steps={steps}", f"train.task={task}"],
                             cache=cache)  # fmt: skip


def _metrics(workdir, name: str) -> list[float]:
    lines = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    return [line[name] for line in lines if name in line]


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


@pytest.mark.parametrize("task", ["mean_frame", "mean_frame_critic"])
def test_a_resumed_run_of_that_task_ends_where_an_uninterrupted_one_does(
    registered, cache, tmp_path, task
):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    _fit(cache, straight, 20, task)
    assert _fit(cache, resumed, 10, task)["steps"] == 10
    assert _fit(cache, resumed, 20, task)["steps_this_run"] == 10
    assert _losses(resumed) == _losses(straight)
    ours, theirs = (tf.train.load_checkpoint(str(w / "checkpoints" / "ckpt-20"))
                    for w in (resumed, straight))  # fmt: skip
    names = sorted(ours.get_variable_to_shape_map())
    assert names == sorted(theirs.get_variable_to_shape_map())
    names.remove("_CHECKPOINTABLE_OBJECT_GRAPH")  # names the layers as the process did
    assert any("seed" in name for name in names)  # the dropout's seed state, restored
    if task == "mean_frame_critic":  # the critic and both optimizers, each its own entry
        assert _metrics(resumed, "critic_loss") == _metrics(straight, "critic_loss")
        assert any(name.startswith("critic/") for name in names)
        for objective in ("model", "critic"):
            iterations = f"optimizer/{objective}/iterations/.ATTRIBUTES/VARIABLE_VALUE"
            assert ours.get_tensor(iterations) == 20
    else:  # one objective: its AdamW is the checkpoint's optimizer, as runs always were
        assert ours.get_tensor("optimizer/iterations/.ATTRIBUTES/VARIABLE_VALUE") == 20
    for name in names:
        np.testing.assert_array_equal(ours.get_tensor(name), theirs.get_tensor(name), name)


def test_two_objectives_update_in_one_program_and_learn_apart(registered, cache, tmp_path):
    summary = _fit(cache, tmp_path / "run", 20, "mean_frame_critic")
    assert summary["traces"] == summary["compiled_shapes"] == 1
    assert summary["retraces_after_warmup"] == 0
    for name in ("loss", "critic_loss"):  # seeded, and far apart: each learns its target
        values = _metrics(tmp_path / "run", name)
        assert len(values) == 20, name
        assert np.mean(values[-5:]) < 0.5 * np.mean(values[:5]), name


def test_two_objectives_share_the_gate_and_the_retrace_guard(registered, cache):
    stack = _stack(cache, 4, "mean_frame_critic")
    train = xd.make_dataset(cache, stack.data, "train", audio=stack.audio)
    steps = build_steps(stack, train.spec)
    steps.warm_up(workers=1)
    batch = next(iter(train.dataset))
    critic = steps.task.critic.trainable_variables[0]
    before = critic.numpy()
    outputs = steps.train({**batch, "mel": batch["mel"] * float("nan")}, step=0)
    assert not bool(outputs["finite"])  # NaN losses: neither objective updates
    assert [int(o.iterations) for o in steps.optimizers.values()] == [0, 0]
    np.testing.assert_array_equal(critic.numpy(), before)
    outputs = steps.train(batch, step=5)  # past the warm-up: a learning rate above 0
    assert bool(outputs["finite"])
    assert [int(o.iterations) for o in steps.optimizers.values()] == [1, 1]
    assert not np.array_equal(critic.numpy(), before)
    with pytest.raises(RetraceError, match="not one of the 1 compiled shapes"):
        steps.train({name: value[:2] for name, value in batch.items()}, step=6)


def test_a_taken_name_is_refused(registered):
    class Other(MeanFrameTask):
        pass

    with pytest.raises(ValueError, match=r"Expected a new task name, received: 'mean_frame'"):
        register_task(Other)
    register_task(MeanFrameTask)  # the same class again: nothing changes
    assert TASKS["mean_frame"] is MeanFrameTask
