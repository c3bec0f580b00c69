"""The vocoder's adversarial stage: the discriminators' shapes and losses (known values),
the vocoder task with two objectives in one compiled step, and `fit` from a
reconstruction-trained run (`--init-from`), resumed bit for bit."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf
from train_helpers import VOCODER

import xtts_audio as xa
from xtts_data import SegmentShape, SegmentSpec
from xtts_train.config import VocoderConfig, load_stack_config
from xtts_train.errors import ConfigError
from xtts_train.models.vocoder.discriminators import (
    Discriminators,
    discriminator_loss,
    feature_loss,
    generator_loss,
)
from xtts_train.tasks.registry import build_steps, fit
from xtts_train.tasks.vocoder import VocoderTask
from xtts_train.training.steps import RetraceError

AUDIO = xa.MelConfig.from_preset("xtts")
# One period, one resolution: each compiled step costs seconds, not a minute.
ADVERSARIAL = ["vocoder.adversarial=true", "vocoder.disc_channels=2", "vocoder.periods=[2]",
               "vocoder.stft_resolutions=[[512,128,512]]"]  # fmt: skip
CONFIG = VocoderConfig.from_preset("tiny", dim=32, intermediate=64, layers=1, adversarial=True,
                                   disc_channels=2, periods=(2, 3))  # fmt: skip
SPEC = SegmentSpec(shapes=(SegmentShape(batch_size=2, frames=8, samples=8 * 256),),
                   n_mels=80, hop_length=256)  # fmt: skip


def test_one_sub_discriminator_per_period_and_resolution_with_static_shapes():
    discriminators = Discriminators(CONFIG, AUDIO.sample_rate)
    logits, features = discriminators(tf.random.normal([2, 2048], seed=1))
    assert len(logits) == len(features) == 2 + len(CONFIG.stft_resolutions)
    assert all(x.shape.is_fully_defined() and x.shape[0] == 2 for x in logits)
    assert [len(f) for f in features] == [5] * len(logits)  # every hidden layer
    # Period 3 folds 2048 samples (reflect-padded to 2049) into 683 rows of 3 columns;
    # four stride-3 layers leave ceil(683 / 81) = 9 rows.
    assert logits[1].shape == (2, 9, 3)
    assert features[1][0].shape == (2, 228, 3, 2)  # the first layer: disc_channels wide


def test_hinge_and_feature_losses_have_their_known_values():
    confident = [tf.constant([2.0, 3.0]), tf.constant([[1.5]])]
    fooled = [tf.constant([-2.0, -1.0]), tf.constant([[-1.0]])]
    assert float(discriminator_loss(confident, fooled)) == 0.0  # both margins met
    # relu(1 - 0) + relu(1 + 0) per sub-discriminator, averaged: 2
    zeros = [tf.zeros([2]), tf.zeros([1, 1])]
    assert float(discriminator_loss(zeros, zeros)) == 2.0
    # generator: mean relu(1 - D(fake)): (3 + 2) / 2 = 2.5 and 2, averaged
    assert float(generator_loss(fooled)) == pytest.approx((2.5 + 2.0) / 2)
    real = [[tf.ones([2, 3]), tf.zeros([4])], [tf.ones([1])]]
    fake = [[tf.zeros([2, 3]), tf.fill([4], 0.5)], [tf.ones([1])]]
    assert float(feature_loss(real, fake)) == pytest.approx((1.0 + 0.5 + 0.0) / 2)
    assert float(feature_loss(real, real)) == 0.0


@pytest.mark.parametrize(("overrides", "match"), [
    (dict(periods=(0,)), "periods: expected a list of ints >= 1"),
    (dict(periods=(), stft_resolutions=()), "a period or an STFT resolution to judge"),
    (dict(adversarial="yes"), "adversarial: expected true or false"),
    (dict(feature_weight=-1.0), "feature_weight: expected a number >= 0"),
    (dict(disc_channels=0), "disc_channels: expected an int >= 1"),
])  # fmt: skip
def test_bad_adversarial_settings_are_refused(overrides, match):
    with pytest.raises(ConfigError, match=match):
        dataclasses.replace(CONFIG, **overrides)


def _segments() -> dict[str, tf.Tensor]:
    t = np.arange(8 * 256, dtype=np.float32) / AUDIO.sample_rate
    audio = np.stack([0.5 * np.sin(2 * np.pi * 220 * t), 0.3 * np.sin(2 * np.pi * 330 * t)])
    mel = xa.mel_features(tf.constant(audio), AUDIO)[:, :8]
    return {"mel": tf.cast(mel, tf.float32), "audio": tf.constant(audio, tf.float32)}


def test_the_vocoder_and_its_discriminators_update_in_one_program():
    stack = load_stack_config(None, [*VOCODER, *ADVERSARIAL, "vocoder.dim=32"])
    steps = build_steps(stack, SPEC)
    assert isinstance(steps.task, VocoderTask)
    assert list(steps.optimizers) == ["model", "discriminators"]
    assert steps.task.describe().startswith("vocoder: ")
    assert "; discriminators: " in steps.task.describe()
    steps.warm_up(workers=1)
    disc = steps.task.discriminators.trainable_variables[0]
    before = disc.numpy()
    outputs = steps.train(_segments(), step=10)  # past the warm-up: a learning rate above 0
    assert {"loss", "mel_l1", "adversarial", "feature", "disc_loss"} <= set(outputs)
    assert bool(outputs["finite"])
    assert [int(o.iterations) for o in steps.optimizers.values()] == [1, 1]
    assert not np.array_equal(disc.numpy(), before)
    assert steps.traces == {(2, 8, 2048): 1}
    with pytest.raises(RetraceError):
        steps.train({k: v[:1] for k, v in _segments().items()}, step=11)


def test_fit_trains_the_adversarial_stage_from_a_run_and_resumes_bit_for_bit(
    audio_cache, vocoder_run, tmp_path
):
    _, base = vocoder_run

    # On the graph executor: its step traces in seconds where XLA compiles for most of a
    # minute, three times. The two objectives' one program under XLA (the vocoder's compiler
    # everywhere by default) is the test above's; a resume under XLA, test_resume's.
    def adversarial_fit(workdir, steps):
        overrides = [*VOCODER, *ADVERSARIAL, f"train.steps={steps}", "train.min_lr_ratio=1.0",
                     "train.warmup_steps=0", f"train.init_from={base}",
                     "train.compiler=graph"]  # fmt: skip
        return fit(load_stack_config(None, overrides), audio_cache, workdir, progress=False)

    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    summary = adversarial_fit(straight, 4)
    assert summary["compiler"]["train"] == "graph"
    assert summary["traces"] == summary["compiled_shapes"] == 1
    assert summary["retraces_after_warmup"] == 0
    adversarial_fit(resumed, 2)
    assert adversarial_fit(resumed, 4)["steps_this_run"] == 2
    ours, theirs = (tf.train.load_checkpoint(str(w / "checkpoints" / "ckpt-4"))
                    for w in (resumed, straight))  # fmt: skip
    names = sorted(ours.get_variable_to_shape_map())
    assert names == sorted(theirs.get_variable_to_shape_map())
    assert any(name.startswith("discriminators/") for name in names)
    assert ours.get_tensor("optimizer/discriminators/iterations/.ATTRIBUTES/VARIABLE_VALUE") == 4
    names.remove("_CHECKPOINTABLE_OBJECT_GRAPH")
    names.remove("save_counter/.ATTRIBUTES/VARIABLE_VALUE")  # the resumed run saved twice
    for name in names:
        np.testing.assert_array_equal(ours.get_tensor(name), theirs.get_tensor(name), name)
    lines = [json.loads(x) for x in (straight / "metrics.jsonl").read_text().splitlines()]
    logged = [line for line in lines if "disc_loss" in line]
    assert logged
    assert all(np.isfinite(line["disc_loss"]) for line in logged)
